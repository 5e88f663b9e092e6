//! The cause split (docs/causes.md) on the real kernel, one scenario per
//! cause, each built so that its answer is known from the construction:
//! hogs sharing a CPU are preempted, a sleeper beside them is woken, a
//! wakee whose CPU is taken migrates, a group over its quota is throttled,
//! a sleeper beside another group's hogs waits behind that group, N hogs
//! queue behind N-1 others. Steal and IRQ time are checked against what the
//! running kernel accounts (its config, else its BTF).
//!
//! They run here (`cargo xtask test`) and inside QEMU on other kernels
//! (`cargo xtask vm-test`), on 2 CPUs shared with other work: the
//! assertions are shares with margins and counts, never latencies.

mod common;

use std::{
    io::Write,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{HOG, Procs, TestCgroup, other_cpu, pinned_sh},
    parse_json_lines, require_root,
    workload::{
        Hogs, make_current_thread_fifo, named_sleeper, pin_current_thread, thread_cpu, workload_cpu,
    },
};
use serde_json::Value;

const WINDOW: Duration = Duration::from_secs(2);
// Hogs on a CPU that other work shares wait whole slices of all of it:
// on a machine with a load of 60 they had ~50 waits in WINDOW, so the
// hog tests ask for 20 (every wait of a hog is preempted by construction).

/// Runs schedlat with `args` plus `--json` until `work` returns, stops it
/// with SIGINT, and returns its last interval.
fn traced(args: &[&str], work: impl FnOnce()) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let tracer = TracerProcess::start(SCHEDLAT, &all);
    work();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat {args:?} exited with {status}");
    parse_json_lines(&lines)
        .pop()
        .unwrap_or_else(|| panic!("no JSON from schedlat {args:?}"))
}

/// The interval's `causes` object; the tp_btf hook (the default where the
/// kernel has it, as on every kernel these tests run on) always measures it.
fn causes(interval: &Value) -> &Value {
    let c = &interval["causes"];
    assert!(c.is_object(), "no causes object in {interval}");
    c
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Waits split by how they began: every wait is in one class.
fn waits(c: &Value) -> u64 {
    n(&c["woken"]["count"]) + n(&c["new"]["count"]) + n(&c["preempted"]["count"])
}

fn wait_ns(c: &Value) -> u64 {
    n(&c["woken"]["sum_ns"]) + n(&c["new"]["sum_ns"]) + n(&c["preempted"]["sum_ns"])
}

/// Each split counts every wait once: its classes add up to the waits,
/// within a few waits that end between the reads of two counters.
fn assert_splits_add_up(c: &Value) {
    let total = waits(c);
    let sum = |v: &Value, names: &[&str]| -> u64 { names.iter().map(|k| n(&v[k]["count"])).sum() };
    let placement = sum(&c["placement"], &["same_cpu", "migrated", "unknown"]);
    let held = sum(
        &c["held_by"],
        &[
            "same_cgroup",
            "other_cgroup",
            "kernel",
            "higher_class",
            "idle",
            "unknown",
        ],
    );
    let depth: u64 = c["queue_depth"]
        .as_object()
        .expect("queue_depth is an object")
        .values()
        .map(n)
        .sum();
    let slack = 2 + total / 100;
    for (split, counted) in [
        ("placement", placement),
        ("held_by", held),
        ("queue_depth", depth),
    ] {
        assert!(
            counted.abs_diff(total) <= slack,
            "{split} counts {counted} waits, how they began {total}: {c}"
        );
    }
}

/// The spinners' names: 15 bytes, the whole of comm. Before 6.x kernels
/// copied a new name without clearing the bytes after it (strlcpy), so a
/// shorter name keeps the tail of the test binary's in comm.
const HOG_NAME: &str = "causes-hogspins";
const DEEP_NAME: &str = "causes-deephogs";

/// `n` threads of this process named `name` (their comm, for `--comm`),
/// spinning on `cpu` for WINDOW. Threads, not shell loops: the guests'
/// shell is busybox, which cannot run under another name.
fn named_spinners(cpu: usize, n: usize, name: &str) {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    pin_current_thread(cpu);
                    let until = Instant::now() + WINDOW;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                })
                .expect("spawn a spinner")
        })
        .collect();
    for t in threads {
        t.join().expect("spinner thread");
    }
}

