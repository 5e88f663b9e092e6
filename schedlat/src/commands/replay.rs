//! `schedlat replay DUMP`: a recorder dump read back, without root and on
//! any machine: per interval its count, percentiles and verdict, then the
//! sub-window asked for (`--from`/`--to`, default all of it) merged: runqlat's
//! table, percentiles, verdict, and its longest slow waits with culprits
//! (output/replay.rs); for a dump recorded with stacks, their holders' and
//! wakers' stacks, and the sub-window's flame graph (`--folded`,
//! `--flamegraph`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::{
    analysis::{
        dump_series::{self, NotFound},
        recording::{Second, Window},
        shape,
        stacks::Folded,
    },
    commands::UsageError,
    output::{dump, escape, escape::printable, flame::FlameFiles, replay, replay::Replay},
    sys::{clock::local_time_us, slice::Slice},
};

/// What to show of the dump.
pub(crate) struct ReplayOptions {
    /// Seconds from the dump's first interval, or a local time HH:MM:SS.
    pub from: Option<String>,
    pub to: Option<String>,
    pub series: String,
    /// Longest slow waits listed.
    pub slow: usize,
    pub json: bool,
    /// Where to write the sub-window's holders' stacks folded, and drawn.
    pub folded: Option<PathBuf>,
    pub flamegraph: Option<PathBuf>,
}

pub(crate) fn run(path: &Path, opts: &ReplayOptions) -> Result<()> {
    // Created first: a path that cannot be written fails before the read.
    let files = FlameFiles::create(&opts.folded, &opts.flamegraph)?;
    let w = dump::load(path)?;
    let replayed = report(&w, opts).with_context(|| path.display().to_string())?;
    for warning in &replayed.warnings {
        say!("schedlat: warning: {}", printable(warning));
    }
    if (opts.folded.is_some() || opts.flamegraph.is_some()) && !w.meta.stacks {
        say!(
            "schedlat: warning: the dump was recorded without stacks (`record --ring --stacks` keeps them): no stack to fold"
        );
    }
    files.write(&replayed.folded)?;
    crate::commands::stdout::write(&replayed.out)?;
    Ok(())
}

/// What `report` made of a dump.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// The report, text or JSON.
    pub out: String,
    /// What to warn about on stderr.
    pub warnings: Vec<String>,
    /// The sub-window's slow waits' holder stacks, folded.
    pub folded: Folded,
}

