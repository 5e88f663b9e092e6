//! Aggregated waits: the per-CPU kernel counters summed, differenced between
//! readings, and viewed as runqlat's log2 histogram.

use schedlat_common::{CpuStats, Extremes, NR_BUCKETS, NR_LOG2_SLOTS};

use super::{
    cause_counts::CauseCounts, decision_counts::DecisionCounts, key_decision::KeyDecisionCounts,
};

/// The display unit, chosen at load time (the kernel divides by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Usecs,
    Msecs,
}

impl Unit {
    pub(crate) fn ns(self) -> u64 {
        match self {
            Unit::Usecs => 1_000,
            Unit::Msecs => 1_000_000,
        }
    }

    /// The header runqlat prints above the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Unit::Usecs => "usecs",
            Unit::Msecs => "msecs",
        }
    }
}

/// Wait counts and loss counters over some span (since load, or an interval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Waits {
    /// Per fine log-linear bucket of nanoseconds.
    pub buckets: Vec<u64>,
    /// Per runqlat log2 slot, in the load-time unit.
    pub log2: Vec<u64>,
    pub sum_ns: u64,
    /// Exact shortest and longest wait, when the span's extremes are known.
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Waits whose end preceded their start (cross-CPU clock skew): discarded.
    pub discarded_negative: u64,
    /// Enqueues of TIDs beyond the start array (pid_max raised after load):
    /// those waits were not measured.
    pub untracked_tid: u64,
    /// Waits in this total but in no breakdown histogram (key map full).
    pub unkeyed: u64,
    /// The cause split of these waits, when the programs measured it.
    pub causes: Option<CauseCounts>,
    /// The decision split of these waits, when the programs measured it
    /// (off with `--no-decision`).
    pub decision: Option<DecisionCounts>,
    /// A breakdown key's decision split (each dimension apart: the kernel
    /// keeps no table per key), when the programs measured it.
    pub key_decision: Option<KeyDecisionCounts>,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            buckets: vec![0; NR_BUCKETS],
            log2: vec![0; NR_LOG2_SLOTS],
            sum_ns: 0,
            min_ns: None,
            max_ns: None,
            discarded_negative: 0,
            untracked_tid: 0,
            unkeyed: 0,
            causes: None,
            decision: None,
            key_decision: None,
        }
    }
}

impl Waits {
    /// Sums the per-CPU counters.
    pub(crate) fn from_cpus(cpus: &[CpuStats]) -> Waits {
        let mut total = Waits::default();
        for cpu in cpus {
            add(&mut total.buckets, &cpu.buckets);
            add(&mut total.log2, &cpu.log2);
            total.sum_ns += cpu.sum_ns;
            total.discarded_negative += cpu.discarded_negative;
            total.untracked_tid += cpu.untracked_tid;
            total.unkeyed += cpu.unkeyed;
        }
        total
    }

    /// Takes the interval's extremes, merged over CPUs (0 = none on a CPU).
    pub(crate) fn with_extremes(mut self, cpus: &[Extremes]) -> Waits {
        self.min_ns = cpus.iter().map(|x| x.min_ns).filter(|&v| v > 0).min();
        self.max_ns = cpus.iter().map(|x| x.max_ns).max().filter(|&v| v > 0);
        self
    }

