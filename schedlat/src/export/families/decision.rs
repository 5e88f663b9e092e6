//! The decision split (docs/decision.md) as Prometheus counters: every
//! wait the split saw counted once per split (`split` label), with its
//! class as `class`:
//! - `outcome`: what became of it (granted, late, declined, passed_over,
//!   idle_cpu, other);
//! - `decision`: what the scheduler decided at its wakeup, the request
//!   class or the rule that declined it (requested, ..., protected,
//!   not_eligible, ...);
//! - `passes`: the switches to other tasks on its CPU meanwhile (0, 1, 2,
//!   3+, migrated, unknown);
//! - `holder`: how the task that held the CPU left it (blocked,
//!   preempted, slice_ended, exited, yielded, idle).
//!
//! A fixed set of label values (31 per family), never one per task.
//! Families, as for the cause split: the whole system (with the filter's
//! `scope` label) in `schedlat_runqueue_*`, and with `--cgroups` per
//! cgroup in `schedlat_cgroup_runqueue_*` (the outcome and decision
//! seconds, without the classes the kernel cannot produce, `late` on CFS
//! among them; every split
//! with `--cgroup-splits full`: export/cgroup_splits.rs), its series the keyed
//! histogram's (the same intervals and `--max-series`, `__overflow__`
//! included), so `sum()` over a family never counts a wait twice. A
//! series is absent when the split is off (`--no-decision`,
//! `--no-causes`) or the kernel lacks its fields.

use schedlat_common::decision::{DECISIONS, Decision, HOLDERS, OUTCOMES, Outcome, PASSES};

use crate::{
    export::{
        cgroup_splits::{self, CgroupSplits},
        model::{Family, Labels, MetricUnit, Value, counter},
    },
    histogram::{DecisionFacts, KeyDecisionCounts},
};

/// The split's series of one family: a label set (the scope, or the
/// cgroup) and its counts, each dimension apart (the whole system's
/// table summed: DecisionCounts::marginals).
#[derive(Debug, Default)]
pub(crate) struct DecisionSeries {
    pub series: Vec<(Labels, KeyDecisionCounts)>,
    /// What the split measures on this kernel (None: not known), which
    /// decides the decision classes a per-cgroup series has.
    pub facts: Option<DecisionFacts>,
}

/// Waits and their time of every class of every split; `outcomes` and
/// `decisions` say which of those classes.
fn classes(
    d: &KeyDecisionCounts,
    outcomes: &[Outcome],
    decisions: &[Decision],
) -> Vec<(&'static str, &'static str, u64, u64)> {
    let mut out = Vec::new();
    for &o in outcomes {
        out.push(("outcome", o.name(), d.outcome(o), d.outcome_ns(o)));
    }
    for &dc in decisions {
        out.push(("decision", dc.name(), d.decided(dc), d.decided_ns(dc)));
    }
    for &p in &PASSES {
        out.push(("passes", p.name(), d.passed(p), d.passed_ns(p)));
    }
    for &h in &HOLDERS {
        out.push(("holder", h.name(), d.held(h), d.held_ns(h)));
    }
    out
}

/// Which of the family's classes are exported: the total's every one;
/// per cgroup the splits `--cgroup-splits` keeps and the decision classes
/// this kernel can produce.
struct Extent {
    splits: CgroupSplits,
    outcomes: Vec<Outcome>,
    decisions: Vec<Decision>,
    /// HELP's note of what is left out.
    note: String,
}

/// The whole system's two families; none without the split.
pub(super) fn system_families(family: &DecisionSeries) -> Vec<Family> {
    let every = Extent {
        splits: CgroupSplits::Full,
        outcomes: OUTCOMES.to_vec(),
        decisions: DECISIONS.to_vec(),
        note: String::new(),
    };
    families(
        "schedlat_runqueue",
        "Waits of schedlat_runqueue_latency_seconds the decision split saw",
        family,
        &every,
    )
}

