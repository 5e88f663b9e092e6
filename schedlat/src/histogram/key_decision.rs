//! A breakdown key's decision split (docs/decision.md) as the kernel counts
//! it per key: each dimension apart (decision, pass-overs, holder,
//! outcome, and the outcomes' waits of 1 ms or more), not the whole
//! system's decision x pass-over table and histograms. The whole system's
//! counts give the same view ([`DecisionCounts::marginals`]), so one
//! rendering serves both.

use std::ops::{Deref, DerefMut};

use schedlat_common::decision::{
    DECISIONS, Decision, HOLDERS, HolderLeft, KEY_SLOW_NS, KeyDecision, OUTCOMES, Outcome, PASSES,
    Pass,
};

use super::decision_counts::DecisionCounts;

/// One key's decision split over some span (since the key's first wait,
/// or an interval): the kernel's own [`KeyDecision`], so one definition
/// serves the map's entries and their differences; read through `Deref`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyDecisionCounts(KeyDecision);

impl Deref for KeyDecisionCounts {
    type Target = KeyDecision;
    fn deref(&self) -> &KeyDecision {
        &self.0
    }
}

impl DerefMut for KeyDecisionCounts {
    fn deref_mut(&mut self) -> &mut KeyDecision {
        &mut self.0
    }
}

/// [`KeyDecision`]'s counters, every one a u64 (no padding: asserted), so
/// a difference or a sum is one loop over its words. A field of another
/// width would pass the size check in pairs and be differenced as one
/// word: keep every field a u64 (the kernel adds to them as such).
pub(crate) const WORDS: usize = size_of::<KeyDecision>() / size_of::<u64>();
const _: () = assert!(size_of::<KeyDecision>() == WORDS * size_of::<u64>());
const _: () = assert!(align_of::<KeyDecision>() == align_of::<u64>());

fn words(k: &KeyDecision) -> &[u64; WORDS] {
    // SAFETY: KeyDecision is repr(C) of u64 arrays and u64s only (the
    // kernel's Pod value), its size is WORDS u64s and its alignment u64's
    // (both asserted above): every bit pattern of it is one of [u64; WORDS].
    unsafe { &*(k as *const KeyDecision).cast::<[u64; WORDS]>() }
}

fn words_mut(k: &mut KeyDecision) -> &mut [u64; WORDS] {
    // SAFETY: as in `words`, and the borrow is exclusive.
    unsafe { &mut *(k as *mut KeyDecision).cast::<[u64; WORDS]>() }
}

impl KeyDecisionCounts {
    /// The kernel's cumulative entry of a key.
    pub(crate) fn from_key(k: &KeyDecision) -> Self {
        KeyDecisionCounts(*k)
    }

    /// No wait.
    pub(crate) fn zero() -> Self {
        KeyDecisionCounts(KeyDecision::ZERO)
    }

    /// Every counter, as one run of words (serve's per-key series keep
    /// them flat: keyed_words.rs).
    pub(crate) fn words(&self) -> &[u64; WORDS] {
        words(&self.0)
    }

    /// The counters from [`KeyDecisionCounts::words`]' run.
    pub(crate) fn from_words(from: &[u64]) -> Self {
        let mut k = KeyDecision::ZERO;
        words_mut(&mut k).copy_from_slice(&from[..WORDS]);
        KeyDecisionCounts(k)
    }

    /// Each counter of `self` combined with `other`'s by `op`.
    fn combine(&mut self, other: &KeyDecisionCounts, op: impl Fn(u64, u64) -> u64) {
        for (mine, theirs) in words_mut(&mut self.0).iter_mut().zip(words(&other.0)) {
            *mine = op(*mine, *theirs);
        }
    }

    /// The counts since `before` (an earlier reading of the same key).
    pub(crate) fn since(&self, before: &KeyDecisionCounts) -> KeyDecisionCounts {
        let mut d = self.clone();
        d.combine(before, u64::saturating_sub);
        d
    }

    /// Adds another key's or span's counts (keys rolled up, intervals).
    pub(crate) fn merge(&mut self, other: &KeyDecisionCounts) {
        self.combine(other, u64::saturating_add);
    }

    /// Waits counted.
    pub(crate) fn waits(&self) -> u64 {
        self.decision_count.iter().sum()
    }

    pub(crate) fn decided(&self, d: Decision) -> u64 {
        self.decision_count[d as usize]
    }

    pub(crate) fn decided_ns(&self, d: Decision) -> u64 {
        self.decision_sum_ns[d as usize]
    }

    /// Waits whose wakeup did not ask for the CPU (every rule).
    pub(crate) fn declined(&self) -> u64 {
        (DECISIONS.iter())
            .filter(|d| d.declined())
            .map(|&d| self.decided(d))
            .sum()
    }

    pub(crate) fn passed(&self, p: Pass) -> u64 {
        self.pass_count[p as usize]
    }

    pub(crate) fn passed_ns(&self, p: Pass) -> u64 {
        self.pass_sum_ns[p as usize]
    }

    pub(crate) fn held(&self, h: HolderLeft) -> u64 {
        self.holder_count[h as usize]
    }

    pub(crate) fn held_ns(&self, h: HolderLeft) -> u64 {
        self.holder_sum_ns[h as usize]
    }

    pub(crate) fn outcome(&self, o: Outcome) -> u64 {
        self.outcome_count[o as usize]
    }

