//! The per-task word of the start array (schedlat-ebpf wait.rs START): one
//! u64 per TID holds everything the cause split needs to know about a wait
//! in progress, so the split adds no per-task memory.
//!
//! | bits   | field                                                        |
//! |--------|--------------------------------------------------------------|
//! | 0..46  | low 46 bits of the enqueue timestamp (ns)                    |
//! | 46..48 | how the wait began: 0 not waiting, 1 woken, 2 new, 3 preempted |
//! | 48..51 | depth class at enqueue (0..=5 as `Cause::Depth0`.., 6 unknown) |
//! | 51..64 | the CPU the task last ran on, plus one (0 = unknown)         |
//!
//! The wait is `(now - start) mod 2^46`, exact for waits under 2^46 ns
//! (19.5 hours). A start later than `now` (clock skew between CPUs) wraps
//! to 2^45 or more and is discarded, as a negative wait always was.
//!
//! The last-run CPU is written at the switch-in that ends a wait and kept
//! while the task runs and sleeps, so the next wait can tell whether it
//! ended on the same CPU.
//!
//! With `--waking`, a word that is not waiting may carry the time of the
//! task's sched_waking: kind 0 and depth field [`WAKING_MARK`] (a value no
//! wait writes), the timestamp in bits 0..46. The sched_wakeup that follows
//! reads the wakeup path's length from it ([`waking_ns`]) and overwrites it
//! with the wait ([`begin`]). A task woken while still waiting (preempted
//! on its way to sleep: still on its run queue) keeps its wait's word: it
//! is never stamped.

use crate::causes::Cause;

pub const TS_BITS: u32 = 46;
pub const TS_MASK: u64 = (1 << TS_BITS) - 1;
const KIND_SHIFT: u32 = 46;
const DEPTH_SHIFT: u32 = 48;
const CPU_SHIFT: u32 = 51;
/// CPUs the word can name: 13 bits for the CPU plus one.
pub const MAX_CPUS: u32 = (1 << (64 - CPU_SHIFT)) - 1;
/// Waits at least this long after wrapping are starts in the future.
const NEGATIVE: u64 = 1 << (TS_BITS - 1);

/// How a wait began (bits 46..48); `NotWaiting` is the old `start == 0`.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    NotWaiting = 0,
    Woken = 1,
    New = 2,
    Preempted = 3,
}

/// The depth field's "not measured" value.
pub const DEPTH_UNKNOWN: u64 = 6;
/// The depth field of a not-waiting word stamped at sched_waking.
pub const WAKING_MARK: u64 = 7;
const DEPTH_FIELD: u64 = 7 << DEPTH_SHIFT;

/// The word of a wait that begins at `now`, the `kind` way, behind
/// `depth` (a depth class index 0..=5, or [`DEPTH_UNKNOWN`]); `old` is the
/// task's word before, whose last-run CPU is kept.
#[inline(always)]
pub fn begin(old: u64, now: u64, kind: Kind, depth: u64) -> u64 {
    (old & (u64::MAX << CPU_SHIFT))
        | (now & TS_MASK)
        | ((kind as u64) << KIND_SHIFT)
        | ((depth & 7) << DEPTH_SHIFT)
}

/// The word after a wait ends with the task switched in on `cpu`: not
/// waiting, last run on `cpu` (unknown when `cpu` does not fit).
#[inline(always)]
pub fn ended_on(cpu: u32) -> u64 {
    if cpu >= MAX_CPUS {
        return 0;
    }
    u64::from(cpu + 1) << CPU_SHIFT
}

/// Bits 46..48: 0 not waiting, 1 woken, 2 new, 3 preempted.
#[inline(always)]
pub fn kind_bits(word: u64) -> u64 {
    (word >> KIND_SHIFT) & 3
}

/// Whether a wait is in progress.
#[inline(always)]
pub fn waiting(word: u64) -> bool {
    kind_bits(word) != 0
}

