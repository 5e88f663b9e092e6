//! A breakdown's renderings (analysis/breakdown.rs): runqlat's per-key
//! tables with schedlat's summary lines, and the `breakdown` member of a
//! JSON interval (docs/json.md).

use std::fmt::Write as _;

use schedlat_common::scope::Breakdown;
use serde_json::json;

use super::{
    causes, decision, escape,
    json::shape_out,
    text as table,
    workload::{self, workload_json},
};
use crate::{
    analysis::breakdown::{KeySort, KeyedReport},
    histogram::Unit,
};

/// runqlat's per-key layout: a label line, then the table; schedlat adds
/// each key's count and mean, percentiles and verdict; then a footer.
pub(crate) fn text(report: &KeyedReport, unit: Unit) -> String {
    let mut out = String::new();
    for row in &report.rows {
        // A task's or cgroup's name: its control bytes escaped, as ps does.
        let _ = writeln!(out, "\n{}", escape::printable(&row.label));
        out.push_str(&table::log2_table(&row.waits.log2_slots(), unit.label()));
        let mean = table::mean_in_unit(&row.waits, unit);
        let _ = writeln!(out, "total {} waits, mean {mean}", row.waits.count());
        // No per-key extremes are kept: the line stops at p99.9.
        if let Some(p) = &row.percentiles {
            let _ = writeln!(out, "{}", table::quantiles(p));
        }
        let _ = writeln!(out, "shape: {}", row.shape.summary);
        if let Some(split) = causes::of(&row.waits) {
            out.push_str(&causes::text(&split));
        }
        out.push_str(&decision::key_text(&row.waits));
    }
    let _ = writeln!(
        out,
        "\n{} {} with waits, {} shown (by {}); {} waits unkeyed (key map full, --max-keys {})",
        report.keys_with_waits,
        key_noun(report.by),
        report.rows.len(),
        sort_name(report.sort),
        report.unkeyed,
        report.max_keys
    );
    out
}

/// The `breakdown` member of a JSON interval (docs/json.md).
pub(crate) fn json(report: &KeyedReport) -> serde_json::Value {
    let keys: Vec<serde_json::Value> = report
        .rows
        .iter()
        .map(|r| {
            json!({
                "key": r.key,
                "label": r.label,
                "cgroup": r.rolled_up.is_none().then(|| r.workload.as_ref().map(|w| &w.path)).flatten(),
                "cgroups": r.rolled_up.as_ref().map(|(_, paths)| paths),
                "workload": match (&r.rolled_up, &r.workload) {
                    (Some((level, _)), Some(w)) => Some(workload::rolled_up_json(*level, w)),
                    (None, Some(w)) => Some(workload_json(w)),
                    (_, None) => None,
                },
                "count": r.waits.count(),
                "sum_ns": r.waits.sum_ns,
                "mean_ns": r.waits.mean_ns(),
                "percentiles": r.percentiles,
                "shape": shape_out(&r.shape),
                "log2": r.waits.log2_slots(),
                "causes": causes::of(&r.waits).map(|c| causes::json(&c)),
                "decision": decision::key_json(&r.waits),
            })
        })
        .collect();
    let rolled_up =
        (report.rows.iter()).find_map(|r| r.rolled_up.as_ref().map(|(l, _)| l.as_str()));
    json!({
        "by": key_noun(report.by),
        "rolled_up_by": rolled_up,
        "sort": report.sort,
        "keys_with_waits": report.keys_with_waits,
        "unkeyed": report.unkeyed,
        "max_keys": report.max_keys,
        "keys": keys,
    })
}

/// What the keys of a breakdown are, as the footer and the JSON say it.
pub(crate) fn key_noun(by: Breakdown) -> &'static str {
    match by {
        Breakdown::Process => "pids",
        Breakdown::Thread => "tids",
        Breakdown::PidNamespace => "pidnss",
        Breakdown::Cgroup => "cgroups",
        Breakdown::Cpu => "cpus",
        Breakdown::None => "keys",
    }
}

