//! The `le` boundaries of the exported histograms, and how the kernel's
//! fine buckets fold into them. Three layouts: `fine` for the unlabelled
//! total, and for the per-key families' `--key-buckets` `slo` (the
//! default), `log2` or `fine`.
//!
//! `log2`: one boundary per power of two, 2^10 ns (1.024 us) to 2^34 ns
//! (17.2 s), plus `+Inf`: 25 finite boundaries, a quarter of `fine`'s
//! series per key. A percentile from `histogram_quantile` then lies in the
//! same power of two as the true one: off by less than a factor of two
//! (at most +100% / -50%). At a thousand hosts of a thousand keys that is
//! the difference between 26 and 106 samples per key and scrape.
//!
//! `slo`: `log2` plus, around each latency an SLO or an alert is usually
//! set at ([`SLO_THRESHOLDS_NS`]: 0.5, 1, 2, 5, 10, 50 ms), both edges of
//! the kernel bucket that holds it (an eighth of its power of two wide):
//! 34 finite boundaries. A `histogram_quantile` whose true value is one of
//! those thresholds then lands in that narrow bucket, within 7.8% (the
//! worst, at 50 ms; [`Layout::error_at`]), where `log2` is off by up to
//! 68% there ("p99 above 5 ms" read from a bucket 4.2-8.4 ms wide); `fine`
//! is within 25% everywhere but at three times the samples, which at the
//! default 250 series a scrape would put the text body far over a
//! megabyte. Elsewhere `slo` is as `log2`: within a factor of two.
//!
//! The kernel counts waits in log-linear nanosecond buckets: 8 per power of
//! two (schedlat_common::bucket), about 300 in all. Exporting every one
//! would cost ~300 series per histogram on every scrape and in Prometheus'
//! storage, so the exporter keeps every second edge: 4 buckets per power of
//! two, from 2^10 ns (1.024 us) to 2^36 ns (68.7 s), plus `+Inf`: 105
//! finite boundaries. Why these:
//!
//! - Every boundary is an edge of the kernel's buckets, so every exported
//!   count is exact; nothing is interpolated before Prometheus does.
//! - `histogram_quantile` interpolates linearly inside the bucket that holds
//!   the rank, so its answer is off by at most that bucket's width: a quarter
//!   of the bucket's lower bound here (a log2 layout would allow 100%).
//! - The set is fixed, not an option: `sum by (le)` over a fleet only works
//!   when every machine exports the same boundaries.
//! - Below 1 us the CPU's own switch path dominates; above a minute a task
//!   is hung, not queued. Both ends are still counted (first bucket,
//!   `+Inf`), and `_sum`/`_count` are exact.
//!
//! A boundary `le = 2^k ns` holds the waits up to `2^k - 1` ns; the one
//! nanosecond of difference from "<=" is below what the clock resolves.

use std::sync::LazyLock;

use super::Bucket;

/// Lowest boundary: 2^10 ns.
const FIRST_EXP: u32 = 10;
/// Highest finite boundary: 2^36 ns (fine), 2^34 ns (log2).
const LAST_EXP: u32 = 36;
const LOG2_LAST_EXP: u32 = 34;
/// Boundaries per power of two (a divisor of the kernel's 8).
const PER_OCTAVE: u64 = 4;

/// The exported boundaries and, per kernel bucket, the exported bucket its
/// waits fall into (`edges_ns.len()` being `+Inf`).
#[derive(Debug)]
pub(crate) struct Layout {
    edges_ns: Vec<u64>,
    fold: Vec<usize>,
    /// Per exported bucket, the kernel buckets folded into it: `fold` is
    /// non-decreasing, so each is a range, summed without a scatter.
    ranges: Vec<std::ops::Range<usize>>,
}

/// The whole-system total's layout: 4 boundaries per power of two.
pub(crate) static LAYOUT: LazyLock<Layout> = LazyLock::new(|| Layout::new(PER_OCTAVE, LAST_EXP));
/// One boundary per power of two.
pub(crate) static LOG2: LazyLock<Layout> = LazyLock::new(|| Layout::new(1, LOG2_LAST_EXP));
/// The per-key families' default: `log2` and a narrow bucket at each of
/// the SLO thresholds.
pub(crate) static SLO: LazyLock<Layout> =
    LazyLock::new(|| Layout::bracketing(&LOG2, &SLO_THRESHOLDS_NS));

/// The waits SLOs and alerts on run-queue latency are usually written at
/// (0.5, 1, 2, 5, 10, 50 ms): the `slo` layout's narrow buckets.
pub(crate) const SLO_THRESHOLDS_NS: [u64; 6] = [
    500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 50_000_000,
];