/// Hogs that never sleep only ever wait because the CPU was taken from
/// them: at least 90% of their waits are `preempted` (the rest are their
/// first wait, `new`, and the odd page fault that slept).
#[test]
fn hogs_sharing_a_cpu_are_preempted() {
    if !require_root() {
        return;
    }
    let v = traced(&["--comm", HOG_NAME], || {
        named_spinners(workload_cpu(), 3, HOG_NAME);
    });
    let c = causes(&v);
    let total = waits(c);
    eprintln!("hogs: {total} waits, causes {c}");
    assert!(total >= 20, "too few waits to judge: {c}");
    let preempted = n(&c["preempted"]["count"]);
    assert!(
        preempted * 10 >= total * 9,
        "{preempted} of {total} waits preempted: {c}"
    );
    assert_eq!(total, n(&v["count"]), "the split covers other waits: {v}");
    assert_splits_add_up(c);
    // The total has the histograms for percentiles.
    assert!(c["preempted"]["p99_ns"].is_u64(), "{c}");
}

/// A 1 ms sleeper beside hogs waits after each wakeup: at least 90% of its
/// waits are `woken`.
#[test]
fn a_sleeper_beside_hogs_is_woken() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let hogs = Hogs::start(cpu, 2);
    let v = traced(&["--comm", "causes-sleeper"], || {
        named_sleeper(cpu, Duration::from_millis(1), 1000, "causes-sleeper");
    });
    drop(hogs);
    let c = causes(&v);
    let total = waits(c);
    eprintln!("sleeper: {total} waits, causes {c}");
    assert!(total >= 200, "too few waits to judge: {c}");
    let woken = n(&c["woken"]["count"]);
    assert!(
        woken * 10 >= total * 9,
        "{woken} of {total} waits woken: {c}"
    );
    assert_splits_add_up(c);
}

/// `se.nr_migrations` of a thread of this process.
fn nr_migrations(tid: i32) -> u64 {
    let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched"))
        .unwrap_or_else(|e| panic!("/proc/self/task/{tid}/sched: {e}"));
    sched
        .lines()
        .find(|l| l.starts_with("se.nr_migrations"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no se.nr_migrations in:\n{sched}"))
}

/// A wakee allowed on every CPU sleeps 1 ms at a time while a hog
/// (SCHED_FIFO but on PREEMPT_RT) moves from CPU to CPU every 20 ms: the CPU it last ran on is often
/// the hog's when it wakes, where it cannot preempt, and the scheduler
/// places it on (or load balancing pulls it to) another one. Some of
/// its waits end `migrated`, and never more than the kernel's own count of
/// its migrations over a span that contains the traced one (each migrated
/// wait is at least one migration).
#[test]
fn a_wakee_whose_cpu_is_taken_migrates() {
    if !require_root() {
        return;
    }
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: migration needs 2 CPUs, this machine has {cpus}");
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tid_tx, tid_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let wakee = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
            }
            // Alive until its migrations are read.
            let _ = exit_rx.recv();
        })
    };
    // SCHED_FIFO where it can be: the wakee cannot preempt it, so a wakeup
    // on its CPU waits there or moves. Not on PREEMPT_RT, where the
    // wakee's timer fires in a SCHED_FIFO kernel thread (ktimers, priority
    // 1) that the mover would starve, so that the wakee is only woken once
    // the mover has left its CPU.
    let fifo = !common::kernel::preempt_rt();
    let mover = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            if fifo {
                make_current_thread_fifo(50);
            }
            let mut cpu = 0;
            while !stop.load(Ordering::Relaxed) {
                pin_current_thread(cpu);
                let until = Instant::now() + Duration::from_millis(20);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                cpu = (cpu + 1) % cpus;
            }
        })
    };
    let tid = tid_rx.recv().unwrap();
    let before = nr_migrations(tid);
    // Longer than the others: with both CPUs busy (other work on the
    // machine) the scheduler has nowhere better, and migrations come a few
    // a second.
    let v = traced(&["-t", &tid.to_string()], || {
        thread::sleep(3 * WINDOW / 2);
    });
    let after = nr_migrations(tid);
    stop.store(true, Ordering::Relaxed);
    let _ = exit_tx.send(());
    mover.join().unwrap();
    wakee.join().unwrap();
    let c = causes(&v);
    let migrated = n(&c["placement"]["migrated"]["count"]);
    let delta = after - before;
    eprintln!(
        "wakee ({} mover): {} waits, {migrated} migrated, nr_migrations +{delta}; causes {c}",
        if fifo { "SCHED_FIFO" } else { "normal" },
        waits(c)
    );
    assert!(waits(c) >= 50, "too few waits to judge: {c}");
    assert!(
        migrated > 0,
        "no migrated waits (nr_migrations +{delta}): {c}"
    );
    assert!(
        migrated <= delta,
        "{migrated} migrated waits but only {delta} migrations: {c}"
    );
    assert_splits_add_up(c);
}

