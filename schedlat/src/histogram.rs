//! Aggregated waits: the per-CPU kernel counters summed, differenced between
//! snapshots, and viewed as runqlat's log2 histogram.

use schedlat_common::{
    CpuStats, NR_BUCKETS,
    bucket::{bucket_bounds, log2_slot},
};

/// The display unit, chosen at load time (the kernel divides by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Usecs,
    Msecs,
}

impl Unit {
    pub fn ns(self) -> u64 {
        match self {
            Unit::Usecs => 1_000,
            Unit::Msecs => 1_000_000,
        }
    }

    /// The header runqlat prints above the table.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Usecs => "usecs",
            Unit::Msecs => "msecs",
        }
    }
}

/// Wait counts and loss counters over some span (since load, or an interval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waits {
    /// Per log-linear bucket, in the load-time unit.
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
    /// Waits whose end preceded their start (cross-CPU clock skew): discarded.
    pub discarded_negative: u64,
    /// Enqueues of TIDs beyond the start array (pid_max raised after load):
    /// those waits were not measured.
    pub untracked_tid: u64,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            buckets: vec![0; NR_BUCKETS],
            sum_ns: 0,
            discarded_negative: 0,
            untracked_tid: 0,
        }
    }
}

impl Waits {
    /// Sums the per-CPU counters.
    pub fn from_cpus(cpus: &[CpuStats]) -> Waits {
        let mut total = Waits::default();
        for cpu in cpus {
            for (sum, n) in total.buckets.iter_mut().zip(cpu.buckets.iter()) {
                *sum += n;
            }
            total.sum_ns += cpu.sum_ns;
            total.discarded_negative += cpu.discarded_negative;
            total.untracked_tid += cpu.untracked_tid;
        }
        total
    }

    /// What happened between `earlier` and `self` (both cumulative). The
    /// kernel counters only grow, so nothing between two reads is lost.
    pub fn since(&self, earlier: &Waits) -> Waits {
        Waits {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            discarded_negative: self
                .discarded_negative
                .saturating_sub(earlier.discarded_negative),
            untracked_tid: self.untracked_tid.saturating_sub(earlier.untracked_tid),
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn mean_ns(&self) -> Option<f64> {
        let count = self.count();
        (count > 0).then(|| self.sum_ns as f64 / count as f64)
    }

    /// runqlat's log2 slots (slot 0 = 0..1, slot k = 2^k..2^(k+1)-1), up to
    /// the highest non-empty one; empty when there were no waits.
    pub fn log2_slots(&self) -> Vec<u64> {
        let mut slots = Vec::new();
        for (index, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let slot = log2_slot(index);
            if slots.len() <= slot {
                slots.resize(slot + 1, 0);
            }
            slots[slot] += n;
        }
        slots
    }

    /// Non-empty fine buckets as (index, low, high, count), bounds in the unit.
    pub fn nonempty_buckets(&self) -> impl Iterator<Item = (usize, u64, u64, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, &n)| {
                let (low, high) = bucket_bounds(i);
                (i, low, high, n)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlat_common::bucket_index;

    fn waits_of(values: &[u64]) -> Waits {
        let mut cpu = CpuStats::ZERO;
        for &v in values {
            cpu.buckets[bucket_index(v)] += 1;
            cpu.sum_ns += v * 1000;
        }
        Waits::from_cpus(&[cpu])
    }

    #[test]
    fn sums_cpus_and_differences_snapshots() {
        let mut a = CpuStats::ZERO;
        let mut b = CpuStats::ZERO;
        a.buckets[3] = 2;
        b.buckets[3] = 5;
        b.discarded_negative = 1;
        let first = Waits::from_cpus(&[a, b]);
        assert_eq!(first.buckets[3], 7);
        a.buckets[3] = 4;
        b.untracked_tid = 2;
        let second = Waits::from_cpus(&[a, b]);
        let delta = second.since(&first);
        assert_eq!(delta.count(), 2);
        assert_eq!(delta.untracked_tid, 2);
        assert_eq!(delta.discarded_negative, 0);
    }

    #[test]
    fn log2_slots_group_like_runqlat() {
        // runqlat: 0,1 -> slot 0; 2,3 -> 1; 4..7 -> 2; 1000 -> 9; 3000 -> 11.
        let w = waits_of(&[0, 1, 2, 3, 4, 7, 1000, 3000, 3000]);
        assert_eq!(w.log2_slots(), vec![2, 2, 2, 0, 0, 0, 0, 0, 0, 1, 0, 2]);
        assert!(Waits::default().log2_slots().is_empty());
    }

    #[test]
    fn mean_is_exact() {
        let w = waits_of(&[10, 20, 30]);
        assert_eq!(w.mean_ns(), Some(20_000.0));
        assert_eq!(Waits::default().mean_ns(), None);
    }
}
