//! Native (sparse, exponential) histograms for the protobuf exposition:
//! schedlat's buckets re-bucketed into Prometheus' schema 3.
//!
//! A native bucket of schema `s` and index `i` holds the values in
//! `(b^(i-1), b^i]` seconds, `b = 2^(2^-s)`: schema 3 has 8 buckets per
//! power of two, each 9.05% wider than the one before. schedlat's buckets
//! are linear inside a power of two of *nanoseconds* (the kernel's: 8 per
//! power of two; the exported `fine`: 4; `log2`: 1), and a power of two of
//! nanoseconds is not one of seconds, so no boundary of one lies on the
//! other. Each source bucket goes whole into the one native bucket that
//! keeps the error smallest (counts stay integers, nothing is split; the
//! choice is monotonic, so a rank's bucket is the bucket of the rank's
//! wait). A percentile Prometheus computes lies inside that native bucket,
//! and the true one inside the source bucket, so the worst error of a
//! percentile is, over the source buckets `[L, H)` and their native
//! bucket `[lo, hi]`, the largest of `|r - w| / w` for `w` in `[L, H]` and
//! `r` in `[lo, hi]`. Computed below over the waits from 1.024 us to the
//! last finite boundary of the classic layout, and stated in the HELP:
//!
//! - the whole-system total, from the kernel's buckets: 12.2% (the
//!   classic `fine` layout: 25%);
//! - per key, `--key-buckets slo` (the default): 39.7% (classic: 7.8% at
//!   the SLO thresholds, a factor of two elsewhere);
//! - per key, `--key-buckets log2`: 39.7% (classic: a factor of two);
//! - per key, `--key-buckets fine`: 18.8% (classic: 25%).
//!
//! Schema 3 for every family: a fleet's native histograms then add up
//! without Prometheus lowering any of them to a coarser schema. Waits of 0
//! ns (none in practice) go to the zero bucket; waits below 1.024 us or
//! beyond the last boundary are counted in the native bucket nearest their
//! source bucket's edge, as the classic layout counts them in its first
//! bucket or in `+Inf`.

use std::sync::LazyLock;

use super::{
    Bucket,
    layout::{LAYOUT, LOG2, Layout, SLO, percent_up},
};

/// Prometheus' exponential schema: 2^3 = 8 buckets per power of two.
pub(crate) const SCHEMA: i32 = 3;
/// Native zero bucket: only waits of 0 ns. Nonzero, so that Prometheus
/// 2.42 takes even an empty histogram for a native one; Prometheus'
/// clients use the same default (2^-128).
pub(crate) const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// Worst percentile errors as the docs state them (the HELP texts state
/// the computed ones; a test checks that they agree).
#[cfg(test)]
const TOTAL_ERROR: &str = "12.2%";
#[cfg(test)]
const LOG2_ERROR: &str = "39.7%";
#[cfg(test)]
const FINE_ERROR: &str = "18.8%";
#[cfg(test)]
const SLO_ERROR: &str = "39.7%";

/// Where each source bucket goes in the native histogram.
#[derive(Debug)]
pub(crate) struct NativeMap {
    /// Per source bucket: its native index, None for the zero bucket.
    index: Vec<Option<i32>>,
    /// The worst relative error of a percentile, over the source buckets
    /// from 1.024 us to the last finite classic boundary (what the tests
    /// check the stated errors against).
    worst: f64,
}

/// A histogram's native buckets, as the protobuf carries them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct NativeBuckets {
    pub zero_count: u64,
    /// `(offset, length)`: the first offset is the first index, the others
    /// the gap after the previous span.
    pub spans: Vec<(i32, u32)>,
    /// Each bucket's count minus the previous bucket's (the first: minus 0).
    pub deltas: Vec<i64>,
}

/// The native index whose bucket `(b^(i-1), b^i]` holds `seconds` > 0.
fn index_of(seconds: f64) -> i32 {
    let scaled = seconds.log2() * f64::from(1 << SCHEMA);
    // A value on a boundary belongs to the bucket below it; the rounding
    // of log2 must not push it up.
    let i = scaled.ceil();
    let i = if (i - 1.0 - scaled).abs() < 1e-9 {
        i - 1.0
    } else {
        i
    };
    i as i32
}

/// The bounds `(lo, hi]` of native bucket `i`, in seconds.
fn bounds_of(i: i32) -> (f64, f64) {
    let per_octave = f64::from(1 << SCHEMA);
    (
        (f64::from(i - 1) / per_octave).exp2(),
        (f64::from(i) / per_octave).exp2(),
    )
}