/// The running kernel's config: /boot/config-RELEASE, else
/// /proc/config.gz (CONFIG_IKCONFIG_PROC) through zcat.
fn kernel_config() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    if let Ok(text) = std::fs::read_to_string(format!("/boot/config-{}", release.trim())) {
        return Some(text);
    }
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether the kernel has an accounting: `CONFIG_X=y` in its config, else
/// (the VM guests have no /boot) the field it keeps in its BTF's strings.
fn kernel_has(config: &str, btf_field: &str) -> bool {
    if let Some(text) = kernel_config() {
        return text.lines().any(|l| l == format!("{config}=y"));
    }
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").expect("BTF at /sys/kernel/btf/vmlinux");
    let mut needle = btf_field.as_bytes().to_vec();
    needle.insert(0, 0);
    needle.push(0);
    btf.windows(needle.len()).any(|w| w == needle.as_slice())
}

/// A busy loop in a group allowed 10% of a CPU spends most of its time
/// throttled: the throttling covers most of its measured wait time. Where
/// the kernel lacks CFS bandwidth control, the field is null instead.
#[test]
fn a_busy_loop_over_its_quota_is_throttled() {
    if !require_root() {
        return;
    }
    let (group, which) = TestCgroup::with_cpu_quota("causes-quota", 10_000, 100_000);
    let worker = Procs(vec![pinned_sh(workload_cpu(), HOG)]);
    let pid = worker.pids()[0];
    group.add(pid);
    let v = traced(&["-p", &pid.to_string()], || thread::sleep(WINDOW));
    drop(worker);
    let c = causes(&v);
    let o = &c["overlap_ns"];
    eprintln!("quota ({which}): causes {c}");
    if !kernel_has("CONFIG_CFS_BANDWIDTH", "throttled_time") {
        assert!(o["throttled"].is_null(), "no CFS bandwidth, yet {o}");
        return;
    }
    let throttled = n(&o["throttled"]);
    let measured = n(&o["measured_wait_ns"]);
    // 20 periods of 100 ms, 90 ms of each throttled.
    assert!(waits(c) >= 10, "too few waits to judge: {c}");
    assert!(
        measured * 2 >= wait_ns(c),
        "only {measured} of {} ns measured (pinned: same CPU): {c}",
        wait_ns(c)
    );
    assert!(
        throttled * 2 >= measured && throttled <= measured,
        "throttled {throttled} of {measured} ns: {c}"
    );
    drop(group);
}

