//! The scheduler's time slice, the yardstick the shape rule measures waits
//! against: a woken task that waits a whole slice waited for someone else's
//! slice to end (a sleeper sharing its CPU with hogs: ~3 ms behind a hog under EEVDF).

use std::{fs, path::Path};

use serde::Serialize;

/// EEVDF's base slice (6.6+) or CFS's minimum granularity (before), as
/// debugfs publishes them (already scaled for the number of CPUs).
const DEBUGFS_FILES: [&str; 2] = [
    "/sys/kernel/debug/sched/base_slice_ns",
    "/sys/kernel/debug/sched/min_granularity_ns",
];

/// The kernel's unscaled default (sysctl_sched_base_slice = 0.75 ms).
const DEFAULT_NORMALIZED_NS: u64 = 750_000;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Slice {
    pub ns: u64,
    /// Where the value came from, for the evidence line.
    pub source: String,
}

impl Slice {
    /// From debugfs when it is mounted (root), else the kernel's default.
    pub fn detect() -> Slice {
        for file in DEBUGFS_FILES {
            if let Some(ns) = fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|&ns| ns > 0)
            {
                let name = Path::new(file)
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy();
                return Slice {
                    ns,
                    source: format!("debugfs {name}"),
                };
            }
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Slice {
            ns: default_ns(cpus),
            source: format!("kernel default for {cpus} CPUs; mount debugfs for the live value"),
        }
    }

    /// A fixed slice (tests, and `compare` of recordings from elsewhere).
    pub fn fixed(ns: u64, source: &str) -> Slice {
        Slice {
            ns,
            source: source.to_string(),
        }
    }
}

/// kernel/sched/fair.c get_update_sysctl_factor() with the default
/// SCHED_TUNABLESCALING_LOG: 0.75 ms x (1 + ilog2(min(cpus, 8))).
pub fn default_ns(cpus: usize) -> u64 {
    let cpus = cpus.clamp(1, 8);
    DEFAULT_NORMALIZED_NS * (1 + cpus.ilog2() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scales_like_the_kernel() {
        assert_eq!(default_ns(1), 750_000);
        assert_eq!(default_ns(2), 1_500_000);
        assert_eq!(default_ns(8), 3_000_000);
        assert_eq!(default_ns(64), 3_000_000);
    }
}
