//! Percentiles from the kernel's fine buckets.
//!
//! A percentile's rank falls in one bucket; the true value lies in that same
//! bucket, and the estimate (linear interpolation by rank inside it, then
//! clamped to the exact min and max) does too. A bucket is at most 1/8 of its
//! lower bound wide, so every reported percentile is within 12.5% of the true
//! one (and exact below 8 ns, where buckets are 1 ns wide). The unit tests
//! check this bound against exact percentiles of known data.

use serde::{Deserialize, Serialize};

use crate::collect::histogram::Waits;

/// The summary every report carries, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub min_ns: Option<u64>,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    #[serde(rename = "p99_9_ns")]
    pub p999_ns: u64,
    pub max_ns: Option<u64>,
}

impl Percentiles {
    pub fn of(w: &Waits) -> Option<Percentiles> {
        Some(Percentiles {
            min_ns: w.min_ns,
            p50_ns: quantile_ns(w, 0.50)?,
            p90_ns: quantile_ns(w, 0.90)?,
            p99_ns: quantile_ns(w, 0.99)?,
            p999_ns: quantile_ns(w, 0.999)?,
            max_ns: w.max_ns,
        })
    }
}

/// The nearest-rank `q`-quantile (0 < q <= 1) in ns; None without waits.
pub fn quantile_ns(w: &Waits, q: f64) -> Option<u64> {
    let count = w.count();
    if count == 0 {
        return None;
    }
    let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
    let mut before = 0;
    for (_, low, high, n) in w.nonempty_buckets() {
        if before + n >= rank {
            let position = (rank - before) as f64 - 0.5;
            let width = (high - low + 1) as f64;
            let estimate = (low as f64 + width * position / n as f64).floor() as u64;
            let estimate = w.min_ns.map_or(estimate, |min| estimate.max(min));
            return Some(w.max_ns.map_or(estimate, |max| estimate.min(max)));
        }
        before += n;
    }
    None
}

/// Share of waits at or above `threshold_ns` (counting whole buckets whose
/// lower bound reaches it, so within one bucket's width of the threshold).
pub fn share_at_least(w: &Waits, threshold_ns: u64) -> f64 {
    let count = w.count();
    if count == 0 {
        return 0.0;
    }
    let slow: u64 = w
        .nonempty_buckets()
        .filter(|(_, low, _, _)| *low >= threshold_ns)
        .map(|(_, _, _, n)| n)
        .sum();
    slow as f64 / count as f64
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, Extremes, bucket_index, log2_slot};

    use super::*;

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
