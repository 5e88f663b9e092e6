//! `schedlat replay DUMP`: a recorder dump read back, without root and on
//! any machine: per interval its count, percentiles and verdict, then the
//! sub-window asked for (`--from`/`--to`, default all of it) merged: runqlat's
//! table, percentiles, verdict, and its longest slow waits with culprits
//! (output/replay.rs).

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::{
    analysis::shape,
    output::{dump, replay, replay::Replay},
    sys::{clock::local_time_us, slice::Slice},
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

pub fn run(path: &Path, opts: &ReplayOptions) -> Result<()> {
    let w = dump::load(path)?;
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
        .map(|s| &**s)
        .filter(|s| s.start_unix_ns >= from && s.end_unix_ns <= to)
        .collect();
    if inside.is_empty() {
        bail!("no whole interval between --from and --to");
    }
    let Some(merged) = w.merged(&opts.series, from, to) else {
        bail!("the window's wait counts add up to more than 2^64: a damaged dump");
    };
    let mut slow: Vec<_> = w
        .slow
        .iter()
        .filter(|e| (from..=to).contains(&w.unix_ns(e.at_ns)))
        .collect();
    slow.sort_by_key(|e| std::cmp::Reverse(e.wait_ns));
    let report = Replay {
        window: &w,
        series: &opts.series,
        from,
        to,
        inside,
        shape: shape::classify(&merged, &slice),
        merged,
        slow,
        slice,
        max_slow: opts.slow,
    };
    let out = if opts.json {
        replay::json(&report)
    } else {
        replay::text(&report)
    };
    crate::commands::stdout::write(&out).ok();
    Ok(())
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