/// A sleeper beside two hogs on one CPU for WINDOW, `place` putting the
/// sleeper's PID and the hogs' in their cgroups first: the sleeper's
/// cause split (`-p`). The sleeper is a shell reading a FIFO that this
/// test writes a line to every millisecond from another CPU: it neither
/// forks (a `sleep` child's exit would hand the CPU over within its own
/// group) nor is woken by a timer (on PREEMPT_RT, timers fire in a
/// SCHED_FIFO kernel thread, which would be what held the CPU).
fn sleeper_beside_hogs(place: impl FnOnce(u32, &[u32])) -> Value {
    let cpu = workload_cpu();
    let hogs = Procs((0..2).map(|_| pinned_sh(cpu, HOG)).collect());
    // One FIFO per call: the tests may run at once.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let fifo = std::env::temp_dir().join(format!(
        "schedlat-causes-{}-{}.fifo",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&fifo);
    let path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
    let reader = format!("while read x; do :; done < {}", fifo.display());
    let sleeper = Procs(vec![pinned_sh(cpu, &reader)]);
    let pid = sleeper.pids()[0];
    place(pid, &hogs.pids());
    // Blocks until the shell opens its end.
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the FIFO");
    // The writer is SCHED_FIFO on its CPU, so that other work there (other
    // jobs' builds) cannot starve it and thin out the sleeper's wakeups;
    // it writes from another CPU than the sleeper's, whose holders alone
    // are measured.
    let writing = || {
        thread::spawn(move || {
            pin_current_thread(other_cpu());
            make_current_thread_fifo(10);
            // Twice the window: other jobs' real-time or busy work on the
            // CPU can hold the sleeper off for long stretches.
            let until = Instant::now() + 2 * WINDOW;
            while Instant::now() < until {
                writer.write_all(b"x\n").expect("write the FIFO");
                thread::sleep(Duration::from_millis(1));
            }
        })
        .join()
        .expect("the FIFO's writer");
    };
    let v = traced(&["-p", &pid.to_string()], writing);
    drop(sleeper);
    drop(hogs);
    let _ = std::fs::remove_file(&fifo);
    let c = causes(&v);
    assert!(waits(c) >= 100, "too few waits to judge: {c}");
    assert_splits_add_up(c);
    c.clone()
}

/// `class` of the holder split has most of the waits and their time (60%
/// at least of each), and no other class as much time.
fn assert_held_mostly_by(c: &Value, class: &str, context: &str) {
    let h = &c["held_by"];
    let (ns, count) = (n(&h[class]["sum_ns"]), n(&h[class]["count"]));
    let (time, all) = (wait_ns(c), waits(c));
    assert!(
        ns * 10 >= time * 6,
        "{context}: {class} {ns} of {time} ns: {h}"
    );
    assert!(
        count * 10 >= all * 6,
        "{context}: {class} {count} of {all} waits: {h}"
    );
    for other in [
        "same_cgroup",
        "other_cgroup",
        "kernel",
        "higher_class",
        "idle",
        "unknown",
    ] {
        if other != class {
            assert!(
                n(&h[other]["sum_ns"]) < ns,
                "{context}: {other} beats {class}: {h}"
            );
        }
    }
}

/// A sleeper in group A beside group B's hogs on one CPU, A and B groups
/// of the cpu controller (so of the CPU scheduler): its waits end when a
/// hog of B is switched out, so `held_by.other_cgroup` has most of A's
/// waits and their time.
#[test]
fn a_sleeper_beside_another_groups_hogs_waits_behind_it() {
    if !require_root() {
        return;
    }
    let (a, which) = TestCgroup::with_cpu_controller("causes-a");
    let (b, _) = TestCgroup::with_cpu_controller("causes-b");
    let c = sleeper_beside_hogs(|sleeper, hogs| {
        a.add(sleeper);
        for &pid in hogs {
            b.add(pid);
        }
    });
    eprintln!("A beside B ({which}): causes {c}");
    assert_held_mostly_by(&c, "other_cgroup", &format!("two cpu groups ({which})"));
    a.wait_empty();
    b.wait_empty();
}

