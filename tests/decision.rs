//! Root: the advice `schedlat diagnose --decision` gives from the decision split is
//! checked, not asserted. On the worker case (a process that computes 0.8
//! ms and sleeps 0.5 ms, pinned beside three CPU-bound loops) diagnose
//! names the rule and proposes a remedy; the test applies the remedy it
//! proposes (a renice) and `compare` must report the worker's waits
//! improved, its p50 under 100 us; it then applies the remedy diagnose
//! says does not fit this rule (a shorter custom slice, sched_setattr's
//! sched_runtime) and shows that it does not fix it.

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    time::Duration,
};

use common::{SCHEDLAT, cpu::CpuTimes, require_root, workload::Hogs};

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

/// sched_setattr(2) on `tid`: SCHED_OTHER, nice 0, a custom slice of
/// `runtime_ns` (honoured as the slice by EEVDF from 6.12).
fn set_custom_slice(tid: u32, runtime_ns: u64) {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: 0,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: runtime_ns,
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    // SAFETY: attr is a valid sched_attr of the size it states.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    assert_eq!(rc, 0, "sched_setattr: {}", std::io::Error::last_os_error());
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
    let report = run(&["diagnose", "--decision", "--json", "-d", "5", "-p", &pid]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
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
    let (p50_before, p50_after) = (p50(&c["before"]), p50(&c["after"]));
    assert!(
        p50_after < 100_000 && c["change"] == "improved",
        "renice: p50 {p50_before} -> {p50_after} ns, change {} ({})",
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
