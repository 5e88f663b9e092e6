//! The cause split (docs/causes.md): every measured wait is counted in one
//! class of each of four splits: how it began, where it ended compared with
//! where the task last ran, who held the CPU when it ended, and how deep the
//! run queue was when it was queued. For waits that end on the CPU they were
//! queued on, the kernel's own accounting gives what else took that CPU
//! during the wait (steal, IRQ time, the task group's bandwidth throttling).
//!
//! One flat index space ([`Cause`]) serves the total (per CPU, [`CauseStats`])
//! and the breakdown keys ([`KeyCauses`]), so the kernel adds a wait to a
//! class with the same two array writes everywhere.

use crate::NR_BUCKETS;

/// A class of one of the splits; the value is the index into the
/// `count`/`sum_ns` arrays. The first [`NR_CAUSE_HISTOGRAMS`] also have a
/// fine histogram in [`CauseStats`] (for their percentiles).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    // How it began.
    /// sched_wakeup: the task had slept.
    Woken = 0,
    /// sched_wakeup_new: a new task's first wait.
    New = 1,
    /// Switched out while still runnable: the CPU was taken from it.
    Preempted = 2,
    // Where it ended, against the CPU the task last ran on.
    SameCpu = 3,
    Migrated = 4,
    /// No earlier run seen since load: its last CPU is unknown.
    PlacementUnknown = 5,
    /// Subsets of `Migrated`, where the loader knew the topology: the two
    /// CPUs share no last-level cache / are on different NUMA nodes.
    CrossLlc = 6,
    CrossNode = 7,
    // Who held the CPU when the wait ended (the task switched out).
    /// An RT or deadline task, while the waiter was not.
    HeldByHigherClass = 8,
    /// A kernel thread (PF_KTHREAD), other than the idle task.
    HeldByKernel = 9,
    /// The idle task: the CPU had nothing else to run (the wakeup path and
    /// the idle exit are the wait).
    HeldByIdle = 10,
    /// A task in the same cgroups as the waiter (the same css_set).
    HeldBySameCgroup = 11,
    HeldByOtherCgroup = 12,
    /// The hook mode gives no task pointers (classic tracepoints).
    HeldByUnknown = 13,
    // Tasks queued on the run queue besides this one, when it was queued.
    Depth0 = 14,
    Depth1 = 15,
    Depth2 = 16,
    Depth3To4 = 17,
    Depth5To8 = 18,
    Depth9Plus = 19,
    /// The kernel gives no run-queue length (no CONFIG_FAIR_GROUP_SCHED
    /// chain, or the classic tracepoints).
    DepthUnknown = 20,
}

impl Cause {
    /// Its name among its split's classes: the label value of the
    /// exposition's split families and the key of the JSON `causes`
    /// object (whose `placement` names the crossings `cross_llc` and
    /// `cross_node`). The text views word the classes for people.
    pub const fn name(self) -> &'static str {
        match self {
            Cause::Woken => "woken",
            Cause::New => "new",
            Cause::Preempted => "preempted",
            Cause::SameCpu => "same_cpu",
            Cause::Migrated => "migrated",
            Cause::PlacementUnknown | Cause::HeldByUnknown | Cause::DepthUnknown => "unknown",
            Cause::CrossLlc => "llc",
            Cause::CrossNode => "node",
            Cause::HeldByHigherClass => "higher_class",
            Cause::HeldByKernel => "kernel",
            Cause::HeldByIdle => "idle",
            Cause::HeldBySameCgroup => "same_cgroup",
            Cause::HeldByOtherCgroup => "other_cgroup",
            Cause::Depth0 => "0",
            Cause::Depth1 => "1",
            Cause::Depth2 => "2",
            Cause::Depth3To4 => "3-4",
            Cause::Depth5To8 => "5-8",
            Cause::Depth9Plus => "9+",
        }
    }
}

