//! schedlat's fine buckets as an HdrHistogram (the .hlog files of a
//! recorder dump, output/hlog.rs).
//!
//! The fine buckets split each power of two [2^k, 2^(k+1)) into 8 equal
//! parts. An HdrHistogram with 2 significant figures has 256 sub-buckets,
//! whose upper half splits each power of two into 128 equal parts; 128 is a
//! multiple of 8 and both are aligned on powers of two, so every schedlat
//! bucket is a union of whole HdrHistogram buckets (16 of them), and below
//! 256 ns HdrHistogram is exact. Each schedlat bucket's count is recorded at
//! its midpoint: the HdrHistogram bucket that holds it, and so every value
//! HdrHistogram reports for those waits (lowest, median or highest
//! equivalent), lies inside the schedlat bucket. Counts per schedlat bucket
//! therefore survive exactly, and a percentile read from the .hlog and one
//! from schedlat's JSON fall in the same bucket: they differ by less than
//! its width, at most 1/8 (12.5%) of its lower bound, and are exact below
//! 8 ns.

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;

use super::{Bucket, Waits};

/// Significant figures of the HdrHistogram (see the module comment).
pub(crate) const SIGFIG: u8 = 2;
/// Largest trackable value: schedlat's last bucket starts at 2^40 ns.
const HIGHEST_NS: u64 = 1 << 42;

/// The value each wait of `bucket` is recorded at.
pub(crate) fn representative_ns(bucket: Bucket) -> u64 {
    // The last bucket also holds everything above it: only its low bound
    // is known.
    match bucket.upper_ns() {
        Some(_) => bucket.midpoint_ns(),
        None => bucket.low_ns,
    }
}

/// An empty HdrHistogram of the bounds and precision above, in ns.
pub(crate) fn empty() -> Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, SIGFIG)
        .map_err(|e| anyhow!("HdrHistogram bounds: {e:?}"))
}

/// The waits as an HdrHistogram, in nanoseconds.
pub(crate) fn histogram_of(waits: &Waits) -> Result<Histogram<u64>> {
    let mut h = empty()?;
    for (bucket, count) in waits.nonempty_buckets() {
        h.record_n(representative_ns(bucket), count)
            .map_err(|e| anyhow!("HdrHistogram record: {e:?}"))?;
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::bucket_index;

    #[test]
    fn every_bucket_maps_inside_itself() {
        let h = empty().unwrap();
        for bucket in Bucket::all().filter(|b| !b.is_last()) {
            let v = representative_ns(bucket);
            assert_eq!(bucket_index(v), bucket.index);
            // What HdrHistogram may report for a value recorded at v.
            assert!(h.lowest_equivalent(v) >= bucket.low_ns, "{bucket:?}");
            assert!(h.highest_equivalent(v) <= bucket.high_ns, "{bucket:?}");
        }
    }
}
