//! HdrHistogram interval logs (.hlog): one tagged interval histogram per
//! second per series, so HistogramLogAnalyzer and every HdrHistogram
//! toolchain can read a recorder dump (docs/recorder.md).
//!
//! The intervals are transcoded by histogram/hdr.rs, which says why every
//! count survives exactly.

use std::{io::Write, time::Duration};

use anyhow::{Context, Result, anyhow};
use hdrhistogram::serialization::{
    V2DeflateSerializer,
    interval_log::{IntervalLogWriterBuilder, Tag},
};

use crate::histogram::{Waits, hdr::histogram_of};

/// One interval of one series, ready for the log.
pub(crate) struct LogInterval<'a> {
    /// Since the log's base time (the dump's first interval).
    pub start: Duration,
    pub duration: Duration,
    /// `total`, or the series' name (made tag-safe here).
    pub tag: &'a str,
    pub waits: Waits,
}

/// Tags may not hold commas or whitespace (the log's field separators).
pub(crate) fn tag_of(series: &str) -> String {
    series
        .chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Writes the log: a header with the base time, then every interval.
/// Writes the log: a header with the base time, then every interval, one
/// at a time (a dump's log is never whole in memory).
pub(crate) fn write<'a>(
    out: &mut impl Write,
    base_unix: std::time::SystemTime,
    intervals: impl IntoIterator<Item = LogInterval<'a>>,
) -> Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("schedlat flight recorder: run-queue waits in nanoseconds, one histogram per second per series")
        .with_start_time(base_unix)
        .with_base_time(base_unix)
        .with_max_value_divisor(1e6)
        .begin_log_with(out, &mut serializer)
        .context("writing the .hlog header")?;
    for interval in intervals {
        let h = histogram_of(&interval.waits)?;
        let tag = tag_of(interval.tag);
        log.write_histogram(&h, interval.start, interval.duration, Tag::new(&tag))
            .map_err(|e| anyhow!("writing the .hlog: {e}"))?;
    }
    Ok(())
}

/// The window's log: every second of every series, timed from the
/// earliest: a second stamped before the first (in a dump whose seconds
/// were stamped on a wall clock that stepped back) has a start before it,
/// which the log cannot hold.
pub(crate) fn write_window(
    out: &mut impl Write,
    w: &crate::analysis::recording::Window,
) -> Result<()> {
    let base = w.seconds.iter().map(|s| s.start_mono_ns).min().unwrap_or(0);
    let intervals = w.seconds.iter().flat_map(|s| {
        let start = Duration::from_nanos(s.start_mono_ns - base);
        let duration = Duration::from_nanos(s.end_mono_ns.saturating_sub(s.start_mono_ns));
        s.series.iter().map(move |(name, c)| LogInterval {
            start,
            duration,
            tag: name,
            waits: c.waits(),
        })
    });
    write(
        out,
        std::time::UNIX_EPOCH + Duration::from_nanos(w.unix_ns(base)),
        intervals,
    )
}

#[cfg(test)]
mod tests {
    use schedlat_common::CpuStats;

    use super::*;
    use crate::histogram::bucket_index;

    #[test]
    fn counts_and_percentiles_survive() {
        let mut cpu = CpuStats::ZERO;
        for v in [5u64, 900, 1_000, 20_000, 3_000_000, 3_000_000, 7_000_000] {
            cpu.buckets[bucket_index(v)] += 1;
        }
        let waits = Waits::from_cpus(&[cpu]);
        let h = histogram_of(&waits).unwrap();
        assert_eq!(h.len(), 7);
        for q in [0.5, 0.9, 0.99] {
            let v = h.value_at_quantile(q);
            let ours = crate::analysis::percentiles::quantile_ns(&waits, q).unwrap();
            assert_eq!(bucket_index(v), bucket_index(ours), "q={q}");
        }
    }

    /// Regression (the replay fuzz target, overflow checks on): a second
    /// stamped before the window's first made `start - base` wrap to about
    /// 1.8e10 s (a panic in checked builds).
    #[test]
    fn a_second_before_the_first_starts_at_its_offset_from_the_earliest() {
        let mut w = crate::output::dump::tests::sample_window();
        let mut early = (*w.seconds[0]).clone();
        early.start_mono_ns -= 10_000_000_000;
        early.end_mono_ns -= 10_000_000_000;
        w.seconds.push(early.into());
        let mut out = Vec::new();
        write_window(&mut out, &w).unwrap();
        let text = String::from_utf8(out).unwrap();
        let starts: Vec<f64> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
            .filter_map(|l| l.split(',').nth(1))
            .filter_map(|t| t.parse().ok())
            .collect();
        assert_eq!(starts, [10.0, 10.0, 11.0, 11.0, 0.0, 0.0], "{text}");
    }

    #[test]
    fn writes_a_tagged_log() {
        let waits = Waits::default();
        let mut out = Vec::new();
        let base = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let one = LogInterval {
            start: Duration::from_secs(1),
            duration: Duration::from_secs(1),
            tag: "cgroup /a b,c",
            waits,
        };
        write(&mut out, base, [one]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("#[BaseTime: 1700000000.000"), "{text}");
        assert!(text.contains("Tag=cgroup_/a_b_c,1.000,1.000,"), "{text}");
    }
}