/// The same sleeper and hogs in one group of the cpu controller but in
/// two groups of a hierarchy without it (v1 memory on a hybrid host, as
/// an agent that puts each command in a memory cgroup of its own leaves
/// them; two v2 children of the cpu group where v2 has it): the CPU
/// scheduler shares the CPU within one task group, so the sleeper is held
/// by its own group (`same_cgroup`), not by another (which a comparison
/// of whole css_sets said: 2,286 of 2,315 waits on this project's 6.18
/// VM).
#[test]
fn other_hierarchies_do_not_make_another_group_of_the_scheduler() {
    if !require_root() {
        return;
    }
    let (cpu_group, which) = TestCgroup::with_cpu_controller("causes-one-cpu");
    let [m1, m2] = cpu_group.two_without_cpu(["causes-m1", "causes-m2"]);
    let c = sleeper_beside_hogs(|sleeper, hogs| {
        cpu_group.add(sleeper);
        m1.add(sleeper);
        for &pid in hogs {
            cpu_group.add(pid);
            m2.add(pid);
        }
    });
    eprintln!("one cpu group ({which}), two others: causes {c}");
    // By waits, not time: the waits behind the hogs are many and short
    // (a wakeup preempts a hog at once), while work of other groups on the
    // CPU (other jobs of the machine) makes few long ones, which the time
    // would weigh.
    let h = &c["held_by"];
    let (same, other) = (
        n(&h["same_cgroup"]["count"]),
        n(&h["other_cgroup"]["count"]),
    );
    let elsewhere = n(&h["other_cgroup"]["sum_ns"]) as f64 / 1e6;
    let context = format!(
        "one cpu group ({which}), the sleeper and hogs in {} and {}; {elsewhere:.1} ms of the sleeper's wait was behind other groups' tasks (other work on the CPU)",
        m1.path(),
        m2.path()
    );
    // Other work on the CPU is other groups, and on a loaded machine it
    // holds many of the waits too (539 against 1,398 in one run; 773
    // against 1,216 of 2,031 while four builds ran at a load of 8): more
    // waits behind the own group is what a css_set comparison never gave
    // (3 of 2,315), and the claim this test makes. A share of all waits
    // (60% once) measured the machine's load as much as the split.
    assert!(
        same > other,
        "{context}: same cgroup {same}, other {other} of {} waits: {h}",
        waits(&c)
    );
    m1.wait_empty();
    m2.wait_empty();
}

/// N hogs on one CPU: each, when preempted, is queued behind the N-1
/// others (and whatever else runs there), so depth N-1 or more has most of
/// their waits.
#[test]
fn n_hogs_queue_behind_n_minus_one() {
    if !require_root() {
        return;
    }
    const N: usize = 3;
    let v = traced(&["--comm", DEEP_NAME], || {
        named_spinners(workload_cpu(), N, DEEP_NAME);
    });
    let c = causes(&v);
    let d = &c["queue_depth"];
    eprintln!("{N} hogs: causes {c}");
    let total = waits(c);
    assert!(total >= 20, "too few waits to judge: {c}");
    // N - 1 = 2: the classes "2", "3-4", "5-8", "9+".
    let deep = n(&d["2"]) + n(&d["3-4"]) + n(&d["5-8"]) + n(&d["9+"]);
    assert!(n(&d["unknown"]) * 10 < total, "depth not measured: {d}");
    assert!(
        deep * 10 >= total * 7,
        "{deep} of {total} waits at depth >= 2: {d}"
    );
}