    /// What happened between `earlier` and `self` (both cumulative). The
    /// kernel counters only grow, so nothing between two reads is lost.
    /// Extremes are per interval already and are kept from `self`.
    pub(crate) fn since(&self, earlier: &Waits) -> Waits {
        let minus = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter()
                .zip(then)
                .map(|(n, t)| n.saturating_sub(*t))
                .collect()
        };
        Waits {
            buckets: minus(&self.buckets, &earlier.buckets),
            log2: minus(&self.log2, &earlier.log2),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            discarded_negative: self
                .discarded_negative
                .saturating_sub(earlier.discarded_negative),
            untracked_tid: self.untracked_tid.saturating_sub(earlier.untracked_tid),
            unkeyed: self.unkeyed.saturating_sub(earlier.unkeyed),
            causes: match (&self.causes, &earlier.causes) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
            decision: match (&self.decision, &earlier.decision) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
            key_decision: match (&self.key_decision, &earlier.key_decision) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
        }
    }

    /// The number of waits. Counts from the kernel cannot overflow; counts
    /// read from a file are checked on reading ([`Waits::try_merge`]).
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// [`Waits::count`], or None when the buckets add up past u64 (only a
    /// corrupt or forged recording can say so).
    pub(crate) fn checked_count(&self) -> Option<u64> {
        self.buckets
            .iter()
            .try_fold(0u64, |sum, &n| sum.checked_add(n))
    }

    pub(crate) fn mean_ns(&self) -> Option<f64> {
        let count = self.count();
        (count > 0).then(|| self.sum_ns as f64 / count as f64)
    }

    /// Adds another span's waits (merging intervals of one run, or runs).
    pub(crate) fn merge(&mut self, other: &Waits) {
        add(&mut self.buckets, &other.buckets);
        add(&mut self.log2, &other.log2);
        self.sum_ns += other.sum_ns;
        self.discarded_negative += other.discarded_negative;
        self.untracked_tid += other.untracked_tid;
        self.unkeyed += other.unkeyed;
        self.min_ns = [self.min_ns, other.min_ns].into_iter().flatten().min();
        self.max_ns = [self.max_ns, other.max_ns].into_iter().flatten().max();
        merge_causes(&mut self.causes, &other.causes);
        merge_decision(&mut self.decision, &other.decision);
        merge_key_decision(&mut self.key_decision, &other.key_decision);
    }

    /// [`Waits::merge`] for counts read from a file: None, and `self`
    /// unchanged, when a sum would overflow u64 (the total count included,
    /// so [`Waits::count`] stays exact afterwards).
    pub(crate) fn try_merge(&mut self, other: &Waits) -> Option<()> {
        let merged = Waits {
            buckets: checked_add_all(&self.buckets, &other.buckets)?,
            log2: checked_add_all(&self.log2, &other.log2)?,
            sum_ns: self.sum_ns.checked_add(other.sum_ns)?,
            discarded_negative: self
                .discarded_negative
                .checked_add(other.discarded_negative)?,
            untracked_tid: self.untracked_tid.checked_add(other.untracked_tid)?,
            unkeyed: self.unkeyed.checked_add(other.unkeyed)?,
            min_ns: [self.min_ns, other.min_ns].into_iter().flatten().min(),
            max_ns: [self.max_ns, other.max_ns].into_iter().flatten().max(),
            // Recordings do not carry the split: only the kernel's counts
            // (which cannot overflow) come here with one.
            causes: self.causes.clone(),
            decision: self.decision.clone(),
            key_decision: self.key_decision.clone(),
        };
        merged.checked_count()?;
        merged
            .log2
            .iter()
            .try_fold(0u64, |sum, &n| sum.checked_add(n))?;
        *self = merged;
        merge_causes(&mut self.causes, &other.causes);
        merge_decision(&mut self.decision, &other.decision);
        merge_key_decision(&mut self.key_decision, &other.key_decision);
        Some(())
    }

    /// runqlat's log2 slots (slot 0 = 0..1, slot k = 2^k..2^(k+1)-1), up to
    /// the highest non-empty one; empty when there were no waits.
    pub(crate) fn log2_slots(&self) -> Vec<u64> {
        let used = self.log2.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        self.log2[..used].to_vec()
    }
}

fn add(into: &mut [u64], from: &[u64]) {
    for (sum, n) in into.iter_mut().zip(from) {
        *sum += n;
    }
}

fn checked_add_all(into: &[u64], from: &[u64]) -> Option<Vec<u64>> {
    into.iter()
        .zip(from)
        .map(|(a, b)| a.checked_add(*b))
        .collect()
}

/// A span with the split plus one without it has no split: a share of the
/// waits would be read as all of them.
fn merge_causes(total: &mut Option<CauseCounts>, more: &Option<CauseCounts>) {
    match (total.as_mut(), more) {
        (Some(total), Some(more)) => total.merge(more),
        _ => *total = None,
    }
}

/// As `merge_causes`: a span without the split makes the sum lack it.
fn merge_decision(total: &mut Option<DecisionCounts>, more: &Option<DecisionCounts>) {
    match (total.as_mut(), more) {
        (Some(total), Some(more)) => total.merge(more),
        _ => *total = None,
    }
}

/// As `merge_causes`.
fn merge_key_decision(total: &mut Option<KeyDecisionCounts>, more: &Option<KeyDecisionCounts>) {
    match (total.as_mut(), more) {
        (Some(total), Some(more)) => total.merge(more),
        _ => *total = None,
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{bucket_index, log2_slot};

    use super::*;

    /// Waits of `values` microseconds, counted as the kernel counts them.
    pub(super) fn waits_of_us(values: &[u64]) -> Waits {
        let mut cpu = CpuStats::ZERO;
        for &v in values {
            cpu.buckets[bucket_index(v * 1000)] += 1;
            cpu.log2[log2_slot(v)] += 1;
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
        let w = waits_of_us(&[0, 1, 2, 3, 4, 7, 1000, 3000, 3000]);
        assert_eq!(w.log2_slots(), vec![2, 2, 2, 0, 0, 0, 0, 0, 0, 1, 0, 2]);
        assert!(Waits::default().log2_slots().is_empty());
    }

    #[test]
    fn merge_adds_counts_and_combines_extremes() {
        let x = |min_ns, max_ns| Extremes { min_ns, max_ns };
        let mut a = waits_of_us(&[10]).with_extremes(&[x(10_000, 10_000), x(0, 0)]);
        let b = waits_of_us(&[20, 30]).with_extremes(&[x(20_000, 30_000)]);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!((a.min_ns, a.max_ns), (Some(10_000), Some(30_000)));
        assert_eq!(Waits::default().with_extremes(&[x(0, 0)]).max_ns, None);
    }

    #[test]
    fn mean_is_exact() {
        let w = waits_of_us(&[10, 20, 30]);
        assert_eq!(w.mean_ns(), Some(20_000.0));
        assert_eq!(Waits::default().mean_ns(), None);
    }
}
