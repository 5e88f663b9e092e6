//! The `le` boundaries of the exported histogram, and how the kernel's fine
//! buckets fold into them.
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

use schedlat_common::{NR_BUCKETS, bucket::bucket_bounds};

/// Lowest boundary: 2^10 ns.
const FIRST_EXP: u32 = 10;
/// Highest finite boundary: 2^36 ns.
const LAST_EXP: u32 = 36;
/// Boundaries per power of two (a divisor of the kernel's 8).
const PER_OCTAVE: u64 = 4;

/// The exported boundaries and, per kernel bucket, the exported bucket its
/// waits fall into (`edges_ns.len()` being `+Inf`).
#[derive(Debug)]
pub struct Layout {
    edges_ns: Vec<u64>,
    fold: Vec<usize>,
}

/// The one layout every scrape uses.
pub static LAYOUT: LazyLock<Layout> = LazyLock::new(Layout::new);

impl Layout {
    fn new() -> Layout {
        let mut edges_ns = vec![1u64 << FIRST_EXP];
        for exp in FIRST_EXP..LAST_EXP {
            let base = 1u64 << exp;
            let step = base / PER_OCTAVE;
            edges_ns.extend((1..=PER_OCTAVE).map(|j| base + j * step));
        }
        // A kernel bucket goes to the first exported bucket whose boundary
        // lies above all of it (its inclusive `high` is below the edge).
        let fold = (0..NR_BUCKETS)
            .map(|i| {
                let (_, high) = bucket_bounds(i);
                edges_ns.partition_point(|&edge| edge <= high)
            })
            .collect();
        Layout { edges_ns, fold }
    }

    /// Finite boundaries, in nanoseconds, ascending.
    #[cfg(test)]
    pub fn edges_ns(&self) -> &[u64] {
        &self.edges_ns
    }

    /// Per exported bucket, `(upper bound in seconds, waits in it)`, the last
    /// one `+Inf`: not cumulative, as prometheus-client's encoder wants them.
    pub fn fold(&self, kernel_buckets: &[u64]) -> Vec<(f64, u64)> {
        let mut out: Vec<(f64, u64)> = self
            .edges_ns
            .iter()
            // Division, not multiplication by 1e-9: it rounds to the double
            // nearest the decimal value, which then prints short.
            .map(|&ns| (ns as f64 / 1e9, 0))
            .chain(std::iter::once((f64::INFINITY, 0)))
            .collect();
        for (&n, &to) in kernel_buckets.iter().zip(&self.fold) {
            out[to].1 += n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::bucket_index;

    use super::*;

    #[test]
    fn boundaries_are_kernel_bucket_edges() {
        // Exactness: each boundary is where one kernel bucket ends and the
        // next begins, so no kernel bucket straddles it.
        for &edge in LAYOUT.edges_ns() {
            let (low, _) = bucket_bounds(bucket_index(edge));
            assert_eq!(low, edge, "{edge} ns is not a kernel bucket edge");
        }
        assert_eq!(LAYOUT.edges_ns().len(), 105);
        assert!(LAYOUT.edges_ns().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(LAYOUT.edges_ns()[0], 1024);
        assert_eq!(*LAYOUT.edges_ns().last().unwrap(), 1 << 36);
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
