//! `schedlat compare BEFORE AFTER`: the diagnosis' last step (fix, then
//! measure again; docs/architecture.md). Two
//! recordings (from `schedlat record` or `schedlat --json`, every interval in
//! a file merged) side by side, what changed in the percentiles and the
//! verdict, and whether the change is beyond noise (analysis::compare).

use std::{fmt::Write as _, fs, path::Path};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{
    analysis::{
        compare::{self, Change, rank_test, tail_test},
        fmt_ns,
        percentiles::Percentiles,
        shape::{self, Shape},
        slice::Slice,
    },
    collect::histogram::Waits,
    commands::stdout,
    output::json::Interval,
};

/// One side of the comparison.
struct Recording {
    waits: Waits,
    unit: String,
    slice: Option<Slice>,
}

fn load(path: &Path) -> Result<Recording> {
    // A recorder dump is a directory; its JSON Lines are read.
    let dump = path.join("dump.jsonl");
    let path = if path.is_dir() { dump.as_path() } else { path };
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut waits = Waits::default();
    let mut unit = None;
    let mut slice = None;
    for (n, line) in text.lines().enumerate().filter(|(_, l)| l.starts_with('{')) {
        let bad = || format!("{}:{}: not a schedlat JSON object", path.display(), n + 1);
        let mut value: serde_json::Value = serde_json::from_str(line).with_context(bad)?;
        // A dump's lines are typed (docs/recorder.md): its total series'
        // intervals count, the rest (per-cgroup series, slow waits) not.
        if let Some(kind) = value.get("type").and_then(|t| t.as_str()) {
            if kind != "interval" || value["series"] != "total" {
                continue;
            }
            value = value["histogram"].take();
        }
        let interval: Interval = serde_json::from_value(value).with_context(bad)?;
        if unit.get_or_insert_with(|| interval.unit.clone()) != &interval.unit {
            bail!("{}: mixes usecs and msecs intervals", path.display());
        }
        // The slice the recording was judged against, so both sides use it.
        if let Some(ev) = interval.shape.as_ref().map(|s| &s.evidence)
            && let (Some(ns), Some(src)) = (ev["slice_ns"].as_u64(), ev["slice_source"].as_str())
        {
            slice.get_or_insert_with(|| Slice::fixed(ns, src));
        }
        waits.merge(&interval.waits());
    }
    let Some(unit) = unit else {
        bail!(
            "{}: no schedlat JSON objects in it (make one with `schedlat record -o {} 10`)",
            path.display(),
            path.display()
        );
    };
    Ok(Recording { waits, unit, slice })
}

pub fn run(before: &Path, after: &Path, json: bool) -> Result<()> {
    let before = load(before)?;
    let after = load(after)?;
    let slice = before
        .slice
        .clone()
        .or(after.slice.clone())
        .unwrap_or_else(Slice::detect);
    let shapes = (
        shape::classify(&before.waits, &slice),
        shape::classify(&after.waits, &slice),
    );
    let test = rank_test(&before.waits, &after.waits);
    let tail = tail_test(&before.waits, &after.waits, slice.ns / 2);
    let change = compare::overall(tail, test);
    let text = if json {
        let side = |w: &Waits, s: &Shape| {
            json!({"count": w.count(), "mean_ns": w.mean_ns(), "percentiles": Percentiles::of(w),
                   "shape": {"verdict": s.verdict.as_str(), "summary": s.summary}})
        };
        let object = json!({
            "schema": "schedlat.compare.v1",
            "before": side(&before.waits, &shapes.0),
            "after": side(&after.waits, &shapes.1),
            "tail_test": tail, "rank_test": test, "alpha": compare::ALPHA, "change": change,
        });
        format!("{object}\n")
    } else {
        let mut out = String::new();
        if before.unit == after.unit {
            out.push_str(&side_by_side(
                &before.waits.log2_slots(),
                &after.waits.log2_slots(),
                &before.unit,
            ));
            out.push('\n');
        }
        out.push_str(&changes(&before.waits, &after.waits, &shapes));
        if let Some(t) = tail {
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
        match test {
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
            match change {
                Change::Improved =>
                    "improved (beyond noise, p < 0.001; the tail decides when it changed)",
                Change::Regressed =>
                    "regressed (beyond noise, p < 0.001; the tail decides when it changed)",
                Change::Unchanged =>
                    "no significant change (p >= 0.001 for the tail and for all waits)",
            }
        );
        out
    };
    // A closed stdout (`| head`) is no error; a failed write is.
    stdout::write(&text)?;
    Ok(())
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
        let stars = (n * WIDTH / max) as usize;
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
        let mut low = (1u64 << (i + 1)) >> 1;
        let high = (1u64 << (i + 1)) - 1;
        if low == high {
            low -= 1;
        }
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
