//! How busy the CPUs were while a test ran, for the failure messages of
//! the tests whose assertions need a quiet CPU: a run on a loaded machine
//! (a noisy CI host, other jobs) then reads as such, not as a regression.

use std::fs;

/// The CPUs' time counters (/proc/stat, USER_HZ ticks) at one moment.
pub(crate) struct CpuTimes {
    /// Per CPU: (busy ticks, all ticks); idle and iowait are not busy.
    cpus: Vec<(u64, u64)>,
    /// Runnable tasks at this moment (procs_running).
    running: u64,
}

impl CpuTimes {
    pub(crate) fn now() -> Self {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        let mut cpus = Vec::new();
        let mut running = 0;
        for line in stat.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some(cpu) if cpu.starts_with("cpu") && cpu.len() > 3 => {
                    let ticks: Vec<u64> = words.filter_map(|w| w.parse().ok()).collect();
                    let all: u64 = ticks.iter().sum();
                    // Fields 4 and 5 (from 1) are idle and iowait.
                    let idle = ticks.get(3).unwrap_or(&0) + ticks.get(4).unwrap_or(&0);
                    cpus.push((all - idle, all));
                }
                Some("procs_running") => {
                    running = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                }
                _ => {}
            }
        }
        CpuTimes { cpus, running }
    }

    /// Each CPU's busy share (0 to 1) since `self`, by CPU number.
    pub(crate) fn shares_since(&self) -> Vec<f64> {
        self.shares_until(&CpuTimes::now())
    }

    fn shares_until(&self, now: &CpuTimes) -> Vec<f64> {
        self.cpus
            .iter()
            .zip(&now.cpus)
            .map(|(&(b0, a0), &(b1, a1))| {
                b1.saturating_sub(b0) as f64 / a1.saturating_sub(a0).max(1) as f64
            })
            .collect()
    }

    /// Each CPU's busy share since `self`, and the runnable tasks now
    /// against then: "CPU 0 97% busy, CPU 1 40% busy; 5 runnable tasks
    /// (3 at the start)".
    pub(crate) fn busy_since(&self) -> String {
        let now = CpuTimes::now();
        let shares: Vec<String> = self
            .shares_until(&now)
            .iter()
            .enumerate()
            .map(|(cpu, share)| format!("CPU {cpu} {:.0}% busy", share * 100.0))
            .collect();
        format!(
            "while the test ran: {}; {} runnable tasks at the end ({} at the start)",
            shares.join(", "),
            now.running,
            self.running
        )
    }
}
