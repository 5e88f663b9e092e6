//! One wait's decision (the kernel's `Decided` word, docs/decision.md), as
//! a slow event, a recorder dump and a Perfetto slice show it: what the
//! scheduler decided at the wakeup, the pass-overs, how the holder left,
//! and for a declined wakeup the wait its rule predicted beside the actual.

use schedlat_common::decision::{
    DECISIONS, Decided, Decision, HOLDERS, HolderLeft, OUTCOMES, Outcome, PASSES, Pass,
    REQUESTED_SPENT,
};
use serde_json::{Value, json};

use crate::analysis::fmt_ns;

/// The word's parts, named; None when the split did not see the wait
/// (off, or not this kind of wait).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WaitDecision {
    pub decision: Decision,
    pub pass: Pass,
    /// Pass-overs counted (0 for `migrated` and `unknown`).
    pub passes: u64,
    pub holder: HolderLeft,
    /// What became of it (`late` only from the kernel's word: it needs
    /// the spent bit, `Decided::SPENT`).
    pub outcome: Outcome,
    /// The rule's predicted wait, ns (declined wakeups with a prediction).
    pub predicted_ns: Option<u64>,
    /// The wakee's fair share at the rule's queue, 0..=1.
    pub share: Option<f64>,
}

impl WaitDecision {
    pub(crate) fn of(word: u64) -> Option<WaitDecision> {
        let d = Decided(word);
        if !d.measured() {
            return None;
        }
        Some(WaitDecision {
            decision: Decision::from_index(d.decision_index())?,
            pass: Pass::from_index(d.pass_index())?,
            passes: d.passes(),
            holder: HolderLeft::from_index(d.holder_index())?,
            outcome: d.outcome()?,
            predicted_ns: (d.predicted_us() > 0).then(|| d.predicted_us() * 1000),
            share: (d.share() > 0).then(|| (d.share() - 1) as f64 / 1000.0),
        })
    }

    /// The kernel's word again (for a dump read back).
    pub(crate) fn word(&self) -> u64 {
        let share = self.share.map_or(0, |s| (s * 1000.0).round() as u64 + 1);
        let predicted_us = self.predicted_ns.map_or(0, |ns| ns / 1000);
        // A request whose renewed holder is not late had the spent bit.
        let spent = self.decision == Decision::Requested
            && self.holder == HolderLeft::SliceEnded
            && self.pass == Pass::Zero
            && self.outcome != Outcome::Late;
        let decision = if spent {
            REQUESTED_SPENT
        } else {
            self.decision as u64
        };
        Decided::pack(
            (decision, self.pass as u64, self.holder as u64),
            share,
            predicted_us,
            self.passes,
        )
    }

    /// What `json` wrote, read back; None for null or a class this build
    /// does not know. A dump without `outcome` (written before `late`)
    /// reads as the table gives it, without the spent bit.
    pub(crate) fn from_json(v: &Value) -> Option<WaitDecision> {
        let name = |key: &str| v.get(key)?.as_str();
        let mut d = WaitDecision {
            decision: DECISIONS
                .into_iter()
                .find(|&d| Some(d.name()) == name("decision"))?,
            pass: PASSES
                .into_iter()
                .find(|&p| Some(p.name()) == name("pass_overs"))?,
            passes: v.get("passes")?.as_u64()?,
            holder: HOLDERS
                .into_iter()
                .find(|&h| Some(h.name()) == name("holder"))?,
            outcome: Outcome::Other,
            predicted_ns: v.get("predicted_ns").and_then(Value::as_u64),
            share: v.get("share").and_then(Value::as_f64),
        };
        d.outcome = match name("outcome") {
            Some(o) => OUTCOMES.into_iter().find(|&c| c.name() == o)?,
            None => Outcome::of(d.decision, d.pass, d.holder, (false, false)),
        };
        Some(d)
    }

