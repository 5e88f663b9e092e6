//! Bucketing of a wait, two ways.
//!
//! Fine (log-linear, in nanoseconds): values 0..=7 get a bucket each. Above
//! that, every power of two [2^k, 2^(k+1)) is split into [`SUB_BUCKETS`] = 8
//! equal linear sub-buckets, so a bucket's width is at most 1/8 of its lower
//! bound: any value estimated inside its bucket is within 12.5% of the true
//! value. Exponents above [`MAX_EXP`] saturate into the last bucket: waits over
//! 2^40 ns (18 minutes), which a run queue does not produce.
//!
//! Coarse (runqlat's log2 slots, in the display unit): slot 0 holds 0 and 1,
//! slot k holds [2^k, 2^(k+1)). Microsecond and millisecond powers of two do
//! not fall on nanosecond powers of two, so these are counted separately, to
//! stay identical to runqlat's table.

use crate::flat::{above, min, select};

/// log2 of the number of linear sub-buckets per power of two.
pub const SUB_BITS: u32 = 3;
/// Linear sub-buckets per power of two.
pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Largest exponent with buckets of its own.
pub const MAX_EXP: u32 = 39;
/// Number of buckets: the exact ones below [`SUB_BUCKETS`], then
/// [`SUB_BUCKETS`] per exponent from [`SUB_BITS`] to [`MAX_EXP`].
pub const NR_BUCKETS: usize = ((MAX_EXP - SUB_BITS + 2) as usize) * SUB_BUCKETS as usize;

/// floor(log2(v)) for v > 0, 0 for v == 0; branch-light and loop-free so the
/// BPF verifier accepts it (BPF has no count-leading-zeros instruction).
#[inline(always)]
pub fn log2_u64(v: u64) -> u32 {
    let hi = (v >> 32) as u32;
    if hi != 0 {
        log2_u32(hi) + 32
    } else {
        log2_u32(v as u32)
    }
}

#[inline(always)]
fn log2_u32(mut v: u32) -> u32 {
    let mut r = ((v > 0xffff) as u32) << 4;
    v >>= r;
    let mut shift = ((v > 0xff) as u32) << 3;
    v >>= shift;
    r |= shift;
    shift = ((v > 0xf) as u32) << 2;
    v >>= shift;
    r |= shift;
    shift = ((v > 0x3) as u32) << 1;
    v >>= shift;
    r |= shift;
    r | (v >> 1)
}

/// Bucket of a value; always `< NR_BUCKETS`.
#[inline(always)]
pub fn bucket_index(v: u64) -> usize {
    if v < SUB_BUCKETS {
        return v as usize;
    }
    let exp = log2_u64(v);
    if exp > MAX_EXP {
        return NR_BUCKETS - 1;
    }
    let sub = (v >> (exp - SUB_BITS)) & (SUB_BUCKETS - 1);
    ((exp - SUB_BITS + 1) as usize) * SUB_BUCKETS as usize + sub as usize
}

/// `bucket_index` without a branch, for `v` below 2^63 (a wait always
/// is): for a kernel function whose every branch the verifier would walk
/// apart (crate::flat).
#[inline(always)]
pub fn bucket_index_flat(v: u64) -> usize {
    // Below SUB_BUCKETS a value is its own bucket; the formula then runs
    // on SUB_BUCKETS, which it handles, and is not used.
    let small = 1 ^ above(v, SUB_BUCKETS - 1);
    let w = select(small, SUB_BUCKETS, v);
    let exp = log2_flat(w);
    let sub = (w >> ((exp - u64::from(SUB_BITS)) & 63)) & (SUB_BUCKETS - 1);
    let index = (exp - u64::from(SUB_BITS) + 1) * SUB_BUCKETS + sub;
    select(small, v, min(index, NR_BUCKETS as u64 - 1)) as usize
}

/// floor(log2(v)) for 0 < v < 2^63, without a branch.
#[inline(always)]
fn log2_flat(mut v: u64) -> u64 {
    let mut r = above(v, 0xffff_ffff) << 5;
    v >>= r;
    let mut shift = above(v, 0xffff) << 4;
    v >>= shift;
    r |= shift;
    shift = above(v, 0xff) << 3;
    v >>= shift;
    r |= shift;
    shift = above(v, 0xf) << 2;
    v >>= shift;
    r |= shift;
    shift = above(v, 0x3) << 1;
    v >>= shift;
    r |= shift;
    r | (v >> 1)
}

/// Inclusive bounds `(low, high)` of a bucket. The last bucket also holds
/// everything above `high` (saturation).
pub fn bucket_bounds(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return (index, index);
    }
    let exp = index / SUB_BUCKETS + SUB_BITS as u64 - 1;
    let sub = index % SUB_BUCKETS;
    let width = 1u64 << (exp - SUB_BITS as u64);
    let low = (SUB_BUCKETS + sub) * width;
    (low, low + width - 1)
}

/// Number of runqlat log2 slots kept; larger values count in the last one
/// (runqlat clamps the same way, at 26).
pub const NR_LOG2_SLOTS: usize = 40;

/// runqlat's slot for a value in the display unit: `log2l(v)`, clamped.
#[inline(always)]
pub fn log2_slot(v: u64) -> usize {
    let slot = log2_u64(v) as usize;
    if slot >= NR_LOG2_SLOTS {
        NR_LOG2_SLOTS - 1
    } else {
        slot
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    fn reference_log2(v: u64) -> u32 {
        if v == 0 { 0 } else { 63 - v.leading_zeros() }
    }

    fn samples() -> Vec<u64> {
        let mut v: Vec<u64> = (0..5000).collect();
        for shift in 0..64 {
            let p = 1u64 << shift;
            v.extend([p - 1, p, p + 1, p.wrapping_mul(3) / 2]);
        }
        v.push(u64::MAX);
        v
    }

    #[test]
    fn log2_matches_leading_zeros() {
        for v in samples() {
            assert_eq!(log2_u64(v), reference_log2(v), "v={v}");
        }
    }

    #[test]
    fn every_value_falls_inside_its_bucket() {
        for v in samples() {
            let i = bucket_index(v);
            assert!(i < NR_BUCKETS);
            let (lo, hi) = bucket_bounds(i);
            if i == NR_BUCKETS - 1 {
                assert!(v >= lo, "v={v} lo={lo}");
            } else {
                assert!(lo <= v && v <= hi, "v={v} in [{lo},{hi}] (bucket {i})");
            }
        }
    }

    #[test]
    fn the_flat_bucket_is_the_bucket() {
        for v in samples().into_iter().filter(|&v| v < 1 << 63) {
            assert_eq!(bucket_index_flat(v), bucket_index(v), "v={v}");
        }
    }

    #[test]
    fn buckets_tile_the_number_line() {
        for i in 1..NR_BUCKETS {
            let (_, prev_hi) = bucket_bounds(i - 1);
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, prev_hi + 1, "gap before bucket {i}");
            assert!(hi >= lo);
        }
        assert_eq!(bucket_bounds(0), (0, 0));
    }

    #[test]
    fn bucket_width_is_at_most_an_eighth_of_its_low_bound() {
        for i in SUB_BUCKETS as usize..NR_BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert!((hi - lo + 1) * SUB_BUCKETS <= lo, "bucket {i}: [{lo},{hi}]");
        }
    }

    #[test]
    fn log2_slots_match_runqlat() {
        // runqlat: slot = log2l(delta_us), with log2l(0) == 0.
        for v in samples() {
            let expect = (reference_log2(v) as usize).min(NR_LOG2_SLOTS - 1);
            assert_eq!(log2_slot(v), expect, "v={v}");
        }
    }
}