/// The report on the dump `w`. Without `--from`/`--to`, every interval in
/// the order recorded; with them, the intervals inside those wall-clock
/// bounds.
pub(crate) fn report(w: &Window, opts: &ReplayOptions) -> Result<Replayed> {
    let Some(first) = w.seconds.first() else {
        bail!("the dump holds no intervals");
    };
    // --from/--to are wall-clock bounds: the seconds' bounds as the dump
    // dated them.
    let start_unix_ns = |s: &Second| w.unix_ns(s.start_mono_ns);
    let end_unix_ns = |s: &Second| w.unix_ns(s.end_mono_ns);
    let earliest = w
        .seconds
        .iter()
        .map(|s| start_unix_ns(s))
        .min()
        .unwrap_or(0);
    let latest = w.seconds.iter().map(|s| end_unix_ns(s)).max().unwrap_or(0);
    let first_unix_ns = start_unix_ns(first);
    let from = bound(opts.from.as_deref(), first_unix_ns, earliest)?;
    let to = bound(opts.to.as_deref(), first_unix_ns, latest)?;
    let picked = match dump_series::pick(w, &opts.series) {
        Ok(picked) => picked,
        Err(NotFound(why)) if why.is_empty() => {
            return Err(UsageError(no_such_series(w, &opts.series)).into());
        }
        Err(NotFound(why)) => return Err(UsageError(why).into()),
    };
    let out_of_order = w.out_of_order();
    let mut warnings = Vec::new();
    if out_of_order > 0 {
        warnings.push(format!(
            "{out_of_order} of the dump's {} intervals are out of time order (recorded by a schedlat that stamped them on the wall clock, which stepped back, or the dump was edited): shown in the order recorded{}",
            w.seconds.len(),
            if opts.from.is_some() || opts.to.is_some() {
                "; --from/--to select by wall-clock time, so intervals stamped outside them are left out"
            } else {
                ""
            }
        ));
    }
    let slice = Slice::fixed(w.meta.slice_ns, &w.meta.slice_source);
    let inside: Vec<_> = w
        .seconds
        .iter()
        .map(|s| &**s)
        .filter(|s| start_unix_ns(s) >= from && end_unix_ns(s) <= to)
        .collect();
    if inside.is_empty() {
        let why = no_interval_inside(opts, first_unix_ns, (earliest, latest), (from, to));
        return Err(UsageError(why).into());
    }
    let Some(merged) = Window::merge(inside.iter().copied(), &picked.names) else {
        bail!("the window's wait counts add up to more than 2^64: a damaged dump");
    };
    let mut slow: Vec<_> = w
        .slow
        .iter()
        .filter(|s| (from..=to).contains(&w.unix_ns(s.event.at_ns)))
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.event.wait_ns));
    // Folded only for the files that want it.
    let mut folded = Folded::default();
    let fold = opts.folded.is_some() || opts.flamegraph.is_some();
    for wait in slow.iter().filter(|_| fold) {
        if let Some(stacks) = &wait.stacks {
            let culprit = &wait.event.culprit;
            folded.add(&[&escape::comm(culprit)], stacks, wait.event.wait_ns);
        }
    }
    let report = Replay {
        window: w,
        series: &picked.shown,
        names: &picked.names,
        from: from.max(earliest),
        to: to.min(latest),
        inside,
        shape: shape::classify(&merged, &slice),
        merged,
        slow,
        slice,
        max_slow: opts.slow,
        out_of_order,
        warnings: &warnings,
    };
    let out = if opts.json {
        replay::json(&report)
    } else {
        replay::text(&report)
    };
    Ok(Replayed {
        out,
        warnings,
        folded,
    })
}

/// Why `--series NAME` is not in the dump: what it has, which groups its
/// cgroup series are (on a hybrid host, those of the v1 cpu hierarchy, not
/// the v2 ones), and how many series a second left out (`--max-series`
/// keeps the cgroups that waited most).
fn no_such_series(w: &Window, name: &str) -> String {
    let mut why = format!(
        "no series `{}` in the dump; it has: {}",
        printable(name),
        printable(&w.series_names().join(", "))
    );
    match &w.meta.cgroup_hierarchy {
        Some(h) => {
            why += &format!("; its cgroup series are groups of {}", printable(h));
            let dropped: u64 = w.seconds.iter().map(|s| u64::from(s.series_dropped)).sum();
            if dropped > 0 {
                why += &format!(
                    ", and {dropped} cgroup series were left out over its {} intervals (record --ring keeps the --max-series cgroups that waited most each second)",
                    w.seconds.len()
                );
            }
        }
        None => why += "; it was recorded without --ring-cgroups: no per-cgroup series",
    }
    why
}

