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
        recording::{Second, Window},
        shape::{self, Shape},
        slice::Slice,
        task,
    },
    collect::histogram::Waits,
    commands::UsageError,
    output::{dump, escape::printable, text},
    sys::{clock::local_time_us, files::Lines},
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

/// Reads a dump: its directory or its dump.jsonl, a regular file of at most
/// `dump::MAX_DUMP_BYTES` (a FIFO, a device or a link to one is refused: a
/// dump someone sent cannot hang or fill this machine's memory).
pub fn load(path: &Path) -> Result<Window> {
    let file = if path.is_dir() {
        path.join("dump.jsonl")
    } else {
        path.to_path_buf()
    };
    let lines = Lines::open(&file, dump::MAX_DUMP_BYTES, dump::MAX_LINE_BYTES)
        .with_context(|| format!("cannot read {}", file.display()))?;
    dump::read(lines, &file.display().to_string())
}

pub fn run(path: &Path, opts: &ReplayOptions) -> Result<()> {
    let w = load(path)?;
    let replay = render(&w, opts).with_context(|| path.display().to_string())?;
    for warning in &replay.warnings {
        say!("schedlat: warning: {warning}");
    }
    crate::commands::stdout::write(&replay.text)?;
    Ok(())
}

/// What replay prints, and what it warns about on stderr.
pub struct Replay {
    pub text: String,
    pub warnings: Vec<String>,
}

/// Intervals that start before the one before them ended, or end before
/// they start: the wall clock stepped back while recording (or the dump
/// was edited). Their times cannot order them.
fn out_of_order(seconds: &[std::sync::Arc<Second>]) -> usize {
    let mut previous_end = 0;
    let mut n = 0;
    for s in seconds {
        if s.end_unix_ns < s.start_unix_ns || s.start_unix_ns < previous_end {
            n += 1;
        }
        previous_end = s.end_unix_ns;
    }
    n
}

/// The report on the dump `w`: without `--from`/`--to`, every interval in
/// the order recorded; with them, the intervals inside those wall-clock
/// bounds.
pub fn render(w: &Window, opts: &ReplayOptions) -> Result<Replay> {
    let Some(first) = w.seconds.first() else {
        bail!("the dump holds no intervals");
    };
    let earliest = w.seconds.iter().map(|s| s.start_unix_ns).min().unwrap_or(0);
    let latest = w.seconds.iter().map(|s| s.end_unix_ns).max().unwrap_or(0);
    let from = bound(opts.from.as_deref(), first.start_unix_ns, earliest)?;
    let to = bound(opts.to.as_deref(), first.start_unix_ns, latest)?;
    if !w.series_names().contains(&opts.series) {
        bail!(
            "no series `{}` in the dump; it has: {}",
            printable(&opts.series),
            printable(&w.series_names().join(", "))
        );
    }
    let mut warnings = Vec::new();
    let disordered = out_of_order(&w.seconds);
    if disordered > 0 {
        warnings.push(format!(
            "{disordered} of the dump's {} intervals are out of time order (the wall clock stepped back while it was recorded, or the dump was edited): shown in the order recorded{}",
            w.seconds.len(),
            if opts.from.is_some() || opts.to.is_some() {
                "; --from/--to select by wall-clock time, so intervals stamped outside them are left out"
            } else {
                ""
            }
        ));
    }
    let slice = Slice::fixed(w.meta.slice_ns, &w.meta.slice_source);
    let inside: Vec<&Second> = w
        .seconds
        .iter()
        .map(|s| &**s)
        .filter(|s| s.start_unix_ns >= from && s.end_unix_ns <= to)
        .collect();
    if inside.is_empty() {
        bail!("no whole interval between --from and --to");
    }
    let Some(merged) = Window::merge(inside.iter().copied(), &opts.series) else {
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
            "start_unix_ns": from.max(earliest), "end_unix_ns": to.min(latest),
            "intervals": inside.len(), "count": merged.count(), "mean_ns": merged.mean_ns(),
            "percentiles": Percentiles::of(&merged),
            "verdict": window_shape.verdict.as_str(), "summary": window_shape.summary,
            "slow_waits": slow.len(),
            "out_of_order_intervals": disordered,
        });
        let _ = writeln!(out, "{line}");
    } else {
        for warning in &warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
        let _ = writeln!(
            out,
            "dump of {} on {} ({}): {} intervals, {} slow waits of at least {}",
            clock(first.start_unix_ns),
            printable(&w.meta.host),
            printable(&w.meta.reason),
            w.seconds.len(),
            w.slow.len(),
            fmt_ns(w.meta.slow_threshold_ns)
        );
        let _ = writeln!(
            out,
            "\n{:<15} {:>8} {:>9} {:>9} {:>9}  VERDICT ({})",
            "TIME",
            "COUNT",
            "P50",
            "P99",
            "MAX",
            printable(&opts.series)
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
                    printable(&task::short(&e.victim)),
                    printable(&task::short(&e.culprit))
                );
            }
        }
    }
    Ok(Replay {
        text: out,
        warnings,
    })
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
/// local time of day (`14:05:00`) on the dump's first day. A value the
/// clock cannot hold is a bad command line, not a silent wrap.
fn bound(arg: Option<&str>, start_unix_ns: u64, default: u64) -> Result<u64> {
    let Some(arg) = arg else { return Ok(default) };
    let bad = |why: &str| UsageError(format!("`{arg}`: {why}"));
    const NS: u64 = 1_000_000_000;
    if arg.contains(':') {
        let parts: Vec<u64> = arg
            .split(':')
            .map(|p| p.parse())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("a time of day reads HH:MM:SS"))?;
        let [h, m, s] = parts[..] else {
            return Err(bad("a time of day reads HH:MM:SS").into());
        };
        if h > 23 || m > 59 || s > 60 {
            return Err(bad("a time of day reads HH:MM:SS, from 00:00:00 to 23:59:60").into());
        }
        // The local midnight before the dump's start, from its local time.
        let first = local_time_us(start_unix_ns);
        let field = |r: std::ops::Range<usize>| first.get(r).and_then(|f| f.parse::<u64>().ok());
        let (Some(fh), Some(fm), Some(fs)) = (field(0..2), field(3..5), field(6..8)) else {
            bail!("the dump's start {first} is not a local time HH:MM:SS");
        };
        let midnight = (start_unix_ns / NS).saturating_sub(fh * 3600 + fm * 60 + fs);
        return Ok((midnight + h * 3600 + m * 60 + s).saturating_mul(NS));
    }
    let (number, scale) = match arg.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (arg.strip_suffix('s').unwrap_or(arg), 1),
    };
    let secs: u64 = number
        .parse()
        .map_err(|_| bad("give seconds from the dump's start (30, 30s, 2m) or HH:MM:SS"))?;
    secs.checked_mul(scale)
        .and_then(|s| s.checked_mul(NS))
        .and_then(|ns| ns.checked_add(start_unix_ns))
        .ok_or_else(|| {
            bad("past the end of the clock (2554): give seconds from the dump's start").into()
        })
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
