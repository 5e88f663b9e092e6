//! What the kernel's own accounting says of a scope over a window: two
//! samples of what it publishes (PSI, schedstat, cpu.stat, /proc/stat),
//! taken at the ends of the window, and what changed between them. These
//! are the numbers `diagnose` judges (analysis/diagnosis/).

use std::{collections::HashMap, fs, time::Duration};

use serde::Serialize;

use super::{
    procfs::{self, CpuTimes, Pressure, Quota, Schedstat},
    scope::Scope,
};

/// Everything read at one instant.
pub struct ProcSample {
    pub psi_system: Option<Pressure>,
    pub psi_cgroup: Option<Pressure>,
    pub schedstat: HashMap<u32, Schedstat>,
    pub throttling: Option<((u64, u64, u64), &'static str)>,
    pub cpus: Option<CpuTimes>,
}

impl ProcSample {
    pub fn take(scope: &Scope) -> ProcSample {
        let read = |p: &str| fs::read_to_string(p).ok();
        let cgroup = scope.cgroup();
        ProcSample {
            psi_system: read("/proc/pressure/cpu").and_then(|t| procfs::parse_pressure(&t).ok()),
            psi_cgroup: cgroup
                .and_then(|c| c.v2.as_ref())
                .and_then(|d| fs::read_to_string(d.join("cpu.pressure")).ok())
                .and_then(|t| procfs::parse_pressure(&t).ok()),
            schedstat: scope
                .threads()
                .into_iter()
                .filter_map(|tid| {
                    let text = read(&format!("/proc/{tid}/schedstat"))?;
                    Some((tid, procfs::parse_schedstat(&text).ok()?))
                })
                .collect(),
            throttling: cgroup.and_then(|c| c.throttling_from()),
            cpus: read("/proc/stat").and_then(|t| procfs::parse_proc_stat(&t).ok()),
        }
    }
}

/// One thread's waiting over the window.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadWait {
    pub tid: u32,
    pub comm: String,
    pub wait_ns: u64,
    /// Share of the window spent runnable but waiting.
    pub share: f64,
    /// Time it ran over the window (schedstat field 1).
    pub run_ns: u64,
    /// Its nice value at the end of the window.
    pub nice: Option<i32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Throttling {
    /// Whose cpu.stat: "cgroup v2" or "cgroup v1".
    pub source: &'static str,
    pub quota: Option<(u64, u64)>,
    pub quota_cpus: Option<f64>,
    pub periods: u64,
    pub throttled: u64,
    pub throttled_ns: u64,
}

/// What the window showed, without eBPF.
#[derive(Debug, Clone, Serialize)]
pub struct Findings {
    pub window_ns: u64,
    pub cpus: usize,
    /// Threads alive at the end of the window (those born in it included).
    pub threads: usize,
    /// Sum of run-queue wait over the scope's threads (schedstat field 2).
    pub schedstat_wait_ns: u64,
    /// Their switch-ins over the window (schedstat field 3): one per wait
    /// run_delay ended, whether or not it saw the wait's time.
    pub schedstat_switch_ins: u64,
    /// False when every thread's schedstat reads zero (CONFIG_SCHED_INFO
    /// off): then the wait numbers are unknown, not zero.
    pub schedstat_works: bool,
    /// The threads that waited most, most first.
    pub top_waiters: Vec<ThreadWait>,
    /// PSI cpu `some` over the window: share of wall time (delta of
    /// `total`), and avg10 at the end. None when PSI is unavailable.
    pub psi_system: Option<(f64, f64)>,
    pub psi_cgroup: Option<(f64, f64)>,
    pub throttling: Option<Throttling>,
    /// Busy share of each CPU over the window.
    pub cpu_busy: Vec<f64>,
    /// Runnable tasks (procs_running) averaged over samples in the window.
    pub avg_runnable: f64,
    /// CPUs the thread that waited most may run on (process or cgroup scope).
    pub allowed_cpus: Option<Vec<usize>>,
    /// The scope is the whole system (PSI then speaks for it).
    pub system_scope: bool,
}

impl Findings {
    pub fn between(
        scope: &Scope,
        start: &ProcSample,
        end: &ProcSample,
        window: Duration,
        runnable_samples: &[u64],
    ) -> Findings {
        let window_ns = window.as_nanos().max(1) as u64;
        let mut waits: Vec<ThreadWait> = end
            .schedstat
            .iter()
            .map(|(tid, s)| {
                // A thread born during the window did all its waiting in it.
                let before = start.schedstat.get(tid);
                let wait_ns = s.wait_ns.saturating_sub(before.map_or(0, |b| b.wait_ns));
                let run_ns = s.run_ns.saturating_sub(before.map_or(0, |b| b.run_ns));
                ThreadWait {
                    tid: *tid,
                    comm: fs::read_to_string(format!("/proc/{tid}/comm"))
                        .map(|c| c.trim().to_string())
                        .unwrap_or_default(),
                    wait_ns,
                    share: wait_ns as f64 / window_ns as f64,
                    run_ns,
                    nice: fs::read_to_string(format!("/proc/{tid}/stat"))
                        .ok()
                        .and_then(|t| procfs::parse_stat_nice(&t)),
                }
            })
            .collect();
        let threads = waits.len();
        let schedstat_wait_ns = waits.iter().map(|w| w.wait_ns).sum();
        let schedstat_switch_ins = end
            .schedstat
            .iter()
            .map(|(tid, s)| {
                let before = start.schedstat.get(tid).map_or(0, |b| b.slices);
                s.slices.saturating_sub(before)
            })
            .sum();
        let schedstat_works = end.schedstat.values().any(|s| s.run_ns > 0);
        waits.sort_by_key(|w| std::cmp::Reverse(w.wait_ns));
        waits.truncate(5);
        let psi = |a: &Option<Pressure>, b: &Option<Pressure>| match (a, b) {
            (Some(a), Some(b)) => Some((
                b.total_us.saturating_sub(a.total_us) as f64 * 1000.0 / window_ns as f64,
                b.avg10,
            )),
            _ => None,
        };
        let throttling = match (start.throttling, end.throttling) {
            (Some(((p0, t0, n0), _)), Some(((p1, t1, n1), source))) => {
                let quota: Option<Quota> = scope.cgroup().and_then(|c| c.quota());
                Some(Throttling {
                    source,
                    quota: quota.map(|q| (q.quota_us, q.period_us)),
                    quota_cpus: quota.map(|q| q.cpus()),
                    periods: p1.saturating_sub(p0),
                    throttled: t1.saturating_sub(t0),
                    throttled_ns: n1.saturating_sub(n0),
                })
            }
            _ => None,
        };
        let cpu_busy = match (&start.cpus, &end.cpus) {
            (Some(a), Some(b)) => a
                .per_cpu
                .iter()
                .zip(&b.per_cpu)
                .map(|((b0, t0), (b1, t1))| (b1 - b0) as f64 / (t1 - t0).max(1) as f64)
                .collect(),
            _ => Vec::new(),
        };
        let avg_runnable = if runnable_samples.is_empty() {
            0.0
        } else {
            runnable_samples.iter().sum::<u64>() as f64 / runnable_samples.len() as f64
        };
        let allowed_cpus = match scope {
            Scope::System => None,
            _ => waits.first().and_then(|w| allowed_cpus(w.tid)),
        };
        Findings {
            window_ns,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads,
            schedstat_wait_ns,
            schedstat_switch_ins,
            schedstat_works,
            top_waiters: waits,
            psi_system: psi(&start.psi_system, &end.psi_system),
            // A group at the root of the hierarchy has the system's PSI,
            // which says nothing about the scope.
            psi_cgroup: psi(&start.psi_cgroup, &end.psi_cgroup)
                .filter(|_| scope.cgroup().is_some_and(|c| !c.is_root())),
            throttling,
            cpu_busy,
            avg_runnable,
            allowed_cpus,
            system_scope: matches!(scope, Scope::System),
        }
    }

    /// The largest share of the window any one thread spent waiting.
    pub fn max_thread_share(&self) -> f64 {
        self.top_waiters.first().map_or(0.0, |w| w.share)
    }

    /// The CPUs the scope's tasks may run on: its most-waiting thread's
    /// allowed list, or every CPU.
    pub fn scope_cpus(&self) -> usize {
        self.allowed_cpus
            .as_ref()
            .map_or(self.cpus, Vec::len)
            .max(1)
    }

    /// PSI that speaks for the scope: its own cgroup's, or the system's
    /// when the scope is the system. A process in the root cgroup has none.
    pub fn scope_psi(&self) -> Option<(f64, f64)> {
        if self.system_scope {
            self.psi_system
        } else {
            self.psi_cgroup
        }
    }
}

/// Runnable tasks now: /proc/stat's procs_running, less the one reading it.
pub fn runnable_now() -> Option<u64> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let times = procfs::parse_proc_stat(&text).ok()?;
    Some(times.procs_running.saturating_sub(1))
}

/// A thread's Cpus_allowed_list.
fn allowed_cpus(tid: u32) -> Option<Vec<usize>> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    procfs::parse_cpu_list(list).ok()
}
