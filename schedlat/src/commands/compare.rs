//! `schedlat compare BEFORE AFTER`: the diagnosis' last step (fix, then
//! measure again; docs/architecture.md). Two recordings (from `schedlat
//! record`, `schedlat --json` or a `record --ring` dump; every interval in a
//! file merged) side by side, what changed in the percentiles and the
//! verdict, and whether the change is beyond noise (analysis::compare).

use std::{fmt::Write as _, path::Path};

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
    commands::stdout,
    histogram::Waits,
    output::{
        json::{self, Interval},
        recording::Scope,
    },
};

/// One side of the comparison.
struct Recording {
    waits: Waits,
    unit: String,
    slice: Option<Slice>,
    /// What it measured (None in files from before scopes were written).
    scope: Option<Scope>,
    hook: String,
}

fn load(path: &Path) -> Result<Recording> {
    // A recorder dump is a directory; its JSON Lines are read.
    let dump = path.join("dump.jsonl");
    let path = if path.is_dir() { dump.as_path() } else { path };
    let text = crate::sys::files::read_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    parse(path, &text)
}

/// A recording's text (JSON Lines); `path` names it in errors.
fn parse(path: &Path, text: &str) -> Result<Recording> {
    let mut waits = Waits::default();
    let mut unit = None;
    let mut slice = None;
    let mut scope = None;
    let mut hook = String::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| l.starts_with('{')) {
        let at = || format!("{}:{}", path.display(), n + 1);
        let mut value: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
        // A dump's lines are typed (docs/recorder.md): its total series'
        // intervals count, the rest (header, per-cgroup series, slow waits,
        // end) not.
        if let Some(kind) = value.get("type").and_then(|t| t.as_str()) {
            if kind != "interval" || value["series"] != "total" {
                continue;
            }
            value = value["histogram"].take();
        }
        // Another schema (compare's own output, another tool's JSON) is
        // named as such rather than as a missing field.
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(schema) if json::READS.contains(&schema) => {}
            Some(other) => bail!(
                "{}: not a recording (schema {other}): compare reads `schedlat record` files, `schedlat --json` output ({}) and `record --ring` dumps",
                at(),
                json::SCHEMA
            ),
            None => bail!(
                "{}: not a recording (no schema field): compare reads `schedlat record` files, `schedlat --json` output ({}) and `record --ring` dumps",
                at(),
                json::SCHEMA
            ),
        }
        let interval: Interval = serde_json::from_value(value)
            .with_context(|| format!("{}: a damaged {} object", at(), json::SCHEMA))?;
        if unit.get_or_insert_with(|| interval.unit.clone()) != &interval.unit {
            bail!("{}: mixes usecs and msecs intervals", path.display());
        }
        if scope.is_none() {
            scope = interval.scope.clone();
            hook = interval.hook.clone();
        }
        // The slice the recording was judged against, so both sides use it.
        if let Some(ev) = interval.shape.as_ref().map(|s| &s.evidence)
            && let (Some(ns), Some(src)) = (ev["slice_ns"].as_u64(), ev["slice_source"].as_str())
        {
            slice.get_or_insert_with(|| Slice::fixed(ns, src));
        }
        // Counts near 2^64 come only from a damaged or forged file; refused
        // here so every later sum over the buckets is exact.
        interval
            .waits()
            .and_then(|w| waits.try_merge(&w))
            .with_context(|| {
                format!(
                    "{}: wait counts add up to more than 2^64: a damaged recording",
                    at()
                )
            })?;
    }
    let Some(unit) = unit else {
        bail!(
            "{}: no schedlat JSON objects in it (make one with `schedlat record -o {} 10`)",
            path.display(),
            path.display()
        );
    };
    Ok(Recording {
        waits,
        unit,
        slice,
        scope,
        hook,
    })
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
    let mismatch = scope_mismatch(&before, &after);
    // The text report says it at its top; JSON readers get it on stderr too.
    if json {
        for line in &mismatch {
            say!("schedlat: warning: the recordings differ: {line}");
        }
    }
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
            "scope_differences": mismatch,
        });
        format!("{object}\n")
    } else {
        let mut out = String::new();
        for line in &mismatch {
            let _ = writeln!(out, "warning: the recordings differ: {line}");
        }
        if !mismatch.is_empty() {
            out.push_str("  (the change below may come from measuring something else)\n\n");
        }
        out.push_str(&tables(&before, &after));
        out.push('\n');
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

/// The fuzz target (src/fuzz.rs): everything compare does with a file it
/// accepts, without printing.
#[cfg(test)]
pub(crate) fn fuzz_one(text: &str) {
    let Ok(r) = parse(Path::new("fuzz"), text) else {
        return;
    };
    let slice = r
        .slice
        .clone()
        .unwrap_or_else(|| Slice::fixed(3_000_000, "fuzz"));
    let shapes = (
        shape::classify(&r.waits, &slice),
        shape::classify(&r.waits, &slice),
    );
    let _ = rank_test(&r.waits, &r.waits);
    let _ = tail_test(&r.waits, &r.waits, slice.ns / 2);
    let _ = changes(&r.waits, &r.waits, &shapes);
    let _ = scope_mismatch(&r, &r);
    let mut other = parse(Path::new("fuzz"), text).expect("parsed once");
    other.unit = if r.unit == "msecs" { "usecs" } else { "msecs" }.into();
    let _ = tables(&r, &other);
}

/// What differs between the two recordings' scopes (hook included), one
/// line each; a side without a scope (an older file) is said once.
fn scope_mismatch(before: &Recording, after: &Recording) -> Vec<String> {
    let mut out = Vec::new();
    if before.hook != after.hook {
        out.push(format!(
            "hook mode: {} before, {} after",
            before.hook, after.hook
        ));
    }
    match (&before.scope, &after.scope) {
        (Some(b), Some(a)) => out.extend(b.differences(a)),
        (None, None) => {}
        (b, _) => out.push(format!(
            "only the {} recording says what it measured (the other is a recorder dump or was made by an older schedlat): check that both measured the same thing",
            if b.is_some() { "before" } else { "after" }
        )),
    }
    out
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

#[cfg(test)]
mod tests {
    use std::{fs, time::Duration};

    use schedlat_common::{CpuStats, bucket_index, log2_slot};

    use super::*;
    use crate::{
        histogram::Unit,
        kernel::hook::HookMode,
        output::{Report, recording::Scope},
    };

    /// A one-object recording of `n` waits of `us` microseconds each.
    fn recording(
        name: &str,
        unit: Unit,
        us: u64,
        n: u64,
        scope: Option<Scope>,
    ) -> std::path::PathBuf {
        let mut cpu = CpuStats::ZERO;
        cpu.buckets[bucket_index(us * 1000)] = n;
        cpu.log2[log2_slot(us * 1000 / unit.ns())] = n;
        cpu.sum_ns = (us * 1000).saturating_mul(n);
        let waits = Waits::from_cpus(&[cpu]);
        let slice = Slice::fixed(3_000_000, "test");
        let mut report = Report::new(
            HookMode::Btf,
            unit,
            &waits,
            &slice,
            Duration::from_secs(1),
            true,
        );
        report.scope = scope;
        let path = std::env::temp_dir().join(format!("schedlat-cmp-{}-{name}", std::process::id()));
        fs::write(&path, json::render(&report)).unwrap();
        path
    }

    #[test]
    fn another_schema_is_named_not_a_missing_field() {
        let path = std::env::temp_dir().join(format!("schedlat-cmp-{}-schema", std::process::id()));
        fs::write(
            &path,
            "{\"schema\":\"schedlat.compare.v1\",\"before\":{}}\n",
        )
        .unwrap();
        let e = format!("{:#}", load(&path).err().unwrap());
        fs::remove_file(&path).unwrap();
        assert!(
            e.contains("not a recording (schema schedlat.compare.v1)"),
            "{e}"
        );
        assert!(!e.contains("missing field"), "{e}");
    }

    /// Regression (fuzz_compare_input): a recording whose counts add up
    /// past 2^64 overflowed in Waits::count; it is refused on reading.
    #[test]
    fn counts_past_u64_are_refused() {
        let one = fs::read_to_string(recording("big", Unit::Usecs, 3000, u64::MAX / 2 + 1, None))
            .unwrap();
        // Two intervals of 2^63 waits each: 2^64 in all.
        let e = format!(
            "{:#}",
            parse(Path::new("big"), &one.repeat(2)).err().unwrap()
        );
        assert!(
            e.contains("big:2: wait counts add up to more than 2^64"),
            "{e}"
        );
        parse(Path::new("big"), &one).unwrap();
    }

    /// A recorder dump (its directory) is read as a recording: the total
    /// series' intervals merged, the per-cgroup series and slow waits not.
    #[test]
    fn a_recorder_dump_is_read_beside_a_recording_with_scope() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump");
        let text = fs::read_to_string(dir.join("dump.jsonl")).unwrap();
        let total: u64 = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["type"] == "interval" && v["series"] == "total")
            .map(|v| {
                v["histogram"]["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["count"].as_u64().unwrap())
                    .sum::<u64>()
            })
            .sum();
        let dump = load(&dir).unwrap();
        assert!(total > 0);
        assert_eq!(dump.waits.count(), total);
        let scoped = Scope {
            kernel: "k".into(),
            host: "h".into(),
            ..Scope::default()
        };
        let file = load(&recording("vs-dump", Unit::Usecs, 100, 5, Some(scoped))).unwrap();
        let lines = scope_mismatch(&file, &dump);
        assert!(
            lines.iter().any(|l| l.contains("recorder dump")),
            "{lines:?}"
        );
    }

    #[test]
    fn mixed_units_keep_the_side_by_side_table() {
        // 3 ms waits recorded in usecs and in msecs land in the same ms slot.
        let b = load(&recording("us", Unit::Usecs, 3000, 5, None)).unwrap();
        let a = load(&recording("ms", Unit::Msecs, 3000, 7, None)).unwrap();
        let table = tables(&b, &a);
        assert!(table.contains("rebuilt in msecs"), "{table}");
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with("2 -> 3"))
            .unwrap_or_else(|| panic!("no 2 -> 3 ms row: {table}"));
        assert!(row.contains(": 5 ") && row.contains(": 7 "), "{row}");
    }

    #[test]
    fn a_scope_mismatch_is_reported() {
        let whole = Scope {
            kernel: "k".into(),
            host: "h".into(),
            ..Scope::default()
        };
        let one = Scope {
            pid: Some(7),
            ..whole.clone()
        };
        let b = load(&recording(
            "whole",
            Unit::Usecs,
            100,
            5,
            Some(whole.clone()),
        ))
        .unwrap();
        let a = load(&recording("one", Unit::Usecs, 100, 5, Some(one))).unwrap();
        assert_eq!(
            scope_mismatch(&b, &a),
            ["filters: the whole system before, -p 7 after"]
        );
        let same = load(&recording("same", Unit::Usecs, 100, 5, Some(whole))).unwrap();
        assert!(scope_mismatch(&b, &same).is_empty());
        let old = load(&recording("old", Unit::Usecs, 100, 5, None)).unwrap();
        assert!(scope_mismatch(&b, &old)[0].contains("only the before recording"));
    }
}