/// The worst `|r - w| / w` for a wait `w` in `[low, high]` reported as
/// `r` in `[lo, hi]`: one of the four corners.
fn error(low: f64, high: f64, lo: f64, hi: f64) -> f64 {
    [(lo, low), (hi, low), (lo, high), (hi, high)]
        .into_iter()
        .map(|(r, w)| (r - w).abs() / w)
        .fold(0.0, f64::max)
}

impl NativeMap {
    /// From the source buckets' bounds `[low, high)` in nanoseconds
    /// (`high` None: unbounded), ascending; `stated` is the range of
    /// nanoseconds whose buckets count in the worst error.
    fn new(bounds: &[(u64, Option<u64>)], stated: (u64, u64)) -> NativeMap {
        let mut index = Vec::with_capacity(bounds.len());
        let mut worst = 0.0f64;
        let mut previous = i32::MIN;
        for &(low, high) in bounds {
            let chosen = match (low, high) {
                (0, Some(1)) => None,
                // Below the first boundary: the native bucket of its top.
                (0, Some(high)) => Some(index_of(high as f64 / 1e9)),
                // Unbounded: the native bucket just above its bottom.
                (low, None) => Some(index_of(low as f64 / 1e9) + 1),
                (low, Some(high)) => {
                    let (l, h) = (low as f64 / 1e9, high as f64 / 1e9);
                    let (best, e) = (index_of(l)..=index_of(h))
                        .map(|i| {
                            let (lo, hi) = bounds_of(i);
                            (i, error(l, h, lo, hi))
                        })
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .expect("at least one candidate");
                    if low >= stated.0 && high <= stated.1 {
                        worst = worst.max(e);
                    }
                    Some(best)
                }
            };
            // Monotonic (it already is: the test checks), so that ranks
            // keep their order.
            let chosen = chosen.map(|i| i.max(previous));
            if let Some(i) = chosen {
                previous = i;
            }
            index.push(chosen);
        }
        NativeMap { index, worst }
    }

    /// For the kernel's own buckets (the total's `Series::kernel`).
    fn kernel() -> NativeMap {
        let bounds: Vec<(u64, Option<u64>)> = Bucket::all()
            .map(|b| (b.low_ns, b.upper_ns().map(|high| high + 1)))
            .collect();
        NativeMap::new(&bounds, (1 << 10, 1 << 36))
    }

    /// For an exported layout's buckets (`Folded`).
    fn layout(layout: &Layout) -> NativeMap {
        let edges = layout.edges_ns();
        let mut bounds = Vec::with_capacity(edges.len() + 1);
        let mut low = 0;
        for &edge in edges {
            bounds.push((low, Some(edge)));
            low = edge;
        }
        bounds.push((low, None));
        NativeMap::new(&bounds, (edges[0], *edges.last().expect("edges")))
    }

    /// The worst relative error of a percentile (0.122 for 12.2%).
    #[cfg(test)]
    pub(crate) fn worst(&self) -> f64 {
        self.worst
    }

    /// The worst error as the HELP states it: a percentage rounded up.
    pub(crate) fn stated(&self) -> String {
        percent_up(self.worst)
    }

    /// The native buckets of the source counts `counts`.
    pub(crate) fn buckets(&self, counts: &[u64]) -> NativeBuckets {
        let mut out = NativeBuckets::default();
        // (index, count) of the current native bucket, merged over the
        // source buckets that map to it.
        let mut current: Option<(i32, u64)> = None;
        let mut last: Option<(i32, u64)> = None;
        let mut flush = |out: &mut NativeBuckets, (i, n): (i32, u64)| {
            match last {
                Some((j, _)) if i == j + 1 => {
                    out.spans.last_mut().expect("a span").1 += 1;
                }
                Some((j, _)) => out.spans.push((i - j - 1, 1)),
                None => out.spans.push((i, 1)),
            }
            let before = last.map_or(0, |(_, m)| m);
            out.deltas.push(n as i64 - before as i64);
            last = Some((i, n));
        };
        for (&n, &to) in counts.iter().zip(&self.index) {
            if n == 0 {
                continue;
            }
            let Some(i) = to else {
                out.zero_count += n;
                continue;
            };
            current = match current {
                Some((j, m)) if j == i => Some((j, m + n)),
                Some(done) => {
                    flush(&mut out, done);
                    Some((i, n))
                }
                None => Some((i, n)),
            };
        }
        if let Some(done) = current {
            flush(&mut out, done);
        }
        out
    }
}

