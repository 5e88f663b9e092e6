//! The shape verdict: is this histogram healthy, a long tail (intermittent
//! cause), a shifted mean (structural contention), or bimodal? The rule is
//! written down in docs/shape.md; this is its implementation, and the two
//! must change together. It depends only on the histogram and the slice, so
//! the same data gives the same verdict on any machine.

use serde::Serialize;

use super::{
    fmt_ns,
    percentiles::{quantile_ns, share_at_least},
    slice::Slice,
};
use crate::collect::histogram::Waits;

/// Fewer waits than this and no verdict is given.
pub const MIN_WAITS: u64 = 200;
/// From this many waits on, the tail is judged at p99.9 rather than p99.
pub const P999_FROM: u64 = 10_000;
/// The slow mode of a bimodal histogram holds at least this share.
pub const BIMODAL_MIN_SHARE: f64 = 0.10;
/// ... and is at least this many octaves above the fast mode,
pub const BIMODAL_MIN_OCTAVES: usize = 3;
/// ... with a valley between them: the octaves strictly between the two
/// peaks hold on average at most this fraction of the lower peak.
pub const BIMODAL_MAX_VALLEY: f64 = 0.25;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Healthy,
    LongTail,
    ShiftedMean,
    Bimodal,
    InsufficientData,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::LongTail => "long-tail",
            Verdict::ShiftedMean => "shifted-mean",
            Verdict::Bimodal => "bimodal",
            Verdict::InsufficientData => "insufficient-data",
        }
    }
}

/// The numbers a verdict was decided on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub count: u64,
    pub slice_ns: u64,
    pub slice_source: String,
    pub p50_ns: Option<u64>,
    /// "p99" or "p99.9" (see P999_FROM).
    pub tail_label: &'static str,
    pub tail_ns: Option<u64>,
    /// Share of waits of at least half a slice.
    pub slow_share: f64,
    /// Centers of the fast and slow modes, when bimodal.
    pub modes_ns: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shape {
    pub verdict: Verdict,
    /// One line for people: the verdict and why.
    pub summary: String,
    pub evidence: Evidence,
}

pub fn classify(w: &Waits, slice: &Slice) -> Shape {
    let count = w.count();
    let h = slice.ns;
    let tail_label = if count >= P999_FROM { "p99.9" } else { "p99" };
    let tail_q = if count >= P999_FROM { 0.999 } else { 0.99 };
    let mut evidence = Evidence {
        count,
        slice_ns: h,
        slice_source: slice.source.clone(),
        p50_ns: quantile_ns(w, 0.5),
        tail_label,
        tail_ns: quantile_ns(w, tail_q),
        slow_share: share_at_least(w, h / 2),
        modes_ns: None,
    };
    let slice_text = format!("base slice {} ({})", fmt_ns(h), slice.source);
    let (verdict, why) = match (evidence.p50_ns, evidence.tail_ns) {
        _ if count < MIN_WAITS => (
            Verdict::InsufficientData,
            format!("{count} waits, fewer than {MIN_WAITS}"),
        ),
        (Some(p50), _) if p50 >= h / 4 => (
            Verdict::ShiftedMean,
            format!(
                "the median wait {} is at least a quarter slice ({}): most wakeups wait",
                fmt_ns(p50),
                fmt_ns(h / 4)
            ),
        ),
        (_, Some(tail)) if tail < h / 2 => (
            Verdict::Healthy,
            format!(
                "{tail_label} {} is under half a slice ({})",
                fmt_ns(tail),
                fmt_ns(h / 2)
            ),
        ),
        _ => {
            let share = evidence.slow_share;
            match modes(w, h / 2).filter(|_| share >= BIMODAL_MIN_SHARE) {
                Some((fast, slow)) => {
                    evidence.modes_ns = Some((fast, slow));
                    (
                        Verdict::Bimodal,
                        format!(
                            "a fast mode near {} and a slow one near {} holding {:.1}% of waits",
                            fmt_ns(fast),
                            fmt_ns(slow),
                            share * 100.0
                        ),
                    )
                }
                None => (
                    Verdict::LongTail,
                    format!(
                        "median {} but {tail_label} {}; {:.2}% of waits are at least half a slice ({})",
                        fmt_ns(evidence.p50_ns.unwrap_or(0)),
                        fmt_ns(evidence.tail_ns.unwrap_or(0)),
                        share * 100.0,
                        fmt_ns(h / 2)
                    ),
                ),
            }
        }
    };
    Shape {
        verdict,
        summary: format!("{}: {why}; {slice_text}", verdict.as_str()),
        evidence,
    }
}