/// The per-cgroup families (`--cgroups`): the seconds of the splits
/// `splits` keeps (and with `full` the counts); none without the split.
pub(super) fn cgroup_families(family: &DecisionSeries, splits: CgroupSplits) -> Vec<Family> {
    let facts = family.facts.as_ref();
    let decisions = (DECISIONS.iter().copied())
        .filter(|&d| cgroup_splits::kernel_can_decide(facts, d))
        .collect();
    let outcomes = (OUTCOMES.iter().copied())
        .filter(|&o| cgroup_splits::kernel_can_end(facts, o))
        .collect();
    let left_out = cgroup_splits::left_out(facts);
    let mut note = splits.help().to_string();
    if !left_out.is_empty() {
        note += &format!(
            "; per cgroup without the classes this kernel cannot produce ({}), from the kernel at start",
            left_out.join(", ")
        );
    }
    let extent = Extent {
        splits,
        outcomes,
        decisions,
        note,
    };
    families(
        "schedlat_cgroup_runqueue",
        "Waits of schedlat_cgroup_runqueue_latency_seconds (per cgroup) the decision split saw",
        family,
        &extent,
    )
}

fn families(prefix: &str, whose: &str, family: &DecisionSeries, extent: &Extent) -> Vec<Family> {
    if family.series.is_empty() {
        return Vec::new();
    }
    let rows: Vec<_> = (family.series.iter())
        .map(|(labels, d)| {
            let mut kept = classes(d, &extent.outcomes, &extent.decisions);
            kept.retain(|&(split, ..)| extent.splits.decision_split(split));
            (labels, kept)
        })
        .collect();
    let samples = |value: fn(u64, u64) -> Value| {
        let mut out = Vec::new();
        for (labels, classes) in &rows {
            for &(split, class, n, ns) in classes {
                let mut l = (*labels).clone();
                l.push(("split", split.into()));
                l.push(("class", class.into()));
                out.push((l, value(n, ns)));
            }
        }
        out
    };
    let splits = "split outcome (granted: the wakeup asked for the CPU and got it at the next switch; late: it asked and no other task ran first, but the holder kept the CPU until a tick ended its slice (a lazy request: until a preemption inside the kernel); declined: it did not ask and ran at the next switch; passed_over: others ran first; idle_cpu; other), decision (what the scheduler decided at the wakeup: requested, slice_ended, pending, lazy, idle, not_wakeup, unknown, or the rule that declined it: not_eligible, later_deadline, protected, policy_gate, other_class, wakeup_granularity, rule_unknown, ext: a sched_ext scheduler decided), passes (switches to other tasks on its CPU during the wait: 0, 1, 2, 3+, migrated, unknown) or holder (how the task that held the CPU left it: blocked, preempted, slice_ended, exited, yielded, idle: the CPU's idle task); each wait is in one class of every split (docs/decision.md)";
    let note = &extent.note;
    let mut out = Vec::new();
    if extent.splits.counts() {
        out.push(counter(
            format!("{prefix}_waits_by_decision"),
            format!("{whose}, counted by {splits}{note}"),
            None,
            samples(|n, _| Value::Count(n)),
        ));
    }
    out.push(counter(
        format!("{prefix}_wait_by_decision"),
        format!("{whose}, summed as time (the sum of the waits) by {splits}{note}"),
        Some(MetricUnit::Seconds),
        samples(|_, ns| Value::seconds_of_ns(ns)),
    ));
    out
}

#[cfg(test)]
mod tests {
    use schedlat_common::decision::{Decision, HolderLeft, Pass};

    use super::*;
    use crate::{
        export::encode::Format,
        histogram::{
            DecisionCounts, DecisionFacts,
            decision_fixtures::{self as fixtures, waits},
        },
    };

