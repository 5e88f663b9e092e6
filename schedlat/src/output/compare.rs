//! `schedlat compare`'s report: the two recordings' runqlat tables side
//! by side, the percentiles and verdicts before and after, and the tests'
//! outcome (analysis/compare.rs), as text or one JSON object.

use std::fmt::Write as _;

use serde_json::json;

use crate::{
    analysis::{
        compare,
        compare::{Change, Comparison},
        fmt_ns,
        percentiles::Percentiles,
        shape::Shape,
    },
    histogram::{Waits, log2_slot_bounds},
    output::recording::read::Recording,
};

/// The report as one JSON object (`schedlat.compare.v1`); `mismatch`: how
/// the recordings' scopes differ.
pub(crate) fn json(
    before: &Recording,
    after: &Recording,
    c: &Comparison,
    mismatch: &[String],
) -> String {
    let side = |w: &Waits, s: &Shape| {
        json!({"count": w.count(), "mean_ns": w.mean_ns(), "percentiles": Percentiles::of(w),
               "shape": {"verdict": s.verdict.as_str(), "summary": s.summary}})
    };
    let object = json!({
        "schema": "schedlat.compare.v1",
        "before": side(&before.waits, &c.shapes.0),
        "after": side(&after.waits, &c.shapes.1),
        "tail_test": c.tail, "rank_test": c.rank, "alpha": compare::ALPHA, "change": c.change,
        "scope_differences": mismatch,
    });
    format!("{object}\n")
}

/// The report for people: the differences of scope first, then the tables,
/// the percentiles and the tests.
pub(crate) fn text(
    before: &Recording,
    after: &Recording,
    c: &Comparison,
    mismatch: &[String],
) -> String {
    let mut out = String::new();
    // The scopes come from the files: a cgroup path or a --comm in them
    // reaches the terminal only escaped.
    for line in mismatch {
        let _ = writeln!(
            out,
            "warning: the recordings differ: {}",
            super::escape::printable(line)
        );
    }
    if !mismatch.is_empty() {
        out.push_str("  (the change below may come from measuring something else)\n\n");
    }
    out.push_str(&tables(before, after));
    out.push('\n');
    out.push_str(&changes(&before.waits, &after.waits, &c.shapes));
    if let Some(t) = c.tail {
        let _ = writeln!(
            out,
            "tail: waits of at least half a slice ({}): {:.2}% before, {:.2}% after (z = {:.1}, p = {:.2e})",
            fmt_ns(t.threshold_ns),
            t.share_before * 100.0,
            t.share_after * 100.0,
            t.z,
            t.p_value
        );
    }
    match c.rank {
        Some(t) => {
            let _ = writeln!(
                out,
                "all waits: Mann-Whitney U: a wait after is shorter than one before with probability {:.3} (z = {:.1}, p = {:.2e})",
                t.p_shorter_after, t.z, t.p_value
            );
        }
        None => out.push_str("tests: not possible, one side has no waits\n"),
    }
    let _ = writeln!(
        out,
        "change: {}",
        match c.change {
            Change::Improved =>
                "improved (beyond noise, p < 0.001; the tail decides when it changed)",
            Change::Regressed =>
                "regressed (beyond noise, p < 0.001; the tail decides when it changed)",
            Change::Unchanged =>
                "no significant change (p >= 0.001 for the tail and for all waits)",
        }
    );
    out
}

/// The fuzz target (src/fuzz/): everything compare does with a file it
/// accepts, without printing.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_one(input: &[u8]) {
    use std::path::Path;

    use crate::sys::slice::Slice;
    let Ok(r) = Recording::parse(Path::new("fuzz"), input) else {
        return;
    };
    let slice = r
        .slice
        .clone()
        .unwrap_or_else(|| Slice::fixed(3_000_000, "fuzz"));
    let c = Comparison::of(&r.waits, &r.waits, &slice);
    let mismatch = r.differences(&r);
    let _ = json(&r, &r, &c, &mismatch);
    let mut other = Recording::parse(Path::new("fuzz"), input).expect("parsed once");
    other.unit = if r.unit == "msecs" { "usecs" } else { "msecs" }.into();
    let _ = text(&r, &other, &c, &mismatch);
}

