//! How much the scope waited, as one share of the window: what the 1%
//! test of the causes and their strengths go by (docs/diagnose.md, step 1).

use super::findings::Findings;

/// What eBPF measured of the scope's waiting (root only), as shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EbpfWaiting {
    /// The most-waiting task's total wait over the window, from the
    /// victims tables (None when they could not be read).
    pub most_task: Option<f64>,
    /// All the scope's measured waits over its CPUs' time (the window
    /// times the CPUs its tasks may use), at most 1. A scope whose waiting
    /// is spread over many tasks, such as a shell's short-lived children
    /// waiting a few milliseconds each, has no one task that waited 1% of
    /// the window and still lost a quarter of its CPU's time to waiting.
    /// Where waits overlap on one CPU this counts each, so it bounds PSI's
    /// "some" (at least one task waiting) from above.
    pub scope: f64,
}

impl EbpfWaiting {
    /// From the scope's histogram sum over the window (`waited_ns`).
    pub fn new(waited_ns: u64, most_task: Option<f64>, f: &Findings) -> EbpfWaiting {
        let cpu_time = f.window_ns as f64 * f.scope_cpus() as f64;
        EbpfWaiting {
            most_task,
            scope: (waited_ns as f64 / cpu_time.max(1.0)).min(1.0),
        }
    }

    /// The larger of the two: how much eBPF says the scope waited.
    pub fn share(&self) -> f64 {
        self.scope.max(self.most_task.unwrap_or(0.0))
    }
}

/// The scope's waiting as a share of the window, for the 1% test of the
/// causes and their strengths: the largest of its most-waiting thread by
/// schedstat (threads alive at both ends of the window) and what eBPF
/// measured (which also sees short-lived children and run_delay's blind
/// spot).
pub fn scope_waited(f: &Findings, ebpf: Option<EbpfWaiting>) -> f64 {
    let schedstat = if f.schedstat_works {
        f.max_thread_share()
    } else {
        0.0
    };
    schedstat.max(ebpf.map_or(0.0, |e| e.share()))
}