/// Steal and IRQ time: null where the kernel lacks the accounting (and the
/// text says "unavailable"), else a count within the measured wait time.
#[test]
fn steal_and_irq_follow_the_kernels_accounting() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let hogs = Hogs::start(cpu, 2);
    let v = traced(&[], || {
        named_sleeper(cpu, Duration::from_millis(1), 500, "causes-irq");
    });
    let (status, text, err) = common::run_schedlat(&["-v", "1", "1"]);
    drop(hogs);
    assert!(status.success(), "{err}");
    let o = &causes(&v)["overlap_ns"];
    let measured = n(&o["measured_wait_ns"]);
    assert!(n(&o["measured_waits"]) > 0, "{o}");
    let line = text
        .lines()
        .find(|l| l.contains(" of same-CPU wait time"))
        .unwrap_or_else(|| panic!("no overlap line in:\n{text}"));
    for (field, config, btf_field) in [
        (
            "steal",
            "CONFIG_PARAVIRT_TIME_ACCOUNTING",
            "prev_steal_time_rq",
        ),
        ("irq", "CONFIG_IRQ_TIME_ACCOUNTING", "prev_irq_time"),
    ] {
        let has = kernel_has(config, btf_field);
        eprintln!("{field}: kernel accounts it: {has}; {o}; text: {line}");
        if has {
            let ns = n(&o[field]);
            assert!(ns <= measured, "{field} {ns} > measured {measured}: {o}");
            assert!(!line.contains(&format!("{field} unavailable")), "{line}");
        } else {
            assert!(o[field].is_null(), "{config} is off, yet {o}");
            assert!(line.contains(&format!("{field} unavailable")), "{line}");
        }
    }
}

/// `--no-causes` loads without the split: JSON `causes` null, no text
/// lines.
#[test]
fn no_causes_measures_none_and_says_null() {
    if !require_root() {
        return;
    }
    let hogs = Hogs::start(workload_cpu(), 2);
    let (status, out, err) = common::run_schedlat(&["--no-causes", "--json", "1", "1"]);
    assert!(status.success(), "{err}");
    let v = parse_json_lines(&out.lines().map(str::to_string).collect::<Vec<_>>())
        .pop()
        .unwrap_or_else(|| panic!("no JSON: {out}"));
    assert!(v["count"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v.get("causes"), Some(&Value::Null), "{v}");
    let (status, text, err) = common::run_schedlat(&["-v", "--no-causes", "1", "1"]);
    drop(hogs);
    assert!(status.success(), "{err}");
    assert!(
        text.contains("shape: ") && !text.contains("causes:"),
        "{text}"
    );
}

/// `--waking` times the wakeup path before the queue: a 1 ms sleeper's
/// every wakeup goes through sched_waking, so its waking stages number
/// about its woken waits (a few differ at the run's ends). Without the
/// flag the stage is null; classic tracepoints measure it too; with
/// `--no-causes` it is a bad command line.
#[test]
fn waking_times_the_wakeup_path_only_when_asked() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let hogs = Hogs::start(cpu, 2);
    let v = traced(&["--waking", "--comm", "causes-waking"], || {
        named_sleeper(cpu, Duration::from_millis(1), 1000, "causes-waking");
    });
    let c = causes(&v);
    let woken = n(&c["woken"]["count"]);
    let w = &c["waking"];
    eprintln!("waking: {woken} woken waits, waking stage {w}");
    assert!(woken >= 200, "too few waits to judge: {c}");
    let count = n(&w["count"]);
    assert!(
        count.abs_diff(woken) * 10 <= woken + 50,
        "{count} waking stages for {woken} woken waits: {c}"
    );
    assert!(n(&w["sum_ns"]) > 0, "{w}");
    let (p50, p99) = (n(&w["p50_ns"]), n(&w["p99_ns"]));
    assert!(p50 <= p99, "{w}");

    let v = traced(&["--comm", "causes-waking"], || {
        named_sleeper(cpu, Duration::from_millis(1), 200, "causes-waking");
    });
    assert_eq!(causes(&v)["waking"], Value::Null, "{v}");

    let v = traced(&["--hook", "tp", "--waking"], || {
        named_sleeper(cpu, Duration::from_millis(1), 200, "causes-waking");
    });
    drop(hogs);
    let c = causes(&v);
    assert!(n(&c["waking"]["count"]) > 0, "{c}");
    assert!(
        n(&c["waking"]["count"]) <= n(&c["woken"]["count"]) + 50,
        "{c}"
    );

    let (status, _, err) = common::run_schedlat(&["--waking", "--no-causes", "1", "1"]);
    assert_eq!(status.code(), Some(2), "{err}");
}