    /// 2 waits of 1 ms granted at once, 3 of 4 ms protected and passed
    /// over 3+ times.
    fn counts() -> KeyDecisionCounts {
        let s = fixtures::stats(&[
            waits(
                2,
                1_000_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Blocked,
            ),
            waits(
                3,
                4_000_000,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            ),
        ]);
        DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[s]).marginals()
    }

    fn series(labels: Labels, d: KeyDecisionCounts) -> DecisionSeries {
        DecisionSeries {
            series: vec![(labels, d)],
            facts: None,
        }
    }

    fn text(families: Vec<Family>) -> String {
        let bytes = crate::export::encode::encode(families, Format::Text);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn every_split_adds_up_to_the_waits_it_saw() {
        let out = text(system_families(&series(Vec::new(), counts())));
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
        assert!(system_families(&DecisionSeries::default()).is_empty());
        assert!(cgroup_families(&DecisionSeries::default(), CgroupSplits::Full).is_empty());
        let scoped = text(system_families(&series(
            vec![("scope", "pid=7".into())],
            counts(),
        )));
        assert!(
            scoped.contains("{scope=\"pid=7\",split=\"outcome\",class=\"granted\"} 2"),
            "{scoped}"
        );
    }

    /// Two cgroups' series on the test machine's kernel (EEVDF, lazy).
    fn two_cgroups() -> DecisionSeries {
        let web = KeyDecisionCounts::from_key(&fixtures::key(&[waits(
            4,
            2_000_000,
            Decision::NotEligible,
            Pass::ThreePlus,
            HolderLeft::SliceEnded,
        )]));
        DecisionSeries {
            series: vec![
                (vec![("cgroup", "/web".into())], web),
                (vec![("cgroup", "/db".into())], counts()),
            ],
            facts: Some(DecisionFacts::X86_6_18),
        }
    }

    fn lines_of<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
        out.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    /// Per cgroup (`--cgroups --cgroup-splits full`): the same classes per
    /// series, from each key's own counts, under the cgroup's labels, but
    /// those this kernel cannot produce.
    #[test]
    fn each_cgroup_series_has_every_class_of_its_own_waits() {
        let out = text(cgroup_families(&two_cgroups(), CgroupSplits::Full));
        for line in [
            "schedlat_cgroup_runqueue_waits_by_decision_total{cgroup=\"/web\",split=\"decision\",class=\"not_eligible\"} 4",
            "schedlat_cgroup_runqueue_wait_by_decision_seconds_total{cgroup=\"/web\",split=\"outcome\",class=\"passed_over\"} 0.008",
            "schedlat_cgroup_runqueue_waits_by_decision_total{cgroup=\"/db\",split=\"outcome\",class=\"granted\"} 2",
        ] {
            assert!(out.contains(line), "{line} not in\n{out}");
        }
        let web = "schedlat_cgroup_runqueue_waits_by_decision_total{cgroup=\"/web\"";
        // 33 classes, less wakeup_granularity (CFS only) on EEVDF and ext
        // (this kernel has no sched_ext).
        assert_eq!(lines_of(&out, web).len(), 31, "{out}");
        assert!(out.contains("{cgroup=\"/web\",split=\"outcome\",class=\"late\"} 0"));
        assert!(!out.contains("wakeup_granularity\"}"), "{out}");
        assert!(out.contains("(wakeup_granularity, ext), from the kernel at start"));
        // The total keeps every class, whatever the kernel.
        let total = text(system_families(&series(Vec::new(), counts())));
        assert!(total.contains("class=\"wakeup_granularity\"} 0"), "{total}");
    }

    /// On CFS (before 6.6) no holder reads `slice_ended`, so no wait is
    /// `late`: per cgroup the class is left out, and HELP says so; the
    /// total keeps it.
    #[test]
    fn a_cfs_kernel_leaves_late_out_per_cgroup() {
        let mut cgroups = two_cgroups();
        cgroups.facts = Some(DecisionFacts {
            fair: 2,
            lazy_bit: None,
            ..DecisionFacts::X86_6_18
        });
        let out = text(cgroup_families(&cgroups, CgroupSplits::Alerting));
        assert!(!out.contains("class=\"late\""), "{out}");
        assert!(
            out.contains("protected, ext, late), from the kernel at start"),
            "{out}"
        );
        let web = "schedlat_cgroup_runqueue_wait_by_decision_seconds_total{cgroup=\"/web\"";
        // 5 outcomes and the 9 decision classes a CFS kernel produces.
        assert_eq!(lines_of(&out, web).len(), 14, "{out}");
    }

    /// By default (`--cgroup-splits alerting`) a cgroup's series has the
    /// seconds of the outcome and the rule only: 6 + 13 classes here.
    #[test]
    fn alerting_cgroup_series_have_the_outcome_and_the_rule_in_seconds() {
        let out = text(cgroup_families(&two_cgroups(), CgroupSplits::Alerting));
        assert!(!out.contains("_waits_by_decision_total"), "{out}");
        let web = "schedlat_cgroup_runqueue_wait_by_decision_seconds_total{cgroup=\"/web\"";
        let web = lines_of(&out, web);
        assert_eq!(web.len(), 19, "{out}");
        assert!(
            web.iter()
                .all(|l| l.contains("split=\"outcome\"") || l.contains("split=\"decision\"")),
            "{out}"
        );
        assert!(out.contains("{cgroup=\"/web\",split=\"decision\",class=\"not_eligible\"} 0.008"));
        assert!(out.contains("--cgroup-splits full"), "{out}");
    }
}