/// The [`Cause`] index of how the wait began (Woken 0, New 1, Preempted
/// 2); meaningless when not [`waiting`].
#[inline(always)]
pub fn kind_cause(word: u64) -> u64 {
    kind_bits(word).wrapping_sub(1) & 3
}

/// The wait from the word's start to `now`, or None when the start is
/// later than `now` (it wrapped to 2^45 or more).
#[inline(always)]
pub fn wait_ns(word: u64, now: u64) -> Option<u64> {
    let wait = now.wrapping_sub(word) & TS_MASK;
    if wait >= NEGATIVE { None } else { Some(wait) }
}

/// The [`Cause`] index of the depth class recorded at enqueue.
#[inline(always)]
pub fn depth_cause(word: u64) -> u64 {
    let depth = (word >> DEPTH_SHIFT) & 7;
    if depth >= DEPTH_UNKNOWN {
        Cause::DepthUnknown as u64
    } else {
        Cause::Depth0 as u64 + depth
    }
}

/// The depth field for a wait queued behind `others` tasks.
#[inline(always)]
pub fn depth_field(others: u32) -> u64 {
    crate::causes::depth_class(others) as u64 - Cause::Depth0 as u64
}

/// The word of a task whose sched_waking fires at `now`, its word being
/// `old`: stamped, its last-run CPU kept; None (leave it) while a wait is
/// in progress.
#[inline(always)]
pub fn waking(old: u64, now: u64) -> Option<u64> {
    if waiting(old) {
        return None;
    }
    Some((old & (u64::MAX << CPU_SHIFT)) | (now & TS_MASK) | (WAKING_MARK << DEPTH_SHIFT))
}

/// The wakeup path's length at the sched_wakeup at `now`: from the stamp
/// [`waking`] left in `word`; None without one (a wait in progress, no
/// sched_waking seen since the last wait, or a stamp later than `now`).
#[inline(always)]
pub fn waking_ns(word: u64, now: u64) -> Option<u64> {
    if waiting(word) || word & DEPTH_FIELD != WAKING_MARK << DEPTH_SHIFT {
        return None;
    }
    wait_ns(word, now)
}