/// Blinkers: threads that run BLINK of CPU time each time they are woken,
/// then block. One that blocks having run more than its share stays queued
/// under delayed dequeue (6.12+) until the scheduler picks it, counted in
/// rq->nr_running meanwhile.
const BLINKERS: usize = 8;
const BLINK: Duration = Duration::from_micros(300);
const ROUNDS: usize = 150;

/// One CPU's run-queue counts as the kernel prints them
/// (/sys/kernel/debug/sched/debug): rq->nr_running, and of it the tasks
/// delayed dequeue keeps queued after they blocked (root cfs_rq's
/// h_nr_queued - h_nr_runnable since 6.14, h_nr_delayed in 6.12.y and
/// 6.13; none before 6.12).
struct QueueCounts {
    queued: u64,
    delayed: u64,
}

impl QueueCounts {
    fn read(debug: &str, cpu: usize) -> Option<QueueCounts> {
        let section = debug.split(&format!("cpu#{cpu},")).nth(1)?;
        let section = section.split("\ncpu#").next()?;
        let field = |text: &str, name: &str| -> Option<u64> {
            let at = text.find(&format!(".{name} "))?;
            text[at..]
                .split(':')
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        };
        let queued = field(section, "nr_running")?;
        let root = section.split(&format!("cfs_rq[{cpu}]:/\n")).nth(1)?;
        let delayed = match (field(root, "h_nr_queued"), field(root, "h_nr_runnable")) {
            (Some(q), Some(r)) => q.saturating_sub(r),
            _ => field(root, "h_nr_delayed").unwrap_or(0),
        };
        Some(QueueCounts { queued, delayed })
    }
}

/// The kernel's scheduler debug file: debugfs's since 5.13 (mounted if it
/// is not), /proc/sched_debug before.
fn sched_debug() -> String {
    const DEBUGFS: &str = "/sys/kernel/debug/sched/debug";
    const PROC: &str = "/proc/sched_debug";
    if std::fs::metadata(DEBUGFS).is_err() && std::fs::metadata(PROC).is_err() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "debugfs", "none", "/sys/kernel/debug"])
            .status();
    }
    std::fs::read_to_string(DEBUGFS)
        .or_else(|_| std::fs::read_to_string(PROC))
        .unwrap_or_else(|e| {
            panic!(
                "neither {DEBUGFS} nor {PROC}: {e} (the test's oracle is the kernel's own count: \
                 CONFIG_SCHED_DEBUG and debugfs are needed)"
            )
        })
}

