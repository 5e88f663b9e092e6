//! The decision split as the kernel counted it (docs/decision.md), summed
//! over CPUs: the decision x pass-over table, the holders, the outcomes'
//! histograms, the predictions and the fair shares; and what the load
//! measured it with.

use schedlat_common::{
    NR_BUCKETS,
    bucket::bucket_bounds,
    decision::{
        DECISIONS, Decision, DecisionStats, NR_CELLS, NR_HOLDERS, NR_OUTCOME_SLOTS, NR_OUTCOMES,
        Outcome, PASSES, Pass, cell,
    },
};

/// Where the need-resched bit numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TifSource {
    /// The architecture's and version's values, as the kernel sources
    /// define them (the bits are macros, not in BTF), checked on every
    /// kernel of the VM matrix by a wakeup the kernel always grants (a
    /// SCHED_FIFO task beside fair-class loops).
    Table,
}

/// What the decision split measures on this load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecisionFacts {
    /// TIF_NEED_RESCHED's and TIF_NEED_RESCHED_LAZY's bit numbers (the
    /// lazy one None where the kernel has none).
    pub need_resched_bit: u32,
    pub lazy_bit: Option<u32>,
    pub tif_source: TifSource,
    /// 1 EEVDF rules, 2 CFS (wakeup granularity), 0 none.
    pub fair: u64,
    /// 6.17+'s vprot marks the protected slice (else vlag == deadline).
    pub vprot: bool,
    /// The tick in ns (from CONFIG_HZ), when known.
    pub tick_ns: Option<u64>,
    /// The kernel has sched_ext, whose waits are told apart (`ext`).
    pub ext: bool,
}

impl DecisionFacts {
    /// What this project's x86 6.18 test machine gives (HZ=250), for tests.
    #[cfg(test)]
    pub(crate) const X86_6_18: DecisionFacts = DecisionFacts {
        need_resched_bit: 4,
        lazy_bit: Some(5),
        tif_source: TifSource::Table,
        fair: 1,
        vprot: true,
        tick_ns: Some(4_000_000),
        ext: false,
    };
}

/// Cumulative since load, summed over CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecisionCounts {
    pub facts: DecisionFacts,
    /// Waits and their sum per decision x pass-over cell (`cell()`).
    pub count: [u64; NR_CELLS],
    pub sum_ns: [u64; NR_CELLS],
    pub holder_count: [u64; NR_HOLDERS],
    pub holder_sum_ns: [u64; NR_HOLDERS],
    /// Fine histograms of the outcomes (`Outcome` index).
    pub outcome_buckets: Vec<[u64; NR_BUCKETS]>,
    /// The outcomes' sums, ns (`Outcome` index).
    pub outcome_sum_ns: [u64; NR_OUTCOME_SLOTS],
    pub passes: u64,
    pub predicted_waits: u64,
    pub predicted_ns: u64,
    pub predicted_actual_ns: u64,
    pub beyond_prediction: u64,
    pub share_waits: u64,
    pub share_permille: u64,
}

impl DecisionCounts {
    pub(crate) fn zero(facts: DecisionFacts) -> Self {
        DecisionCounts {
            facts,
            count: [0; NR_CELLS],
            sum_ns: [0; NR_CELLS],
            holder_count: [0; NR_HOLDERS],
            holder_sum_ns: [0; NR_HOLDERS],
            outcome_buckets: vec![[0; NR_BUCKETS]; NR_OUTCOMES],
            outcome_sum_ns: [0; NR_OUTCOME_SLOTS],
            passes: 0,
            predicted_waits: 0,
            predicted_ns: 0,
            predicted_actual_ns: 0,
            beyond_prediction: 0,
            share_waits: 0,
            share_permille: 0,
        }
    }

    pub(crate) fn from_cpus(facts: DecisionFacts, cpus: &[DecisionStats]) -> Self {
        let mut d = DecisionCounts::zero(facts);
        for cpu in cpus {
            d.combine(cpu, |a, b| a + b);
        }
        d
    }