/// An error as the HELP texts state it: a percentage rounded up, so a
/// bound (0.0772 as 7.8%).
pub(crate) fn percent_up(error: f64) -> String {
    format!("{:.1}%", (error * 1000.0).ceil() / 10.0)
}

impl Layout {
    fn new(per_octave: u64, last_exp: u32) -> Layout {
        let mut edges_ns = vec![1u64 << FIRST_EXP];
        for exp in FIRST_EXP..last_exp {
            let base = 1u64 << exp;
            let step = base / per_octave;
            edges_ns.extend((1..=per_octave).map(|j| base + j * step));
        }
        Layout::with_edges(edges_ns)
    }

    /// `base`'s boundaries and both edges of the kernel bucket holding each
    /// of `waits_ns`.
    fn bracketing(base: &Layout, waits_ns: &[u64]) -> Layout {
        let mut edges_ns = base.edges_ns.clone();
        for &ns in waits_ns {
            let bucket = Bucket::at(super::bucket_index(ns));
            edges_ns.push(bucket.low_ns);
            edges_ns.extend(bucket.upper_ns().map(|high| high + 1));
        }
        edges_ns.sort_unstable();
        edges_ns.dedup();
        Layout::with_edges(edges_ns)
    }

    /// `edges_ns`: ascending kernel bucket edges.
    fn with_edges(edges_ns: Vec<u64>) -> Layout {
        // A kernel bucket goes to the first exported bucket whose boundary
        // lies above all of it (its inclusive `high` is below the edge).
        let fold = Bucket::all()
            .map(|b| edges_ns.partition_point(|&edge| edge <= b.high_ns))
            .collect::<Vec<usize>>();
        let ranges = (0..=edges_ns.len())
            .map(|to| fold.partition_point(|&t| t < to)..fold.partition_point(|&t| t <= to))
            .collect();
        Layout {
            edges_ns,
            fold,
            ranges,
        }
    }

    /// Exported buckets, `+Inf` included.
    pub(crate) fn len(&self) -> usize {
        self.edges_ns.len() + 1
    }

    /// [`Layout::counts`] of a key's kernel buckets (u32 counts), into
    /// `out` (`len()` long): no allocation, one pass.
    pub(crate) fn fold_into(&self, kernel_buckets: &[u32], out: &mut [u64]) {
        for (sum, range) in out.iter_mut().zip(&self.ranges) {
            let end = range.end.min(kernel_buckets.len());
            let start = range.start.min(end);
            *sum = kernel_buckets[start..end]
                .iter()
                .map(|&n| u64::from(n))
                .sum();
        }
    }

    /// The exported bucket that counts a wait of `ns` (`edges_ns().len()`
    /// being `+Inf`): the one its kernel bucket folds into.
    pub(crate) fn bucket_of(&self, ns: u64) -> usize {
        self.fold[super::bucket_index(ns)]
    }

    /// Finite boundaries, in nanoseconds, ascending.
    pub(crate) fn edges_ns(&self) -> &[u64] {
        &self.edges_ns
    }

    /// The worst relative error of a `histogram_quantile` whose true value
    /// is `ns`: Prometheus answers with a point of the bucket that holds
    /// the rank, interpolated linearly between its bounds, so anywhere from
    /// the bucket's lower bound to its upper one (infinite in `+Inf`).
    pub(crate) fn error_at(&self, ns: u64) -> f64 {
        let i = self.bucket_of(ns);
        let Some(&high) = self.edges_ns.get(i) else {
            return f64::INFINITY;
        };
        let low = if i == 0 { 0 } else { self.edges_ns[i - 1] };
        let wait = ns as f64;
        (wait - low as f64).max(high as f64 - wait) / wait
    }

    /// The worst [`Layout::error_at`] over the SLO thresholds.
    pub(crate) fn error_at_thresholds(&self) -> f64 {
        (SLO_THRESHOLDS_NS.iter())
            .map(|&ns| self.error_at(ns))
            .fold(0.0, f64::max)
    }

    /// Per exported bucket (the last one `+Inf`), the waits in it.
    pub(crate) fn counts(&self, kernel_buckets: &[u64]) -> Vec<u64> {
        let mut out = vec![0; self.edges_ns.len() + 1];
        for (&n, &to) in kernel_buckets.iter().zip(&self.fold) {
            out[to] += n;
        }
        out
    }