/// The queue depth is the tasks that can run, not the sleepers delayed
/// dequeue keeps queued. On one CPU beside a hog, each round wakes
/// BLINKERS blinkers, waits until all have run and blocked, reads the
/// kernel's own counts of that CPU (runnable, and queued: runnable plus
/// delayed), then wakes a probe: its depth at that wakeup is the runnable
/// tasks the kernel counted just before, not the queued ones. The share of
/// wakeups at depth 2 or more is compared, round for round, with the share
/// of rounds in which the kernel counted 2 or more (under emulation too: the
/// counts and the wakeup are moments apart, not a sample of the time).
/// Before 6.12 no task is kept queued: the counts must show none, and the
/// depth is not compared with them.
#[test]
fn sleepers_kept_queued_by_delayed_dequeue_are_not_counted_in_the_depth() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let started = common::cpu::CpuTimes::now();
    let stop = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (tids, tid_of) = mpsc::channel();
    let blinkers: Vec<_> = (0..BLINKERS)
        .map(|_| {
            let (stop, ran, tids) = (stop.clone(), ran.clone(), tids.clone());
            thread::spawn(move || {
                pin_current_thread(cpu);
                // SAFETY: gettid has no preconditions.
                tids.send(unsafe { libc::gettid() }).unwrap();
                loop {
                    thread::park();
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    // CPU time, not wall time: the same work under emulation.
                    let until = thread_cpu() + BLINK;
                    while thread_cpu() < until {
                        std::hint::spin_loop();
                    }
                    ran.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let blinker_tids: Vec<i32> = (0..BLINKERS).map(|_| tid_of.recv().unwrap()).collect();
    let woke = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let probe = {
        let (stop, woke) = (stop.clone(), woke.clone());
        thread::Builder::new()
            .name(PROBE.into())
            .spawn(move || {
                pin_current_thread(cpu);
                while !stop.load(Ordering::Relaxed) {
                    thread::park();
                    woke.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap()
    };
    let hog = Hogs::start(cpu, 1);
    let mut counts = Vec::new();
    let v = traced(&["--comm", PROBE], || {
        pin_current_thread(other_cpu());
        for round in 1..=ROUNDS {
            for b in &blinkers {
                b.thread().unpark();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while ran.load(Ordering::SeqCst) < round * BLINKERS
                || !blinker_tids.iter().all(|&t| sleeping(t))
            {
                assert!(
                    Instant::now() < deadline,
                    "the blinkers did not run and block"
                );
                thread::yield_now();
            }
            if let Some(c) = QueueCounts::read(&sched_debug(), cpu) {
                counts.push(c);
            }
            probe.thread().unpark();
            while woke.load(Ordering::SeqCst) < round {
                assert!(Instant::now() < deadline, "the probe did not run");
                thread::yield_now();
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    for b in &blinkers {
        b.thread().unpark();
    }
    probe.thread().unpark();
    drop(hog);
    for b in blinkers {
        b.join().expect("blinker");
    }
    probe.join().expect("probe");
    let busy = started.busy_since();
    let c = causes(&v);
    let d = &c["queue_depth"];
    let known = waits(c) - n(&d["unknown"]);
    let deep = known - n(&d["0"]) - n(&d["1"]);
    assert!(
        known * 10 >= ROUNDS as u64 * 9 && counts.len() == ROUNDS,
        "too few to judge: {known} waits of known depth, {} counts of {ROUNDS} rounds ({busy})",
        counts.len()
    );
    let share = |at_least_2: &dyn Fn(&QueueCounts) -> bool| {
        counts.iter().filter(|c| at_least_2(c)).count() as f64 / counts.len() as f64
    };
    let runnable = share(&|c| c.queued - c.delayed >= 2);
    let queued = share(&|c| c.queued >= 2);
    let measured = deep as f64 / known as f64;
    let mean_delayed = counts.iter().map(|c| c.delayed).sum::<u64>() as f64 / counts.len() as f64;
    let summary = format!(
        "{}: depth >= 2 at {:.1}% of {known} wakeups; the kernel's counts before them: 2 or more \
         runnable in {:.1}% of rounds, 2 or more queued in {:.1}% ({mean_delayed:.2} delayed tasks \
         on average); depth {d} ({busy})",
        common::kernel::kernel_release(),
        measured * 100.0,
        runnable * 100.0,
        queued * 100.0,
    );
    eprintln!("{summary}");
    if common::kernel::kernel_version() < (6, 12) {
        // Nothing to tell apart: no task is kept queued. The counts and the
        // wakeup are moments apart, and on PREEMPT_RT (6.1-rt) the wakeup
        // itself had a real-time kernel thread runnable beside it (depth 2
        // at 41% of the wakeups against 16% of the counts), so the depth is
        // compared with the counts only where delayed dequeue exists.
        assert_eq!(mean_delayed, 0.0, "delayed tasks before 6.12: {summary}");
        return;
    }
    // Counted by rq->nr_running alone, the depth was 2 or more at 14% of
    // the wakeups on 6.18 (0.7% runnable, 25% queued); counted as the
    // runnable tasks, at 0-1.3% (0-0.7% runnable).
    assert!(
        (measured - runnable).abs() <= 0.06,
        "the depth is not the runnable count: {summary}"
    );
    if queued - runnable >= 0.2 {
        assert!(
            measured - runnable < queued - measured,
            "the depth counts the delayed tasks: {summary}"
        );
    }
}

const PROBE: &str = "causes-deptprob";

/// Whether thread `tid` of this process is asleep (state S in its stat).
fn sleeping(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|st| {
            st.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('S'))
        })
        .unwrap_or(false)
}
