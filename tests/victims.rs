//! Root tests of `schedlat victims` on the real kernel: the sleeper-and-hogs
//! scenario (a 1 ms sleeper sharing its CPU with CPU hogs of a known comm,
//! tests/common/sleeper.rs), checked against `perf sched record` + `perf
//! sched latency`; rows of exited tasks and of concurrent threads, table
//! overflow, intervals, the tp hook mode (tests/slow.rs: `schedlat slow`).
//! Victims are measured with `-p` on this test process, so other tasks on
//! the machine (a VM test, a build) do not count.

use std::time::Duration;

use common::{
    SCHEDLAT, TracerProcess,
    cpu::CpuTimes,
    parse_json_lines,
    perf::{PerfSched, parse_latency},
    require_root,
    sleeper::{self, HOG, HOGS, PERIOD, SLEEPER, me, slice_ns},
    workload,
};
use serde_json::Value;

use crate::common;

fn row_of(rows: &Value, tid: u32) -> &Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["tid"] == tid)
        .unwrap_or_else(|| panic!("no row for TID {tid}: {rows}"))
}

/// Share of the wait charged to tasks that are neither our hogs, nor idle,
/// nor this process: load from outside the test (another test's hogs, a VM)
/// on the workload CPU. Culprits are whoever held the CPU, so then the
/// strict expectations about who they are do not hold.
/// A task from outside this test: not a hog, not idle, not this process.
fn is_foreign(task: &Value) -> bool {
    task["comm"] != HOG && task["tid"] != 0 && task["pid"] != u64::from(std::process::id())
}

fn foreign_share(culprits: &[Value], sum_ns: u64) -> f64 {
    let foreign: u64 = culprits
        .iter()
        .filter(|c| is_foreign(c))
        .map(|c| c["total_ns"].as_u64().unwrap())
        .sum();
    foreign as f64 / sum_ns.max(1) as f64
}