/// Classes in [`Cause`].
pub const NR_CAUSES: usize = 21;
/// Classes with a fine histogram: Woken, New, Preempted, SameCpu, Migrated.
pub const NR_CAUSE_HISTOGRAMS: usize = 5;

/// The classes of each split, in order: every wait is in exactly one
/// class of each (`CrossLlc` and `CrossNode` are subsets of `Migrated`,
/// in none of these).
pub const BEGAN: [Cause; 3] = [Cause::Woken, Cause::New, Cause::Preempted];
pub const PLACEMENT: [Cause; 3] = [Cause::SameCpu, Cause::Migrated, Cause::PlacementUnknown];
pub const HELD_BY: [Cause; 6] = [
    Cause::HeldByHigherClass,
    Cause::HeldByKernel,
    Cause::HeldByIdle,
    Cause::HeldBySameCgroup,
    Cause::HeldByOtherCgroup,
    Cause::HeldByUnknown,
];
pub const DEPTH: [Cause; 7] = [
    Cause::Depth0,
    Cause::Depth1,
    Cause::Depth2,
    Cause::Depth3To4,
    Cause::Depth5To8,
    Cause::Depth9Plus,
    Cause::DepthUnknown,
];

/// What else took the CPU during a same-CPU wait, by index into
/// `overlap_ns`.
pub const OVERLAP_STEAL: usize = 0;
pub const OVERLAP_IRQ: usize = 1;
pub const OVERLAP_THROTTLED: usize = 2;
pub const NR_OVERLAPS: usize = 3;

/// The depth class of a wait queued behind `others` tasks (the run queue's
/// nr_running minus the waiter itself). Loop-free for the verifier.
#[inline(always)]
pub fn depth_class(others: u32) -> Cause {
    match others {
        0 => Cause::Depth0,
        1 => Cause::Depth1,
        2 => Cause::Depth2,
        3..=4 => Cause::Depth3To4,
        5..=8 => Cause::Depth5To8,
        _ => Cause::Depth9Plus,
    }
}

/// The split of the total, per CPU (a `PERCPU_ARRAY` value), cumulative
/// since load like [`crate::CpuStats`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CauseStats {
    /// Waits per class, and their sum.
    pub count: [u64; NR_CAUSES],
    pub sum_ns: [u64; NR_CAUSES],
    /// Fine histograms (`bucket_index`) of the first classes.
    pub buckets: [[u64; NR_BUCKETS]; NR_CAUSE_HISTOGRAMS],
    /// Nanoseconds of the measured waits covered by steal, IRQ time and
    /// throttling (each capped at its wait).
    pub overlap_ns: [u64; NR_OVERLAPS],
    /// The waits whose overlap was measured, and their sum: the share's
    /// denominator.
    pub overlap_waits: u64,
    pub overlap_wait_ns: u64,
    /// The wakeup path before the queue (sched_waking to sched_wakeup),
    /// when asked for: count, sum and fine histogram.
    pub waking_count: u64,
    pub waking_sum_ns: u64,
    pub waking_buckets: [u64; NR_BUCKETS],
}

impl CauseStats {
    pub const ZERO: CauseStats = CauseStats {
        count: [0; NR_CAUSES],
        sum_ns: [0; NR_CAUSES],
        buckets: [[0; NR_BUCKETS]; NR_CAUSE_HISTOGRAMS],
        overlap_ns: [0; NR_OVERLAPS],
        overlap_waits: 0,
        overlap_wait_ns: 0,
        waking_count: 0,
        waking_sum_ns: 0,
        waking_buckets: [0; NR_BUCKETS],
    };
}

/// The split of one breakdown key (inside `scope::KeyStats`): counts and
/// sums, no histograms. Shared by CPUs, updated with atomic adds.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyCauses {
    pub count: [u32; NR_CAUSES],
    pub _pad: u32,
    pub sum_ns: [u64; NR_CAUSES],
    pub overlap_ns: [u64; NR_OVERLAPS],
    pub overlap_waits: u64,
    pub overlap_wait_ns: u64,
}

