//! Root: the advice `schedlat diagnose` gives from the decision split is
//! checked, not asserted. On the worker case (a process that computes 0.8
//! ms and sleeps 0.5 ms, pinned beside three CPU-bound loops) diagnose
//! names the rule and proposes a remedy; the test applies the remedy it
//! proposes (a renice) and `compare` must report the worker's waits
//! improved, its share of slow waits (over compare's tail threshold) half
//! or less of what it was; it then applies the remedy diagnose says does not fit
//! this rule (a shorter custom slice, sched_setattr's sched_runtime) and
//! shows that it does not fix it.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    time::Duration,
};

use common::{SCHEDLAT, cpu::CpuTimes, kernel::set_custom_slice, require_root, workload::Hogs};

use crate::common;

/// The worker: 0.8 ms of CPU time (its own clock, so a preemption does not
/// shorten the work), then 0.5 ms of sleep, forever.
const WORKER: &str = r#"import time
while True:
    t = time.thread_time()
    while time.thread_time() - t < 0.0008:
        pass
    time.sleep(0.0005)
"#;

/// The worker and its three loops on one CPU, killed when dropped.
struct WorkerCase {
    worker: Child,
    _hogs: Hogs,
}

impl WorkerCase {
    fn start(cpu: usize) -> WorkerCase {
        let hogs = Hogs::start(cpu, 3);
        let worker = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "python3", "-c", WORKER])
            .spawn()
            .expect("taskset and python3 run");
        std::thread::sleep(Duration::from_millis(500));
        WorkerCase {
            worker,
            _hogs: hogs,
        }
    }

    fn pid(&self) -> String {
        self.worker.id().to_string()
    }
}

impl Drop for WorkerCase {
    fn drop(&mut self) {
        let _ = self.worker.kill();
        let _ = self.worker.wait();
    }
}

fn run(args: &[&str]) -> String {
    let out = Command::new(SCHEDLAT)
        .args(args)
        .output()
        .expect("schedlat runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "schedlat {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn record(dir: &Path, name: &str, pid: &str) -> PathBuf {
    let path = dir.join(name);
    run(&["record", "-o", path.to_str().unwrap(), "-p", pid, "5"]);
    path
}

fn compare(before: &Path, after: &Path) -> serde_json::Value {
    let out = run(&[
        "compare",
        "--json",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("compare JSON ({e}): {out}"))
}

/// The command between the backticks of `text` that starts with `program`.
fn proposed<'a>(text: &'a str, program: &str) -> Option<Vec<&'a str>> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .find(|cmd| cmd.starts_with(program))
        .map(|cmd| cmd.split_whitespace().collect())
}

/// The task's se.slice as the kernel prints it.
fn se_slice(pid: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/sched")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.slice").then(|| v.trim().parse().ok())?
    })
}

fn p50(side: &serde_json::Value) -> u64 {
    side["percentiles"]["p50_ns"].as_u64().unwrap_or(0)
}