/// The "done when": one command names the victim, its worst wait
/// (about a slice: it waited for a hog's slice to end) and the task that
/// made it wait.
#[test]
fn sleeper_and_hogs_names_the_victim_its_worst_wait_and_the_hog() {
    if !require_root() {
        return;
    }
    let me = me();
    let sleeper::Run {
        tid,
        hog_pids,
        lines,
    } = sleeper::run(&[
        "victims", "--json", "--top", "0", "--sort", "total", "-p", &me,
    ]);
    let r = parse_json_lines(&lines).pop().expect("one JSON object");
    assert_eq!(r["schema"], "schedlat.victims.v1");
    assert_eq!(r["last"], true);
    let v = row_of(&r["victims"], tid);
    assert_eq!(v["comm"], SLEEPER);
    assert_eq!(v["pid"].as_u64(), Some(u64::from(std::process::id())));
    assert_eq!(
        (v["policy"].as_str(), v["nice"].as_i64()),
        (Some("normal"), Some(0))
    );
    // One wait per wakeup (a few more if the sleeper is preempted).
    let count = v["count"].as_u64().unwrap();
    assert!((1900..=2200).contains(&count), "{count} waits: {v}");
    // Issue 15: per victim, how its waits began and where they ended. The
    // sleeper's are wakeups (a few preemptions while it runs); pinned to
    // one CPU, at most its first waits (around the pinning) migrate.
    let causes = &v["causes"];
    let woken = causes["woken"]["share"].as_f64().unwrap();
    assert!(woken >= 0.9, "woken share {woken}: {v}");
    let kinds: u64 = ["woken", "new", "preempted"]
        .iter()
        .map(|k| causes[k]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(kinds, count, "every wait classified: {v}");
    assert!(causes["migrated"]["count"].as_u64().unwrap() <= 2, "{v}");
    // Issue 24: per victim, what the scheduler decided of its waits (the
    // victims switch with the split, on by default). Every wait of the row
    // is split (the pinned sleeper's snapshots are on its CPU), once by
    // outcome and once by decision; woken beside the hogs, each wakeup was
    // granted at once, declined by a rule or passed over.
    let d = &v["decision"];
    let split = d["waits"].as_u64().unwrap_or(0);
    assert!(
        split + 4 >= count && split <= count,
        "{split} of {count} split: {v}"
    );
    let sum = |member: &str| -> u64 {
        d[member]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    // Every split wait has one outcome, one decision and one holder.
    assert_eq!(
        (sum("outcomes"), sum("decisions"), sum("holders")),
        (split, split, split),
        "{d}"
    );
    // The hogs never sleep: the CPU is not idle when the sleeper's waits
    // end (measured 0 idle holders beside hogs on 6.18).
    let idle = d["holders"]["idle"].as_u64().unwrap();
    assert!(
        idle <= 3 + split / 10,
        "{idle} of {split} ended on an idle CPU: {d}"
    );
    let judged: u64 = ["granted", "declined", "passed_over"]
        .iter()
        .map(|o| d["outcomes"][o].as_u64().unwrap())
        .sum();
    assert!(judged * 10 >= split * 9, "{judged} of {split} judged: {d}");
    let (max, slice) = (v["max_ns"].as_u64().unwrap(), slice_ns());
    assert!(
        max >= slice / 2,
        "longest wait {max} ns, slice {slice} ns: {v}"
    );
    assert_eq!(v["max_cpu"].as_u64(), Some(workload::workload_cpu() as u64));
    // The hogs are charged with slice-long waits, per task and per process.
    let culprits = r["culprits"].as_array().unwrap();
    let hog = |c: &&Value| c["comm"] == HOG;
    assert!(
        culprits
            .iter()
            .filter(hog)
            .any(|c| c["max_ns"].as_u64().unwrap() >= slice / 2),
        "no hog charged with a slice-long wait: {culprits:?}"
    );
    let processes = r["culprit_processes"].as_array().unwrap();
    let hog_rows = processes.iter().filter(|p| p["comm"] == HOG).count();
    assert!((1..=HOGS).contains(&hog_rows), "{processes:?}");
    assert_eq!(r["overflow"]["victim_waits"], 0);

    let sum = r["sum_ns"].as_u64().unwrap();
    let foreign = foreign_share(culprits, sum);
    if foreign > 0.05 {
        eprintln!(
            "note: {:.0}% of the wait was charged to tasks from outside this test on CPU {}; \
             not checking who the worst culprit is",
            foreign * 100.0,
            workload::workload_cpu()
        );
        return;
    }
    // Alone with our hogs: the worst wait is behind one of them, a few
    // slices long at most. Measured here: 4-13 ms for a 1.5 ms slice (a
    // woken task with negative lag waits for several hogs' slices, and this
    // VM's vCPUs are themselves time-shared by the host), so the bound only
    // rules out nonsense (units, a stuck start time), not EEVDF's details.
    assert!(
        max <= 20 * slice,
        "longest wait {max} ns, slice {slice} ns: {v}"
    );
    // A single wait behind a task from outside the test (a kworker) can be
    // the longest even when such tasks hold under 5% of the wait: then it
    // rightly names that task, and the hogs' part is checked below.
    if is_foreign(&v["max_culprit"]) {
        eprintln!(
            "note: the longest wait was behind a task from outside this test: {}",
            v["max_culprit"]
        );
    } else {
        assert_eq!(v["max_culprit"]["comm"], HOG, "{v}");
        let culprit_pid = v["max_culprit"]["pid"].as_u64().unwrap() as u32;
        assert!(
            hog_pids.contains(&culprit_pid),
            "{culprit_pid} not in {hog_pids:?}"
        );
    }
    assert_eq!(culprits[0]["comm"], HOG, "largest total: {}", culprits[0]);
    let by_hogs: u64 = culprits
        .iter()
        .filter(hog)
        .map(|c| c["total_ns"].as_u64().unwrap())
        .sum();
    assert!(by_hogs * 2 >= sum, "hogs caused {by_hogs} of {sum} ns");
}

/// The culprits' charge by time (HELD), with every task's waits measured
/// (no `-p`): the hogs' waits mostly end when the sleeper leaves the CPU
/// (it runs a few microseconds every millisecond), so the last holder's
/// columns charge the sleeper with them whole; by time it is charged its
/// own microseconds, and the hogs, which hold the CPU, with the rest. Each
/// wait's time is charged to the runs inside it or counted unapportioned:
/// the two add up to the waits.
#[test]
fn culprits_are_charged_by_their_time_on_the_cpu_inside_the_waits() {
    if !require_root() {
        return;
    }
    let times = CpuTimes::now();
    let sleeper::Run { tid, lines, .. } = sleeper::run(&["victims", "--json", "--top", "0"]);
    let busy = times.busy_since();
    let r = parse_json_lines(&lines).pop().expect("one JSON object");
    let culprits = r["culprits"].as_array().expect("culprits");
    let held = |c: &Value| c["held_ns"].as_u64().expect("held_ns");
    let sleeper = row_of(&r["culprits"], tid);
    let hogs: u64 = (culprits.iter())
        .filter(|c| c["comm"] == HOG)
        .map(held)
        .sum();
    let (by_time, last_holder) = (held(sleeper), sleeper["total_ns"].as_u64().unwrap());
    assert!(
        by_time * 20 <= hogs,
        "the sleeper held {by_time} ns of the waits, the hogs {hogs} ns ({busy}): {sleeper}"
    );
    assert!(
        last_holder >= 10 * by_time,
        "as the last holder the sleeper ended {last_holder} ns of waits, against {by_time} ns held ({busy}): {sleeper}"
    );
    // The busiest culprit by time is a hog, as the table ranks them.
    assert_eq!(culprits[0]["comm"], HOG, "{} ({busy})", culprits[0]);
    assert_eq!(r["overflow"]["victim_waits"], 0, "{}", r["overflow"]);
    let waited = r["sum_ns"].as_u64().unwrap();
    let charged: u64 = culprits.iter().map(held).sum();
    let unapportioned = r["overflow"]["culprit_unapportioned_ns"].as_u64().unwrap();
    let off = (charged + unapportioned).abs_diff(waited);
    assert!(
        off * 100 <= waited,
        "{charged} ns held and {unapportioned} ns unapportioned against {waited} ns waited ({busy})"
    );
    // Most of it has a culprit: the CPUs' last 32 runs reach back over a
    // wait behind six hogs.
    assert!(
        unapportioned * 10 <= waited,
        "{unapportioned} of {waited} ns unapportioned ({busy})"
    );
}

/// The same window seen by schedlat (in the kernel) and by perf (from a
/// recording, tests/common/perf.rs). Both time a wait from sched_wakeup (or
/// a preempted switch-out) to the switch-in, so for the sleeper they see the
/// same waits. What differs: perf prints ms with 3 decimals (1 us); perf
/// skips a wakeup of a task it does not believe asleep, and counts a
/// zero-length wait for a task first seen being switched in; schedlat counts
/// a preempted task's wait whatever its state says. Tolerance: count within
/// 1% + 3, average within 2% + 2 us, max within 1% + 10 us. Measured here
/// (three runs): counts 2001/2002, 2002/2002, 2001/2002; averages and maxima
/// equal to perf's microsecond.
#[test]
fn victims_agree_with_perf_sched_latency() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let perf = PerfSched::start(&dir);
    let me = me();
    let sleeper::Run { tid, lines, .. } =
        sleeper::run(&["victims", "--json", "--top", "0", "-p", &me]);
    let perf = perf.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let r = parse_json_lines(&lines).pop().expect("one JSON object");
    let ours = row_of(&r["victims"], tid);
    let theirs = perf
        .tasks
        .iter()
        .find(|p| p.tid == tid)
        .unwrap_or_else(|| panic!("perf has no row for {tid}: {perf:?}"));
    let count = ours["count"].as_u64().unwrap();
    let avg = ours["avg_ns"].as_u64().unwrap();
    let max = ours["max_ns"].as_u64().unwrap();
    eprintln!(
        "sleeper {tid}: schedlat {count} waits, avg {avg} ns, max {max} ns; perf {} waits, avg {} ns, max {} ns{}",
        theirs.switches,
        theirs.avg_ns,
        theirs.max_ns,
        if perf.lost_events {
            " (perf lost events)"
        } else {
            ""
        }
    );
    if perf.lost_events {
        // Under load from outside the test perf's buffers overflow: it
        // misses wakeups, so waits (never the other way round). What it
        // did see must still be what schedlat saw.
        assert!(
            count >= theirs.switches,
            "count: schedlat {count}, perf {theirs:?}"
        );
        assert!(
            max + 10_000 >= theirs.max_ns,
            "max: schedlat {max}, perf {theirs:?}"
        );
        return;
    }
    assert!(
        count.abs_diff(theirs.switches) <= theirs.switches / 100 + 3,
        "count: schedlat {count}, perf {theirs:?}"
    );
    assert!(
        avg.abs_diff(theirs.avg_ns) <= theirs.avg_ns / 50 + 2_000,
        "avg: schedlat {avg}, perf {theirs:?}"
    );
    assert!(
        max.abs_diff(theirs.max_ns) <= theirs.max_ns / 100 + 10_000,
        "max: schedlat {max}, perf {theirs:?}"
    );
}

/// A thread that exits before the report keeps its row: the tables are per
/// interval, not per live task.
#[test]
fn a_task_that_exits_keeps_its_row() {
    if !require_root() {
        return;
    }
    let me = me();
    let tracer = TracerProcess::start(SCHEDLAT, &["victims", "--top", "0", "-p", &me]);
    let tid = workload::named_sleeper(workload::workload_cpu(), PERIOD, 300, "short-lived");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
    let (status, lines) = tracer.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}");
    let row = lines
        .iter()
        .find(|l| l.split_whitespace().next() == Some(&tid.to_string()))
        .unwrap_or_else(|| panic!("no row for the exited thread {tid}: {lines:#?}"));
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields[2], "short-lived", "{row}");
    let waits: u64 = fields[5].parse().unwrap();
    assert!(waits >= 250, "{row}");
    assert!(
        lines.iter().any(|l| l.starts_with("culprits (")),
        "{lines:#?}"
    );
}