fn sort_name(sort: KeySort) -> &'static str {
    match sort {
        KeySort::Total => "total wait",
        KeySort::P99 => "p99",
        KeySort::P50 => "p50",
        KeySort::Mean => "mean wait",
        KeySort::Count => "count",
        KeySort::Key => "key",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::breakdown::{KeyRow, tests::row};

    /// A breakdown by `by` of one key's row, the only key with waits.
    fn one_key(by: Breakdown, row: KeyRow) -> KeyedReport {
        KeyedReport {
            by,
            sort: KeySort::Total,
            rows: vec![row],
            keys_with_waits: 1,
            unkeyed: 0,
            max_keys: 4096,
        }
    }

    #[test]
    fn text_has_runqlat_labels_tables_and_a_footer() {
        let report = KeyedReport {
            by: Breakdown::Process,
            sort: KeySort::Total,
            rows: vec![row(42, &[3, 5, 9])],
            keys_with_waits: 7,
            unkeyed: 2,
            max_keys: 4096,
        };
        let out = text(&report, Unit::Usecs);
        assert!(
            out.starts_with("\npid = 42 x\n     usecs               : count    distribution\n"),
            "{out}"
        );
        assert!(out.contains("total 3 waits, mean 5.7 usecs"), "{out}");
        assert!(
            out.contains("7 pids with waits, 1 shown (by total wait); 2 waits unkeyed"),
            "{out}"
        );
        let json = json(&report);
        assert_eq!(json["keys"][0]["count"], 3);
        assert_eq!(json["by"], "pids");
        // Not measured: no causes or decision line, null objects.
        assert!(!out.contains("causes:"), "{out}");
        assert_eq!(json["keys"][0]["causes"], serde_json::Value::Null);
        assert!(!out.contains("decision:"), "{out}");
        assert_eq!(json["keys"][0]["decision"], serde_json::Value::Null);
    }

    /// Issue 29 item 7: a task named with ESC or a newline reached -P and
    /// -L text raw (clearing the screen, hiding its row, forging lines).
    /// Control bytes print as `?`, as ps does; --json keeps the name.
    #[test]
    fn a_hostile_name_cannot_act_on_the_terminal() {
        let mut hostile = row(42, &[3]);
        hostile.label = "pid = 42, comm = \u{1b}[2J\u{1b}[8mx\nFAKE 1 waits".to_string();
        let report = one_key(Breakdown::Process, hostile);
        let out = text(&report, Unit::Usecs);
        assert!(!out.contains('\u{1b}'), "{out:?}");
        assert!(!out.contains("\nFAKE"), "{out:?}");
        assert!(out.contains("comm = ?[2J?[8mx?FAKE 1 waits"), "{out:?}");
        let json = json(&report);
        assert!(
            json["keys"][0]["label"]
                .as_str()
                .unwrap()
                .contains('\u{1b}')
        );
    }

    #[test]
    fn each_key_gets_its_causes_line_and_object() {
        use schedlat_common::causes::{Cause, KeyCauses};

        use crate::histogram::{CauseCounts, CauseFacts};
        let mut r = row(42, &[3, 5, 9]);
        let mut key = KeyCauses::ZERO;
        key.count[Cause::Preempted as usize] = 3;
        key.sum_ns[Cause::Preempted as usize] = 17_000;
        key.count[Cause::Depth2 as usize] = 3;
        key.count[Cause::HeldBySameCgroup as usize] = 3;
        key.sum_ns[Cause::HeldBySameCgroup as usize] = 17_000;
        r.waits.causes = Some(CauseCounts::from_key(CauseFacts::default(), &key));
        let report = one_key(Breakdown::Process, r);
        let out = text(&report, Unit::Usecs);
        let after_shape = out.split_once("\nshape: ").unwrap().1;
        let causes = after_shape.lines().nth(1).unwrap();
        assert_eq!(
            causes,
            "causes: woken 0% of waits, 0% of time; preempted 100%, 100%"
        );
        assert!(out.contains("queue depth 2: 100%; held by same cgroup 100% of wait time"));
        let json = json(&report);
        let c = &json["keys"][0]["causes"];
        assert_eq!(c["preempted"]["count"], 3);
        assert_eq!(c["preempted"]["p99_ns"], serde_json::Value::Null);
        assert_eq!(c["queue_depth"]["2"], 3);
    }

    #[test]
    fn each_key_gets_its_decision_block_and_object() {
        use schedlat_common::decision::{Decision, HolderLeft, Pass};

        use crate::histogram::{
            KeyDecisionCounts,
            decision_fixtures::{self as fixtures, waits},
        };
        // A passed-over worker: 2 of its 3 waits declined (protected)
        // and passed over 3+ times, both over 1 ms.
        let mut r = row(42, &[3, 5000, 9000]);
        let protected = |ns| {
            waits(
                1,
                ns,
                Decision::Protected,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            )
        };
        let mut k = fixtures::key(&[
            waits(
                1,
                3_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            protected(5_000_000),
            protected(9_000_000),
        ]);
        k.passes = 8;
        r.waits.key_decision = Some(KeyDecisionCounts::from_key(&k));
        let report = one_key(Breakdown::Thread, r);
        let out = text(&report, Unit::Usecs);
        let block: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("decision: "))
            .take(4)
            .collect();
        assert_eq!(
            block,
            [
                "decision: granted 33%, late 0%, declined 0%, passed over 67%, idle CPU 0%, other 0% of waits; of the 2 over 1 ms: passed over 100%",
                "  at the wakeup: requested 1; not asked 2: protected 2",
                "  passed over: 0 in 1, 3+ in 2 (2.7 per wait)",
                "  holder left: blocked 0%, preempted 33%, slice ended 67%, exited 0%, yielded 0%, idle 0%",
            ],
            "{out}"
        );
        let json = json(&report);
        let d = &json["keys"][0]["decision"];
        assert_eq!(d["waits"], 3);
        assert_eq!(d["decisions"]["protected"]["sum_ns"], 14_000_000);
        assert_eq!(d["pass_overs"]["3+"]["count"], 2);
        assert_eq!(d["outcomes"]["passed_over"]["over_1ms"], 2);
        assert_eq!(d["holders"]["slice_ended"]["count"], 2);
        assert_eq!(d["outcomes"]["late"]["count"], 0);
        assert_eq!(d["passes"], 8);
    }
}