/// The CPU the task last ran on plus one; 0 when unknown.
#[inline(always)]
pub fn last_cpu_plus_one(word: u64) -> u64 {
    word >> CPU_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_the_cpu_survives_a_wait() {
        let ran = ended_on(5);
        assert!(!waiting(ran));
        assert_eq!(last_cpu_plus_one(ran), 6);
        let now = 123_456_789_012_345;
        let w = begin(ran, now, Kind::Preempted, depth_field(3));
        assert!(waiting(w));
        assert_eq!(kind_cause(w), Cause::Preempted as u64);
        assert_eq!(depth_cause(w), Cause::Depth3To4 as u64);
        assert_eq!(last_cpu_plus_one(w), 6);
        assert_eq!(wait_ns(w, now + 1500), Some(1500));
        // A new wait replaces everything but the CPU.
        let w2 = begin(w, now + 10, Kind::Woken, DEPTH_UNKNOWN);
        assert_eq!(kind_cause(w2), Cause::Woken as u64);
        assert_eq!(depth_cause(w2), Cause::DepthUnknown as u64);
        assert_eq!(last_cpu_plus_one(w2), 6);
        assert_eq!(wait_ns(w2, now + 10), Some(0));
        let w3 = begin(0, now, Kind::New, depth_field(0));
        assert_eq!(kind_cause(w3), Cause::New as u64);
        assert_eq!(depth_cause(w3), Cause::Depth0 as u64);
        assert_eq!(last_cpu_plus_one(w3), 0);
    }

    #[test]
    fn waits_across_the_timestamp_wrap_are_exact() {
        // The enqueue just before the low 46 bits wrap, the switch-in after.
        let start = (7 << TS_BITS) + TS_MASK - 100;
        let w = begin(0, start, Kind::Woken, 0);
        assert_eq!(wait_ns(w, start + 1000), Some(1000));
        // The longest wait that is still exact.
        assert_eq!(wait_ns(w, start + NEGATIVE - 1), Some(NEGATIVE - 1));
    }

    #[test]
    fn a_start_in_the_future_is_negative() {
        let start = 1_000_000_000;
        let w = begin(ended_on(0), start, Kind::Woken, 0);
        assert_eq!(wait_ns(w, start - 1), None);
        assert_eq!(wait_ns(w, start - 5_000_000), None);
    }

    #[test]
    fn the_kind_never_reads_as_zero_while_waiting_and_cpus_are_bounded() {
        for kind in [Kind::Woken, Kind::New, Kind::Preempted] {
            // Timestamps and depths whose bits would spill into the kind.
            let w = begin(u64::MAX, u64::MAX, kind, 7);
            assert_eq!(kind_bits(w), kind as u64);
            assert_eq!(last_cpu_plus_one(w), u64::from(MAX_CPUS));
        }
        assert_eq!(kind_cause(begin(0, 1, Kind::Woken, 0)), 0);
        assert_eq!(ended_on(MAX_CPUS - 1) >> CPU_SHIFT, u64::from(MAX_CPUS));
        assert_eq!(ended_on(MAX_CPUS), 0);
        assert_eq!(ended_on(u32::MAX), 0);
    }

    #[test]
    fn a_waking_stamp_times_the_wakeup_path_and_keeps_the_cpu() {
        let now = 987_654_321_000;
        let w = waking(ended_on(3), now).unwrap();
        assert!(!waiting(w));
        assert_eq!(last_cpu_plus_one(w), 4);
        assert_eq!(waking_ns(w, now + 2500), Some(2500));
        // Stamped again (a second wakeup before the first was consumed).
        let w = waking(w, now + 100).unwrap();
        assert_eq!(waking_ns(w, now + 2500), Some(2400));
        // The wait replaces the stamp: its wakeup has no second stage.
        let wait = begin(w, now + 2500, Kind::Woken, depth_field(1));
        assert_eq!(waking_ns(wait, now + 3000), None);
        assert_eq!(last_cpu_plus_one(wait), 4);
        assert_eq!(depth_cause(wait), Cause::Depth1 as u64);
        // A stamp in the future (clock skew) is discarded.
        assert_eq!(waking_ns(w, now), None);
    }

    #[test]
    fn no_stamp_means_no_waking_stage() {
        // Ran and slept without a sched_waking seen (attached mid-way).
        assert_eq!(waking_ns(ended_on(0), 1_000), None);
        assert_eq!(waking_ns(0, 1_000), None);
        // A task woken while still queued (preempted on its way to sleep)
        // keeps its wait, and no wait reads as stamped.
        for kind in [Kind::Woken, Kind::New, Kind::Preempted] {
            for depth in [0, 5, DEPTH_UNKNOWN] {
                let w = begin(ended_on(1), 5_000, kind, depth);
                assert_eq!(waking(w, 6_000), None);
                assert_eq!(waking_ns(w, 6_000), None);
            }
        }
        // Every stamp is a not-waiting word whatever the clock's bits.
        let w = waking(u64::MAX << CPU_SHIFT, u64::MAX).unwrap();
        assert!(!waiting(w));
        assert_eq!(last_cpu_plus_one(w), u64::from(MAX_CPUS));
    }

    #[test]
    fn depth_fields_map_to_every_depth_class() {
        for (others, cause) in [
            (0, Cause::Depth0),
            (1, Cause::Depth1),
            (2, Cause::Depth2),
            (4, Cause::Depth3To4),
            (8, Cause::Depth5To8),
            (9, Cause::Depth9Plus),
        ] {
            let w = begin(0, 1, Kind::Woken, depth_field(others));
            assert_eq!(depth_cause(w), cause as u64, "{others}");
        }
    }
}