/// Threads on every CPU take rows at the same moments: each must get a row
/// of its own, with all of its waits (rows are allocated with an atomic add
/// shared by all CPUs; a lost race would merge two threads or lose one).
#[test]
fn every_thread_gets_a_row_of_its_own() {
    if !require_root() {
        return;
    }
    let me = me();
    let tracer = TracerProcess::start(SCHEDLAT, &["victims", "--json", "--top", "0", "-p", &me]);
    let threads: Vec<_> = (0..16)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("row-{i}"))
                .spawn(|| {
                    for _ in 0..200 {
                        std::thread::sleep(PERIOD);
                    }
                    // SAFETY: gettid has no preconditions.
                    unsafe { libc::gettid() as u32 }
                })
                .unwrap()
        })
        .collect();
    let tids: Vec<u32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success());
    let r = parse_json_lines(&lines).pop().unwrap();
    for (i, tid) in tids.iter().enumerate() {
        let row = row_of(&r["victims"], *tid);
        assert_eq!(row["comm"], format!("row-{i}"), "{row}");
        let count = row["count"].as_u64().unwrap();
        assert!((190..=260).contains(&count), "{row}");
    }
    assert_eq!(r["overflow"]["victim_waits"], 0);
}

/// A full table says so: the waits of tasks beyond --max-tasks are counted.
#[test]
fn a_full_table_reports_its_overflow() {
    if !require_root() {
        return;
    }
    let me = me();
    let tracer = TracerProcess::start(
        SCHEDLAT,
        &["victims", "--json", "--max-tasks", "2", "-p", &me],
    );
    workload::spinning_threads(workload::workload_cpu(), 4, Duration::from_millis(500));
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success());
    let r = parse_json_lines(&lines).pop().unwrap();
    assert!(r["rows"]["victims"].as_u64().unwrap() <= 2, "{r}");
    assert_eq!(r["overflow"]["max_tasks"], 2);
    assert!(r["overflow"]["victim_waits"].as_u64().unwrap() > 0, "{r}");
    // In text too.
    let (status, out, _) = common::run_schedlat(&["victims", "--max-tasks", "1", "1", "1"]);
    assert!(status.success());
    let total = out.lines().find(|l| l.starts_with("total ")).unwrap();
    assert!(total.contains("(full at --max-tasks 1)"), "{total}");
}

