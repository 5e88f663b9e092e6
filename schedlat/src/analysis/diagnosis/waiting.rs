//! Step 1 of the method: was the scope runnable but waiting at all? How
//! much it waited, as one share of the window, is also what the 1% test of
//! the diagnoses and their strengths go by (docs/diagnose.md, step 1). A
//! share is not enough: thousands of waits of a few microseconds add up to
//! a percent of the window while no task feels them, so with eBPF the size
//! of the waits decides too (their shape against the slice).

use serde::Serialize;

use crate::{
    analysis::{
        fmt_ns,
        shape::{Shape, Verdict},
    },
    sys::findings::Findings,
};

/// Below this share of the window spent waiting (per thread, and PSI for
/// the scope), waiting is negligible: not a scheduling problem.
pub(crate) const NEGLIGIBLE: f64 = 0.01;
/// The time from a wakeup to the switch when the wakeup preempts, which
/// schedstat's run_delay does not count (selfcheck.rs says why): about
/// 10 us on an idle CPU of a virtual machine (measured: 4.29 ms in 398
/// such waits, tests/schedstat.rs), a few microseconds on bare metal. A
/// scale, to say how much waiting run_delay could be missing.
pub(crate) const PREEMPTING_WAKEUP_NS: u64 = 10_000;

/// The answer to step 1, with the numbers it rests on.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub(crate) enum Waiting {
    /// Not a scheduling problem; where to look instead.
    Negligible {
        evidence: String,
    },
    Significant {
        evidence: String,
    },
    /// Waiting adds up to a share that matters, but each wait is short:
    /// the scope's histogram is healthy (its tail under half a slice,
    /// docs/shape.md). Not a scheduling problem, and no cause is named: a
    /// neighbour that holds the CPU for a few microseconds per wakeup is
    /// not one to cap.
    Short {
        evidence: String,
    },
    /// Neither schedstat nor PSI gives numbers on this kernel.
    Unknown {
        reason: String,
    },
}

/// What eBPF measured of the scope's waiting (root only), as shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EbpfWaiting {
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
    pub(crate) fn new(waited_ns: u64, most_task: Option<f64>, f: &Findings) -> EbpfWaiting {
        let cpu_time = f.window_ns as f64 * f.scope_cpus() as f64;
        EbpfWaiting {
            most_task,
            scope: (waited_ns as f64 / cpu_time.max(1.0)).min(1.0),
        }
    }

    /// The larger of the two: how much eBPF says the scope waited.
    pub(crate) fn share(&self) -> f64 {
        self.scope.max(self.most_task.unwrap_or(0.0))
    }
}

/// The scope's waiting as a share of the window, for the 1% test of the
/// causes and their strengths: the largest of its most-waiting thread by
/// schedstat (threads alive at both ends of the window) and what eBPF
/// measured (which also sees short-lived children and run_delay's blind
/// spot).
pub(crate) fn scope_waited(f: &Findings, ebpf: Option<EbpfWaiting>) -> f64 {
    let schedstat = if f.schedstat_works {
        f.max_thread_share()
    } else {
        0.0
    };
    schedstat.max(ebpf.map_or(0.0, |e| e.share()))
}