/// Centers of a fast and a slow mode split at `split_ns`, if the histogram
/// (viewed in octaves of ns) has two peaks at least BIMODAL_MIN_OCTAVES apart
/// and the octaves between them hold on average at most BIMODAL_MAX_VALLEY of
/// the lower peak (an average, so one empty octave in a spread-out
/// distribution does not count as a valley).
fn modes(w: &Waits, split_ns: u64) -> Option<(u64, u64)> {
    let mut octaves = [0u64; 64];
    for (_, low, _, n) in w.nonempty_buckets() {
        octaves[low.max(1).ilog2() as usize] += n;
    }
    let split = split_ns.max(1).ilog2() as usize;
    let peak = |range: std::ops::Range<usize>| {
        range
            .clone()
            .max_by_key(|&i| (octaves[i], std::cmp::Reverse(i)))
            .filter(|&i| octaves[i] > 0)
    };
    let fast = peak(0..split)?;
    let slow = peak(split..64)?;
    if slow - fast < BIMODAL_MIN_OCTAVES {
        return None;
    }
    let between = &octaves[fast + 1..slow];
    let valley = between.iter().sum::<u64>() as f64 / between.len() as f64;
    let lower_peak = octaves[fast].min(octaves[slow]);
    if valley > BIMODAL_MAX_VALLEY * lower_peak as f64 {
        return None;
    }
    // The middle of an octave [2^k, 2^(k+1)) is 1.5 * 2^k.
    let center = |k: usize| (1u64 << k) + (1u64 << k) / 2;
    Some((center(fast), center(slow)))
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index, log2_slot};

    use super::*;

    const SLICE: u64 = 3_000_000;

    fn waits(groups: &[(u64, u64)]) -> Waits {
        let mut cpu = CpuStats::ZERO;
        for &(ns, n) in groups {
            cpu.buckets[bucket_index(ns)] += n;
            cpu.log2[log2_slot(ns / 1000)] += n;
            cpu.sum_ns = cpu.sum_ns.wrapping_add(ns.wrapping_mul(n));
        }
        Waits::from_cpus(&[cpu])
    }

    fn verdict(groups: &[(u64, u64)]) -> Verdict {
        classify(&waits(groups), &Slice::fixed(SLICE, "test")).verdict
    }

    #[test]
    fn quiet_system_is_healthy() {
        assert_eq!(
            verdict(&[(5_000, 600), (30_000, 380), (200_000, 20)]),
            Verdict::Healthy
        );
    }

    #[test]
    fn everyone_waiting_a_slice_is_a_shifted_mean() {
        assert_eq!(
            verdict(&[(5_000, 100), (4_000_000, 900)]),
            Verdict::ShiftedMean
        );
    }

    #[test]
    fn a_few_slice_long_waits_are_a_long_tail() {
        assert_eq!(
            verdict(&[(10_000, 970), (3_000_000, 30)]),
            Verdict::LongTail
        );
    }

    #[test]
    fn a_separate_slow_group_is_bimodal() {
        // 30% fast at ~10 us, 20% at ~5 ms, nothing in between.
        let v = classify(
            &waits(&[(10_000, 700), (5_000_000, 300)]),
            &Slice::fixed(SLICE, "t"),
        );
        assert_eq!(v.verdict, Verdict::Bimodal, "{}", v.summary);
        let (fast, slow) = v.evidence.modes_ns.unwrap();
        assert!(fast < 20_000 && slow > 4_000_000, "{fast} {slow}");
    }

    #[test]
    fn a_filled_valley_is_not_bimodal() {
        let spread = [
            (10_000, 300),
            (40_000, 250),
            (160_000, 200),
            (640_000, 150),
            (2_560_000, 200),
        ];
        assert_eq!(verdict(&spread), Verdict::LongTail);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(verdict(&[]), Verdict::InsufficientData);
        assert_eq!(
            verdict(&[(10_000, MIN_WAITS - 1)]),
            Verdict::InsufficientData
        );
        // One bucket, fast: healthy; one bucket, slow: shifted mean.
        assert_eq!(verdict(&[(10_000, 500)]), Verdict::Healthy);
        assert_eq!(verdict(&[(2_000_000, 500)]), Verdict::ShiftedMean);
        // Everything in the saturating last bucket.
        assert_eq!(verdict(&[(u64::MAX, 500)]), Verdict::ShiftedMean);
    }

    #[test]
    fn the_summary_carries_the_numbers() {
        let s = classify(
            &waits(&[(10_000, 970), (3_000_000, 30)]),
            &Slice::fixed(SLICE, "t"),
        );
        assert!(s.summary.starts_with("long-tail: "), "{}", s.summary);
        assert!(
            s.summary.contains("p99") && s.summary.contains("3.00 ms"),
            "{}",
            s.summary
        );
    }
}
