//! The sleeper-and-hogs scenario as a workload: a 1 ms periodic sleeper
//! thread (cyclictest's loop) sharing one CPU with CPU hogs of a known comm
//! (the report's `cal.sh`), run under a schedlat command.

use std::time::Duration;

use super::{SCHEDLAT, TracerProcess, require_root, workload};

/// The hogs get a name of their own, so tables and events can be checked by it.
pub(crate) const HOG: &str = "schedlat-hog";
pub(crate) const SLEEPER: &str = "cyclic-sleeper";
pub(crate) const PERIOD: Duration = Duration::from_millis(1);
pub(crate) const ROUNDS: u32 = 2000;
pub(crate) const HOGS: usize = 6;

/// What a run left: the sleeper's TID, the hogs' pids, schedlat's stdout.
pub(crate) struct Run {
    pub tid: u32,
    pub hog_pids: Vec<u32>,
    pub lines: Vec<String>,
}

/// The scenario under `schedlat ARGS`: HOGS hogs named HOG and a sleeper
/// thread named SLEEPER, all on the workload CPU; schedlat is stopped with
/// SIGINT once the sleeper is done.
pub(crate) fn run(args: &[&str]) -> Run {
    assert!(require_root(), "callers check require_root() first");
    let cpu = workload::workload_cpu();
    let hogs = workload::Hogs::start_named(cpu, HOGS, HOG);
    let tracer = TracerProcess::start(SCHEDLAT, args);
    let tid = workload::named_sleeper(cpu, PERIOD, ROUNDS, SLEEPER);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat {args:?}: {status}");
    Run {
        tid,
        hog_pids: hogs.pids(),
        lines,
    }
}

/// The scheduler's base slice as schedlat takes it (schedlat/src/sys/
/// slice.rs): debugfs when mounted, else the kernel's default,
/// 0.75 ms x (1 + log2(min(CPUs, 8))).
pub(crate) fn slice_ns() -> u64 {
    if let Some(ns) = std::fs::read_to_string("/sys/kernel/debug/sched/base_slice_ns")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return ns;
    }
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    750_000 * (1 + u64::from(cpus.ilog2()))
}

/// This test process's pid, for `-p`.
pub(crate) fn me() -> String {
    std::process::id().to_string()
}