    pub(crate) fn outcome_ns(&self, o: Outcome) -> u64 {
        self.outcome_sum_ns[o as usize]
    }

    /// Waits of outcome `o` of at least 1 ms.
    pub(crate) fn outcome_slow(&self, o: Outcome) -> u64 {
        self.outcome_slow[o as usize]
    }

    /// Every outcome's waits of at least 1 ms.
    pub(crate) fn slow(&self) -> u64 {
        OUTCOMES.iter().map(|&o| self.outcome_slow(o)).sum()
    }
}

impl DecisionCounts {
    /// The same counts as a key's split: each dimension summed over the
    /// table, the outcomes' slow waits from their histograms (cut at
    /// [`KEY_SLOW_NS`]).
    pub(crate) fn marginals(&self) -> KeyDecisionCounts {
        let mut k = KeyDecisionCounts::zero();
        for d in DECISIONS {
            k.decision_count[d as usize] = self.decided(d);
            k.decision_sum_ns[d as usize] = self.decided_ns(d);
        }
        for p in PASSES {
            k.pass_count[p as usize] = self.passed(p);
            k.pass_sum_ns[p as usize] = self.passed_ns(p);
        }
        for h in HOLDERS {
            k.holder_count[h as usize] = self.holder_count[h as usize];
            k.holder_sum_ns[h as usize] = self.holder_sum_ns[h as usize];
        }
        // Each outcome's waits are its histogram's (the table cannot say
        // them: granted and late share a cell, told apart by the holder),
        // its sum the kernel's own.
        for o in OUTCOMES {
            k.outcome_count[o as usize] = self.outcome_between(o, 0, u64::MAX);
            k.outcome_sum_ns[o as usize] = self.outcome_sum_ns[o as usize];
            k.outcome_slow[o as usize] = self.outcome_between(o, KEY_SLOW_NS, u64::MAX);
        }
        k.passes = self.passes;
        k
    }
}

#[cfg(test)]
mod tests {
    use super::{
        super::{
            decision_counts::DecisionFacts,
            decision_fixtures::{self as fixtures, waits},
        },
        *,
    };

    #[test]
    fn every_counter_is_differenced_and_summed() {
        let mut k = KeyDecision::ZERO;
        for (i, w) in words_mut(&mut k).iter_mut().enumerate() {
            *w = i as u64 + 1;
        }
        // The words are the fields in order: the last one is `passes`.
        assert_eq!(k.passes, WORDS as u64);
        assert_eq!(k.decision_count[0], 1);
        let once = KeyDecisionCounts::from_key(&k);
        let mut twice = once.clone();
        twice.merge(&once);
        assert_eq!(twice.passes, 2 * k.passes);
        assert_eq!(twice.outcome_slow, k.outcome_slow.map(|n| 2 * n));
        assert_eq!(twice.since(&once), once);
        assert_eq!(once.since(&twice), KeyDecisionCounts::zero());
    }

    #[test]
    fn readings_difference_and_keys_merge() {
        let passed_over = [
            waits(
                4,
                1_200_000,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            ),
            waits(
                1,
                200_000,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            ),
        ];
        let granted = waits(
            2,
            10_000,
            Decision::Requested,
            Pass::Zero,
            HolderLeft::Blocked,
        );
        let then = KeyDecisionCounts::from_key(&fixtures::key(&passed_over));
        let now =
            KeyDecisionCounts::from_key(&fixtures::key(&[passed_over[0], passed_over[1], granted]));
        let new = now.since(&then);
        assert_eq!((new.waits(), new.decided(Decision::Requested)), (2, 2));
        assert_eq!((new.declined(), new.slow()), (0, 0));
        let mut sum = then.clone();
        sum.merge(&now);
        assert_eq!(sum.waits(), 12);
        assert_eq!(sum.declined(), 10);
        assert_eq!(sum.outcome_slow(Outcome::PassedOver), 8);
        assert_eq!(sum.held(HolderLeft::SliceEnded), 10);
    }

    /// The table's marginals are what the kernel counts per key for the
    /// same waits, every counter of them.
    #[test]
    fn the_whole_systems_table_gives_the_same_view() {
        let groups = [
            waits(
                3,
                7_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                2,
                4_500_000,
                Decision::Protected,
                Pass::Two,
                HolderLeft::Preempted,
            ),
            waits(1, 20_000, Decision::Idle, Pass::Zero, HolderLeft::Idle),
        ];
        let s = fixtures::stats(&groups);
        let k = DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[s]).marginals();
        assert_eq!(k, KeyDecisionCounts::from_key(&fixtures::key(&groups)));
        assert_eq!(k.waits(), 6);
        assert_eq!(k.decided(Decision::Protected), 2);
        assert_eq!(k.decided_ns(Decision::Protected), 9_000_000);
        assert_eq!((k.passed(Pass::Zero), k.passed(Pass::Two)), (4, 2));
        assert_eq!(k.outcome(Outcome::Granted), 3);
        assert_eq!(k.outcome(Outcome::IdleCpu), 1);
        assert_eq!(k.outcome_slow(Outcome::Granted), 0);
        assert_eq!(k.outcome_slow(Outcome::PassedOver), 2);
        assert_eq!(k.outcome_ns(Outcome::PassedOver), 9_000_000);
        assert_eq!(k.outcome_ns(Outcome::Granted), 21_000);
        assert_eq!(
            (k.held(HolderLeft::Preempted), k.held(HolderLeft::Idle)),
            (5, 1)
        );
    }
}
