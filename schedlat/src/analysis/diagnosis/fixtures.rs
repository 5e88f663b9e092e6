//! The kernel's accounting the diagnosis tests share: a quiet 10 s window
//! on 2 CPUs, and a thread that waited a share of it.

use crate::sys::findings::{Findings, ThreadWait};

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
