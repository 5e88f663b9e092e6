//! Percentiles from the kernel's fine buckets.
//!
//! A percentile's rank falls in one bucket; the true value lies in that same
//! bucket, and the estimate (linear interpolation by rank inside it, then
//! clamped to the exact min and max) does too. A bucket is at most 1/8 of its
//! lower bound wide, so every reported percentile is within 12.5% of the true
//! one (and exact below 8 ns, where buckets are 1 ns wide). The unit tests
//! check this bound against exact percentiles of known data.
//!
//! The bucket also bounds the true value exactly: the nearest-rank
//! percentile is one of the waits counted in that bucket, so it lies between
//! the bucket's bounds, narrowed by the exact min and max. `Bound` carries
//! that interval, for the JSON and for the verdict, which says so when a
//! threshold falls inside it (docs/shape.md, docs/json.md).

use serde::{Deserialize, Serialize};

use crate::histogram::{Rank, Waits};

/// The summary every report carries, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Percentiles {
    pub min_ns: Option<u64>,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    #[serde(rename = "p99_9_ns")]
    pub p999_ns: u64,
    pub max_ns: Option<u64>,
    /// Where each true percentile lies (recordings made before this field
    /// existed read back without it).
    #[serde(default)]
    pub bounds: Bounds,
}

/// The interval that holds a true percentile: its bucket, narrowed by the
/// exact extremes. `high_ns` is None only for the last bucket, which also
/// holds every longer wait, when the maximum is not known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Bound {
    pub low_ns: u64,
    pub high_ns: Option<u64>,
}

impl Bound {
    /// True when `threshold_ns` lies inside the interval, so the true value
    /// may be on either side of it (at or above, or below).
    pub(crate) fn straddles(&self, threshold_ns: u64) -> bool {
        self.low_ns < threshold_ns && self.high_ns.is_none_or(|high| high >= threshold_ns)
    }
}

/// The bounds of the four estimated percentiles, named as their estimates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Bounds {
    pub p50_ns: Bound,
    pub p90_ns: Bound,
    pub p99_ns: Bound,
    #[serde(rename = "p99_9_ns")]
    pub p999_ns: Bound,
}

impl Percentiles {
    pub(crate) fn of(w: &Waits) -> Option<Percentiles> {
        Some(Percentiles {
            min_ns: w.min_ns,
            p50_ns: quantile_ns(w, 0.50)?,
            p90_ns: quantile_ns(w, 0.90)?,
            p99_ns: quantile_ns(w, 0.99)?,
            p999_ns: quantile_ns(w, 0.999)?,
            max_ns: w.max_ns,
            bounds: Bounds {
                p50_ns: quantile_bound(w, 0.50)?,
                p90_ns: quantile_bound(w, 0.90)?,
                p99_ns: quantile_bound(w, 0.99)?,
                p999_ns: quantile_bound(w, 0.999)?,
            },
        })
    }
}

/// The rank of the nearest-rank `q`-quantile among `count` waits.
fn rank(q: f64, count: u64) -> u64 {
    ((q * count as f64).ceil() as u64).clamp(1, count)
}

/// Where the true `q`-quantile lies; None without waits.
pub(crate) fn quantile_bound(w: &Waits, q: f64) -> Option<Bound> {
    let count = w.count();
    if count == 0 {
        return None;
    }
    let bucket = w.bucket_of_rank(rank(q, count))?.bucket;
    let (low, high) = (bucket.low_ns, bucket.upper_ns());
    let high = match (high, w.max_ns) {
        (Some(h), Some(max)) => Some(h.min(max)),
        (None, max) => max,
        (h, None) => h,
    };
    let low = w.min_ns.map_or(low, |min| low.max(min));
    // Extremes from another span (a per-key histogram has none) could cross
    // the bucket: keep the interval well-formed.
    Some(Bound {
        low_ns: high.map_or(low, |h| low.min(h)),
        high_ns: high,
    })
}

/// The nearest-rank `q`-quantile (0 < q <= 1) in ns; None without waits.
pub(crate) fn quantile_ns(w: &Waits, q: f64) -> Option<u64> {
    let count = w.count();
    if count == 0 {
        return None;
    }
    let rank = rank(q, count);
    let Rank {
        bucket,
        count: n,
        before,
    } = w.bucket_of_rank(rank)?;
    let position = (rank - before) as f64 - 0.5;
    let width = bucket.width_ns() as f64;
    let estimate = (bucket.low_ns as f64 + width * position / n as f64).floor() as u64;
    let estimate = w.min_ns.map_or(estimate, |min| estimate.max(min));
    Some(w.max_ns.map_or(estimate, |max| estimate.min(max)))
}