/// The whole-system total, from the kernel's buckets.
pub(crate) static KERNEL: LazyLock<NativeMap> = LazyLock::new(NativeMap::kernel);
/// The per-key families, from `--key-buckets slo`, `log2` or `fine`.
pub(crate) static SLO_MAP: LazyLock<NativeMap> = LazyLock::new(|| NativeMap::layout(&SLO));
pub(crate) static LOG2_MAP: LazyLock<NativeMap> = LazyLock::new(|| NativeMap::layout(&LOG2));
pub(crate) static FINE_MAP: LazyLock<NativeMap> = LazyLock::new(|| NativeMap::layout(&LAYOUT));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{NR_BUCKETS, bucket_index};

    #[test]
    fn stated_errors_are_the_computed_ones() {
        // Rounded up: a bound.
        assert_eq!(KERNEL.stated(), TOTAL_ERROR);
        assert_eq!(LOG2_MAP.stated(), LOG2_ERROR);
        assert_eq!(SLO_MAP.stated(), SLO_ERROR);
        assert_eq!(FINE_MAP.stated(), FINE_ERROR);
    }

    #[test]
    fn the_mapping_is_monotonic_and_zero_only_for_zero() {
        for map in [&*KERNEL, &*LOG2_MAP, &*FINE_MAP, &*SLO_MAP] {
            let idx: Vec<i32> = map.index.iter().flatten().copied().collect();
            assert!(idx.windows(2).all(|w| w[0] <= w[1]));
        }
        assert_eq!(KERNEL.index[0], None);
        assert!(KERNEL.index[1..].iter().all(Option::is_some));
        // 3 ms: 2^(-8.38...) s, index ceil(-67.06) = -67.
        let i = KERNEL.index[bucket_index(3_000_000)].unwrap();
        let (lo, hi) = bounds_of(i);
        assert!(lo < 0.003 * 1.13 && hi > 0.003 / 1.13, "{lo} {hi}");
    }

    #[test]
    fn boundaries_belong_to_the_bucket_below() {
        assert_eq!(index_of(1.0), 0);
        assert_eq!(index_of(2.0), 8);
        assert_eq!(index_of(2.0f64.powf(1.0 / 8.0)), 1);
        assert_eq!(index_of(1.01), 1);
        assert_eq!(index_of(0.5), -8);
    }

    #[test]
    fn spans_and_deltas() {
        let map = NativeMap {
            index: vec![None, Some(-2), Some(-1), Some(-1), Some(3), Some(4)],
            worst: 0.0,
        };
        let b = map.buckets(&[5, 1, 2, 3, 0, 7]);
        assert_eq!(b.zero_count, 5);
        // -2: 1, -1: 5, then 3 after a gap of 3 (0, 1, 2): 0 waits there,
        // 4: 7.
        assert_eq!(b.spans, [(-2, 2), (4, 1)]);
        assert_eq!(b.deltas, [1, 4, 2]);
        assert_eq!(map.buckets(&[0; 6]), NativeBuckets::default());
    }

    /// Percentiles of random waits, from the native buckets as Prometheus
    /// computes them (linear inside the bucket of the rank), against the
    /// exact ones: within the stated error.
    #[test]
    fn percentiles_are_within_the_stated_error() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..50 {
            // Log-uniform from 1.1 us to about 1 s, some rounds narrow.
            let spread = if round % 2 == 0 { 20.0 } else { 3.0 };
            let mut waits: Vec<u64> = (0..2_000)
                .map(|_| {
                    let u = (next() % 1_000_000) as f64 / 1e6;
                    (1_100.0 * 2f64.powf(u * spread)) as u64
                })
                .collect();
            waits.sort_unstable();
            let mut kernel = vec![0u64; NR_BUCKETS];
            for &w in &waits {
                kernel[bucket_index(w)] += 1;
            }
            let native = KERNEL.buckets(&kernel);
            let mut expanded = Vec::new();
            let mut index = 0;
            let mut count = 0i64;
            let mut deltas = native.deltas.iter();
            for &(offset, len) in &native.spans {
                index += offset;
                for _ in 0..len {
                    count += deltas.next().unwrap();
                    expanded.push((index, count as u64));
                    index += 1;
                }
            }
            for q in [0.5, 0.9, 0.99] {
                let rank = q * waits.len() as f64;
                let exact = waits[(rank.ceil() as usize).max(1) - 1] as f64 / 1e9;
                let mut below = 0.0;
                let (i, n) = expanded
                    .iter()
                    .find(|(_, n)| {
                        below += *n as f64;
                        below >= rank
                    })
                    .copied()
                    .unwrap();
                let (lo, hi) = bounds_of(i);
                let got = lo + (hi - lo) * (rank - (below - n as f64)) / n as f64;
                let err = (got - exact).abs() / exact;
                assert!(
                    err <= KERNEL.worst() + 1e-9,
                    "q{q}: {got} vs {exact}: {err}"
                );
            }
        }
    }
}
