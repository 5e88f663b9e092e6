//! A per-key series' counters as one flat run of u64 words: its buckets in
//! the export layout, its sum, and (per cgroup) its cause and decision
//! splits. keyed_series.rs keeps each series, its kernel baseline, their
//! sum and the overflow series this way, so that adding an interval,
//! differencing against the total, or holding back a few waits is one
//! loop over words whatever they count; [`Words::folded`] makes the
//! exported value.

use schedlat_common::{
    causes::{NR_CAUSES, NR_OVERLAPS},
    scope::KeyStats,
};

use crate::{
    collect::key_summaries::WholeKey,
    histogram::{
        CauseCounts, CauseFacts, KEY_DECISION_WORDS as WORDS, KeyDecisionCounts, Waits,
        layout::Layout,
    },
};

/// Words of the cause split: counts and sums per class, overlaps, and the
/// overlap-measured waits and their sum.
const CAUSE_WORDS: usize = 2 * NR_CAUSES + NR_OVERLAPS + 2;

/// Which counters a series has, and where each is in its words.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Words {
    layout: &'static Layout,
    /// Per key, the cause split (per cgroup, when measured).
    causes: Option<CauseFacts>,
    /// Per key, the decision split.
    decision: bool,
}

impl Words {
    pub(crate) fn new(layout: &'static Layout, causes: Option<CauseFacts>, decision: bool) -> Self {
        // Keys keep no wakeup path: the stage is the total's only.
        let causes = causes.map(|m| CauseFacts { waking: false, ..m });
        Words {
            layout,
            causes,
            decision,
        }
    }

    fn buckets(&self) -> usize {
        self.layout.len()
    }

    fn causes_at(&self) -> usize {
        self.buckets() + 1
    }

    fn decision_at(&self) -> usize {
        self.causes_at()
            + if self.causes.is_some() {
                CAUSE_WORDS
            } else {
                0
            }
    }

    pub(crate) fn width(&self) -> usize {
        self.decision_at() + if self.decision { WORDS } else { 0 }
    }

    pub(crate) fn zero(&self) -> Vec<u64> {
        vec![0; self.width()]
    }

    /// A key's cumulative kernel entry, into `out`.
    pub(crate) fn of_key(&self, whole: &WholeKey, out: &mut [u64]) {
        let stats: &KeyStats = &whole.stats;
        let n = self.buckets();
        self.layout.fold_into(&stats.buckets, &mut out[..n]);
        out[n] = stats.sum_ns;
        if let Some(m) = self.causes {
            let c = CauseCounts::from_key(m, &stats.causes);
            cause_words(&c, &mut out[self.causes_at()..self.decision_at()]);
        }
        if self.decision {
            let d = whole
                .decision
                .map_or_else(KeyDecisionCounts::zero, |d| KeyDecisionCounts::from_key(&d));
            out[self.decision_at()..].copy_from_slice(d.words());
        }
    }

    /// The total's cumulative waits, counted as a key's are (its decision
    /// split's marginals), into `out`.
    pub(crate) fn of_total(&self, total: &Waits, out: &mut [u64]) {
        let n = self.buckets();
        out[..n].copy_from_slice(&self.layout.counts(&total.buckets));
        out[n] = total.sum_ns;
        if self.causes.is_some() {
            let into = &mut out[self.causes_at()..self.decision_at()];
            match &total.causes {
                Some(c) => cause_words(c, into),
                None => into.fill(0),
            }
        }
        if self.decision {
            let into = &mut out[self.decision_at()..];
            match &total.decision {
                Some(d) => into.copy_from_slice(d.marginals().words()),
                None => into.fill(0),
            }
        }
    }

    /// The exported value of `words`.
    pub(crate) fn folded(&self, words: &[u64]) -> crate::export::model::Folded {
        let n = self.buckets();
        let causes = self.causes.map(|m| {
            let w = &words[self.causes_at()..self.decision_at()];
            let mut c = CauseCounts::zero(m, false);
            c.count.copy_from_slice(&w[..NR_CAUSES]);
            c.sum_ns.copy_from_slice(&w[NR_CAUSES..2 * NR_CAUSES]);
            let o = 2 * NR_CAUSES;
            c.overlap_ns.copy_from_slice(&w[o..o + NR_OVERLAPS]);
            c.overlap_waits = w[o + NR_OVERLAPS];
            c.overlap_wait_ns = w[o + NR_OVERLAPS + 1];
            c
        });
        let decision = self
            .decision
            .then(|| KeyDecisionCounts::from_words(&words[self.decision_at()..]));
        crate::export::model::Folded {
            buckets: words[..n].to_vec(),
            sum_ns: words[n],
            causes,
            decision,
        }
    }
}

fn cause_words(c: &CauseCounts, out: &mut [u64]) {
    out[..NR_CAUSES].copy_from_slice(&c.count[..NR_CAUSES]);
    out[NR_CAUSES..2 * NR_CAUSES].copy_from_slice(&c.sum_ns[..NR_CAUSES]);
    let o = 2 * NR_CAUSES;
    out[o..o + NR_OVERLAPS].copy_from_slice(&c.overlap_ns);
    out[o + NR_OVERLAPS] = c.overlap_waits;
    out[o + NR_OVERLAPS + 1] = c.overlap_wait_ns;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::layout::LOG2;

    #[test]
    fn a_key_folds_to_its_words_and_back() {
        let words = Words::new(&LOG2, None, true);
        let mut stats = KeyStats::ZERO;
        stats.buckets[schedlat_common::bucket_index(3_000)] = 2;
        stats.sum_ns = 6_000;
        let mut d = schedlat_common::decision::KeyDecision::ZERO;
        d.passes = 7;
        let mut out = words.zero();
        words.of_key(
            &WholeKey {
                stats,
                decision: Some(d),
            },
            &mut out,
        );
        let f = words.folded(&out);
        assert_eq!((f.count(), f.sum_ns), (2, 6_000));
        assert_eq!(f.decision.unwrap().passes, 7);
        assert!(f.causes.is_none());
    }
}