/// Was the scope runnable but waiting? `ebpf`: what eBPF measured, when
/// it could; it sees what run_delay misses. `shape`: the shape of the
/// scope's waits in the window (eBPF), which says whether they were long
/// enough to matter.
pub(crate) fn waiting(f: &Findings, ebpf: Option<EbpfWaiting>, shape: Option<&Shape>) -> Waiting {
    let window = fmt_ns(f.window_ns);
    let psi = f.scope_psi();
    if !f.schedstat_works && psi.is_none() && ebpf.is_none() {
        return Waiting::Unknown {
            reason: format!(
                "{} and {}: nothing here says how long its tasks waited",
                no_schedstat(f),
                no_psi(f)
            ),
        };
    }
    let mut evidence = Vec::new();
    if f.schedstat_works {
        let top = f.top_waiters.first();
        evidence.push(format!(
            "schedstat: {} threads waited {} in {window}; most: {}",
            f.threads,
            fmt_ns(f.schedstat_wait_ns),
            top.map_or("-".into(), |w| format!(
                "thread {} ({}) {:.1}% of the window",
                w.tid,
                w.comm,
                w.share * 100.0
            ))
        ));
        // run_delay's blind spot, at a scale: each switch-in may hide a
        // preempting wakeup's wakeup-to-switch time.
        let blind_ns = f.schedstat_switch_ins.saturating_mul(PREEMPTING_WAKEUP_NS);
        evidence.push(format!(
            "schedstat's run_delay does not count the time from a wakeup to the switch when the wakeup preempts (most wakeups on an idle or lightly loaded CPU): {} switch-ins, {} ({:.1}% of the window) at {} each; {}",
            f.schedstat_switch_ins,
            fmt_ns(blind_ns),
            blind_ns as f64 / f.window_ns as f64 * 100.0,
            fmt_ns(PREEMPTING_WAKEUP_NS),
            match (ebpf, psi.is_some()) {
                (Some(e), _) => format!(
                    "eBPF, which counts it, measured the scope's waits at {:.1}% of its CPUs' time{}",
                    e.scope * 100.0,
                    e.most_task.map_or(String::new(), |m| format!(
                        ", its most-waiting task at {:.1}% of the window",
                        m * 100.0
                    ))
                ),
                (None, true) => "PSI counts it".into(),
                (None, false) => "no PSI of this scope's own counts it".into(),
            }
        ));
    } else {
        evidence.push(format!("{}: not used", no_schedstat(f)));
        if let Some(e) = ebpf {
            evidence.push(format!(
                "eBPF measured the scope's waits at {:.1}% of its CPUs' time",
                e.scope * 100.0
            ));
        }
    }
    if let Some((share, avg10)) = psi {
        let whose = if f.psi_cgroup.is_some() {
            "cgroup"
        } else {
            "system"
        };
        evidence.push(format!(
            "PSI cpu some ({whose}): {:.1}% of the window, avg10 {avg10:.2}%",
            share * 100.0
        ));
    }
    if let (Some((share, _)), false) = (f.psi_system, f.system_scope) {
        evidence.push(format!(
            "system PSI cpu some {:.1}% (context)",
            share * 100.0
        ));
    }
    let evidence = evidence.join("; ");
    let scope_ok = scope_waited(f, ebpf) < NEGLIGIBLE;
    let psi_ok = psi.is_none_or(|(share, _)| share < NEGLIGIBLE);
    // Negligible by run_delay alone, with nothing that sees its blind spot
    // (no PSI of the scope's own, no eBPF), while that blind spot could
    // hold 1% of the window: not a fact to build "not a scheduling
    // problem" on.
    let blind_share = f.schedstat_switch_ins.saturating_mul(PREEMPTING_WAKEUP_NS) as f64
        / f.window_ns.max(1) as f64;
    let unconfirmed =
        f.schedstat_works && psi.is_none() && ebpf.is_none() && blind_share >= NEGLIGIBLE;
    match (scope_ok && psi_ok, unconfirmed) {
        (true, false) => Waiting::Negligible { evidence },
        (true, true) => Waiting::Unknown {
            reason: format!(
                "{evidence}. schedstat shows negligible waiting, but it could be missing {:.1}% of the window and nothing here counts that time: run as root (eBPF measures it) or diagnose the process's cgroup (its PSI counts it)",
                blind_share * 100.0
            ),
        },
        (false, _) => match shape {
            Some(shape) if shape.verdict == Verdict::Healthy => Waiting::Short {
                evidence: format!("{evidence}; shape: {}", shape.summary),
            },
            _ => Waiting::Significant { evidence },
        },
    }
}

/// Why schedstat gave no numbers: a scope without threads (a pod's
/// cgroup whose containers are gone, an empty group) has none to read,
/// which says nothing of the kernel; threads that all read zero do.
fn no_schedstat(f: &Findings) -> &'static str {
    if f.threads == 0 && !f.system_scope {
        "the scope had no threads at the end of the window (an empty cgroup, or its tasks exited): schedstat has none to read"
    } else {
        "schedstat reads zero on this kernel (CONFIG_SCHED_INFO off?)"
    }
}

/// Why there is no PSI of the scope: the kernel keeps none (no system PSI
/// either), or the scope has none of its own (a process in the root
/// cgroup, a group only in a cgroup v1 hierarchy, which keeps no
/// cpu.pressure).
fn no_psi(f: &Findings) -> &'static str {
    if f.psi_system.is_none() {
        "PSI is unavailable (psi=0 or CONFIG_PSI off)"
    } else {
        "the scope has no PSI of its own (the root cgroup, or a group only in a cgroup v1 hierarchy)"
    }
}