impl KeyCauses {
    pub const ZERO: KeyCauses = KeyCauses {
        count: [0; NR_CAUSES],
        _pad: 0,
        sum_ns: [0; NR_CAUSES],
        overlap_ns: [0; NR_OVERLAPS],
        overlap_waits: 0,
        overlap_wait_ns: 0,
    };
}

/// The kernel's accounting at the enqueue of a wait in progress, to be
/// differenced at its switch-in (a `CAUSE_SLOTS` value), and the decision
/// split's state of it. Slots are per CPU
/// and TID modulo [`SLOTS_PER_CPU`]: `word` is the task's start word at the
/// enqueue, and a switch-in only uses a slot holding its own word.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverlapSlot {
    pub word: u64,
    /// rq->prev_steal_time_rq, rq->prev_irq_time, and the task group's
    /// cfs_bandwidth.throttled_time, by `OVERLAP_*` index.
    pub at: [u64; NR_OVERLAPS],
    /// The decision split's state of the wait (`decision::EnqueueWord`).
    pub decision: u64,
}

/// Overlap snapshot slots per CPU: TIDs that share one (equal modulo
/// this) and wait on one CPU at once lose each other's measurement, never
/// mix it up.
pub const SLOTS_PER_CPU: u32 = 256;

/// Where a CPU sits (a `TOPOLOGY` value, from sysfs): the lowest CPU
/// sharing its last-level cache, and its NUMA node.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTopology {
    pub llc: u32,
    pub node: u32,
}

#[cfg(feature = "user")]
// SAFETY: repr(C), u64 fields and arrays only, no padding (checked below),
// valid for any bit pattern.
unsafe impl aya::Pod for CauseStats {}

#[cfg(feature = "user")]
// SAFETY: repr(C), u64 fields only.
unsafe impl aya::Pod for OverlapSlot {}

#[cfg(feature = "user")]
// SAFETY: repr(C), two u32 fields, no padding.
unsafe impl aya::Pod for CpuTopology {}

#[cfg(feature = "user")]
// SAFETY: as above; the u32 array is followed by an explicit `_pad`.
unsafe impl aya::Pod for KeyCauses {}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(
            size_of::<CauseStats>(),
            8 * (2 * NR_CAUSES + NR_CAUSE_HISTOGRAMS * NR_BUCKETS + NR_OVERLAPS + 4 + NR_BUCKETS)
        );
        assert_eq!(
            size_of::<KeyCauses>(),
            4 * NR_CAUSES + 4 + 8 * (NR_CAUSES + NR_OVERLAPS + 2)
        );
        assert_eq!(size_of::<OverlapSlot>(), 40);
        assert_eq!(size_of::<CpuTopology>(), 8);
        // A per-CPU map value may not exceed 32 KiB (PCPU_MIN_UNIT_SIZE).
        assert!(size_of::<CauseStats>() <= 32 * 1024);
    }

    #[test]
    fn classes_are_dense_and_histogrammed_first() {
        assert_eq!(Cause::DepthUnknown as usize, NR_CAUSES - 1);
        assert_eq!(Cause::Migrated as usize, NR_CAUSE_HISTOGRAMS - 1);
    }

    #[test]
    fn depth_classes_follow_the_documented_bounds() {
        let classes: [(u32, Cause); 10] = [
            (0, Cause::Depth0),
            (1, Cause::Depth1),
            (2, Cause::Depth2),
            (3, Cause::Depth3To4),
            (4, Cause::Depth3To4),
            (5, Cause::Depth5To8),
            (8, Cause::Depth5To8),
            (9, Cause::Depth9Plus),
            (1000, Cause::Depth9Plus),
            (u32::MAX, Cause::Depth9Plus),
        ];
        for (others, class) in classes {
            assert_eq!(depth_class(others), class, "{others}");
        }
    }
}