#[test]
fn interval_and_count_print_count_reports() {
    if !require_root() {
        return;
    }
    let (status, out, err) = common::run_schedlat(&["victims", "--json", "1", "2"]);
    assert!(status.success(), "{err}");
    let lines: Vec<String> = out.lines().map(String::from).collect();
    let r = parse_json_lines(&lines);
    assert_eq!(r.len(), 2, "{out}");
    assert_eq!(
        (r[0]["last"].as_bool(), r[1]["last"].as_bool()),
        (Some(false), Some(true))
    );
    let ns = r[0]["interval_ns"].as_u64().unwrap();
    assert!((900_000_000..1_500_000_000).contains(&ns), "{ns}");
}

#[test]
fn classic_tracepoints_are_refused_with_the_reason() {
    if !require_root() {
        return;
    }
    for args in [
        &["victims", "--hook", "tp", "1", "1"][..],
        &["slow", "--hook", "tp"],
    ] {
        let (status, _, err) = common::run_schedlat(args);
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("needs the tp_btf hook mode"), "{err}");
        assert!(err.contains("drop --hook tp"), "{err}");
    }
    let (status, _, err) = common::run_schedlat(&["slow", "--threshold", "5"]);
    assert_eq!(status.code(), Some(2));
    assert!(err.contains("needs a unit"), "{err}");
}

