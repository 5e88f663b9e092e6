//! Test data of the decision split, counted as the kernel counts a wait:
//! into every dimension at once (its decision and pass-over cell, how the
//! holder left, its outcome's histogram; a key's decision, pass-over
//! class, holder and outcome). A fixture made of such groups has splits
//! that add up to the same waits, as real counts do, and says what its
//! waits were in one line a group instead of one line a counter.

// The kernel's definitions only: the files whose tests use these are
// what this crate's histogram/ builds on them.
use schedlat_common::{
    bucket_index,
    decision::{
        Decision, DecisionStats, HolderLeft, KEY_SLOW_NS, KeyDecision, Outcome, Pass, cell,
    },
};

/// `n` waits of `each_ns`, decided `decision`, passed over `pass`, that
/// ended when the holder left the CPU as `holder`; the outcome follows
/// from the decision and the pass-overs (`Outcome::of`), as in the kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Group {
    pub n: u64,
    pub each_ns: u64,
    pub decision: Decision,
    pub pass: Pass,
    pub holder: HolderLeft,
}

/// A group of waits (`Group`).
pub(crate) const fn waits(
    n: u64,
    each_ns: u64,
    decision: Decision,
    pass: Pass,
    holder: HolderLeft,
) -> Group {
    Group {
        n,
        each_ns,
        decision,
        pass,
        holder,
    }
}

/// One CPU's counters of `groups`; `passes`, the prediction and the share
/// are the caller's (they are not per group in the kernel either).
pub(crate) fn stats(groups: &[Group]) -> DecisionStats {
    let mut s = DecisionStats::ZERO;
    for g in groups {
        let sum = g.n * g.each_ns;
        let c = cell(g.decision, g.pass);
        s.count[c] += g.n;
        s.sum_ns[c] += sum;
        s.holder_count[g.holder as usize] += g.n;
        s.holder_sum_ns[g.holder as usize] += sum;
        let outcome = Outcome::of(g.decision, g.pass, g.holder, (false, false)) as usize;
        s.outcome_buckets[outcome][bucket_index(g.each_ns)] += g.n;
        s.outcome_sum_ns[outcome] += sum;
    }
    s
}

/// One breakdown key's counters of `groups`; `passes` is the caller's.
pub(crate) fn key(groups: &[Group]) -> KeyDecision {
    let mut k = KeyDecision::ZERO;
    for g in groups {
        let sum = g.n * g.each_ns;
        k.decision_count[g.decision as usize] += g.n;
        k.decision_sum_ns[g.decision as usize] += sum;
        k.pass_count[g.pass as usize] += g.n;
        k.pass_sum_ns[g.pass as usize] += sum;
        k.holder_count[g.holder as usize] += g.n;
        k.holder_sum_ns[g.holder as usize] += sum;
        let outcome = Outcome::of(g.decision, g.pass, g.holder, (false, false)) as usize;
        k.outcome_count[outcome] += g.n;
        k.outcome_sum_ns[outcome] += sum;
        if g.each_ns >= KEY_SLOW_NS {
            k.outcome_slow[outcome] += g.n;
        }
    }
    k
}
