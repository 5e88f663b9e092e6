//! Too little CPU for the scope: its group's quota (quota throttling),
//! every CPU (saturation), or the CPUs it may use (pinning), each named from
//! the kernel's accounting of the window with its evidence and a next step.
//! Thresholds are named constants, documented in docs/diagnose.md.

use super::{named::Diagnosis, waiting::NEGLIGIBLE};
use crate::{analysis::fmt_ns, sys::findings::Findings};

/// A CPU at least this busy counts as busy ...
pub(crate) const BUSY: f64 = 0.90;
/// ... and one under this as (mostly) idle.
pub(crate) const IDLE: f64 = 0.50;

/// The scope's cgroup throttled by its CPU quota in the window (cpu.stat).
pub(crate) fn throttling(f: &Findings) -> Option<Diagnosis> {
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
    Some(Diagnosis {
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
        holders: Vec::new(),
    })
}

/// More runnable tasks than CPUs while every CPU was busy.
pub(crate) fn saturation(f: &Findings) -> Option<Diagnosis> {
    let all_busy = !f.cpu_busy.is_empty() && f.cpu_busy.iter().all(|&b| b >= BUSY);
    if !(all_busy && f.avg_runnable > f.cpus as f64) {
        return None;
    }
    let psi = f.psi_system.map_or(String::new(), |(s, _)| {
        format!("; PSI some {:.0}% of the window", s * 100.0)
    });
    Some(Diagnosis {
        name: "CPU saturation",
        strength: f.psi_system.map_or(1.0 - f.cpus as f64 / f.avg_runnable, |(s, _)| s),
        evidence: format!(
            "{:.1} runnable tasks on average for {} CPUs; every CPU busy ({}){psi}",
            f.avg_runnable,
            f.cpus,
            busy_list(f)
        ),
        next_step: "more runnable work than CPUs: move or throttle the batch work, renice it (nice 19), or add CPUs".into(),
        holders: Vec::new(),
    })
}

/// The scope's most-waiting thread allowed only on busy CPUs while others
/// sat idle.
pub(crate) fn pinning(f: &Findings) -> Option<Diagnosis> {
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
    Some(Diagnosis {
        name: "affinity (pinning) contention",
        strength: f.max_thread_share(),
        evidence: format!(
            "the scope may only run on {}, while {} sat idle ({}); its most-waiting thread waited {:.1}% of the window. Low average utilisation does not rule out scheduling latency",
            cpus(allowed, "which was busy", "which were all busy"),
            cpus(&idle, "", ""),
            busy_list(f),
            f.max_thread_share() * 100.0
        ),
        next_step: "let the task use the idle CPUs (taskset, cpuset), or move what competes with it off its CPUs".into(),
        holders: Vec::new(),
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

/// "CPU 1, which was busy" or "CPUs 0,1, which were all busy": `one` and
/// `many` follow the list, as its number says.
fn cpus(cpus: &[usize], one: &str, many: &str) -> String {
    let list = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (noun, then) = if cpus.len() == 1 {
        ("CPU", one)
    } else {
        ("CPUs", many)
    };
    let sep = if then.is_empty() { "" } else { ", " };
    format!("{noun} {list}{sep}{then}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::diagnosis::{
            fixtures::{findings, waiter},
            waiting::{Waiting, waiting},
        },
        sys::findings::Throttling,
    };

    #[test]
    fn saturation_needs_every_cpu_busy_and_a_queue() {
        let f = Findings {
            top_waiters: waiter(0.4),
            cpu_busy: vec![0.99, 0.97],
            avg_runnable: 6.0,
            psi_system: Some((0.6, 55.0)),
            ..findings()
        };
        assert!(matches!(
            waiting(&f, None, None),
            Waiting::Significant { .. }
        ));
        let c = saturation(&f).unwrap();
        assert_eq!(c.name, "CPU saturation");
        assert!(c.evidence.contains("6.0 runnable"), "{}", c.evidence);
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
        assert!(saturation(&f).is_none() && throttling(&f).is_none());
        let c = pinning(&f).unwrap();
        assert_eq!(c.name, "affinity (pinning) contention");
        // Issue 28: one CPU is not "CPU 1, which were busy".
        assert!(
            c.evidence.starts_with(
                "the scope may only run on CPU 1, which was busy, while CPU 0 sat idle ("
            ),
            "{}",
            c.evidence
        );
        let two = Findings {
            cpu_busy: vec![0.95, 0.99, 0.1],
            allowed_cpus: Some(vec![0, 1]),
            ..f.clone()
        };
        let evidence = pinning(&two).unwrap().evidence;
        assert!(
            evidence.starts_with(
                "the scope may only run on CPUs 0,1, which were all busy, while CPU 2 sat idle"
            ),
            "{evidence}"
        );
        // Not pinned: the idle CPU was allowed, so no pinning verdict.
        let free = Findings {
            allowed_cpus: Some(vec![0, 1]),
            ..f
        };
        assert!(pinning(&free).is_none());
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
        let c = [throttling(&f).unwrap()];
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
