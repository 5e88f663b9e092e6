//! The kernel's two bucketings as userspace reads them. Their arithmetic is
//! `schedlat_common::bucket` (the programs count with the same functions);
//! what follows from it for a reader is here, once: a fine bucket's
//! bounds, that the last one is open above, which bucket holds a rank, and
//! the bounds of runqlat's log2 slots.

use schedlat_common::bucket::bucket_bounds;
pub(crate) use schedlat_common::bucket::{NR_BUCKETS, NR_LOG2_SLOTS, bucket_index, log2_slot};

use super::waits::Waits;

/// One fine bucket (log-linear, in nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub index: usize,
    pub low_ns: u64,
    /// Inclusive. For the last bucket this is its nominal end: it also
    /// holds every longer wait ([`Bucket::upper_ns`]).
    pub high_ns: u64,
}

impl Bucket {
    /// Bucket `index` (below [`NR_BUCKETS`]).
    pub(crate) fn at(index: usize) -> Bucket {
        let (low_ns, high_ns) = bucket_bounds(index);
        Bucket {
            index,
            low_ns,
            high_ns,
        }
    }

    /// The bucket that counts a wait of `ns`.
    #[cfg(test)]
    pub(crate) fn of(ns: u64) -> Bucket {
        Bucket::at(bucket_index(ns))
    }

    /// Every bucket, shortest first.
    pub(crate) fn all() -> impl Iterator<Item = Bucket> {
        (0..NR_BUCKETS).map(Bucket::at)
    }

    /// The last bucket saturates: waits over 2^40 ns count in it too.
    pub(crate) fn is_last(&self) -> bool {
        self.index + 1 == NR_BUCKETS
    }

    /// The longest wait the bucket can hold; None for the last one.
    pub(crate) fn upper_ns(&self) -> Option<u64> {
        (!self.is_last()).then_some(self.high_ns)
    }

    /// Nanoseconds it spans (nominal for the last one).
    pub(crate) fn width_ns(&self) -> u64 {
        self.high_ns - self.low_ns + 1
    }

    /// The middle of its nominal span.
    pub(crate) fn midpoint_ns(&self) -> u64 {
        self.low_ns + (self.high_ns - self.low_ns) / 2
    }
}

/// The bucket that holds the `rank`-th wait (1-based) of a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rank {
    pub bucket: Bucket,
    /// Waits in that bucket, and in the buckets before it.
    pub count: u64,
    pub before: u64,
}

/// runqlat's log2 slot bounds, inclusive, in the display unit: slot 0 holds
/// 0 and 1, slot k holds 2^k to 2^(k+1) - 1.
pub(crate) fn log2_slot_bounds(slot: usize) -> (u64, u64) {
    let high = (1u64 << (slot + 1)) - 1;
    let low = if slot == 0 { 0 } else { 1u64 << slot };
    (low, high)
}

impl Waits {
    /// The non-empty fine buckets and their counts, shortest first.
    pub(crate) fn nonempty_buckets(&self) -> impl Iterator<Item = (Bucket, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, &n)| (Bucket::at(i), n))
    }

    /// The bucket holding the `rank`-th wait; None past the last wait.
    pub(crate) fn bucket_of_rank(&self, rank: u64) -> Option<Rank> {
        let mut before = 0;
        for (bucket, count) in self.nonempty_buckets() {
            if before + count >= rank {
                return Some(Rank {
                    bucket,
                    count,
                    before,
                });
            }
            before += count;
        }
        None
    }

    /// Adds `count` waits to the fine bucket that holds `ns` (a bucket read
    /// back from its low bound); None if its count would pass u64.
    pub(crate) fn add_at(&mut self, ns: u64, count: u64) -> Option<()> {
        let sum = &mut self.buckets[bucket_index(ns)];
        *sum = sum.checked_add(count)?;
        Some(())
    }

    /// runqlat's log2 slots in another unit (`unit_ns` per unit), rebuilt
    /// from the fine buckets, each placed by its midpoint: a fine bucket is
    /// at most 1/8 of a power of two wide, so a slot boundary is off by at
    /// most that. Up to the highest non-empty slot, as
    /// [`Waits::log2_slots`].
    pub(crate) fn log2_slots_in(&self, unit_ns: u64) -> Vec<u64> {
        let mut slots = vec![0u64; NR_LOG2_SLOTS];
        for (bucket, count) in self.nonempty_buckets() {
            slots[log2_slot(bucket.midpoint_ns() / unit_ns)] += count;
        }
        let used = slots.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        slots.truncate(used);
        slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_bucket_is_open() {
        assert!(
            Bucket::all()
                .filter(|b| b.upper_ns().is_none())
                .eq([Bucket::at(NR_BUCKETS - 1)])
        );
        let b = Bucket::of(3_000_000);
        assert!(b.low_ns <= 3_000_000 && 3_000_000 <= b.upper_ns().unwrap());
        assert_eq!(b.width_ns(), b.high_ns - b.low_ns + 1);
    }

    #[test]
    fn log2_slot_bounds_are_runqlats() {
        assert_eq!(log2_slot_bounds(0), (0, 1));
        assert_eq!(log2_slot_bounds(1), (2, 3));
        assert_eq!(log2_slot_bounds(11), (2048, 4095));
        for v in [0u64, 1, 2, 7, 1000, 3000] {
            let (low, high) = log2_slot_bounds(log2_slot(v));
            assert!(low <= v && v <= high, "{v}");
        }
    }
}
