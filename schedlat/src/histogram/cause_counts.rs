//! The cause split's counters (docs/causes.md) summed over CPUs or read
//! from one breakdown key, differenced between readings and merged like
//! the histogram they travel with ([`super::Waits`]), and what of the
//! split this kernel measures.

use schedlat_common::{
    NR_BUCKETS,
    causes::{BEGAN, CauseStats, KeyCauses, NR_CAUSE_HISTOGRAMS, NR_CAUSES, NR_OVERLAPS},
};

/// What this kernel lets the programs measure of the split; the loader
/// decides it from BTF (kernel/causes.rs), and the collect layer copies it
/// onto every `CauseCounts` so that a reader can tell "0 ns" from "not
/// measured".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CauseFacts {
    /// rq->prev_steal_time_rq (CONFIG_PARAVIRT_TIME_ACCOUNTING).
    pub steal: bool,
    /// rq->prev_irq_time (CONFIG_IRQ_TIME_ACCOUNTING).
    pub irq: bool,
    /// The task group's cfs_bandwidth (CONFIG_CFS_BANDWIDTH).
    pub throttled: bool,
    /// rq->nr_running through the task's cfs_rq (CONFIG_FAIR_GROUP_SCHED).
    pub queue_depth: bool,
    /// Who held the CPU: needs task pointers (tp_btf hook mode).
    pub held_by: bool,
    /// The CPUs' last-level caches and NUMA nodes were read from sysfs.
    pub topology: bool,
    /// The sched_waking hook is on (`--waking`).
    pub waking: bool,
}

/// The split's counters over some span: cumulative, or an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CauseCounts {
    pub measurable: CauseFacts,
    /// Per [`schedlat_common::causes::Cause`] class.
    pub count: Vec<u64>,
    pub sum_ns: Vec<u64>,
    /// Fine histograms of the first classes (empty for a breakdown key,
    /// which keeps counts and sums only).
    pub buckets: Vec<Vec<u64>>,
    pub overlap_ns: [u64; NR_OVERLAPS],
    pub overlap_waits: u64,
    pub overlap_wait_ns: u64,
    pub waking_count: u64,
    pub waking_sum_ns: u64,
    /// Empty for a breakdown key.
    pub waking_buckets: Vec<u64>,
}

impl CauseCounts {
    /// Nothing counted yet; `with_histograms` for the total, not for keys.
    pub(crate) fn zero(measurable: CauseFacts, with_histograms: bool) -> CauseCounts {
        let (buckets, waking_buckets) = if with_histograms {
            (
                vec![vec![0; NR_BUCKETS]; NR_CAUSE_HISTOGRAMS],
                vec![0; NR_BUCKETS],
            )
        } else {
            (Vec::new(), Vec::new())
        };
        CauseCounts {
            measurable,
            count: vec![0; NR_CAUSES],
            sum_ns: vec![0; NR_CAUSES],
            buckets,
            overlap_ns: [0; NR_OVERLAPS],
            overlap_waits: 0,
            overlap_wait_ns: 0,
            waking_count: 0,
            waking_sum_ns: 0,
            waking_buckets,
        }
    }

    /// Sums the per-CPU counters of the total.
    pub(crate) fn from_cpus(measurable: CauseFacts, cpus: &[CauseStats]) -> CauseCounts {
        let mut total = CauseCounts::zero(measurable, true);
        for cpu in cpus {
            add(&mut total.count, &cpu.count);
            add(&mut total.sum_ns, &cpu.sum_ns);
            for (sum, class) in total.buckets.iter_mut().zip(&cpu.buckets) {
                add(sum, class);
            }
            add(&mut total.overlap_ns, &cpu.overlap_ns);
            total.overlap_waits += cpu.overlap_waits;
            total.overlap_wait_ns += cpu.overlap_wait_ns;
            total.waking_count += cpu.waking_count;
            total.waking_sum_ns += cpu.waking_sum_ns;
            add(&mut total.waking_buckets, &cpu.waking_buckets);
        }
        total
    }

    /// One breakdown key's counters.
    pub(crate) fn from_key(measurable: CauseFacts, key: &KeyCauses) -> CauseCounts {
        // Keys keep no wakeup path: the stage is the total's only.
        let measurable = CauseFacts {
            waking: false,
            ..measurable
        };
        let mut counts = CauseCounts::zero(measurable, false);
        for (sum, &n) in counts.count.iter_mut().zip(&key.count) {
            *sum = u64::from(n);
        }
        counts.sum_ns.copy_from_slice(&key.sum_ns);
        counts.overlap_ns = key.overlap_ns;
        counts.overlap_waits = key.overlap_waits;
        counts.overlap_wait_ns = key.overlap_wait_ns;
        counts
    }