/// `--stacks`: a holder thread spinning in HOLDER_SPIN beside a
/// SCHED_BATCH sleeper of this process on one CPU (its waits end behind
/// the holder, at its slice's end): in the intervals the holder's culprit
/// row quotes its hottest stack of the waits over 1 ms, ending in that
/// function, as diagnose's `stacks.holders` do; every interval says what
/// its stacks covered, and quotes no more waits than the row has (each
/// interval folds its own).
#[test]
fn the_holders_culprit_row_quotes_its_hottest_stack() {
    if !require_root() {
        return;
    }
    let me = me();
    let cpus = CpuTimes::now();
    let tracer = TracerProcess::start(
        SCHEDLAT,
        &[
            "victims", "--stacks", "--json", "--top", "0", "-p", &me, "1",
        ],
    );
    let cpu = workload::workload_cpu();
    let (_, holder) = workload::behind_holder(cpu, || workload::batch_sleeper(cpu, 400));
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    let busy = cpus.busy_since();
    assert!(status.success(), "{status}");
    let intervals = parse_json_lines(&lines);
    assert!(!intervals.is_empty(), "no interval: {lines:#?}");
    for r in &intervals {
        let stacks = &r["stacks"];
        assert_eq!(stacks["threshold_ns"], 1_000_000, "{r}");
        assert!(stacks["events"].is_u64() && stacks["lost"].is_u64(), "{r}");
        assert!(r.get("stacks_unavailable").is_none(), "{r}");
        for row in r["culprits"].as_array().unwrap() {
            let Some(hottest) = row.get("hottest_stack") else {
                continue;
            };
            assert_eq!(hottest["task"]["tid"], row["tid"], "{row}");
            // The stacks' interval ends a moment after the tables': a wait
            // that ended between the two counts in the next row.
            let (waits, count) = (hottest["waits"].as_u64(), row["count"].as_u64());
            assert!(
                waits.zip(count).is_some_and(|(w, c)| w <= c + 1)
                    && hottest["stack_ns"].as_u64() <= hottest["wait_ns"].as_u64(),
                "more quoted than the interval's row holds (an interval folds its own): {row}"
            );
        }
    }
    let quoted: Vec<&Value> = (intervals.iter())
        .flat_map(|r| r["culprits"].as_array().unwrap())
        .filter(|row| row["tid"] == holder)
        .filter_map(|row| row.get("hottest_stack"))
        .collect();
    let folded = |h: &Value| h["folded"].as_str().unwrap_or_default().to_string();
    assert!(
        quoted.iter().any(|h| folded(h).starts_with("stack-holder;")
            && folded(h).ends_with(&format!(";{}", workload::HOLDER_SPIN))),
        "no stack of the holder {holder} ending in {} ({busy}): {quoted:?}; intervals: {intervals:?}",
        workload::HOLDER_SPIN
    );
}