/// Why `--from`/`--to` select nothing: where the bounds given fall, and
/// the span the dump covers, in the seconds from its start `--from` takes
/// and in local time.
fn no_interval_inside(
    opts: &ReplayOptions,
    start: u64,
    (earliest, latest): (u64, u64),
    (from, to): (u64, u64),
) -> String {
    let offset = |ns: u64| (ns as i128 - start as i128) as f64 / 1e9;
    let hms = |ns: u64| local_time_us(ns).get(..8).unwrap_or("??:??:??").to_string();
    let given: Vec<String> = [("--from", &opts.from, from), ("--to", &opts.to, to)]
        .into_iter()
        .filter_map(|(name, arg, ns)| {
            let arg = printable(arg.as_deref()?);
            Some(format!(
                "{name} {arg} is {:.0} s from the dump's start",
                offset(ns)
            ))
        })
        .collect();
    format!(
        "no whole interval between --from and --to ({}): the dump covers {:.0} s to {:.0} s ({} to {} local time); give bounds inside it",
        given.join(", "),
        offset(earliest),
        offset(latest),
        hms(earliest),
        hms(latest)
    )
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

    /// Text, the five longest slow waits, no files: from `from`, series
    /// `series`.
    fn options(from: Option<&str>, series: &str) -> ReplayOptions {
        ReplayOptions {
            from: from.map(String::from),
            to: None,
            series: series.into(),
            slow: 5,
            json: false,
            folded: None,
            flamegraph: None,
        }
    }

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

    /// Issue 28: a series the dump lacks: which groups its cgroup series
    /// are, and what --max-series left out, beside what it has.
    #[test]
    fn a_missing_series_says_which_groups_the_dump_has() {
        let mut w = crate::output::dump::tests::sample_window();
        let opts = |series: &str| options(None, series);
        let err = report(&w, &opts("cgroup = /s4-web")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no series `cgroup = /s4-web` in the dump; it has: total, cgroup /a; its cgroup series are groups of cgroup v2 at /sys/fs/cgroup, and 1 cgroup series were left out over its 2 intervals (record --ring keeps the --max-series cgroups that waited most each second)"
        );
        assert!(err.downcast_ref::<UsageError>().is_some());
        w.meta.cgroup_hierarchy = None;
        let err = report(&w, &opts("cgroup = /s4-web")).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("; it was recorded without --ring-cgroups: no per-cgroup series"),
            "{err}"
        );
    }

    /// A dump recorded with stacks: each listed wait shows what the holder
    /// ran and who woke the waiter, and the window folds the holders'
    /// stacks by the time waited behind them.
    #[test]
    fn a_dump_with_stacks_shows_and_folds_them() {
        let w = crate::output::dump::tests::window_with_stacks();
        // A folded file asked for (report writes none itself).
        let opts = ReplayOptions {
            folded: Some("window.folded".into()),
            ..options(None, "total")
        };
        let replayed = report(&w, &opts).unwrap();
        assert!(
            replayed.out.contains("    holder user:   spin <- main\n"),
            "{}",
            replayed.out
        );
        assert!(
            replayed
                .out
                .contains("    waker 0        try_to_wake_up <- hrtimer_wakeup\n"),
            "{}",
            replayed.out
        );
        assert_eq!(replayed.folded.lines(), ["hog;main;spin 5000"]);
        let plain = report(&crate::output::dump::tests::sample_window(), &opts).unwrap();
        assert!(!plain.out.contains("holder user"), "{}", plain.out);
        assert!(!plain.out.contains("stacks: not kept"), "{}", plain.out);
        assert!(plain.folded.lines().is_empty());
        // A wait whose stacks made room for newer ones says so.
        let mut dropped = w.clone();
        dropped.slow[0].stacks = None;
        let dropped = report(&dropped, &opts).unwrap();
        assert!(
            dropped.out.contains("    stacks: not kept"),
            "{}",
            dropped.out
        );
    }

    /// Issue 28: `--from 99` past a 2 s dump said "no whole interval"
    /// and nothing of what the dump covers.
    #[test]
    fn a_bound_past_the_dump_says_the_span_it_covers() {
        let w = crate::output::dump::tests::sample_window();
        let opts = options(Some("99"), "total");
        let err = report(&w, &opts).unwrap_err();
        let start = w.unix_ns(w.seconds[0].start_mono_ns);
        let (first, last) = (local_time_us(start), local_time_us(start + 2_000_000_000));
        assert_eq!(
            err.to_string(),
            format!(
                "no whole interval between --from and --to (--from 99 is 99 s from the dump's start): the dump covers 0 s to 2 s ({} to {} local time); give bounds inside it",
                &first[..8],
                &last[..8]
            )
        );
        assert!(
            err.downcast_ref::<UsageError>().is_some(),
            "a bad command line: exit 2"
        );
    }
}
