//! How much of the cause and decision splits each per-cgroup series
//! carries (`serve --cgroup-splits`). The total's families always carry
//! every split in full; this is only the per-cgroup side, where each
//! class is one more series per cgroup: at 100 cgroups the full splits
//! are ~10,000 series a node, three times the histograms'.
//!
//! `alerting` (the default) keeps what the mixin's rules, alerts and
//! panels read per cgroup, and the decision split's rule per cgroup that
//! issue #27 asks for; the rest of each split is the total's:
//! - the cause split's seconds of `split="held_by"` (NoisyNeighbour's
//!   share of wait time behind another cgroup);
//! - the overlaps' seconds and the measured seconds they are a share of
//!   (QuotaThrottlingWaits);
//! - the decision split's seconds of `split="outcome"` and
//!   `split="decision"` (what became of a wakeup, and the rule that
//!   declined it).
//!
//! The counts families (`_waits_by_cause_total`, `_waits_by_decision_total`,
//! `_wait_overlap_measured_waits_total`) and the other splits (began,
//! placement, queue_depth, crossed; passes, holder) come per cgroup with
//! `full`.

use schedlat_common::decision::{Decision, Outcome};

use crate::histogram::DecisionFacts;

/// The per-cgroup splits' extent (`--cgroup-splits`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum CgroupSplits {
    /// What the mixin reads per cgroup: the seconds of the cause split's
    /// held_by, of the overlaps, and of the decision split's outcome and
    /// decision; every split in full in the total
    #[default]
    Alerting,
    /// Every split, counts and seconds, per cgroup as in the total
    Full,
}

impl CgroupSplits {
    /// Whether the waits-counted families (beside the seconds) are
    /// exported per cgroup.
    pub(crate) fn counts(self) -> bool {
        self == CgroupSplits::Full
    }

    /// Whether the cause split `split` is exported per cgroup.
    pub(crate) fn cause_split(self, split: &str) -> bool {
        self == CgroupSplits::Full || split == "held_by"
    }

    /// Whether the decision split `split` is exported per cgroup.
    pub(crate) fn decision_split(self, split: &str) -> bool {
        self == CgroupSplits::Full || matches!(split, "outcome" | "decision")
    }

    /// What the per-cgroup families' HELP says is left to the total.
    pub(crate) fn help(self) -> &'static str {
        match self {
            CgroupSplits::Alerting => {
                "; per cgroup only the seconds of the splits the alerts read (--cgroup-splits alerting; every split and the counts with --cgroup-splits full, and always in the schedlat_runqueue_* total)"
            }
            CgroupSplits::Full => "",
        }
    }
}

/// Whether a kernel with these facts can put a wait in decision class
/// `d` (schedlat-ebpf/src/decision.rs): the EEVDF rules and a renewed
/// slice only under EEVDF, the wakeup granularity only under CFS, lazy
/// only where the kernel has TIF_NEED_RESCHED_LAZY, `ext` only where it has
/// sched_ext. Decided once from the
/// kernel context at load, never from a value, so a per-cgroup series
/// does not appear with its first wait (rate() would miss that increase).
/// Unknown facts keep every class.
pub(crate) fn kernel_can_decide(facts: Option<&DecisionFacts>, d: Decision) -> bool {
    let Some(facts) = facts else {
        return true;
    };
    let eevdf = facts.fair == 1;
    let cfs = facts.fair == 2;
    match d {
        Decision::SliceEnded
        | Decision::NotEligible
        | Decision::LaterDeadline
        | Decision::Protected => eevdf,
        Decision::WakeupGranularity => cfs,
        Decision::Lazy => facts.lazy_bit.is_some(),
        Decision::Ext => facts.ext,
        _ => true,
    }
}

/// Whether a kernel with these facts can give a wait outcome `o`: `late`
/// needs a holder that left with its slice renewed, which only EEVDF
/// tells (on CFS such a holder reads `preempted`). Decided as
/// [`kernel_can_decide`], from the kernel context at load.
pub(crate) fn kernel_can_end(facts: Option<&DecisionFacts>, o: Outcome) -> bool {
    let Some(facts) = facts else {
        return true;
    };
    match o {
        Outcome::Late => facts.fair == 1,
        _ => true,
    }
}

/// The classes [`kernel_can_decide`] and [`kernel_can_end`] leave out on
/// this kernel (decisions, then outcomes), for HELP.
pub(crate) fn left_out(facts: Option<&DecisionFacts>) -> Vec<&'static str> {
    let decisions = (schedlat_common::decision::DECISIONS.iter())
        .filter(|&&d| !kernel_can_decide(facts, d))
        .map(|&d| d.name());
    let outcomes = (schedlat_common::decision::OUTCOMES.iter())
        .filter(|&&o| !kernel_can_end(facts, o))
        .map(|&o| o.name());
    decisions.chain(outcomes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eevdf_with_lazy_leaves_out_the_cfs_rule_only() {
        let facts = DecisionFacts::X86_6_18;
        // This project's 6.18 host has no sched_ext.
        assert_eq!(left_out(Some(&facts)), ["wakeup_granularity", "ext"]);
        let ext = DecisionFacts { ext: true, ..facts };
        assert_eq!(left_out(Some(&ext)), ["wakeup_granularity"]);
        let cfs = DecisionFacts {
            fair: 2,
            lazy_bit: None,
            ..facts
        };
        assert_eq!(
            left_out(Some(&cfs)),
            [
                "slice_ended",
                "lazy",
                "not_eligible",
                "later_deadline",
                "protected",
                "ext",
                "late"
            ]
        );
        assert!(left_out(None).is_empty());
    }

    #[test]
    fn alerting_keeps_what_the_mixin_reads() {
        let a = CgroupSplits::Alerting;
        assert!(a.cause_split("held_by") && !a.cause_split("queue_depth"));
        assert!(a.decision_split("decision") && a.decision_split("outcome"));
        assert!(!a.decision_split("passes") && !a.decision_split("holder"));
        assert!(!a.counts() && CgroupSplits::Full.counts());
        assert!(CgroupSplits::Full.cause_split("began"));
    }
}