    /// Each finite bucket's upper bound in seconds (the exposition's
    /// `le`). Division, not multiplication by 1e-9: it rounds to the
    /// double nearest the decimal value, which then prints short.
    pub(crate) fn bounds_seconds(&self) -> impl Iterator<Item = f64> + '_ {
        self.edges_ns.iter().map(|&ns| ns as f64 / 1e9)
    }

    /// `counts` with each bucket's upper bound in seconds (the last
    /// infinite), not cumulative, as the exposition libraries take them.
    #[cfg(test)]
    pub(crate) fn with_bounds(&self, counts: &[u64]) -> Vec<(f64, u64)> {
        (self.bounds_seconds())
            .chain(std::iter::once(f64::INFINITY))
            .zip(counts.iter().copied())
            .collect()
    }

    /// Per exported bucket, `(upper bound in seconds, waits in it)`.
    #[cfg(test)]
    pub(crate) fn fold(&self, kernel_buckets: &[u64]) -> Vec<(f64, u64)> {
        self.with_bounds(&self.counts(kernel_buckets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{NR_BUCKETS, bucket_index};

    #[test]
    fn boundaries_are_kernel_bucket_edges() {
        // Exactness: each boundary is where one kernel bucket ends and the
        // next begins, so no kernel bucket straddles it.
        for &edge in LAYOUT.edges_ns() {
            let low = Bucket::of(edge).low_ns;
            assert_eq!(low, edge, "{edge} ns is not a kernel bucket edge");
        }
        assert_eq!(LAYOUT.edges_ns().len(), 105);
        assert!(LAYOUT.edges_ns().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(LAYOUT.edges_ns()[0], 1024);
        assert_eq!(*LAYOUT.edges_ns().last().unwrap(), 1 << 36);
    }

    #[test]
    fn log2_is_one_boundary_per_power_of_two_up_to_17_s() {
        let e = LOG2.edges_ns();
        assert_eq!(e.len(), 25);
        assert!(e.iter().enumerate().all(|(i, &ns)| ns == 1 << (10 + i)));
        for &edge in e {
            assert_eq!(Bucket::of(edge).low_ns, edge);
        }
        let mut kernel = vec![0u64; NR_BUCKETS];
        for ns in [1_000, 3_000_000, 20_000_000_000] {
            kernel[bucket_index(ns)] += 1;
        }
        let c = LOG2.counts(&kernel);
        assert_eq!(c.len(), 26);
        // 3 ms is in (2^21, 2^22] ns; 20 s only in +Inf.
        assert_eq!((c[0], c[12], c[25]), (1, 1, 1));
    }

    #[test]
    fn fold_into_matches_counts() {
        let mut kernel = vec![0u32; NR_BUCKETS];
        for (i, n) in kernel.iter_mut().enumerate() {
            *n = (i as u32 * 7919) % 13;
        }
        let wide: Vec<u64> = kernel.iter().map(|&n| u64::from(n)).collect();
        for layout in [&*LAYOUT, &*LOG2, &*SLO] {
            let mut out = vec![0; layout.len()];
            layout.fold_into(&kernel, &mut out);
            assert_eq!(out, layout.counts(&wide));
        }
    }

    /// An exemplar's bucket is the one that counts its wait: at an edge
    /// (`le` 2^21 ns holds waits up to 2^21 - 1 ns) and beyond the last
    /// boundary too.
    #[test]
    fn slo_is_log2_and_the_kernel_bucket_of_each_threshold() {
        let e = SLO.edges_ns();
        assert_eq!(e.len(), 34);
        assert!(e.windows(2).all(|w| w[0] < w[1]));
        assert!(LOG2.edges_ns().iter().all(|edge| e.contains(edge)));
        for &edge in e {
            assert_eq!(Bucket::of(edge).low_ns, edge, "{edge} ns");
        }
        // 5 ms lies in the kernel's (4.72, 5.24] ms: 2^22 * (1.125, 1.25].
        let i = SLO.bucket_of(5_000_000);
        assert_eq!((e[i - 1], e[i]), (4_718_592, 5_242_880));
    }

    /// Prometheus' histogram_quantile over one histogram's buckets: the
    /// bucket holding the rank, linear inside it (the first from 0; the
    /// rank in `+Inf`: the highest finite boundary).
    fn histogram_quantile(layout: &Layout, counts: &[u64], q: f64) -> f64 {
        let rank = q * counts.iter().sum::<u64>() as f64;
        let edges = layout.edges_ns();
        let mut below = 0.0;
        for (i, &n) in counts.iter().enumerate() {
            let n = n as f64;
            if below + n >= rank && n > 0.0 {
                let Some(&high) = edges.get(i) else {
                    return *edges.last().unwrap() as f64;
                };
                let low = if i == 0 { 0.0 } else { edges[i - 1] as f64 };
                return low + (high as f64 - low) * (rank - below) / n;
            }
            below += n;
        }
        unreachable!("rank beyond the count")
    }

    /// For waits whose true p99 is each SLO threshold (the rest spread
    /// below and above it, differently each round), the p99 Prometheus
    /// computes from the folded buckets: within `error_at` of the
    /// threshold, and that within the `slo` layout's stated 7.8%; `log2`,
    /// the former default, is off by more than 20% at some of them.
    #[test]
    fn a_p99_at_each_threshold_is_within_the_stated_error() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % below.max(1)
        };
        let mut log2_worst = 0.0f64;
        for &t in &SLO_THRESHOLDS_NS {
            for _ in 0..200 {
                // 98 waits in [t/10, t), t itself (the 99th of 100), one in
                // (t, 10 t]: the exact p99 is t.
                let mut waits: Vec<u64> = (0..98).map(|_| t / 10 + next(t - t / 10)).collect();
                waits.push(t);
                waits.push(t + 1 + next(9 * t));
                let mut kernel = vec![0u64; NR_BUCKETS];
                for &w in &waits {
                    kernel[bucket_index(w)] += 1;
                }
                for layout in [&*SLO, &*LOG2, &*LAYOUT] {
                    let got = histogram_quantile(layout, &layout.counts(&kernel), 0.99);
                    let error = (got - t as f64).abs() / t as f64;
                    assert!(
                        error <= layout.error_at(t) + 1e-12,
                        "{t} ns: {got} ({error}) beyond {}",
                        layout.error_at(t)
                    );
                    if std::ptr::eq(layout, &*SLO) {
                        assert!(error <= 0.078, "slo at {t} ns: {error}");
                    }
                    if std::ptr::eq(layout, &*LOG2) {
                        log2_worst = log2_worst.max(error);
                    }
                }
            }
        }
        assert!((0.077..0.078).contains(&SLO.error_at_thresholds()));
        assert!(LOG2.error_at_thresholds() > 0.6);
        assert!(
            log2_worst > 0.2,
            "log2's worst at the thresholds: {log2_worst}"
        );
    }

    #[test]
    fn bucket_of_a_wait_is_the_one_that_counts_it() {
        for layout in [&*LAYOUT, &*LOG2, &*SLO] {
            for ns in [
                0,
                1_023,
                1_024,
                2_097_151,
                2_097_152,
                3_000_000,
                1 << 40,
                u64::MAX,
            ] {
                let mut kernel = vec![0u64; NR_BUCKETS];
                kernel[bucket_index(ns)] = 1;
                let counts = layout.counts(&kernel);
                assert_eq!(counts[layout.bucket_of(ns)], 1, "{ns} ns");
            }
        }
        assert_eq!(LOG2.bucket_of(u64::MAX), LOG2.len() - 1, "+Inf");
    }

    #[test]
    fn four_boundaries_per_power_of_two() {
        let e = LAYOUT.edges_ns();
        assert_eq!(&e[..5], &[1024, 1280, 1536, 1792, 2048]);
        // 3 ms lies in (2.62, 3.15] ms: 2^21 * (1.25, 1.5].
        let i = e.partition_point(|&edge| edge < 3_000_000);
        assert_eq!((e[i - 1], e[i]), (2_621_440, 3_145_728));
    }

    #[test]
    fn fold_keeps_every_wait_in_the_right_bucket() {
        let mut kernel = vec![0u64; NR_BUCKETS];
        for ns in [0, 1_023, 1_024, 3_000_000, 3_145_727, 3_145_728, u64::MAX] {
            kernel[bucket_index(ns)] += 1;
        }
        let folded = LAYOUT.fold(&kernel);
        assert_eq!(folded.len(), LAYOUT.edges_ns().len() + 1);
        assert_eq!(folded.iter().map(|(_, n)| n).sum::<u64>(), 7);
        // Cumulative count at the boundary `edge_ns`.
        let count_le = |edge_ns: u64| -> u64 {
            let i = LAYOUT
                .edges_ns()
                .iter()
                .position(|&e| e == edge_ns)
                .unwrap();
            folded[..=i].iter().map(|(_, n)| n).sum()
        };
        // 0 and 1023 ns are below 1.024 us; 1024 ns is not.
        assert_eq!(count_le(1024), 2);
        assert_eq!(count_le(2_621_440), 3);
        assert_eq!(count_le(3_145_728), 5);
        // Beyond 2^36 ns: only +Inf.
        assert_eq!(folded.last().unwrap(), &(f64::INFINITY, 1));
        assert_eq!(folded[0].0, 1.024e-6);
    }
}
