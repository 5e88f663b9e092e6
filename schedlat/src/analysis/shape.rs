//! The shape verdict: is this histogram healthy, a long tail (intermittent
//! cause), a shifted mean (structural contention), or bimodal? The rule is
//! written down in docs/shape.md; this is its implementation, and the two
//! must change together. It depends only on the histogram and the slice, so
//! the same data gives the same verdict on any machine.

use serde::Serialize;

pub(crate) use super::shape_modes::ModesDecision;
use super::{
    fmt_ns,
    percentiles::{Bound, quantile_bound, quantile_ns, share_at_least},
    shape_modes,
};
use crate::{histogram::Waits, sys::slice::Slice};

/// Fewer waits than this and no verdict is given.
pub(crate) const MIN_WAITS: u64 = 200;
/// From this many waits on, the tail is judged at p99.9 rather than p99.
pub(crate) const P999_FROM: u64 = 10_000;
/// The slow mode of a bimodal histogram holds at least this share.
pub(crate) const BIMODAL_MIN_SHARE: f64 = 0.10;
/// Where the median is slow (rule 2), a fast mode must hold at least this
/// share for the histogram to be bimodal rather than a shifted mean: a
/// worker granted at some wakeups and passed over at the others.
pub(crate) const BIMODAL_MIN_FAST_SHARE: f64 = 0.25;
/// ... and is at least this many octaves above the fast mode,
pub(crate) const BIMODAL_MIN_OCTAVES: usize = 3;
/// ... with a valley between them: the octaves strictly between the two
/// peaks hold on average at most this fraction of the lower peak.
pub(crate) const BIMODAL_MAX_VALLEY: f64 = 0.25;
/// A slow tail needs at least this many slow waits (of half a slice or
/// more), however many waits there are ...
pub(crate) const MIN_SLOW_WAITS: u64 = 5;
/// ... and the slow share must exceed the tail's share (1% for p99, 0.1%
/// for p99.9) with confidence: its Wilson score lower bound at this z (95%
/// two-sided, 97.5% one-sided) must be above it. Otherwise the few slow
/// waits are isolated: a handful of them in a few hundred waits is what an
/// idle machine shows (docs/shape.md has the measurements).
pub(crate) const WILSON_Z: f64 = 1.96;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Verdict {
    Healthy,
    LongTail,
    ShiftedMean,
    Bimodal,
    InsufficientData,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) struct Evidence {
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
    /// What the scheduler decided in each mode, when bimodal and the
    /// decision split measured it.
    pub modes_decision: Option<ModesDecision>,
    /// Waits of at least half a slice: `slow_share`'s buckets, plus the
    /// part above H/2 of the bucket that holds it (interpolated, as the
    /// percentiles are).
    pub slow_count: u64,
    /// Wilson score lower bound (z = WILSON_Z) of the slow share: a tail is
    /// only called slow when this exceeds the tail's share.
    pub slow_share_low: f64,
    /// The longest wait (exact when known, else its bucket's upper bound).
    pub max_ns: Option<u64>,
    /// Where the true p50 and tail lie (their buckets, docs/json.md).
    pub p50_bound: Option<Bound>,
    pub tail_bound: Option<Bound>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Shape {
    pub verdict: Verdict,
    /// One line for people: the verdict and why.
    pub summary: String,
    pub evidence: Evidence,
}

/// Waits of at least `threshold_ns`: whole buckets above it, and the part
/// of the bucket that holds it that lies above it (spread evenly inside the
/// bucket, as the percentile estimates are), so that a tail estimated at
/// the threshold or above always has slow waits behind it.
pub(crate) fn slow_waits(w: &Waits, threshold_ns: u64) -> u64 {
    w.nonempty_buckets()
        .map(|(bucket, n)| {
            let (low, high) = (bucket.low_ns, bucket.high_ns);
            if low >= threshold_ns {
                n
            } else if high >= threshold_ns {
                let above = (high - threshold_ns + 1) as f64 / (high - low + 1) as f64;
                (n as f64 * above).ceil() as u64
            } else {
                0
            }
        })
        .sum()
}

/// Wilson score interval's lower bound for `k` successes in `n` trials.
pub(crate) fn wilson_lower(k: u64, n: u64, z: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let center = p + z2 / (2.0 * n);
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((center - margin) / (1.0 + z2 / n)).max(0.0)
}

pub(crate) fn classify(w: &Waits, slice: &Slice) -> Shape {
    let count = w.count();
    let h = slice.ns;
    let tail_label = if count >= P999_FROM { "p99.9" } else { "p99" };
    let tail_q = if count >= P999_FROM { 0.999 } else { 0.99 };
    let slow_share = share_at_least(w, h / 2);
    let slow_count = slow_waits(w, h / 2);
    let mut evidence = Evidence {
        count,
        slice_ns: h,
        slice_source: slice.source.clone(),
        p50_ns: quantile_ns(w, 0.5),
        tail_label,
        tail_ns: quantile_ns(w, tail_q),
        slow_share,
        modes_ns: None,
        modes_decision: None,
        slow_count,
        slow_share_low: wilson_lower(slow_count, count, WILSON_Z),
        max_ns: w
            .max_ns
            .or_else(|| quantile_bound(w, 1.0).map(|b| b.high_ns.unwrap_or(b.low_ns))),
        p50_bound: quantile_bound(w, 0.5),
        tail_bound: quantile_bound(w, tail_q),
    };
    // The tail's share: p99 is slow when more than 1% of waits are.
    let tail_share = 1.0 - tail_q;
    let isolated = slow_count < MIN_SLOW_WAITS || evidence.slow_share_low <= tail_share;
    let slice_text = format!("base slice {} ({})", fmt_ns(h), slice.source);
    let mut sep = ": ";
    // Two populations with a valley between: bimodal, whichever side the
    // median falls (rules 2 and 5 of docs/shape.md).
    let min_fast = match evidence.p50_ns {
        Some(p50) if p50 >= h / 4 => BIMODAL_MIN_FAST_SHARE,
        _ => 0.0,
    };
    let bimodal =
        modes(w, h / 2).filter(|_| slow_share >= BIMODAL_MIN_SHARE && 1.0 - slow_share >= min_fast);
    let (verdict, why) = match (evidence.p50_ns, evidence.tail_ns) {
        _ if count < MIN_WAITS => (
            Verdict::InsufficientData,
            format!("{count} waits, fewer than {MIN_WAITS}"),
        ),
        _ if bimodal.is_some() && min_fast > 0.0 => {
            bimodal_verdict(w, h, bimodal.unwrap_or_default(), &mut evidence)
        }
        (Some(p50), _) if p50 >= h / 4 => (
            Verdict::ShiftedMean,
            format!(
                // Waits begin with a wakeup or a preemption (the cause
                // split says which): the median speaks of both.
                "the median wait {} is at least a quarter slice ({}): half the waits last that long or longer",
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
        (_, Some(tail)) if isolated => {
            // "healthy, 5 isolated slow waits (max X): ..."
            sep = ", ";
            (
                Verdict::Healthy,
                format!(
                    "{slow_count} isolated slow waits (max {}): {tail_label} {} reaches half a slice ({}), but {slow_count} of {count} waits cannot show that more than {:.1}% are that slow (95% lower bound {:.2}%)",
                    fmt_ns(evidence.max_ns.unwrap_or(tail)),
                    fmt_ns(tail),
                    fmt_ns(h / 2),
                    tail_share * 100.0,
                    evidence.slow_share_low * 100.0
                ),
            )
        }
        _ => {
            let share = evidence.slow_share;
            match bimodal {
                Some(modes) => bimodal_verdict(w, h, modes, &mut evidence),
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
    let near = near_threshold(verdict, &evidence, h);
    Shape {
        verdict,
        summary: format!("{}{sep}{why}{near}; {slice_text}", verdict.as_str()),
        evidence,
    }
}

/// The bimodal verdict's words: the two modes, and what the decision
/// split says separates them where it measured the waits.
fn bimodal_verdict(
    w: &Waits,
    h: u64,
    (fast, slow): (u64, u64),
    evidence: &mut Evidence,
) -> (Verdict, String) {
    evidence.modes_ns = Some((fast, slow));
    evidence.modes_decision = shape_modes::decided(w, h / 2);
    let split = evidence
        .modes_decision
        .as_ref()
        .map_or(String::new(), ModesDecision::text);
    (
        Verdict::Bimodal,
        format!(
            "a fast mode near {} and a slow one near {} holding {:.1}% of waits{split}",
            fmt_ns(fast),
            fmt_ns(slow),
            evidence.slow_share * 100.0
        ),
    )
}

/// Where it matters, the percentile's bound: when the threshold the verdict
/// compared it with lies inside its bucket, the true value may be on the
/// other side, and the summary says so (e.g. "(p99 lies in 703-781 us, on
/// both sides of 750 us)").
fn near_threshold(verdict: Verdict, e: &Evidence, h: u64) -> String {
    let (label, bound, threshold) = match verdict {
        Verdict::ShiftedMean => ("p50", e.p50_bound, h / 4),
        Verdict::InsufficientData => return String::new(),
        // Any other verdict was drawn where the median was under a quarter
        // slice and the tail was compared with half a slice.
        _ => match e.p50_bound {
            Some(b) if b.straddles(h / 4) => ("p50", Some(b), h / 4),
            _ => (e.tail_label, e.tail_bound, h / 2),
        },
    };
    match bound {
        Some(b) if b.straddles(threshold) => format!(
            " ({label} lies in {}-{}, on both sides of {})",
            fmt_ns(b.low_ns),
            b.high_ns.map_or("no upper bound".into(), fmt_ns),
            fmt_ns(threshold)
        ),
        _ => String::new(),
    }
}

/// Centers of a fast and a slow mode split at `split_ns`, if the histogram
/// (viewed in octaves of ns) has two peaks at least BIMODAL_MIN_OCTAVES apart
/// and the octaves between them hold on average at most BIMODAL_MAX_VALLEY of
/// the lower peak (an average, so one empty octave in a spread-out
/// distribution does not count as a valley).
fn modes(w: &Waits, split_ns: u64) -> Option<(u64, u64)> {
    let mut octaves = [0u64; 64];
    for (bucket, n) in w.nonempty_buckets() {
        octaves[bucket.low_ns.max(1).ilog2() as usize] += n;
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
pub(crate) mod tests {
    use schedlat_common::{CpuStats, bucket_index, log2_slot};

    use super::*;

    const SLICE: u64 = 3_000_000;

    /// A histogram of `(wait ns, how many)` groups.
    pub(crate) fn waits(groups: &[(u64, u64)]) -> Waits {
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
        // Issue 28: said of waits (preempted ones too), not of wakeups.
        let summary = classify(&waits(&[(4_000_000, 900)]), &Slice::fixed(SLICE, "test")).summary;
        assert!(
            summary.contains("half the waits last that long or longer"),
            "{summary}"
        );
        assert!(!summary.contains("wakeups"), "{summary}");
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

    /// The idle 2-CPU machine of docs/shape.md: ~300 waits in 3 s, of which
    /// 4 to 6 reach half a slice. p99 is then slow, but a handful of waits
    /// cannot show that more than 1% are: healthy, and the summary says how
    /// many slow waits there were and the longest.
    #[test]
    fn a_handful_of_slow_waits_is_healthy() {
        for slow in 1..=3 {
            assert_eq!(
                verdict(&[(8_000, 300 - slow), (2_000_000, slow)]),
                Verdict::Healthy
            );
        }
        for slow in 4..=6 {
            let s = classify(
                &waits(&[(8_000, 300 - slow), (2_000_000, slow)]),
                &Slice::fixed(SLICE, "t"),
            );
            assert!(s.evidence.tail_ns.unwrap() >= SLICE / 2, "{slow}: {s:?}");
            assert_eq!(s.verdict, Verdict::Healthy, "{slow}: {}", s.summary);
            assert_eq!(s.evidence.slow_count, slow);
            assert!(
                // No exact max here: the top bucket's upper bound (2.10 ms).
                s.summary.starts_with(&format!(
                    "healthy, {slow} isolated slow waits (max 2.10 ms)"
                )),
                "{}",
                s.summary
            );
        }
        // From 7 of 300 (2.3%), more than 1% are slow with 95% confidence.
        assert_eq!(verdict(&[(8_000, 293), (2_000_000, 7)]), Verdict::LongTail);
    }

    #[test]
    fn the_evidence_needed_scales_with_the_waits() {
        // p99.9 from 10,000 waits on: 0.1% of them, with confidence.
        assert_eq!(
            verdict(&[(8_000, 9_984), (2_000_000, 16)]),
            Verdict::Healthy
        );
        assert_eq!(
            verdict(&[(8_000, 9_980), (2_000_000, 20)]),
            Verdict::LongTail
        );
        // Never fewer than MIN_SLOW_WAITS, however confident the share.
        assert_eq!(verdict(&[(8_000, 200), (2_000_000, 4)]), Verdict::Healthy);
        assert_eq!(verdict(&[(8_000, 200), (2_000_000, 6)]), Verdict::LongTail);
    }

    #[test]
    fn wilson_lower_bound_matches_known_values() {
        // 5 of 300 at z = 1.96: 0.71% (by hand from the formula).
        assert!((wilson_lower(5, 300, 1.96) - 0.00714).abs() < 0.0001);
        assert_eq!(wilson_lower(0, 300, 1.96), 0.0);
        assert_eq!(wilson_lower(0, 0, 1.96), 0.0);
        // All slow: the bound approaches 1 as n grows.
        assert!(wilson_lower(1000, 1000, 1.96) > 0.99);
    }

    #[test]
    fn a_threshold_inside_the_bucket_is_said_where_it_matters() {
        // p99 in the bucket that holds half a slice (1.5 ms: [1.44, 1.57)
        // ms): the true p99 may be on either side of it.
        let s = classify(
            &waits(&[(10_000, 960), (1_520_000, 40)]),
            &Slice::fixed(SLICE, "t"),
        );
        assert_eq!(s.verdict, Verdict::LongTail, "{}", s.summary);
        assert!(
            s.summary
                .contains("(p99 lies in 1.44 ms-1.57 ms, on both sides of 1.50 ms)"),
            "{}",
            s.summary
        );
        // Far from every threshold: no bound in the text.
        let s = classify(
            &waits(&[(10_000, 970), (3_000_000, 30)]),
            &Slice::fixed(SLICE, "t"),
        );
        assert!(!s.summary.contains("lies in"), "{}", s.summary);
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
