//! What separates the two modes of a bimodal histogram, when the decision
//! split measured the waits (docs/decision.md): the fast mode's waits are
//! wakeups that asked for the CPU and ran at the next switch (`granted`),
//! the slow mode's were not asked for (a rule declined the wakeup) or were
//! passed over (others were picked first). Without the split the modes are
//! only told apart by length.

use schedlat_common::decision::Outcome;
use serde::Serialize;

use crate::histogram::Waits;

/// Each mode's waits by outcome: the fast mode under the split point
/// (half a slice), the slow one at or above it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ModesDecision {
    pub split_ns: u64,
    pub fast_waits: u64,
    /// Fast waits the wakeup asked for, run with 0 pass-overs.
    pub fast_granted: u64,
    pub slow_waits: u64,
    /// Slow waits a rule declined (0 pass-overs) ...
    pub slow_declined: u64,
    /// ... and those passed over 1+ times.
    pub slow_passed_over: u64,
}

/// None without the split or without waits on either side.
pub(crate) fn decided(w: &Waits, split_ns: u64) -> Option<ModesDecision> {
    let d = w.decision.as_ref()?;
    let fast_waits = d.all_between(0, split_ns);
    let slow_waits = d.all_between(split_ns, u64::MAX);
    (fast_waits > 0 && slow_waits > 0).then(|| ModesDecision {
        split_ns,
        fast_waits,
        fast_granted: d.outcome_between(Outcome::Granted, 0, split_ns),
        slow_waits,
        slow_declined: d.outcome_between(Outcome::Declined, split_ns, u64::MAX),
        slow_passed_over: d.outcome_between(Outcome::PassedOver, split_ns, u64::MAX),
    })
}

fn pct(part: u64, whole: u64) -> f64 {
    part as f64 * 100.0 / whole.max(1) as f64
}

impl ModesDecision {
    /// The share of the waits the decision puts on the side of their mode.
    #[cfg(test)]
    pub(crate) fn separated_share(&self) -> f64 {
        let on_side = self.fast_granted + self.slow_declined + self.slow_passed_over;
        on_side as f64 / (self.fast_waits + self.slow_waits).max(1) as f64
    }

    /// `; the decision separates them: ...`, for the verdict's line.
    pub(crate) fn text(&self) -> String {
        let slow = self.slow_declined + self.slow_passed_over;
        format!(
            "; the decision separates them: {:.0}% of the fast waits were requested and ran with 0 pass-overs, {:.0}% of the slow ones were not requested ({:.0}%) or passed over ({:.0}%)",
            pct(self.fast_granted, self.fast_waits),
            pct(slow, self.slow_waits),
            pct(self.slow_declined, self.slow_waits),
            pct(self.slow_passed_over, self.slow_waits),
        )
    }
}