impl Waiting {
    /// Whether the causes are looked for: waiting that matters, or no
    /// numbers to say it does not. Negligible or short waiting has no
    /// cause to name (a cause named beside "not a scheduling problem"
    /// would be acted on).
    pub(crate) fn wants_a_cause(&self) -> bool {
        matches!(self, Waiting::Significant { .. } | Waiting::Unknown { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnosis::fixtures::{findings, waiter};

    /// eBPF's measure with the scope's waits and its most-waiting task at
    /// `share`.
    fn ebpf(share: f64) -> EbpfWaiting {
        EbpfWaiting {
            most_task: Some(share),
            scope: share,
        }
    }

    /// A pod's cgroup whose containers are gone: no threads is not a
    /// kernel without schedstat, and the system's PSI is no sign that PSI
    /// is off.
    #[test]
    fn a_scope_without_threads_blames_no_kernel_option() {
        let f = Findings {
            schedstat_works: false,
            threads: 0,
            top_waiters: Vec::new(),
            system_scope: false,
            ..findings()
        };
        match waiting(&f, None, None) {
            Waiting::Unknown { reason } => {
                assert!(reason.contains("no threads"), "{reason}");
                assert!(reason.contains("no PSI of its own"), "{reason}");
                assert!(!reason.contains("CONFIG_"), "{reason}");
            }
            w => panic!("{w:?}"),
        }
        // eBPF's numbers stand where schedstat has none.
        assert!(matches!(
            waiting(&f, Some(ebpf(0.2)), None),
            Waiting::Significant { .. }
        ));
    }

    #[test]
    fn zeros_everywhere_are_unknown_not_facts() {
        let f = Findings {
            schedstat_works: false,
            psi_system: None,
            ..findings()
        };
        assert!(matches!(waiting(&f, None, None), Waiting::Unknown { .. }));
    }

    /// A process that sleeps and wakes 1,000 times a second, in the root
    /// cgroup (no PSI of its own): run_delay says almost nothing, but its
    /// blind spot could hide 1% of the window: unknown, not negligible;
    /// eBPF settles it either way.
    #[test]
    fn run_delay_alone_cannot_call_a_frequent_sleeper_negligible() {
        let f = Findings {
            schedstat_switch_ins: 10_000,
            system_scope: false,
            ..findings()
        };
        match waiting(&f, None, None) {
            Waiting::Unknown { reason } => assert!(
                reason.contains("10000 switch-ins, 100 ms (1.0% of the window)")
                    && reason.contains("run as root"),
                "{reason}"
            ),
            w => panic!("{w:?}"),
        }
        assert!(matches!(
            waiting(&f, Some(ebpf(0.001)), None),
            Waiting::Negligible { .. }
        ));
        assert!(matches!(
            waiting(&f, Some(ebpf(0.05)), None),
            Waiting::Significant { .. }
        ));
        // With PSI of its own (a cgroup, or the system), PSI counts it.
        let f = Findings {
            system_scope: true,
            ..f
        };
        match waiting(&f, None, None) {
            Waiting::Negligible { evidence } => {
                assert!(evidence.contains("PSI counts it"), "{evidence}")
            }
            w => panic!("{w:?}"),
        }
    }

    /// A cgroup whose waiting is spread over short-lived children: no
    /// thread alive at both ends waited 1% of the window, no one task
    /// measured by eBPF either, but together they waited a quarter of
    /// their CPU's time.
    #[test]
    fn waiting_spread_over_many_tasks_is_significant() {
        let f = Findings {
            top_waiters: waiter(0.001),
            system_scope: false,
            psi_system: None,
            ..findings()
        };
        let spread = EbpfWaiting {
            most_task: Some(0.003),
            scope: 0.25,
        };
        match waiting(&f, Some(spread), None) {
            Waiting::Significant { evidence } => assert!(
                evidence.contains("the scope's waits at 25.0% of its CPUs' time, its most-waiting task at 0.3% of the window"),
                "{evidence}"
            ),
            w => panic!("{w:?}"),
        }
        assert_eq!(scope_waited(&f, Some(spread)), 0.25);
    }
}
