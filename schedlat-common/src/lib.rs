//! What schedlat's kernel side and user side must agree on: the layout of the
//! map values and the arithmetic that puts a wait into a histogram bucket.
//!
//! Everything here is `#![no_std]` and loop-free so that the eBPF programs can
//! call it on every context switch; the host unit tests at the bottom check it
//! against plain arithmetic.
#![no_std]

pub mod bucket;
pub mod cast;
pub mod causes;
pub mod decision;
pub mod flat;
pub mod kconfig;
pub mod scope;
pub mod start;
pub mod victims;
pub mod workload;

pub use bucket::{NR_BUCKETS, NR_LOG2_SLOTS, bucket_index, log2_slot};

/// Per-CPU accumulator the kernel updates on every measured wait.
///
/// One instance per CPU (a `PERCPU_ARRAY`), so the hot path needs no atomic
/// operation and no shared cache line; userspace sums the CPUs. Every field is
/// a cumulative counter since load, so userspace gets interval values by
/// subtracting two snapshots and nothing is lost between reads (runqlat clears
/// its map after printing, which drops the events that land in between).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuStats {
    /// Waits per fine log-linear bucket of nanoseconds (see [`bucket`]).
    pub buckets: [u64; NR_BUCKETS],
    /// Waits per runqlat log2 slot of the display unit chosen at load.
    pub log2: [u64; NR_LOG2_SLOTS],
    /// Sum of all waits, in nanoseconds (for the exact mean).
    pub sum_ns: u64,
    /// Switch-ins whose start timestamp was later than "now" (clock skew
    /// between CPUs); the wait was discarded rather than recorded as huge.
    pub discarded_negative: u64,
    /// Enqueues that could not be timestamped because the TID was beyond the
    /// start array's capacity (pid_max grew after load).
    pub untracked_tid: u64,
    /// Waits counted here but in no breakdown histogram: the key map was
    /// full (`--max-keys`), or the key could not be read.
    pub unkeyed: u64,
}

impl CpuStats {
    pub const ZERO: CpuStats = CpuStats {
        buckets: [0; NR_BUCKETS],
        log2: [0; NR_LOG2_SLOTS],
        sum_ns: 0,
        discarded_negative: 0,
        untracked_tid: 0,
        unkeyed: 0,
    };
}

/// Shortest and longest wait per CPU within one interval ("epoch").
///
/// Two slots, indexed by the low bit of the `EPOCH` counter that userspace
/// flips at each interval end: it then reads the slot the kernel stopped
/// writing and zeroes it. Min and max cannot be differenced like counters,
/// so this is how intervals get exact extremes. 0 means "no wait yet".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extremes {
    pub min_ns: u64,
    pub max_ns: u64,
}

#[cfg(feature = "user")]
// SAFETY: repr(C), only u64 fields, no padding, valid for any bit pattern.
unsafe impl aya::Pod for CpuStats {}

#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for Extremes {}

/// Names shared by the loader and the eBPF object: maps and programs (the
/// globals are named by their types, [`kconfig::KernelGlobal`]).
pub mod names {
    pub const MAP_START: &str = "START";
    pub const MAP_STATS: &str = "STATS";
    pub const MAP_EXTREMES: &str = "EXTREMES";
    pub const MAP_EPOCH: &str = "EPOCH";
    /// The breakdown histograms (`scope::Breakdown`) and the zeroed value
    /// new keys are inserted from.
    pub const MAP_KEYED: &str = "KEYED";
    pub const MAP_KEY_ZERO: &str = "KEY_ZERO";
    /// Per breakdown key, its waits and their sum (`scope::KeySummary`):
    /// a memory-mapped array, one row per key (`KeyStats::summary_slot`),
    /// and the queue of its free rows.
    pub const MAP_KEY_SUMMARY: &str = "KEY_SUMMARY";
    pub const MAP_KEY_FREE: &str = "KEY_FREE";
    /// Victims and slow modes (schedlat-ebpf victims.rs): per-TID row
    /// slots, per-interval rows in two halves picked by the low bit of
    /// EPOCH, rows used per half, and the slow events.
    pub const MAP_VICTIM_SLOTS: &str = "VICTIM_SLOTS";
    pub const MAP_CULPRIT_SLOTS: &str = "CULPRIT_SLOTS";
    pub const MAP_VICTIM_ROWS: &str = "VICTIM_ROWS";
    pub const MAP_CULPRIT_ROWS: &str = "CULPRIT_ROWS";
    pub const MAP_ROWS_USED: &str = "ROWS_USED";
    pub const MAP_MODE_COUNTERS: &str = "MODE_COUNTERS";
    pub const MAP_SLOW_EVENTS: &str = "SLOW_EVENTS";
    /// `slow --stacks`: per TID its latest waker, and the wakers' stacks.
    pub const MAP_WAKERS: &str = "WAKERS";
    pub const MAP_WAKER_STACKS: &str = "WAKER_STACKS";
    /// The cause split (schedlat-ebpf causes.rs): per-CPU totals, the
    /// overlap snapshots of waits in progress, the CPUs' topology.
    pub const MAP_CAUSES: &str = "CAUSES";
    pub const MAP_CAUSE_SLOTS: &str = "CAUSE_SLOTS";
    pub const MAP_TOPOLOGY: &str = "TOPOLOGY";
    /// The decision split (schedlat-ebpf decision.rs): per-CPU totals, and
    /// per CPU the last wakeup onto it that found need-resched set.
    pub const MAP_DECISIONS: &str = "DECISIONS";
    pub const MAP_REQUESTS: &str = "REQUESTS";
    /// Per breakdown key, its decision split (keyed as `MAP_KEYED`), and
    /// the zeroed value new keys are inserted from.
    pub const MAP_KEY_DECISIONS: &str = "KEY_DECISIONS";
    pub const MAP_KEY_DECISION_ZERO: &str = "KEY_DECISION_ZERO";
    /// The workload views (schedlat-ebpf workload.rs): the neighbour-pair
    /// table and its second role's, its counters, the per-CPU record of recent switches its
    /// charges walk, the cgroup names sent at creation.
    pub const MAP_PAIRS: &str = "PAIRS";
    pub const MAP_SHARES: &str = "SHARES";
    pub const MAP_WORKLOAD_COUNTERS: &str = "WORKLOAD_COUNTERS";
    pub const MAP_SWITCHES: &str = "SWITCHES";
    pub const MAP_CGROUP_NAMES: &str = "CGROUP_NAMES";
    /// Sends each new cgroup's path with its id, when cgroups are named.
    pub const BTF_CGROUP_MKDIR: (&str, &str) = ("cgroup_mkdir", "cgroup_mkdir");

