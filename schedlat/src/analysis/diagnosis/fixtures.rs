//! The kernel's accounting the diagnosis tests share: a quiet 10 s window
//! on 2 CPUs, a thread that waited a share of it, and decision splits
//! known by their outcomes (the worker case's, which the shape verdict's
//! recorded cases read too).

use schedlat_common::decision::Outcome;

use crate::{
    histogram::{DecisionCounts, DecisionFacts, bucket_index},
    sys::findings::{Findings, ThreadWait},
};

pub(crate) fn findings() -> Findings {
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

pub(crate) fn waiter(share: f64) -> Vec<ThreadWait> {
    vec![ThreadWait {
        tid: 7,
        comm: "victim".into(),
        wait_ns: (share * 1e10) as u64,
        share,
        run_ns: 0,
        nice: Some(0),
    }]
}

/// A 6.18 kernel's split of waits known by their outcome alone, each
/// `(outcome, each_ns, n)` in that outcome's histogram: what the shape
/// verdict and the diagnosis read of a case; its cells are the caller's.
pub(crate) fn outcomes(groups: &[(Outcome, u64, u64)]) -> DecisionCounts {
    let mut d = DecisionCounts::zero(DecisionFacts::X86_6_18);
    for &(o, each_ns, n) in groups {
        d.outcome_buckets[o as usize][bucket_index(each_ns)] += n;
        d.outcome_sum_ns[o as usize] += n * each_ns;
    }
    d
}

/// The worker case of docs/decision.md (0.8 ms of work, 0.5 ms of sleep,
/// pinned beside three loops) as the 2-CPU 6.18 VM recorded it: of its
/// waits under 1 ms, 478 granted and 123 other, 60 passed over and 9
/// declined near the slow mode; of the 702 over 1 ms: granted 5.9%,
/// declined 36%, passed over 58%; each placed in its mode.
pub(crate) fn worker_outcomes() -> DecisionCounts {
    outcomes(&[
        (Outcome::Granted, 6_000, 478),
        (Outcome::Other, 3_000, 123),
        (Outcome::PassedOver, 300_000, 60),
        (Outcome::Declined, 500_000, 9),
        (Outcome::Granted, 1_500_000, 41),
        (Outcome::Declined, 3_000_000, 251),
        (Outcome::PassedOver, 6_000_000, 405),
        (Outcome::Other, 12_000_000, 5),
    ])
}
