//! The decision split (docs/decision.md) as Prometheus counters: every
//! wait the split saw counted once per split (`split` label), with its
//! class as `class`:
//! - `outcome`: what became of it (granted, declined, passed_over,
//!   idle_cpu, other);
//! - `decision`: what the scheduler decided at its wakeup, the request
//!   class or the rule that declined it (requested, ..., protected,
//!   not_eligible, ...);
//! - `passes`: the switches to other tasks on its CPU meanwhile (0, 1, 2,
//!   3+, migrated, unknown);
//! - `holder`: how the task that held the CPU left it (blocked,
//!   preempted, slice_ended, exited).
//!
//! A fixed set of label values (29 per family), never one per task. The
//! whole system (with the filter's `scope` label) only; a series is absent
//! when the split is off (`--no-decision`, `--no-causes`) or the kernel
//! lacks its fields.

use schedlat_common::decision::{DECISIONS, HOLDERS, OUTCOMES, Outcome, PASSES, cell};

use crate::{
    export::model::{Family, Labels, Unit, Value, counter},
    histogram::DecisionCounts,
    output::decision::{decision_name, holder_name, outcome_name, pass_name},
};

/// The family names, for tests and for the docs' table.
pub(crate) const WAITS: &str = "schedlat_runqueue_waits_by_decision";
pub(crate) const SECONDS: &str = "schedlat_runqueue_wait_by_decision";

/// One label set (the scope) and its counts.
pub(crate) type DecisionSeries = Option<(Labels, DecisionCounts)>;

/// Waits and their time of every class of every split.
fn classes(d: &DecisionCounts) -> Vec<(&'static str, &'static str, u64, u64)> {
    let mut out = Vec::new();
    let mut outcome = [(0u64, 0u64); OUTCOMES.len()];
    for &dc in &DECISIONS {
        for &p in &PASSES {
            let o = &mut outcome[Outcome::of(dc, p) as usize];
            o.0 += d.count[cell(dc, p)];
            o.1 += d.sum_ns[cell(dc, p)];
        }
    }
    for (&o, (n, ns)) in OUTCOMES.iter().zip(outcome) {
        out.push(("outcome", outcome_name(o), n, ns));
    }
    for &dc in &DECISIONS {
        out.push((
            "decision",
            decision_name(dc),
            d.decided(dc),
            d.decided_ns(dc),
        ));
    }
    for &p in &PASSES {
        out.push(("passes", pass_name(p), d.passed(p), d.passed_ns(p)));
    }
    for &h in &HOLDERS {
        let i = h as usize;
        out.push((
            "holder",
            holder_name(h),
            d.holder_count[i],
            d.holder_sum_ns[i],
        ));
    }
    out
}

/// The split's two families; none without it.
pub(super) fn families(series: &DecisionSeries) -> Vec<Family> {
    let Some((labels, d)) = series else {
        return Vec::new();
    };
    let rows = classes(d);
    let samples = |value: fn(u64, u64) -> Value| {
        rows.iter()
            .map(|&(split, class, n, ns)| {
                let mut l = labels.clone();
                l.push(("split", split.into()));
                l.push(("class", class.into()));
                (l, value(n, ns))
            })
            .collect()
    };
    let splits = "split outcome (granted: the wakeup asked for the CPU and got it at the next switch; declined: it did not ask and ran at the next switch; passed_over: others ran first; idle_cpu; other), decision (what the scheduler decided at the wakeup: requested, slice_ended, pending, lazy, idle, not_wakeup, unknown, or the rule that declined it: not_eligible, later_deadline, protected, policy_gate, other_class, wakeup_granularity, rule_unknown), passes (switches to other tasks on its CPU during the wait: 0, 1, 2, 3+, migrated, unknown) or holder (how the task that held the CPU left it: blocked, preempted, slice_ended, exited); each wait is in one class of every split (docs/decision.md)";
    vec![
        counter(
            WAITS.into(),
            format!(
                "Waits of schedlat_runqueue_latency_seconds the decision split saw, counted by {splits}"
            ),
            None,
            samples(|n, _| Value::Count(n)),
        ),
        counter(
            SECONDS.into(),
            format!("Their time (the sum of the waits) by {splits}"),
            Some(Unit::Seconds),
            samples(|_, ns| Value::seconds_of_ns(ns)),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use schedlat_common::decision::{Decision, DecisionStats, Holder, Pass};

    use super::*;
    use crate::{export::encode::Format, histogram::DecisionFacts};

    /// 2 waits of 1 ms granted at once, 3 of 4 ms protected and passed
    /// over 3+ times.
    fn counts() -> DecisionCounts {
        let mut s = DecisionStats::ZERO;
        let granted = cell(Decision::Requested, Pass::Zero);
        s.count[granted] = 2;
        s.sum_ns[granted] = 2_000_000;
        let passed = cell(Decision::Protected, Pass::ThreePlus);
        s.count[passed] = 3;
        s.sum_ns[passed] = 12_000_000;
        s.holder_count[Holder::Blocked as usize] = 2;
        s.holder_sum_ns[Holder::Blocked as usize] = 2_000_000;
        s.holder_count[Holder::SliceEnded as usize] = 3;
        s.holder_sum_ns[Holder::SliceEnded as usize] = 12_000_000;
        DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[s])
    }

    fn text(series: &DecisionSeries) -> String {
        let bytes = crate::export::encode::encode(families(series), Format::Text);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn every_split_adds_up_to_the_waits_it_saw() {
        let out = text(&Some((Vec::new(), counts())));
        for line in [
            "schedlat_runqueue_waits_by_decision_total{split=\"outcome\",class=\"granted\"} 2",
            "schedlat_runqueue_waits_by_decision_total{split=\"outcome\",class=\"passed_over\"} 3",
            "schedlat_runqueue_waits_by_decision_total{split=\"decision\",class=\"protected\"} 3",
            "schedlat_runqueue_waits_by_decision_total{split=\"passes\",class=\"3+\"} 3",
            "schedlat_runqueue_waits_by_decision_total{split=\"holder\",class=\"slice_ended\"} 3",
            "schedlat_runqueue_wait_by_decision_seconds_total{split=\"outcome\",class=\"passed_over\"} 0.012",
            "schedlat_runqueue_wait_by_decision_seconds_total{split=\"decision\",class=\"requested\"} 0.002",
        ] {
            assert!(out.contains(line), "{line} not in\n{out}");
        }
        for split in ["outcome", "decision", "passes", "holder"] {
            let sum: f64 = out
                .lines()
                .filter(|l| {
                    l.starts_with("schedlat_runqueue_waits_by_decision_total{")
                        && l.contains(&format!("split=\"{split}\""))
                })
                .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
                .sum();
            assert_eq!(sum, 5.0, "{split}: {out}");
        }
    }

    #[test]
    fn absent_without_the_split_and_labelled_with_the_scope() {
        assert!(families(&None).is_empty());
        let scoped = text(&Some((vec![("scope", "pid=7".into())], counts())));
        assert!(
            scoped.contains("{scope=\"pid=7\",split=\"outcome\",class=\"granted\"} 2"),
            "{scoped}"
        );
    }
}
