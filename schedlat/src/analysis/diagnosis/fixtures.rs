//! Samples the diagnosis tests share: a quiet 10 s window on 2 CPUs, a
//! waiting thread, eBPF's measure, and victims tables of one victim.

use schedlat_common::victims::WaitStats;

use super::{priority::Attribution, waiting::EbpfWaiting};
use crate::{
    analysis::{
        task::tests::task,
        victims::{SortKey, rank},
    },
    sys::{
        cgroup_of::TaskCgroups,
        findings::{Findings, ThreadWait},
    },
};

pub fn findings() -> Findings {
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
pub fn ebpf(share: f64) -> EbpfWaiting {
    EbpfWaiting {
        most_task: Some(share),
        scope: share,
    }
}

pub fn waiter(share: f64) -> Vec<ThreadWait> {
    vec![ThreadWait {
        tid: 7,
        comm: "victim".into(),
        wait_ns: (share * 1e10) as u64,
        share,
    }]
}

/// Culprits charged with `(policy, nice, rt, total_ns)` each, all of
/// one normal nice-0 victim that waited 1000 ns in all.
pub fn attribution(culprits: &[(u32, i32, u32, u64)]) -> Attribution {
    let victim = task(20, 20, "victim", 0, 0, 0);
    let rows: Vec<WaitStats> = culprits
        .iter()
        .enumerate()
        .map(|(i, &(policy, nice, rt, total_ns))| {
            // No cgroups read (TaskCgroups::default): the cgroup check
            // does not apply.
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
    Attribution::new(
        rank(&victims, &rows, SortKey::Total, 0),
        (0, 0),
        &TaskCgroups::default(),
    )
}