    /// What happened between `earlier` and `self` (both cumulative).
    pub(crate) fn since(&self, earlier: &CauseCounts) -> CauseCounts {
        let mut delta = self.clone();
        let minus = |now: &mut [u64], then: &[u64]| {
            for (n, t) in now.iter_mut().zip(then) {
                *n = n.saturating_sub(*t);
            }
        };
        minus(&mut delta.count, &earlier.count);
        minus(&mut delta.sum_ns, &earlier.sum_ns);
        for (now, then) in delta.buckets.iter_mut().zip(&earlier.buckets) {
            minus(now, then);
        }
        minus(&mut delta.overlap_ns, &earlier.overlap_ns);
        delta.overlap_waits = self.overlap_waits.saturating_sub(earlier.overlap_waits);
        delta.overlap_wait_ns = self.overlap_wait_ns.saturating_sub(earlier.overlap_wait_ns);
        delta.waking_count = self.waking_count.saturating_sub(earlier.waking_count);
        delta.waking_sum_ns = self.waking_sum_ns.saturating_sub(earlier.waking_sum_ns);
        minus(&mut delta.waking_buckets, &earlier.waking_buckets);
        delta
    }

    /// Adds another span's counters (merging intervals, or keys).
    pub(crate) fn merge(&mut self, other: &CauseCounts) {
        add(&mut self.count, &other.count);
        add(&mut self.sum_ns, &other.sum_ns);
        if self.buckets.is_empty() {
            self.buckets = other.buckets.clone();
        } else {
            for (sum, class) in self.buckets.iter_mut().zip(&other.buckets) {
                add(sum, class);
            }
        }
        add(&mut self.overlap_ns, &other.overlap_ns);
        self.overlap_waits += other.overlap_waits;
        self.overlap_wait_ns += other.overlap_wait_ns;
        self.waking_count += other.waking_count;
        self.waking_sum_ns += other.waking_sum_ns;
        if self.waking_buckets.is_empty() {
            self.waking_buckets = other.waking_buckets.clone();
        } else {
            add(&mut self.waking_buckets, &other.waking_buckets);
        }
    }

    /// Waits counted: every wait is in exactly one class of how it began.
    pub(crate) fn waits(&self) -> u64 {
        BEGAN.iter().map(|&c| self.count[c as usize]).sum()
    }
}

fn add(sum: &mut [u64], more: &[u64]) {
    for (s, m) in sum.iter_mut().zip(more) {
        *s += m;
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::causes::Cause;

    use super::*;

    fn cpu(woken: u64, preempted: u64, wait_ns: u64) -> CauseStats {
        let mut s = CauseStats::ZERO;
        s.count[Cause::Woken as usize] = woken;
        s.sum_ns[Cause::Woken as usize] = woken * wait_ns;
        s.count[Cause::Preempted as usize] = preempted;
        s.sum_ns[Cause::Preempted as usize] = preempted * wait_ns;
        s.buckets[Cause::Woken as usize][schedlat_common::bucket_index(wait_ns)] = woken;
        s.overlap_ns[1] = wait_ns / 2;
        s.overlap_waits = woken;
        s
    }

    #[test]
    fn cpus_sum_and_intervals_difference() {
        let m = CauseFacts::default();
        let then = CauseCounts::from_cpus(m, &[cpu(1, 2, 1000), cpu(3, 0, 1000)]);
        assert_eq!(then.waits(), 6);
        assert_eq!(then.count[Cause::Woken as usize], 4);
        assert_eq!(then.overlap_ns[1], 1000);
        let now = CauseCounts::from_cpus(m, &[cpu(5, 2, 1000), cpu(3, 1, 1000)]);
        let delta = now.since(&then);
        assert_eq!(delta.count[Cause::Woken as usize], 4);
        assert_eq!(delta.count[Cause::Preempted as usize], 1);
        assert_eq!(delta.sum_ns[Cause::Preempted as usize], 1000);
        assert_eq!(delta.buckets[Cause::Woken as usize].iter().sum::<u64>(), 4);
        assert_eq!(delta.overlap_waits, 4);
    }

    #[test]
    fn keys_merge_into_a_total_without_histograms() {
        let m = CauseFacts::default();
        let mut key = KeyCauses::ZERO;
        key.count[Cause::Migrated as usize] = 7;
        key.sum_ns[Cause::Migrated as usize] = 700;
        let mut total = CauseCounts::from_key(m, &key);
        total.merge(&CauseCounts::from_key(m, &key));
        assert_eq!(total.count[Cause::Migrated as usize], 14);
        assert_eq!(total.sum_ns[Cause::Migrated as usize], 1400);
        assert!(total.buckets.is_empty());
    }
}