    /// Each counter of `self` combined with `cpu`'s by `op`.
    fn combine(&mut self, cpu: &DecisionStats, op: impl Fn(u64, u64) -> u64) {
        let pairs = |mine: &mut [u64], theirs: &[u64]| {
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m = op(*m, *t);
            }
        };
        pairs(&mut self.count, &cpu.count);
        pairs(&mut self.sum_ns, &cpu.sum_ns);
        pairs(&mut self.holder_count, &cpu.holder_count);
        pairs(&mut self.holder_sum_ns, &cpu.holder_sum_ns);
        for (mine, theirs) in self.outcome_buckets.iter_mut().zip(&cpu.outcome_buckets) {
            pairs(mine, theirs);
        }
        pairs(&mut self.outcome_sum_ns, &cpu.outcome_sum_ns);
        let scalars = [
            (&mut self.passes, cpu.passes),
            (&mut self.predicted_waits, cpu.predicted_waits),
            (&mut self.predicted_ns, cpu.predicted_ns),
            (&mut self.predicted_actual_ns, cpu.predicted_actual_ns),
            (&mut self.beyond_prediction, cpu.beyond_prediction),
            (&mut self.share_waits, cpu.share_waits),
            (&mut self.share_permille, cpu.share_permille),
        ];
        for (m, t) in scalars {
            *m = op(*m, t);
        }
    }

    /// The counters as the kernel's layout (to difference two readings).
    fn as_stats(&self) -> DecisionStats {
        let mut s = DecisionStats::ZERO;
        s.count = self.count;
        s.sum_ns = self.sum_ns;
        s.holder_count = self.holder_count;
        s.holder_sum_ns = self.holder_sum_ns;
        for (mine, theirs) in s.outcome_buckets.iter_mut().zip(&self.outcome_buckets) {
            *mine = *theirs;
        }
        s.outcome_sum_ns = self.outcome_sum_ns;
        s.passes = self.passes;
        s.predicted_waits = self.predicted_waits;
        s.predicted_ns = self.predicted_ns;
        s.predicted_actual_ns = self.predicted_actual_ns;
        s.beyond_prediction = self.beyond_prediction;
        s.share_waits = self.share_waits;
        s.share_permille = self.share_permille;
        s
    }

    /// Waits in one cell.
    pub(crate) fn cell(&self, decision: Decision, pass: Pass) -> u64 {
        self.count[cell(decision, pass)]
    }

    /// Their sum, ns.
    pub(crate) fn cell_ns(&self, decision: Decision, pass: Pass) -> u64 {
        self.sum_ns[cell(decision, pass)]
    }

    /// Waits of `decision`, whatever their pass-overs.
    pub(crate) fn decided(&self, decision: Decision) -> u64 {
        PASSES.iter().map(|&p| self.cell(decision, p)).sum()
    }

    /// Their sum, ns.
    pub(crate) fn decided_ns(&self, decision: Decision) -> u64 {
        PASSES.iter().map(|&p| self.cell_ns(decision, p)).sum()
    }

    /// More wakeups asked lazily than with the full bit (preempt=lazy):
    /// then the `late` waits are lazy requests a holder in the kernel kept
    /// waiting, not re-picks at the tick.
    pub(crate) fn mostly_lazy(&self) -> bool {
        self.decided(Decision::Lazy) > self.decided(Decision::Requested)
    }

    /// Waits with `pass` pass-overs, whatever the decision.
    pub(crate) fn passed(&self, pass: Pass) -> u64 {
        DECISIONS.iter().map(|&d| self.cell(d, pass)).sum()
    }

    pub(crate) fn passed_ns(&self, pass: Pass) -> u64 {
        DECISIONS.iter().map(|&d| self.sum_ns[cell(d, pass)]).sum()
    }

    /// Waits whose wakeup did not ask for the CPU (every rule).
    pub(crate) fn declined(&self) -> u64 {
        DECISIONS
            .iter()
            .filter(|d| d.declined())
            .map(|&d| self.decided(d))
            .sum()
    }

    /// Waits counted.
    pub(crate) fn waits(&self) -> u64 {
        self.count.iter().sum()
    }

    /// The holders' counts add up to the waits too (for checks).
    #[cfg(test)]
    pub(crate) fn holder_waits(&self) -> u64 {
        schedlat_common::decision::HOLDERS
            .iter()
            .map(|&h| self.holder_count[h as usize])
            .sum()
    }

    /// Waits of outcome `outcome` at or above `min_ns` (and below
    /// `max_ns`), from its fine histogram (bucket lower bounds).
    pub(crate) fn outcome_between(&self, outcome: Outcome, min_ns: u64, max_ns: u64) -> u64 {
        between(&self.outcome_buckets[outcome as usize], min_ns, max_ns)
    }

    /// All outcomes' waits between `min_ns` and `max_ns`.
    pub(crate) fn all_between(&self, min_ns: u64, max_ns: u64) -> u64 {
        self.outcome_buckets
            .iter()
            .map(|h| between(h, min_ns, max_ns))
            .sum()
    }

    /// The declined waits' mean fair share (0..1), when computed.
    pub(crate) fn mean_share(&self) -> Option<f64> {
        (self.share_waits != 0)
            .then(|| self.share_permille as f64 / 1000.0 / self.share_waits as f64)
    }

    /// Adds another span's counts (intervals of one run).
    pub(crate) fn merge(&mut self, other: &DecisionCounts) {
        self.combine(&other.as_stats(), u64::saturating_add);
    }

    /// The counts since `before` (an earlier reading of the same load).
    pub(crate) fn since(&self, before: &DecisionCounts) -> DecisionCounts {
        let mut d = self.clone();
        d.combine(&before.as_stats(), u64::saturating_sub);
        d
    }
}