#[test]
fn the_remedy_diagnose_proposes_fixes_the_worker_and_the_one_it_rules_out_does_not() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-decision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cpu = common::workload::workload_cpu();
    let case = WorkerCase::start(cpu);
    let pid = case.pid();
    let busy = CpuTimes::now();

    // 1. diagnose names the decision and a remedy for it.
    // By default: the victims tables and the split in one window.
    let report = run(&["diagnose", "--json", "-d", "5", "-p", &pid]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(
        report["ebpf"]["victims"].is_object(),
        "the victims tables are loaded beside the split: {}",
        report["ebpf"]["victims_unavailable"]
    );
    let causes = report["causes"].as_array().unwrap();
    let decision = causes
        .iter()
        .find(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("scheduler decision"))
        })
        .unwrap_or_else(|| {
            panic!(
                "no scheduler decision named: {}; decision: {} ({})",
                serde_json::to_string(causes).unwrap(),
                report["ebpf"]["decision"],
                busy.busy_since()
            )
        });
    assert_eq!(
        decision["name"],
        "scheduler decision: not eligible",
        "{decision} ({})",
        busy.busy_since()
    );
    let next = decision["next_step"].as_str().unwrap();
    assert!(next.contains("not a shorter slice"), "{next}");
    let renice = proposed(next, "renice").unwrap_or_else(|| panic!("no renice in {next}"));
    assert_eq!(renice.last(), Some(&pid.as_str()), "{next}");

    // 2. Record, apply the proposed renice, record, compare.
    let before = record(&dir, "before.json", &pid);
    let status = Command::new(renice[0]).args(&renice[1..]).status().unwrap();
    assert!(status.success(), "{renice:?}");
    let reniced = record(&dir, "reniced.json", &pid);
    let c = compare(&before, &reniced);
    // The renice gives the worker the CPU before the three loops. Judged by
    // the share of waits over compare's tail threshold (700 us here), not
    // by p50: the worker is bimodal, and on a quiet machine its p50 sits
    // in the fast mode before and after. Measured (root, 6.18, 2 CPUs):
    // 0.520 -> 0.053 with the other CPU busy, 0.915 -> 0.063 beside busy
    // loops on both CPUs, 0.635 -> 0.166 beside builds on both CPUs (9
    // runnable tasks: the foreign tasks are not reniced away). Without the
    // renice the share stays where it was: at most half is the bar.
    let (p50_before, p50_after) = (p50(&c["before"]), p50(&c["after"]));
    let tail = &c["tail_test"];
    let share = |side: &str| tail[side].as_f64().unwrap_or(f64::NAN);
    let (slow_before, slow_after) = (share("share_before"), share("share_after"));
    assert!(
        slow_after * 2.0 <= slow_before && c["change"] == "improved",
        "renice: share of waits over {} ns {slow_before:.3} -> {slow_after:.3} (at most half expected), p50 {p50_before} -> {p50_after} ns, p99 {} -> {} ns, change {} ({})",
        tail["threshold_ns"],
        c["before"]["percentiles"]["p99_ns"],
        c["after"]["percentiles"]["p99_ns"],
        c["change"],
        busy.busy_since()
    );

    // 3. The remedy diagnose ruled out: back to nice 0, a 100 us custom
    // slice. The worker still asks for more than its share: not fixed.
    let status = Command::new("renice")
        .args(["-n", "0", "-p", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    set_custom_slice(pid.parse().unwrap(), 100_000);
    let slice = se_slice(&pid);
    assert_eq!(slice, Some(100_000), "the custom slice did not take");
    let sliced = record(&dir, "sliced.json", &pid);
    let c = compare(&before, &sliced);
    let p50_sliced = p50(&c["after"]);
    assert!(
        p50_sliced >= 100_000 && p50_sliced > 4 * p50_after,
        "a 100 us slice: p50 {p50_before} -> {p50_sliced} ns (renice gave {p50_after}); ({})",
        busy.busy_since()
    );
    eprintln!(
        "worker case: {}; p50 {p50_before} ns, reniced {p50_after} ns, 100 us slice {p50_sliced} ns ({})",
        decision["evidence"],
        busy.busy_since()
    );
    drop(case);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A SCHED_FIFO sleeper beside three fair loops on one CPU: the real-time
/// class preempts the fair one at every wakeup (kernel/sched/core.c
/// wakeup_preempt(): another class), so its wakeups are requested and the
/// switch follows at once: the reaction, its p99, stays under 100 us. On
/// this kernel's preempt=none a task in the kernel delays even that
/// switch to its next preemption point, so a machine busy with other
/// work (compilers in system calls) can spoil one window: the best of up
/// to three windows of 1000 wakeups is held to the bound, each to the
/// request.
#[test]
fn a_real_time_sleeper_is_requested_and_runs_within_100_us() {
    if !require_root() {
        return;
    }
    let cpu = common::workload::workload_cpu();
    let _hogs = Hogs::start(cpu, 3);
    let mut p99s = Vec::new();
    for _ in 0..3 {
        let busy = CpuTimes::now();
        let (asked, waits, p99) = fifo_window(cpu);
        let why = format!(
            "{asked} of {waits} asked, p99 {p99} ns ({})",
            busy.busy_since()
        );
        eprintln!("FIFO sleeper beside 3 loops: {why}");
        assert!(
            waits >= 900 && asked * 100 >= waits * 95,
            "not requested: {why}"
        );
        p99s.push((p99, why));
        if p99 < 100_000 {
            return;
        }
    }
    panic!("the reaction's p99 over 100 us in every window: {p99s:?}");
}

/// One window of a SCHED_FIFO thread on `cpu` sleeping 1 ms 1000 times,
/// traced alone: (wakeups that asked for the CPU, waits, p99 in ns).
fn fifo_window(cpu: usize) -> (u64, u64, u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let sleeper = std::thread::Builder::new()
        .name("decision-rt".into())
        .spawn(move || {
            common::workload::pin_current_thread(cpu);
            common::workload::make_current_thread_fifo(10);
            // SAFETY: no arguments.
            tx.send(unsafe { libc::gettid() }).unwrap();
            go_rx.recv().unwrap();
            for _ in 0..1000 {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    let tid = rx.recv().unwrap().to_string();
    let tracer = common::TracerProcess::start(SCHEDLAT, &["--json", "-t", &tid]);
    go_tx.send(()).unwrap();
    sleeper.join().unwrap();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat: {status}");
    let r = common::parse_json_lines(&lines).pop().expect("an interval");
    let d = &r["decision"];
    let of = |name: &str| d["decisions"][name]["count"].as_u64().unwrap_or(0);
    let asked = of("requested") + of("slice_ended") + of("pending");
    let p99 = r["percentiles"]["p99_ns"].as_u64().unwrap_or(u64::MAX);
    (asked, d["waits"].as_u64().unwrap_or(0), p99)
}
