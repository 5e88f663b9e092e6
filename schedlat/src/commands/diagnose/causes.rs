//! From findings to named causes, following the method of docs/architecture.md: first whether
//! the scope was runnable-but-waiting at all, then which known mechanism
//! explains the waiting, strongest first, each with its evidence and a next
//! step. Thresholds are named constants, documented in docs/diagnose.md.

use serde::Serialize;

use super::{
    findings::Findings,
    priority::{Attribution, Edge},
    waited::{EbpfWaiting, scope_waited},
};
use crate::analysis::{fmt_ns, task};

/// Below this share of the window spent waiting (per thread, and PSI for
/// the scope), waiting is negligible: not a scheduling problem.
pub const NEGLIGIBLE: f64 = 0.01;
/// A CPU at least this busy counts as busy ...
pub const BUSY: f64 = 0.90;
/// ... and one under this as (mostly) idle.
pub const IDLE: f64 = 0.50;
/// Class or priority is named when culprits that outrank their victims
/// are charged with at least this share of the scope's measured wait.
/// Kernel threads that outrank everyone (migration/N at FIFO 99, nice -20
/// kworkers, RCU and IRQ threads) take a few percent on a busy machine;
/// a quarter is far above that, and means a structural part of the
/// waiting was decided by rule, not by turn.
pub const OUTRANKED: f64 = 0.25;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Waiting {
    /// Not a scheduling problem; where to look instead.
    Negligible {
        evidence: String,
    },
    Significant {
        evidence: String,
    },
    /// Neither schedstat nor PSI gives numbers on this kernel.
    Unknown {
        reason: String,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cause {
    pub name: &'static str,
    /// Roughly, the share of the window it explains; orders the causes.
    pub strength: f64,
    pub evidence: String,
    pub next_step: String,
}

/// The time from a wakeup to the switch when the wakeup preempts, which
/// schedstat's run_delay does not count (selfcheck.rs says why): about
/// 10 us on an idle CPU of a virtual machine (measured: 4.29 ms in 398
/// such waits, tests/schedstat.rs), a few microseconds on bare metal. A
/// scale, to say how much waiting run_delay could be missing.
pub const PREEMPTING_WAKEUP_NS: u64 = 10_000;

/// Was the scope runnable but waiting? `ebpf`: what eBPF measured, when
/// it could; it sees what run_delay misses.
pub fn waiting(f: &Findings, ebpf: Option<EbpfWaiting>) -> Waiting {
    let window = fmt_ns(f.window_ns);
    let psi = f.scope_psi();
    if !f.schedstat_works && psi.is_none() {
        return Waiting::Unknown {
            reason: "schedstat reads zero (CONFIG_SCHED_INFO off?) and PSI is unavailable (psi=0 or CONFIG_PSI off): this kernel does not say how long tasks waited".into(),
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
        evidence
            .push("schedstat reads zero on this kernel (CONFIG_SCHED_INFO off?): not used".into());
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
        (false, _) => Waiting::Significant { evidence },
    }
}

/// The causes that match, strongest first. With the eBPF victims tables
/// (`attribution`), each measured wait is explained once: the share
/// charged to culprits that outrank their victims goes to class or
/// priority, the rest to the capacity causes (saturation, pinning), whose
/// strength is scaled by it. `ebpf`: the scope's waiting as eBPF measured
/// it, when it could.
pub fn causes(
    f: &Findings,
    attribution: Option<&Attribution>,
    ebpf: Option<EbpfWaiting>,
) -> Vec<Cause> {
    let peers = attribution.map_or(1.0, |a| 1.0 - a.outranking_share());
    let capacity = [saturation(f), pinning(f)]
        .into_iter()
        .flatten()
        .map(|c| Cause {
            strength: c.strength * peers,
            ..c
        });
    let mut causes: Vec<Cause> = [
        throttling(f),
        attribution.and_then(|a| priority(f, a, ebpf)),
    ]
    .into_iter()
    .flatten()
    .chain(capacity)
    .collect();
    causes.sort_by(|a, b| b.strength.total_cmp(&a.strength));
    causes
}

fn throttling(f: &Findings) -> Option<Cause> {
    let t = f.throttling.as_ref().filter(|t| t.throttled > 0)?;
    let quota = match (t.quota, t.quota_cpus) {
        (Some((q, p)), Some(cpus)) => format!("quota {cpus:.2} CPU ({q} us per {p} us)"),
        _ => "a CPU quota".to_string(),
    };
    // cpu.stat's throttled time adds up each CPU's run queue of the group
    // (kernel: unthrottle_cfs_rq), so it can exceed the window. The share
    // of periods throttled is the normalised measure, comparable with the
    // other causes' shares; the time is given with what it sums.
    let cpus = f.scope_cpus();
    let share = t.throttled as f64 / t.periods.max(1) as f64;
    Some(Cause {
        name: "quota throttling",
        strength: share.min(1.0),
        evidence: format!(
            "the cgroup has {quota}; it was throttled in {} of {} periods ({:.0}%); {} throttled, summed over the group's run queues on its {cpus} CPUs (at most {cpus} x the {} window; {} cpu.stat)",
            t.throttled,
            t.periods,
            share * 100.0,
            fmt_ns(t.throttled_ns),
            fmt_ns(f.window_ns),
            t.source
        ),
        next_step: "raise the quota (cpu.max, or cpu.cfs_quota_us on cgroup v1) above the group's peak demand, or spread its bursts".into(),
    })
}

fn saturation(f: &Findings) -> Option<Cause> {
    let all_busy = !f.cpu_busy.is_empty() && f.cpu_busy.iter().all(|&b| b >= BUSY);
    if !(all_busy && f.avg_runnable > f.cpus as f64) {
        return None;
    }
    let psi = f.psi_system.map_or(String::new(), |(s, _)| {
        format!("; PSI some {:.0}% of the window", s * 100.0)
    });
    Some(Cause {
        name: "CPU saturation",
        strength: f.psi_system.map_or(1.0 - f.cpus as f64 / f.avg_runnable, |(s, _)| s),
        evidence: format!(
            "{:.1} runnable tasks on average for {} CPUs; every CPU busy ({}){psi}",
            f.avg_runnable,
            f.cpus,
            busy_list(f)
        ),
        next_step: "more runnable work than CPUs: move or throttle the batch work, renice it (nice 19), or add CPUs".into(),
    })
}

fn pinning(f: &Findings) -> Option<Cause> {
    let allowed = f.allowed_cpus.as_ref()?;
    let idle: Vec<usize> = (0..f.cpu_busy.len())
        .filter(|&c| f.cpu_busy[c] < IDLE)
        .collect();
    let busy_allowed = allowed
        .iter()
        .all(|&c| f.cpu_busy.get(c).is_some_and(|&b| b >= BUSY));
    let locked_out = !idle.is_empty() && idle.iter().all(|c| !allowed.contains(c));
    if !(busy_allowed && locked_out && f.max_thread_share() >= NEGLIGIBLE) {
        return None;
    }
    Some(Cause {
        name: "affinity (pinning) contention",
        strength: f.max_thread_share(),
        evidence: format!(
            "the scope may only run on CPU {}, which were busy, while CPU {} sat idle ({}); its most-waiting thread waited {:.1}% of the window. Low average utilisation does not rule out scheduling latency",
            list(allowed),
            list(&idle),
            busy_list(f),
            f.max_thread_share() * 100.0
        ),
        next_step: "let the task use the idle CPUs (taskset, cpuset), or move what competes with it off its CPUs".into(),
    })
}

/// RT or lower-nice culprits preempting the scope's tasks: named when
/// they are charged with at least OUTRANKED of the scope's measured wait
/// and the scope waited at all.
fn priority(f: &Findings, a: &Attribution, ebpf: Option<EbpfWaiting>) -> Option<Cause> {
    let share = a.outranking_share();
    let waited = scope_waited(f, ebpf);
    if share < OUTRANKED || waited < NEGLIGIBLE {
        return None;
    }
    // The culprits that matter: a migration/N thread (FIFO 99) that took
    // a few microseconds is not evidence.
    let top: Vec<String> = a
        .outranking
        .iter()
        .filter(|o| o.charged_ns as f64 >= a.tables.waited_ns as f64 * 0.01)
        .take(3)
        .map(|o| {
            format!(
                "{} ({}) over {} ({}): {} in {} waits, {:.0}% of the measured wait",
                task::short(&o.culprit),
                task::sched_label(&o.culprit),
                task::short(&o.victim),
                task::sched_label(&o.victim),
                fmt_ns(o.charged_ns),
                o.waits,
                o.charged_ns as f64 / a.tables.waited_ns.max(1) as f64 * 100.0
            )
        })
        .collect();
    let more = a.outranking.len().saturating_sub(top.len());
    let more = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    let rt = a.outranking.iter().any(|o| o.edge != Edge::Weight);
    let weight = a.outranking.iter().any(|o| o.edge == Edge::Weight);
    let mut steps = Vec::new();
    if rt {
        steps.push("move the RT/deadline task off the victim's CPUs (taskset, cpuset) or lower its priority (chrt); or, with care, make the victim SCHED_FIFO (chrt -f): an RT task that spins starves everything below it");
    }
    if weight {
        steps.push("renice the culprit (renice -n 0 -p PID) or give the victim a lower nice (renice, CAP_SYS_NICE); to separate services, give them cgroups with their own cpu.weight");
    }
    Some(Cause {
        name: "class or priority",
        strength: waited * share,
        evidence: format!(
            "{:.0}% of the scope's measured wait ({} of {}) is charged to culprits that outrank the task they made wait (higher class, higher RT priority or lower nice): {}{more}",
            share * 100.0,
            fmt_ns(a.outranking_ns()),
            fmt_ns(a.tables.waited_ns),
            top.join("; ")
        ),
        next_step: steps.join("; "),
    })
}

fn busy_list(f: &Findings) -> String {
    f.cpu_busy
        .iter()
        .enumerate()
        .map(|(c, b)| format!("CPU {c} {:.0}%", b * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::diagnose::findings::{ThreadWait, Throttling};

    fn findings() -> Findings {
        Findings {
            window_ns: 10_000_000_000,
            cpus: 2,
            threads: 3,
            schedstat_wait_ns: 0,
            schedstat_switch_ins: 0,
            schedstat_works: true,
            top_waiters: vec![],
            psi_system: Some((0.0, 0.0)),
            psi_cgroup: None,
            throttling: None,
            cpu_busy: vec![0.05, 0.05],
            avg_runnable: 0.5,
            allowed_cpus: Some(vec![0, 1]),
            system_scope: true,
        }
    }

    /// eBPF's measure with the scope's waits and its most-waiting task at
    /// `share`.
    fn ebpf(share: f64) -> EbpfWaiting {
        EbpfWaiting {
            most_task: Some(share),
            scope: share,
        }
    }

    fn waiter(share: f64) -> Vec<ThreadWait> {
        vec![ThreadWait {
            tid: 7,
            comm: "victim".into(),
            wait_ns: (share * 1e10) as u64,
            share,
        }]
    }

    #[test]
    fn idle_is_not_a_scheduling_problem() {
        assert!(matches!(
            waiting(&findings(), None),
            Waiting::Negligible { .. }
        ));
        assert!(causes(&findings(), None, None).is_empty());
    }

    #[test]
    fn zeros_everywhere_are_unknown_not_facts() {
        let f = Findings {
            schedstat_works: false,
            psi_system: None,
            ..findings()
        };
        assert!(matches!(waiting(&f, None), Waiting::Unknown { .. }));
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
        match waiting(&f, None) {
            Waiting::Unknown { reason } => assert!(
                reason.contains("10000 switch-ins, 100 ms (1.0% of the window)")
                    && reason.contains("run as root"),
                "{reason}"
            ),
            w => panic!("{w:?}"),
        }
        assert!(matches!(
            waiting(&f, Some(ebpf(0.001))),
            Waiting::Negligible { .. }
        ));
        assert!(matches!(
            waiting(&f, Some(ebpf(0.05))),
            Waiting::Significant { .. }
        ));
        // With PSI of its own (a cgroup, or the system), PSI counts it.
        let f = Findings {
            system_scope: true,
            ..f
        };
        match waiting(&f, None) {
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
        match waiting(&f, Some(spread)) {
            Waiting::Significant { evidence } => assert!(
                evidence.contains("the scope's waits at 25.0% of its CPUs' time, its most-waiting task at 0.3% of the window"),
                "{evidence}"
            ),
            w => panic!("{w:?}"),
        }
        assert_eq!(scope_waited(&f, Some(spread)), 0.25);
    }

    #[test]
    fn saturation_needs_every_cpu_busy_and_a_queue() {
        let f = Findings {
            top_waiters: waiter(0.4),
            cpu_busy: vec![0.99, 0.97],
            avg_runnable: 6.0,
            psi_system: Some((0.6, 55.0)),
            ..findings()
        };
        assert!(matches!(waiting(&f, None), Waiting::Significant { .. }));
        let c = causes(&f, None, None);
        assert_eq!(c[0].name, "CPU saturation");
        assert!(c[0].evidence.contains("6.0 runnable"), "{}", c[0].evidence);
    }

    #[test]
    fn pinning_is_busy_allowed_cpus_beside_idle_ones() {
        let f = Findings {
            top_waiters: waiter(0.3),
            cpu_busy: vec![0.03, 0.99],
            avg_runnable: 3.0,
            allowed_cpus: Some(vec![1]),
            ..findings()
        };
        let c = causes(&f, None, None);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "affinity (pinning) contention");
        // Not pinned: the idle CPU was allowed, so no pinning verdict.
        let free = Findings {
            allowed_cpus: Some(vec![0, 1]),
            ..f
        };
        assert!(causes(&free, None, None).is_empty());
    }

    /// Culprits charged with `(policy, nice, rt, total_ns)` each, all of
    /// one normal nice-0 victim that waited 1000 ns in all.
    fn attribution(culprits: &[(u32, i32, u32, u64)]) -> Attribution {
        use schedlat_common::victims::WaitStats;

        use crate::analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        };
        let victim = task(20, 20, "victim", 0, 0, 0);
        let rows: Vec<WaitStats> = culprits
            .iter()
            .enumerate()
            .map(|(i, &(policy, nice, rt, total_ns))| {
                // TIDs no process has: the cgroup check does not apply.
                let tid = 4_100_000 + i as u32;
                WaitStats {
                    task: task(tid, tid, "hog", policy, nice, rt),
                    count: 10,
                    total_ns,
                    max_other: victim,
                    ..Default::default()
                }
            })
            .collect();
        let victims = [WaitStats {
            task: victim,
            count: 30,
            total_ns: 1_000,
            ..Default::default()
        }];
        Attribution::new(rank(&victims, &rows, SortKey::Total, 0), (0, 0))
    }

    #[test]
    fn an_rt_culprit_comes_before_the_pinning_it_also_matches() {
        let f = Findings {
            top_waiters: waiter(0.6),
            cpu_busy: vec![0.03, 0.99],
            avg_runnable: 2.0,
            allowed_cpus: Some(vec![1]),
            ..findings()
        };
        let a = attribution(&[(1, 0, 50, 900), (0, 0, 0, 100)]);
        let c = causes(&f, Some(&a), None);
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["class or priority", "affinity (pinning) contention"]
        );
        assert!((c[0].strength - 0.54).abs() < 1e-9, "{c:?}");
        // Pinning keeps the waits charged to peers only.
        assert!((c[1].strength - 0.06).abs() < 1e-9, "{c:?}");
        assert!(c[0].evidence.contains("hog 4100000/4100000 (fifo 50)"));
        assert!(c[0].next_step.contains("chrt"));
        // Peers only: no class cause, pinning unscaled.
        let peers = attribution(&[(0, 0, 0, 1000)]);
        let c = causes(&f, Some(&peers), None);
        assert_eq!(c.len(), 1);
        assert!((c[0].strength - 0.6).abs() < 1e-9);
    }

    #[test]
    fn a_small_share_of_outranking_wait_is_not_a_cause() {
        let f = Findings {
            top_waiters: waiter(0.6),
            ..findings()
        };
        // A nice -20 kworker with 10% of the wait: below OUTRANKED.
        let a = attribution(&[(0, -20, 0, 100), (0, 0, 0, 900)]);
        assert!(causes(&f, Some(&a), None).is_empty());
        let a = attribution(&[(0, -10, 0, 800), (0, 0, 0, 200)]);
        let c = causes(&f, Some(&a), None);
        assert_eq!(c[0].name, "class or priority");
        assert!(c[0].next_step.contains("renice"), "{}", c[0].next_step);
    }

    #[test]
    fn throttling_is_named_with_its_counts() {
        let f = Findings {
            top_waiters: waiter(0.5),
            throttling: Some(Throttling {
                source: "cgroup v2",
                quota: Some((10_000, 100_000)),
                quota_cpus: Some(0.1),
                periods: 100,
                throttled: 85,
                throttled_ns: 8_000_000_000,
            }),
            ..findings()
        };
        let c = causes(&f, None, None);
        assert_eq!(c[0].name, "quota throttling");
        assert!(
            c[0].evidence.contains("85 of 100 periods"),
            "{}",
            c[0].evidence
        );
        // 85 of 100 periods; 8 s summed over 2 CPUs of a 10 s window.
        assert!((c[0].strength - 0.85).abs() < 1e-9);
        assert!(
            c[0].evidence.contains("(85%)")
                && c[0].evidence.contains("8.00 s throttled, summed over the group's run queues on its 2 CPUs (at most 2 x the 10.0 s window"),
            "{}",
            c[0].evidence
        );
    }
}