/// The side-by-side log2 tables. Recordings in different units are shown in
/// milliseconds, the microsecond side's slots rebuilt from its fine (ns)
/// buckets, each placed by its midpoint.
fn tables(before: &Recording, after: &Recording) -> String {
    if before.unit == after.unit {
        return side_by_side(
            &before.waits.log2_slots(),
            &after.waits.log2_slots(),
            &before.unit,
        );
    }
    const MSECS: u64 = 1_000_000;
    let slots = |r: &Recording| {
        if r.unit == "msecs" {
            r.waits.log2_slots()
        } else {
            r.waits.log2_slots_in(MSECS)
        }
    };
    let which = if before.unit == "msecs" {
        "after"
    } else {
        "before"
    };
    format!(
        "(the {which} recording is in usecs: its table is rebuilt in msecs from its fine buckets)\n{}",
        side_by_side(&slots(before), &slots(after), "msecs")
    )
}

/// Two runqlat tables next to each other, bars 20 wide.
fn side_by_side(before: &[u64], after: &[u64], unit: &str) -> String {
    const WIDTH: u64 = 20;
    let slots = before.len().max(after.len());
    let max = before
        .iter()
        .chain(after)
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = |n: u64| {
        // u128: a count near u64::MAX (a corrupt file) must not overflow.
        let stars = (u128::from(n) * u128::from(WIDTH) / u128::from(max)) as usize;
        format!(
            "|{}{}|",
            "*".repeat(stars),
            " ".repeat(WIDTH as usize - stars)
        )
    };
    let mut out = format!(
        "{:5}{unit:<19} : {:<8} {:<22} : {:<8} distribution\n",
        "", "before", "distribution", "after"
    );
    for i in 0..slots {
        let (low, high) = log2_slot_bounds(i);
        let (b, a) = (
            before.get(i).copied().unwrap_or(0),
            after.get(i).copied().unwrap_or(0),
        );
        let _ = writeln!(
            out,
            "{low:>10} -> {high:<10} : {b:<8} {} : {a:<8} {}",
            bar(b),
            bar(a)
        );
    }
    out
}

/// The percentile table and the verdicts.
fn changes(before: &Waits, after: &Waits, shapes: &(Shape, Shape)) -> String {
    let mut out = format!(
        "{:<8} {:>12} {:>12} {:>9}\n",
        "", "before", "after", "change"
    );
    let _ = writeln!(
        out,
        "{:<8} {:>12} {:>12}",
        "count",
        before.count(),
        after.count()
    );
    let (pb, pa) = (Percentiles::of(before), Percentiles::of(after));
    type Getter = fn(&Percentiles) -> Option<u64>;
    let rows: [(&str, Getter); 5] = [
        ("p50", |p| Some(p.p50_ns)),
        ("p90", |p| Some(p.p90_ns)),
        ("p99", |p| Some(p.p99_ns)),
        ("p99.9", |p| Some(p.p999_ns)),
        ("max", |p| p.max_ns),
    ];
    for (name, get) in rows {
        let b = pb.as_ref().and_then(get);
        let a = pa.as_ref().and_then(get);
        let show = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
        let delta = match (b, a) {
            (Some(b), Some(a)) if b > 0 => format!("{:+.0}%", (a as f64 / b as f64 - 1.0) * 100.0),
            _ => "-".to_string(),
        };
        let _ = writeln!(out, "{name:<8} {:>12} {:>12} {delta:>9}", show(b), show(a));
    }
    let _ = writeln!(
        out,
        "verdict  {} -> {}",
        shapes.0.verdict.as_str(),
        shapes.1.verdict.as_str()
    );
    let _ = writeln!(out, "  before: {}", shapes.0.summary);
    let _ = writeln!(out, "  after:  {}", shapes.1.summary);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{histogram::Unit, output::recording::read::tests::recording};

    #[test]
    fn mixed_units_keep_the_side_by_side_table() {
        // 3 ms waits recorded in usecs and in msecs land in the same ms slot.
        let b = Recording::load(&recording("us", Unit::Usecs, 3000, 5, None)).unwrap();
        let a = Recording::load(&recording("ms", Unit::Msecs, 3000, 7, None)).unwrap();
        let table = tables(&b, &a);
        assert!(table.contains("rebuilt in msecs"), "{table}");
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with("2 -> 3"))
            .unwrap_or_else(|| panic!("no 2 -> 3 ms row: {table}"));
        assert!(row.contains(": 5 ") && row.contains(": 7 "), "{row}");
    }
}