#[test]
fn perf_sched_latency_rows_parse() {
    let text = "\
  Task                  |   Runtime ms  | Switches | Avg delay ms    | Max delay ms    | Max delay start           | Max delay end          |
  sleeper:2494          |      2.068 ms |        2 | avg:   1.350 ms | max:   2.699 ms | max start:  3365.806546 s | max end:  3365.809245 s
  lto cgu.3.rcgu.:2556  |     21.214 ms |        4 | avg:   2.446 ms | max:   4.014 ms | max start:  3366.706540 s | max end:  3366.710554 s
  TOTAL:                |   1689.959 ms |      332 |
";
    let rows = parse_latency(text);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let r = &rows[0];
    assert_eq!((r.comm.as_str(), r.tid, r.switches), ("sleeper", 2494, 2));
    assert_eq!((r.avg_ns, r.max_ns), (1_350_000, 2_699_000));
    assert_eq!(rows[1].comm, "lto cgu.3.rcgu.");
}

/// Issue 19: what tells a throttled wait from a wake onto an idle CPU (both
/// end on an idle CPU, culprit swapper): a CPU hog in a cgroup with 10% of
/// a CPU is seen throttled over an interval, this test process is not.
/// (Whether its waits end on an idle CPU depends on the host's other load;
/// how the views label them is tested in the binary's own tests.)
#[test]
fn a_quota_limited_process_is_seen_throttled() {
    if !require_root() {
        return;
    }
    let (group, _) = common::cgroup::TestCgroup::with_cpu_quota("throttled", 10_000, 100_000);
    let mut hog = std::process::Command::new("sh")
        .args(["-c", common::cgroup::HOG])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let v2 = common::cgroup::v2_root();
    let v1 = common::cgroup::v1_cpu_root();
    let mut watch = schedlat::sys::throttle::ThrottleWatch::start(Some(&v2), v1.as_deref());
    group.add(hog.id());
    std::thread::sleep(Duration::from_millis(600));
    watch.end_interval();
    let (hog_throttled, me_throttled) = (
        watch.throttled(hog.id()),
        watch.throttled(std::process::id()),
    );
    // Without the quota: after an interval to settle, no growth, no
    // throttling.
    let dir = std::path::Path::new(&group.path()).to_path_buf();
    let lifted = if dir.join("cpu.max").exists() {
        std::fs::write(dir.join("cpu.max"), "max 100000")
    } else {
        std::fs::write(dir.join("cpu.cfs_quota_us"), "-1")
    };
    lifted.expect("lifting the quota");
    std::thread::sleep(Duration::from_millis(300));
    watch.end_interval();
    std::thread::sleep(Duration::from_millis(300));
    watch.end_interval();
    let after = watch.throttled(hog.id());
    let _ = hog.kill();
    let _ = hog.wait();
    assert!(
        hog_throttled,
        "the hog in {} was not seen throttled",
        group.path()
    );
    assert!(
        !me_throttled,
        "this test process is not in a throttled group"
    );
    assert!(!after, "an interval without throttling counts as none");
}
