//! `schedlat replay DUMP`: a recorder dump read back, without root and on
//! any machine: per interval its count, percentiles and verdict, then the
//! sub-window asked for (`--from`/`--to`, default all of it) merged: runqlat's
//! table, percentiles, verdict, and its longest slow waits with culprits.

use std::{fmt::Write as _, path::Path};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{
    analysis::{
        fmt_ns,
        percentiles::Percentiles,
        recording::Window,
        shape::{self, Shape},
        slice::Slice,
        task,
    },
    histogram::Waits,
    output::{dump, text},
    sys::clock::local_time_us,
};

/// What to show of the dump.
pub struct ReplayOptions {
    /// Seconds from the dump's first interval, or a local time HH:MM:SS.
    pub from: Option<String>,
    pub to: Option<String>,
    pub series: String,
    /// Longest slow waits listed.
    pub slow: usize,
    pub json: bool,
}

/// Reads a dump: its directory or its dump.jsonl.
pub fn load(path: &Path) -> Result<Window> {
    let file = if path.is_dir() {
        path.join("dump.jsonl")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    dump::parse(&text, &file.display().to_string())
}

pub fn run(path: &Path, opts: &ReplayOptions) -> Result<()> {
    let w = load(path)?;
    let (Some(first), Some(last)) = (w.seconds.first(), w.seconds.last()) else {
        bail!("{}: the dump holds no intervals", path.display());
    };
    let from = bound(
        opts.from.as_deref(),
        first.start_unix_ns,
        first.start_unix_ns,
    )?;
    let to = bound(opts.to.as_deref(), first.start_unix_ns, last.end_unix_ns)?;
    if !w.series_names().contains(&opts.series) {
        bail!(
            "no series `{}` in the dump; it has: {}",
            opts.series,
            w.series_names().join(", ")
        );
    }
    let slice = Slice::fixed(w.meta.slice_ns, &w.meta.slice_source);
    let inside: Vec<_> = w
        .seconds
        .iter()
        .filter(|s| s.start_unix_ns >= from && s.end_unix_ns <= to)
        .collect();
    if inside.is_empty() {
        bail!("no whole interval between --from and --to");
    }
    let Some(merged) = w.merged(&opts.series, from, to) else {
        bail!("the window's wait counts add up to more than 2^64: a damaged dump");
    };
    let window_shape = shape::classify(&merged, &slice);
    let mut slow: Vec<_> = w
        .slow
        .iter()
        .filter(|e| (from..=to).contains(&w.unix_ns(e.at_ns)))
        .collect();
    slow.sort_by_key(|e| std::cmp::Reverse(e.wait_ns));

    let mut out = String::new();
    if opts.json {
        for s in &inside {
            let waits = s.get(&opts.series).map(|c| c.waits()).unwrap_or_default();
            let shape = shape::classify(&waits, &slice);
            let line = json!({
                "type": "interval", "schema": "schedlat.replay.v1", "series": opts.series,
                "start_unix_ns": s.start_unix_ns, "end_unix_ns": s.end_unix_ns,
                "count": waits.count(), "percentiles": Percentiles::of(&waits),
                "verdict": shape.verdict.as_str(),
            });
            let _ = writeln!(out, "{line}");
        }
        let line = json!({
            "type": "window", "schema": "schedlat.replay.v1", "series": opts.series,
            "reason": w.meta.reason, "host": w.meta.host,
            "start_unix_ns": from.max(first.start_unix_ns), "end_unix_ns": to.min(last.end_unix_ns),
            "intervals": inside.len(), "count": merged.count(), "mean_ns": merged.mean_ns(),
            "percentiles": Percentiles::of(&merged),
            "verdict": window_shape.verdict.as_str(), "summary": window_shape.summary,
            "slow_waits": slow.len(),
        });
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(
            out,
            "dump of {} on {} ({}): {} intervals, {} slow waits of at least {}",
            clock(first.start_unix_ns),
            w.meta.host,
            w.meta.reason,
            w.seconds.len(),
            w.slow.len(),
            fmt_ns(w.meta.slow_threshold_ns)
        );
        let _ = writeln!(
            out,
            "\n{:<15} {:>8} {:>9} {:>9} {:>9}  VERDICT ({})",
            "TIME", "COUNT", "P50", "P99", "MAX", opts.series
        );
        for s in &inside {
            let waits = s.get(&opts.series).map(|c| c.waits()).unwrap_or_default();
            let _ = writeln!(out, "{}", interval_line(s.end_unix_ns, &waits, &slice));
        }
        let _ = writeln!(
            out,
            "\n{} to {}, {} intervals merged:",
            clock(inside[0].start_unix_ns),
            clock(inside[inside.len() - 1].end_unix_ns),
            inside.len()
        );
        out.push_str(&window_text(&merged, &window_shape, &w.meta.unit));
        if !slow.is_empty() {
            let _ = writeln!(out, "\nlongest slow waits ({} in the window):", slow.len());
            for e in slow.iter().take(opts.slow) {
                let rq = if e.rq_len == schedlat_common::victims::RQ_LEN_UNKNOWN {
                    "-".to_string()
                } else {
                    e.rq_len.to_string()
                };
                let _ = writeln!(
                    out,
                    "  {} cpu {:>3} {:>9}  {} waited behind {} (run queue {rq})",
                    clock(w.unix_ns(e.at_ns)),
                    e.cpu,
                    fmt_ns(e.wait_ns),
                    task::short(&e.victim),
                    task::short(&e.culprit)
                );
            }
        }
    }
    crate::commands::stdout::write(&out).ok();
    Ok(())
}

fn interval_line(end_unix_ns: u64, waits: &Waits, slice: &Slice) -> String {
    let p = Percentiles::of(waits);
    let f = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
    format!(
        "{:<15} {:>8} {:>9} {:>9} {:>9}  {}",
        clock(end_unix_ns),
        waits.count(),
        f(p.map(|p| p.p50_ns)),
        f(p.map(|p| p.p99_ns)),
        f(waits.max_ns),
        shape::classify(waits, slice).verdict.as_str()
    )
}

fn window_text(w: &Waits, shape: &Shape, unit: &str) -> String {
    let mut out = text::log2_table(&w.log2_slots(), unit);
    let _ = writeln!(out, "total {} waits", w.count());
    if let Some(p) = Percentiles::of(w) {
        out.push_str(&text::percentile_line(&p));
    }
    let _ = writeln!(out, "shape: {}", shape.summary);
    out
}

fn clock(unix_ns: u64) -> String {
    local_time_us(unix_ns)
}

/// `--from`/`--to`: seconds from the dump's start (`30`, `30s`, `2m`) or a
/// local time of day (`14:05:00`) on the dump's first day.
fn bound(arg: Option<&str>, start_unix_ns: u64, default: u64) -> Result<u64> {
    let Some(arg) = arg else { return Ok(default) };
    if arg.contains(':') {
        let parts: Vec<u64> = arg
            .split(':')
            .map(|p| p.parse())
            .collect::<Result<_, _>>()
            .with_context(|| format!("`{arg}`: a time of day reads HH:MM:SS"))?;
        let [h, m, s] = parts[..] else {
            bail!("`{arg}`: a time of day reads HH:MM:SS");
        };
        // The local midnight before the dump's start, from its local time.
        let first = local_time_us(start_unix_ns);
        let secs_of_day: u64 = first[..2].parse::<u64>()? * 3600
            + first[3..5].parse::<u64>()? * 60
            + first[6..8].parse::<u64>()?;
        let midnight = start_unix_ns / 1_000_000_000 - secs_of_day;
        return Ok((midnight + h * 3600 + m * 60 + s) * 1_000_000_000);
    }
    let (number, scale) = match arg.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (arg.strip_suffix('s').unwrap_or(arg), 1),
    };
    let secs: u64 = number.parse().with_context(|| {
        format!("`{arg}`: give seconds from the dump's start (30, 30s, 2m) or HH:MM:SS")
    })?;
    Ok(start_unix_ns + secs * scale * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_offsets_or_times_of_day() {
        let start = 1_700_000_000_000_000_000;
        assert_eq!(bound(None, start, 7).unwrap(), 7);
        assert_eq!(
            bound(Some("30s"), start, 0).unwrap(),
            start + 30_000_000_000
        );
        assert_eq!(
            bound(Some("2m"), start, 0).unwrap(),
            start + 120_000_000_000
        );
        let t = local_time_us(start + 5_000_000_000);
        assert_eq!(
            bound(Some(&t[..8]), start, 0).unwrap(),
            start + 5_000_000_000
        );
        assert!(bound(Some("x"), start, 0).is_err());
        assert!(bound(Some("1:2"), start, 0).is_err());
    }
}