fn between(buckets: &[u64], min_ns: u64, max_ns: u64) -> u64 {
    buckets
        .iter()
        .enumerate()
        .filter(|&(i, _)| {
            let low = bucket_bounds(i).0;
            low >= min_ns && low < max_ns
        })
        .map(|(_, n)| n)
        .sum()
}

#[cfg(test)]
mod tests {
    use schedlat_common::decision::HolderLeft;

    use super::*;
    use crate::histogram::decision_fixtures::{self as fixtures, waits};

    fn facts() -> DecisionFacts {
        DecisionFacts::X86_6_18
    }

    #[test]
    fn cpus_sum_and_readings_difference() {
        let protected = |n| {
            waits(
                n,
                900_000,
                Decision::Protected,
                Pass::Zero,
                HolderLeft::SliceEnded,
            )
        };
        let passed = waits(
            2,
            3_000_000,
            Decision::Requested,
            Pass::ThreePlus,
            HolderLeft::SliceEnded,
        );
        let with_share = |mut s: DecisionStats| {
            s.share_waits = 5;
            s.share_permille = 1250;
            s
        };
        let a = with_share(fixtures::stats(&[protected(5), passed]));
        let b = with_share(fixtures::stats(&[protected(1), passed]));
        let total = DecisionCounts::from_cpus(facts(), &[a, b]);
        assert_eq!(total.decided(Decision::Protected), 6);
        assert_eq!(total.passed(Pass::ThreePlus), 4);
        assert_eq!(total.declined(), 6);
        assert_eq!(total.waits(), 10);
        assert_eq!(total.holder_count[HolderLeft::SliceEnded as usize], 10);
        assert_eq!(total.mean_share(), Some(0.25));
        let earlier = DecisionCounts::from_cpus(facts(), &[a]);
        let since = total.since(&earlier);
        assert_eq!(since.decided(Decision::Protected), 1);
        assert_eq!(since.waits(), 3);
        assert_eq!(since.holder_count[HolderLeft::SliceEnded as usize], 3);
        assert_eq!(since.outcome_between(Outcome::Declined, 0, u64::MAX), 1);
    }
}