    /// (program, tracepoint) pairs for each hook mode.
    pub const BTF_PROGRAMS: [(&str, &str); 4] = [
        ("sched_wakeup", "sched_wakeup"),
        ("sched_wakeup_new", "sched_wakeup_new"),
        ("sched_switch", "sched_switch"),
        ("sched_process_exit", "sched_process_exit"),
    ];
    /// The decision split's programs, (program, the program it replaces):
    /// the same code with the split compiled in.
    pub const BTF_DECISION_PROGRAMS: [(&str, &str); 4] = [
        ("sched_wakeup_decision", "sched_wakeup"),
        ("sched_wakeup_new_decision", "sched_wakeup_new"),
        ("sched_switch_decision", "sched_switch"),
        ("sched_switch_victims_decision", BTF_SWITCH_VICTIMS),
    ];
    /// `--stacks`: the switch programs with the holder's stacks in each
    /// slow event compiled in, (program, the program it replaces, after
    /// the decision split's swap): the others carry none of it.
    pub const BTF_HOLDER_STACKS_PROGRAMS: [(&str, &str); 2] = [
        ("sched_switch_stacks", "sched_switch"),
        ("sched_switch_decision_stacks", "sched_switch_decision"),
    ];
    /// `--stacks all` besides: the wakeups that keep the waker's stack for
    /// the wait they begin (each wakeup of a traced task walks it).
    pub const BTF_WAKER_STACKS_PROGRAMS: [(&str, &str); 2] = [
        ("sched_wakeup_stacks", "sched_wakeup"),
        ("sched_wakeup_decision_stacks", "sched_wakeup_decision"),
    ];
    /// The neighbour pairs: the switch programs that charge each wait to
    /// its CPU's holders during it, (program, the program it replaces,
    /// after the decision split's swap): the others carry none of it.
    pub const BTF_PAIRS_PROGRAMS: [(&str, &str); 4] = [
        ("sched_switch_pairs", "sched_switch"),
        ("sched_switch_decision_pairs", "sched_switch_decision"),
        ("sched_switch_victims_pairs", BTF_SWITCH_VICTIMS),
        (
            "sched_switch_victims_decision_pairs",
            "sched_switch_victims_decision",
        ),
    ];
    /// The pairs' switches with the holder's stacks too (`serve --pairs
    /// --ring --stacks`), (program, the program it replaces, after the
    /// pairs' swap).
    pub const BTF_PAIRS_STACKS_PROGRAMS: [(&str, &str); 2] = [
        ("sched_switch_pairs_stacks", "sched_switch_pairs"),
        (
            "sched_switch_decision_pairs_stacks",
            "sched_switch_decision_pairs",
        ),
    ];
    /// The victims mode's sched_switch, which replaces `sched_switch`.
    pub const BTF_SWITCH_VICTIMS: &str = "sched_switch_victims";
    /// `--waking` (the wakeup path before the queue), in either mode.
    pub const BTF_WAKING: (&str, &str) = ("sched_waking", "sched_waking");
    pub const TP_WAKING: (&str, &str) = ("tp_sched_waking", "sched_waking");
    pub const TP_PROGRAMS: [(&str, &str); 4] = [
        ("tp_sched_wakeup", "sched_wakeup"),
        ("tp_sched_wakeup_new", "sched_wakeup_new"),
        ("tp_sched_switch", "sched_switch"),
        ("tp_sched_process_exit", "sched_process_exit"),
    ];
}
