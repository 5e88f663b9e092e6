//! HdrHistogram interval logs (.hlog): one tagged interval histogram per
//! second per series, so HistogramLogAnalyzer and every HdrHistogram
//! toolchain can read a recorder dump (docs/recorder.md).
//!
//! Transcoding schedlat's fine buckets. They split each power of two
//! [2^k, 2^(k+1)) into 8 equal parts. An HdrHistogram with 2 significant
//! figures has 256 sub-buckets, whose upper half splits each power of two
//! into 128 equal parts; 128 is a multiple of 8 and both are aligned on
//! powers of two, so every schedlat bucket is a union of whole HdrHistogram
//! buckets (16 of them), and below 256 ns HdrHistogram is exact. Each
//! schedlat bucket's count is recorded at its midpoint: the HdrHistogram
//! bucket that holds it, and so every value HdrHistogram reports for those
//! waits (lowest, median or highest equivalent), lies inside the schedlat
//! bucket. Counts per schedlat bucket therefore survive exactly, and a
//! percentile read from the .hlog and one from schedlat's JSON fall in the
//! same bucket: they differ by less than its width, at most 1/8 (12.5%) of
//! its lower bound, and are exact below 8 ns.

use std::{io::Write, time::Duration};

use anyhow::{Context, Result, anyhow};
use hdrhistogram::{
    Histogram,
    serialization::{
        V2DeflateSerializer,
        interval_log::{IntervalLogWriterBuilder, Tag},
    },
};
use schedlat_common::{NR_BUCKETS, bucket::bucket_bounds};

use crate::collect::histogram::Waits;

/// Significant figures of the HdrHistogram (see the module comment).
pub const SIGFIG: u8 = 2;
/// Largest trackable value: schedlat's last bucket starts at 2^40 ns.
const HIGHEST_NS: u64 = 1 << 42;

/// One interval of one series, ready for the log.
pub struct LogInterval<'a> {
    /// Since the log's base time (the dump's first interval).
    pub start: Duration,
    pub duration: Duration,
    /// `total`, or the series' name (made tag-safe here).
    pub tag: &'a str,
    pub waits: Waits,
}

/// The value each wait of fine bucket `index` is recorded at.
pub fn representative_ns(index: usize) -> u64 {
    let (low, high) = bucket_bounds(index);
    if index + 1 == NR_BUCKETS {
        // The last bucket also holds everything above it: only its low
        // bound is known.
        return low;
    }
    low + (high - low) / 2
}

/// The waits as an HdrHistogram, in nanoseconds.
pub fn histogram_of(waits: &Waits) -> Result<Histogram<u64>> {
    let mut h = Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, SIGFIG)
        .map_err(|e| anyhow!("HdrHistogram bounds: {e:?}"))?;
    for (index, _, _, count) in waits.nonempty_buckets() {
        h.record_n(representative_ns(index), count)
            .map_err(|e| anyhow!("HdrHistogram record: {e:?}"))?;
    }
    Ok(h)
}

/// Tags may not hold commas or whitespace (the log's field separators).
pub fn tag_of(series: &str) -> String {
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
pub fn write<'a>(
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
/// earliest: a second stamped before the first (the wall clock stepped
/// back) has a start before it, which the log cannot hold.
pub fn write_window(out: &mut impl Write, w: &crate::analysis::recording::Window) -> Result<()> {
    let base = w.seconds.iter().map(|s| s.start_unix_ns).min().unwrap_or(0);
    let intervals = w.seconds.iter().flat_map(|s| {
        let start = Duration::from_nanos(s.start_unix_ns - base);
        let duration = Duration::from_nanos(s.end_unix_ns.saturating_sub(s.start_unix_ns));
        s.series.iter().map(move |(name, c)| LogInterval {
            start,
            duration,
            tag: name,
            waits: c.waits(),
        })
    });
    write(
        out,
        std::time::UNIX_EPOCH + Duration::from_nanos(base),
        intervals,
    )
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index};

    use super::*;

    #[test]
    fn every_bucket_maps_inside_itself() {
        let h = Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, SIGFIG).unwrap();
        for index in 0..NR_BUCKETS - 1 {
            let (low, high) = bucket_bounds(index);
            let v = representative_ns(index);
            assert_eq!(bucket_index(v), index);
            // What HdrHistogram may report for a value recorded at v.
            assert!(h.lowest_equivalent(v) >= low, "bucket {index}");
            assert!(h.highest_equivalent(v) <= high, "bucket {index}");
        }
    }

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
        early.start_unix_ns -= 10_000_000_000;
        early.end_unix_ns -= 10_000_000_000;
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