/// Share of waits at or above `threshold_ns` (counting whole buckets whose
/// lower bound reaches it, so within one bucket's width of the threshold).
pub(crate) fn share_at_least(w: &Waits, threshold_ns: u64) -> f64 {
    let count = w.count();
    if count == 0 {
        return 0.0;
    }
    let slow: u64 = w
        .nonempty_buckets()
        .filter(|(bucket, _)| bucket.low_ns >= threshold_ns)
        .map(|(_, n)| n)
        .sum();
    slow as f64 / count as f64
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, Extremes};

    use super::*;
    use crate::histogram::{Bucket, NR_BUCKETS, bucket_index, log2_slot};

    fn waits_of_ns(values: &[u64]) -> Waits {
        let mut cpu = CpuStats::ZERO;
        for &v in values {
            cpu.buckets[bucket_index(v)] += 1;
            cpu.log2[log2_slot(v / 1000)] += 1;
            cpu.sum_ns += v;
        }
        let x = Extremes {
            min_ns: *values.iter().min().unwrap(),
            max_ns: *values.iter().max().unwrap(),
        };
        Waits::from_cpus(&[cpu]).with_extremes(&[x])
    }

    /// Deterministic log-uniform waits from 100 ns to ~100 ms.
    fn known_waits(n: usize, start: u64) -> Vec<u64> {
        let mut state = start;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
                (100.0 * 1e6f64.powf(unit)) as u64
            })
            .collect()
    }

    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn every_percentile_is_within_an_eighth_of_the_exact_value() {
        for (n, start) in [(10, 1), (1000, 2), (100_000, 3)] {
            let mut values = known_waits(n, start);
            let w = waits_of_ns(&values);
            values.sort_unstable();
            for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let (est, truth) = (quantile_ns(&w, q).unwrap(), exact(&values, q));
                let error = est.abs_diff(truth) as f64 / truth as f64;
                assert!(error <= 0.125, "n={n} q={q}: {est} vs {truth} ({error:.3})");
            }
        }
    }

    #[test]
    fn every_true_percentile_lies_within_its_bound() {
        for (n, seed) in [(1, 4), (10, 1), (1000, 2), (100_000, 3)] {
            let mut values = known_waits(n, seed);
            let w = waits_of_ns(&values);
            values.sort_unstable();
            for q in [0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let b = quantile_bound(&w, q).unwrap();
                let (truth, est) = (exact(&values, q), quantile_ns(&w, q).unwrap());
                let high = b.high_ns.unwrap();
                assert!(
                    b.low_ns <= truth && truth <= high,
                    "n={n} q={q}: {truth} {b:?}"
                );
                assert!(b.low_ns <= est && est <= high, "n={n} q={q}: {est} {b:?}");
                // A bucket is at most an eighth of its lower bound wide.
                assert!(high - b.low_ns <= b.low_ns / 8, "n={n} q={q}: {b:?}");
            }
        }
    }

    #[test]
    fn bounds_are_narrowed_by_the_extremes_and_open_only_at_the_end() {
        // 1.00 ms falls in the bucket [983040, 1048575]: min narrows it.
        let w = waits_of_ns(&[1_000_000; 10]);
        let b = quantile_bound(&w, 0.5).unwrap();
        assert_eq!((b.low_ns, b.high_ns), (1_000_000, Some(1_000_000)));
        // Without extremes (a per-key histogram): the whole bucket.
        let mut bare = w.clone();
        (bare.min_ns, bare.max_ns) = (None, None);
        let b = quantile_bound(&bare, 0.5).unwrap();
        let Bucket {
            low_ns: low,
            high_ns: high,
            ..
        } = Bucket::of(1_000_000);
        assert_eq!((b.low_ns, b.high_ns), (low, Some(high)));
        assert!(b.straddles(1_000_000) && !b.straddles(low) && !b.straddles(high + 1));
        // The last bucket holds everything above it: open without a max.
        bare.buckets = vec![0; NR_BUCKETS];
        bare.buckets[NR_BUCKETS - 1] = 3;
        let b = quantile_bound(&bare, 0.99).unwrap();
        assert_eq!(b.high_ns, None);
        assert!(b.straddles(u64::MAX));
    }

    #[test]
    fn extremes_are_exact_and_bound_the_estimates() {
        let w = waits_of_ns(&[3_000_000; 50]);
        let p = Percentiles::of(&w).unwrap();
        assert_eq!((p.min_ns, p.max_ns), (Some(3_000_000), Some(3_000_000)));
        assert_eq!(p.p50_ns, 3_000_000);
        assert_eq!(p.p999_ns, 3_000_000);
    }

    #[test]
    fn empty_has_no_percentiles_and_no_share() {
        assert_eq!(Percentiles::of(&Waits::default()), None);
        assert_eq!(share_at_least(&Waits::default(), 1), 0.0);
    }

    #[test]
    fn share_counts_buckets_from_the_threshold() {
        let w = waits_of_ns(&[1_000, 1_000, 1_000, 2_000_000]);
        assert_eq!(share_at_least(&w, 1_000_000), 0.25);
    }
}
