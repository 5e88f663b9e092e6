//! What one run of the load in one mode measured.

use std::time::Duration;

use super::{modes::Mode, progs::ProgramDelta};

/// Runs of `perf bench syscall basic` a sample takes the best of.
pub(super) const SYSCALL_RUNS: u32 = 5;

/// One run of the load in one mode.
#[derive(Debug)]
pub(crate) struct Sample {
    pub round: u32,
    pub mode: Mode,
    pub ops_per_sec: f64,
    /// ns per getppid() of `perf bench syscall basic` on the load's CPU,
    /// the tracer attached (workload::syscall_ns).
    pub syscall_ns: f64,
    /// None for the baseline.
    pub tracer: Option<TracerSample>,
}

/// What one tracer run cost.
#[derive(Debug)]
pub(crate) struct TracerSample {
    pub ready: Duration,
    /// Run-time stats of the tracer's programs over the load, by name.
    pub programs: Vec<ProgramDelta>,
    /// All the tracer's BPF run time over the load / sched_switch runs.
    pub ns_per_switch: f64,
    /// utime + stime of the whole tracer run, load and exit included.
    pub cpu_secs: f64,
    pub max_rss_kib: u64,
}
