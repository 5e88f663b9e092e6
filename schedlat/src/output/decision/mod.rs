//! The decision split (docs/decision.md) as people and
//! machines read it: the `decision:` block under the causes (here), and the
//! `decision` object of a JSON interval (docs/json.md).

pub(crate) mod row;
pub(crate) mod wait;

use std::fmt::Write as _;

use schedlat_common::decision::{
    DECISIONS, DECLINED, Decision, HOLDERS, OUTCOMES, PASSES, Pass, cell,
};
use serde_json::{Value, json};

use super::verdict::Design;
use crate::{
    analysis::fmt_ns,
    histogram::{DecisionCounts, DecisionFacts, KeyDecisionCounts, Waits},
    sys::sched_context::SchedContext,
};

/// A JSON name as text: `slice_ended` as `slice ended`.
fn words(name: &str) -> String {
    match name {
        "idle_cpu" => "idle CPU".into(),
        "not_wakeup" => "not a wakeup".into(),
        "ext" => "sched_ext".into(),
        _ => name.replace('_', " "),
    }
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 || part == 0 {
        return "0%".into();
    }
    let p = part as f64 * 100.0 / whole as f64;
    if p < 0.1 {
        "<0.1%".into()
    } else if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// The text block: five lines (six with lazy requests), the first starting
/// `decision: `, the others indented under it; empty when the split is off
/// or saw no wait.
pub(crate) fn text(waits: &Waits) -> String {
    let Some(d) = &waits.decision else {
        return String::new();
    };
    let mut out = split_text(&d.marginals());
    if out.is_empty() {
        return out;
    }
    if d.predicted_waits > 0 {
        let n = d.predicted_waits;
        let tick = d
            .facts
            .tick_ns
            .map_or(String::new(), |t| format!(" ({} tick)", fmt_ns(t)));
        let _ = write!(
            out,
            "  not asked: the rule predicted {} mean, the wait was {}; {} of {n} beyond prediction + tick{tick}",
            fmt_ns(d.predicted_ns / n),
            fmt_ns(d.predicted_actual_ns / n),
            d.beyond_prediction,
        );
        if let Some(share) = d.mean_share() {
            let _ = write!(out, "; the wakee's fair share {:.0}%", share * 100.0);
        }
        out.push('\n');
    } else if d.facts.fair == FAIR_CFS && d.declined() > 0 {
        out.push_str(CFS_NOTE);
        out.push('\n');
    }
    if let Some(lazy) = lazy_line(d) {
        let _ = writeln!(out, "  {lazy}");
    }
    out
}

/// What the lazy requests waited (preempt=lazy), beside how they are
/// served: at the holder's return to user space, or, while it runs in the
/// kernel, only once the tick (or the high-resolution tick at the end of
/// its slice) turns the request into a full one; the split counts those
/// `late`. Only the requests no other task ran before (pass-overs are
/// another task's turn). None without such waits.
fn lazy_line(d: &DecisionCounts) -> Option<String> {
    let n = d.cell(Decision::Lazy, Pass::Zero);
    (n > 0).then(|| {
        format!(
            "lazy: {n} wakeups asked lazily and ran {} later on average, no other task first (served at the holder's return to user space; a holder in the kernel keeps the CPU until the tick or its slice's end: counted late)",
            fmt_ns(d.cell_ns(Decision::Lazy, Pass::Zero) / n)
        )
    })
}

/// The decision block's verdict in words (verdict.rs), indented under
/// it: whether the waits are the design, and when the slow ones were late
/// or protected, what decides which and the remedy of each, and what lets
/// a fair task run behind another class (unless `class_said`: diagnose's
/// own finding says it); empty without the split, a bound, or an EEVDF
/// kernel.
pub(crate) fn verdict_text(kernel: &SchedContext, waits: &Waits, class_said: bool) -> String {
    if let Some(ext) = super::verdict::decided_by_ext(kernel, waits) {
        return format!("  verdict: {ext}\n");
    }
    let Some(bound) = kernel.design_bound_ns() else {
        return String::new();
    };
    let beyond = crate::analysis::shape::slow_waits(waits, bound);
    let Some(design) = Design::of(waits, bound, beyond) else {
        return String::new();
    };
    let mut out = format!("  verdict: {}\n", design.sentence());
    if let Some(why) = design.late_or_protected() {
        let _ = writeln!(out, "  {why}");
    }
    if let Some(why) = design.behind_another_class(kernel).filter(|_| !class_said) {
        let _ = writeln!(out, "  another class: {why}");
    }
    out
}

/// A breakdown key's block (its waits' split, from the key's own counts):
/// the whole system's first four lines; empty when the split is off or
/// split none of the key's waits.
pub(crate) fn key_text(waits: &Waits) -> String {
    waits
        .key_decision
        .as_ref()
        .map_or(String::new(), split_text)
}

/// The block's first line alone, for the views that show it beside other
/// things (`schedlat top` under the causes); None when the split is off
/// or saw no wait.
pub(crate) fn line(waits: &Waits) -> Option<String> {
    let d = waits.decision.as_ref()?.marginals();
    (d.waits() > 0).then(|| outcomes_line(&d))
}

/// `decision: granted 60%, ... of waits; of the 80 over 1 ms: ...`: each
/// wait's outcome, and the same of the slow waits.
fn outcomes_line(d: &KeyDecisionCounts) -> String {
    let total = d.waits();
    let mut out = String::new();
    let outcomes: Vec<String> = OUTCOMES
        .iter()
        .map(|&o| format!("{} {}", words(o.name()), pct(d.outcome(o), total)))
        .collect();
    let _ = write!(out, "decision: {} of waits", outcomes.join(", "));
    let slow = d.slow();
    if slow > 0 {
        let slow_outcomes: Vec<String> = OUTCOMES
            .iter()
            .filter_map(|&o| {
                let n = d.outcome_slow(o);
                (n > 0).then(|| format!("{} {}", words(o.name()), pct(n, slow)))
            })
            .collect();
        let _ = write!(
            out,
            "; of the {slow} over 1 ms: {}",
            slow_outcomes.join(", ")
        );
    }
    out
}

/// The four lines a key and the whole system share: outcomes (and of the
/// waits over 1 ms), the decision at the wakeup, pass-overs, the holder.
fn split_text(d: &KeyDecisionCounts) -> String {
    let total = d.waits();
    if total == 0 {
        return String::new();
    }
    let mut out = outcomes_line(d);
    out.push('\n');

    let named = |list: &mut Vec<String>, ds: &[Decision]| {
        for &c in ds {
            let n = d.decided(c);
            if n > 0 {
                list.push(format!("{} {n}", words(c.name())));
            }
        }
    };
    let mut asked = Vec::new();
    named(
        &mut asked,
        &[
            Decision::Requested,
            Decision::SliceEnded,
            Decision::Pending,
            Decision::Lazy,
            Decision::Idle,
            Decision::NotWakeup,
            Decision::Unknown,
        ],
    );
    let mut declined = Vec::new();
    named(&mut declined, &DECLINED);
    let _ = write!(out, "  at the wakeup: {}", list_or_none(&asked));
    let _ = writeln!(
        out,
        "; not asked {}: {}",
        d.declined(),
        list_or_none(&declined)
    );

    let passes: Vec<String> = PASSES
        .iter()
        .filter(|&&p| d.passed(p) > 0 || matches!(p, Pass::Zero))
        .map(|&p| {
            let n = d.passed(p);
            match p {
                Pass::Migrated | Pass::Unknown => format!("{} {n}", p.name()),
                _ => format!("{} in {n}", p.name()),
            }
        })
        .collect();
    let counted: u64 = [Pass::Zero, Pass::One, Pass::Two, Pass::ThreePlus]
        .iter()
        .map(|&p| d.passed(p))
        .sum();
    let per_wait = if counted > 0 {
        format!(" ({:.1} per wait)", d.passes as f64 / counted as f64)
    } else {
        String::new()
    };
    let _ = writeln!(out, "  passed over: {}{per_wait}", passes.join(", "));

    let holders: Vec<String> = HOLDERS
        .iter()
        .map(|&h| format!("{} {}", words(h.name()), pct(d.held(h), total)))
        .collect();
    let _ = writeln!(out, "  holder left: {}", holders.join(", "));
    out
}

/// DecisionFacts::fair of a CFS kernel (before 6.6).
const FAIR_CFS: u64 = 2;

/// What CFS's rule cannot give, said where EEVDF's prediction would be.
const CFS_NOTE: &str = "  not asked: no prediction nor fair share on CFS (before 6.6): the wakeup granularity rule compares vruntimes, it sets no deadline to predict the wait from";

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// The `decision` object of a JSON interval (docs/json.md); None when the
/// split is off.
pub(crate) fn json(waits: &Waits) -> Option<Value> {
    let d = waits.decision.as_ref()?;
    let mut table = Vec::new();
    for &c in &DECISIONS {
        for &p in &PASSES {
            let n = d.count[cell(c, p)];
            if n > 0 {
                table.push(json!({
                    "decision": c.name(),
                    "pass_overs": p.name(),
                    "count": n,
                    "sum_ns": d.sum_ns[cell(c, p)],
                }));
            }
        }
    }
    let mut v = split_json(&d.marginals());
    let whole = json!({
        "kernel": facts_json(&d.facts),
        "table": table,
        // CFS's rule gives neither: null, not a zero that reads as measured.
        "predicted": (d.facts.fair != FAIR_CFS).then(|| json!({
            "waits": d.predicted_waits,
            "predicted_ns": d.predicted_ns,
            "actual_ns": d.predicted_actual_ns,
            "beyond_prediction_and_tick": d.beyond_prediction,
        })),
        "share": (d.facts.fair != FAIR_CFS).then(|| json!({
            "waits": d.share_waits,
            "mean": d.mean_share(),
        })),
    });
    if let (Some(v), Value::Object(whole)) = (v.as_object_mut(), whole) {
        v.extend(whole);
    }
    Some(v)
}

/// A breakdown key's `decision` object (docs/json.md): the whole system's
/// members a key has too; None when the split is off.
pub(crate) fn key_json(waits: &Waits) -> Option<Value> {
    waits.key_decision.as_ref().map(split_json)
}

/// The members a key and the whole system share: every count and sum by
/// decision, pass-overs, holder and outcome.
fn split_json(d: &KeyDecisionCounts) -> Value {
    let counted = |count: u64, sum_ns: u64| json!({ "count": count, "sum_ns": sum_ns });
    let decisions: serde_json::Map<String, Value> = DECISIONS
        .iter()
        .map(|&c| (c.name().into(), counted(d.decided(c), d.decided_ns(c))))
        .collect();
    let pass_overs: serde_json::Map<String, Value> = PASSES
        .iter()
        .map(|&p| (p.name().into(), counted(d.passed(p), d.passed_ns(p))))
        .collect();
    let holders: serde_json::Map<String, Value> = HOLDERS
        .iter()
        .map(|&h| (h.name().into(), counted(d.held(h), d.held_ns(h))))
        .collect();
    let outcomes: serde_json::Map<String, Value> = OUTCOMES
        .iter()
        .map(|&o| {
            let (all, slow) = (d.outcome(o), d.outcome_slow(o));
            (o.name().into(), json!({ "count": all, "over_1ms": slow }))
        })
        .collect();
    json!({
        "waits": d.waits(),
        "decisions": decisions,
        "pass_overs": pass_overs,
        "passes": d.passes,
        "holders": holders,
        "outcomes": outcomes,
    })
}

/// How the split was measured on this kernel.
fn facts_json(f: &DecisionFacts) -> Value {
    json!({
        "need_resched_bit": f.need_resched_bit,
        "lazy_bit": f.lazy_bit,
        "bits_from": "table",
        "rules": match f.fair {
            1 => Some("eevdf"),
            FAIR_CFS => Some("cfs"),
            _ => None,
        },
        "protection": match (f.fair, f.vprot) {
            (1, true) => Some("vprot"),
            (1, false) => Some("vlag"),
            _ => None,
        },
        "tick_ns": f.tick_ns,
        "sched_ext": f.ext,
    })
}

#[cfg(test)]
mod tests {
    use schedlat_common::decision::HolderLeft;

    use super::*;
    use crate::histogram::{
        DecisionCounts,
        decision_fixtures::{self as fixtures, waits},
    };

    fn facts() -> DecisionFacts {
        DecisionFacts::X86_6_18
    }

    /// The worker case's shape: granted short waits, passed-over long ones.
    fn worker() -> Waits {
        let mut s = fixtures::stats(&[
            waits(
                120,
                7_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                30,
                8_000_000,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::Preempted,
            ),
            waits(
                50,
                8_000_000,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::Blocked,
            ),
        ]);
        s.passes = 80 * 4;
        s.predicted_waits = 80;
        s.predicted_ns = 80 * 1_000_000;
        s.predicted_actual_ns = 80 * 8_000_000;
        s.beyond_prediction = 75;
        s.share_waits = 80;
        s.share_permille = 80 * 250;
        Waits {
            decision: Some(DecisionCounts::from_cpus(facts(), &[s])),
            ..Waits::default()
        }
    }

    #[test]
    fn the_block_splits_the_waits_by_outcome_and_rule() {
        let out = text(&worker());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert!(
            lines[0].starts_with("decision: granted 60%, late 0%, declined 0%, passed over 40%"),
            "{out}"
        );
        assert!(
            lines[0].ends_with("of the 80 over 1 ms: passed over 100%"),
            "{out}"
        );
        assert_eq!(
            lines[1],
            "  at the wakeup: requested 120; not asked 80: protected 80"
        );
        assert_eq!(lines[2], "  passed over: 0 in 120, 3+ in 80 (1.6 per wait)");
        assert!(
            lines[3].starts_with("  holder left: blocked 25%, preempted 75%"),
            "{out}"
        );
        assert!(
            lines[4].contains("75 of 80 beyond prediction + tick (4.00 ms tick)"),
            "{out}"
        );
        assert!(lines[4].ends_with("fair share 25%"), "{out}");
    }

    /// Lazy requests: the block's last line says how many, their mean
    /// wait and how they are served; a lazy request the holder kept
    /// waiting in the kernel is `late`; none without lazy requests.
    #[test]
    fn lazy_requests_say_how_they_are_served() {
        let s = fixtures::stats(&[
            waits(
                200,
                40_000,
                Decision::Lazy,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                90,
                2_000_000,
                Decision::Lazy,
                Pass::Zero,
                HolderLeft::SliceEnded,
            ),
            waits(
                10,
                9_000_000,
                Decision::Lazy,
                Pass::Two,
                HolderLeft::Blocked,
            ),
        ]);
        let lazy = Waits {
            decision: Some(DecisionCounts::from_cpus(facts(), &[s])),
            ..Waits::default()
        };
        let out = text(&lazy);
        assert!(
            out.ends_with("  lazy: 290 wakeups asked lazily and ran 648 us later on average, no other task first (served at the holder's return to user space; a holder in the kernel keeps the CPU until the tick or its slice's end: counted late)\n"),
            "{out}"
        );
        assert!(!text(&worker()).contains("lazy:"));
    }

    #[test]
    fn off_or_empty_prints_nothing() {
        assert_eq!(text(&Waits::default()), "");
        let empty = Waits {
            decision: Some(DecisionCounts::zero(facts())),
            ..Waits::default()
        };
        assert_eq!(text(&empty), "");
        assert!(json(&Waits::default()).is_none());
    }

    #[test]
    fn the_json_object_carries_every_count() {
        let v = json(&worker()).unwrap();
        assert_eq!(v["waits"], 200);
        assert_eq!(v["decisions"]["protected"]["count"], 80);
        assert_eq!(v["decisions"]["requested"]["sum_ns"], 120 * 7_000);
        assert_eq!(v["pass_overs"]["3+"]["count"], 80);
        assert_eq!(v["table"].as_array().unwrap().len(), 2);
        assert_eq!(v["outcomes"]["passed_over"]["over_1ms"], 80);
        assert_eq!(v["holders"]["preempted"]["count"], 150);
        assert_eq!(v["kernel"]["rules"], "eevdf");
        assert_eq!(v["kernel"]["protection"], "vprot");
        assert_eq!(v["share"]["mean"], 0.25);
        assert_eq!(v["predicted"]["beyond_prediction_and_tick"], 75);
    }

    /// The seed case's slow waits: the wakeup asked, nobody else ran, the
    /// loop left with its slice renewed by the tick: `late`, apart from the
    /// prompt grants of the same cell of the table.
    #[test]
    fn a_request_the_tick_answered_is_late_not_granted() {
        let s = fixtures::stats(&[
            waits(
                90,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                10,
                3_500_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::SliceEnded,
            ),
        ]);
        let waits = Waits {
            decision: Some(DecisionCounts::from_cpus(facts(), &[s])),
            ..Waits::default()
        };
        let out = text(&waits);
        assert!(
            out.starts_with(
                "decision: granted 90%, late 10%, declined 0%, passed over 0%, idle CPU 0%, other 0% of waits; of the 10 over 1 ms: late 100%"
            ),
            "{out}"
        );
        let v = json(&waits).unwrap();
        assert_eq!(v["outcomes"]["late"]["count"], 10);
        assert_eq!(v["outcomes"]["late"]["over_1ms"], 10);
        assert_eq!(v["outcomes"]["granted"]["count"], 90);
        assert_eq!(v["outcomes"]["granted"]["over_1ms"], 0);
        // Both in the one cell of the table.
        assert_eq!(v["table"].as_array().unwrap().len(), 1);
    }

    /// Waits declined for a real-time hog: the verdict says what lets the
    /// fair task run beside it, unless diagnose's own finding says it.
    #[test]
    fn another_class_is_said_once() {
        let s = fixtures::stats(&[
            waits(
                200,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Blocked,
            ),
            waits(
                5,
                900_000_000,
                Decision::OtherClass,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
        ]);
        let mut w = crate::analysis::shape::tests::waits(&[(6_000, 200), (900_000_000, 5)]);
        w.decision = Some(DecisionCounts::from_cpus(facts(), &[s]));
        let kernel = SchedContext::this_vm();
        let said = verdict_text(&kernel, &w, false);
        assert!(
            said.contains("  another class: a real-time or deadline task"),
            "{said}"
        );
        let once = verdict_text(&kernel, &w, true);
        assert!(once.contains("  verdict: "), "{once}");
        assert!(!once.contains("another class"), "{once}");
    }

    /// A CFS kernel's split (5.10, 6.1): the wakeup granularity rule gives
    /// no prediction and no share, which are null and said so, not zeros.
    #[test]
    fn cfs_says_what_its_rule_cannot_give() {
        let s = fixtures::stats(&[
            waits(
                30,
                7_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                20,
                4_000_000,
                Decision::WakeupGranularity,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
        ]);
        let facts = DecisionFacts {
            need_resched_bit: 3,
            lazy_bit: None,
            fair: FAIR_CFS,
            vprot: false,
            tick_ns: None,
            ..facts()
        };
        let waits = Waits {
            decision: Some(DecisionCounts::from_cpus(facts, &[s])),
            ..Waits::default()
        };
        let out = text(&waits);
        assert_eq!(out.lines().last(), Some(CFS_NOTE), "{out}");
        let v = json(&waits).unwrap();
        assert_eq!(v["kernel"]["rules"], "cfs");
        assert!(v["kernel"]["protection"].is_null());
        assert!(v["predicted"].is_null() && v["share"].is_null(), "{v}");
        assert_eq!(v["decisions"]["wakeup_granularity"]["count"], 20);
    }
}