    /// `protected, passed over 3, holder slice ended, predicted 1.40 ms`;
    /// `requested, late, holder slice ended` for a late switch.
    pub(crate) fn text(&self) -> String {
        let mut out = self.decision.name().replace('_', " ");
        if self.outcome == Outcome::Late {
            out.push_str(", late");
        }
        match self.pass {
            Pass::Zero => {}
            Pass::Migrated => out.push_str(", migrated"),
            Pass::Unknown => out.push_str(", pass-overs unknown"),
            _ => out.push_str(&format!(", passed over {}", self.passes)),
        }
        out.push_str(", holder ");
        out.push_str(&self.holder.name().replace('_', " "));
        if let Some(ns) = self.predicted_ns {
            out.push_str(&format!(", predicted {}", fmt_ns(ns)));
        }
        out
    }

    /// The JSON object (docs/json.md, slow events and dumps).
    pub(crate) fn json(&self) -> Value {
        json!({
            "decision": self.decision.name(),
            "declined": self.decision.declined(),
            "outcome": self.outcome.name(),
            "pass_overs": self.pass.name(),
            "passes": self.passes,
            "holder": self.holder.name(),
            "predicted_ns": self.predicted_ns,
            "share": self.share,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(decision: Decision, pass: Pass, holder: HolderLeft, predicted_us: u64, n: u64) -> u64 {
        Decided::pack(
            (decision as u64, pass as u64, holder as u64),
            251,
            predicted_us,
            n,
        )
    }

    #[test]
    fn a_passed_over_protected_wait_reads_as_the_kernel_packed_it() {
        let d = WaitDecision::of(word(
            Decision::Protected,
            Pass::ThreePlus,
            HolderLeft::SliceEnded,
            1400,
            5,
        ))
        .unwrap();
        assert_eq!(
            d.text(),
            "protected, passed over 5, holder slice ended, predicted 1.40 ms"
        );
        let j = d.json();
        assert_eq!(j["decision"], "protected");
        assert_eq!(j["declined"], true);
        assert_eq!(j["pass_overs"], "3+");
        assert_eq!(j["passes"], 5);
        assert_eq!(j["holder"], "slice_ended");
        assert_eq!(j["predicted_ns"], 1_400_000);
        assert_eq!(j["share"], 0.25);
        let back = WaitDecision::from_json(&j).unwrap();
        assert_eq!(back, d);
        assert_eq!(WaitDecision::of(back.word()), Some(d));
        assert_eq!(WaitDecision::from_json(&Value::Null), None);
    }

    #[test]
    fn a_granted_wait_has_no_prediction_and_an_unmeasured_one_is_none() {
        let d = WaitDecision::of(word(
            Decision::Requested,
            Pass::Zero,
            HolderLeft::Blocked,
            0,
            0,
        ))
        .unwrap();
        assert_eq!(d.text(), "requested, holder blocked");
        assert!(d.json()["predicted_ns"].is_null());
        assert_eq!(WaitDecision::of(0), None);
    }

    /// The seed case's slow wait reads `late` in text and JSON, and keeps
    /// it through a dump; a request whose holder's slice the wakeup found
    /// spent is granted, and keeps that too.
    #[test]
    fn a_late_switch_is_named_and_round_trips() {
        let late = WaitDecision::of(word(
            Decision::Requested,
            Pass::Zero,
            HolderLeft::SliceEnded,
            0,
            0,
        ))
        .unwrap();
        assert_eq!(late.outcome, Outcome::Late);
        assert_eq!(late.text(), "requested, late, holder slice ended");
        assert_eq!(late.json()["outcome"], "late");
        let back = WaitDecision::from_json(&late.json()).unwrap();
        assert_eq!(back, late);
        assert_eq!(WaitDecision::of(back.word()), Some(late));
        let spent = WaitDecision::of(Decided::pack(
            (
                REQUESTED_SPENT,
                Pass::Zero as u64,
                HolderLeft::SliceEnded as u64,
            ),
            0,
            0,
            0,
        ))
        .unwrap();
        assert_eq!(
            (spent.decision, spent.outcome),
            (Decision::Requested, Outcome::Granted)
        );
        assert_eq!(spent.text(), "requested, holder slice ended");
        let back = WaitDecision::from_json(&spent.json()).unwrap();
        assert_eq!(WaitDecision::of(back.word()), Some(spent));
    }
}
