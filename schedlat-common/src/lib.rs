//! What schedlat's kernel side and user side must agree on: the layout of the
//! map values and the arithmetic that puts a wait into a histogram bucket.
//!
//! Everything here is `#![no_std]` and loop-free so that the eBPF programs can
//! call it on every context switch; the host unit tests at the bottom check it
//! against plain arithmetic.
#![no_std]

pub mod bucket;
pub mod scope;
pub mod victims;

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

/// Names shared by the loader and the eBPF object: maps, programs, globals.
pub mod names {
    pub const MAP_START: &str = "START";
    pub const MAP_STATS: &str = "STATS";
    pub const MAP_EXTREMES: &str = "EXTREMES";
    pub const MAP_EPOCH: &str = "EPOCH";

    /// Nanoseconds per histogram unit (1000 = usecs, 1000000 = msecs).
    pub const GLOBAL_UNIT_NS: &str = "UNIT_NS";
    /// task_struct field offsets (bytes), resolved from the running kernel's BTF.
    pub const GLOBAL_TASK_PID_OFF: &str = "TASK_PID_OFF";
    pub const GLOBAL_TASK_STATE_OFF: &str = "TASK_STATE_OFF";
    pub const GLOBAL_TASK_TGID_OFF: &str = "TASK_TGID_OFF";
    /// Process filter (`-p`): only this tgid's waits; 0 = all.
    pub const GLOBAL_FILTER_TGID: &str = "FILTER_TGID";
    /// Scopes (schedlat-ebpf scope.rs): thread (`-t`), comm (`--comm`, 1
    /// plus the name as two words), cgroup id (`-c`), CPU mask (`--cpu`).
    pub const GLOBAL_FILTER_TID: &str = "FILTER_TID";
    pub const GLOBAL_FILTER_COMM: &str = "FILTER_COMM";
    pub const GLOBAL_FILTER_COMM_LO: &str = "FILTER_COMM_LO";
    pub const GLOBAL_FILTER_COMM_HI: &str = "FILTER_COMM_HI";
    pub const GLOBAL_FILTER_CGROUP_ID: &str = "FILTER_CGROUP_ID";
    pub const GLOBAL_FILTER_CPUS: &str = "FILTER_CPUS";
    pub const GLOBAL_FILTER_CPU_MASK: &str = "FILTER_CPU_MASK";
    /// The breakdown key (`scope::Breakdown`) and its map.
    pub const GLOBAL_BREAKDOWN: &str = "BREAKDOWN";
    pub const MAP_KEYED: &str = "KEYED";
    pub const MAP_KEY_ZERO: &str = "KEY_ZERO";
    /// task->cgroups, then the css in the chosen hierarchy (css_set's
    /// dfl_cgrp for v2, subsys[id] for a v1 controller), css->cgroup,
    /// css->parent, cgroup->kn, kn->id.
    pub const GLOBAL_TASK_CGROUPS_OFF: &str = "TASK_CGROUPS_OFF";
    pub const GLOBAL_CSET_CSS_OFF: &str = "CSET_CSS_OFF";
    pub const GLOBAL_CSS_CGROUP_OFF: &str = "CSS_CGROUP_OFF";
    pub const GLOBAL_CSS_PARENT_OFF: &str = "CSS_PARENT_OFF";
    pub const GLOBAL_CGROUP_KN_OFF: &str = "CGROUP_KN_OFF";
    pub const GLOBAL_KN_ID_OFF: &str = "KN_ID_OFF";
    /// task->thread_pid, pid->level, pid->numbers, sizeof(struct upid),
    /// upid->ns, pid_namespace->ns.inum: the active PID namespace.
    pub const GLOBAL_TASK_THREAD_PID_OFF: &str = "TASK_THREAD_PID_OFF";
    pub const GLOBAL_PID_LEVEL_OFF: &str = "PID_LEVEL_OFF";
    pub const GLOBAL_PID_NUMBERS_OFF: &str = "PID_NUMBERS_OFF";
    pub const GLOBAL_UPID_SIZE: &str = "UPID_SIZE";
    pub const GLOBAL_UPID_NS_OFF: &str = "UPID_NS_OFF";
    pub const GLOBAL_PIDNS_INUM_OFF: &str = "PIDNS_INUM_OFF";
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
    /// 0 in the victims and slow modes: the histogram is not kept there.
    pub const GLOBAL_HISTOGRAM: &str = "HISTOGRAM";
    /// Rows per half of each table; culprit rows reserved for idle tasks.
    pub const GLOBAL_MAX_TASKS: &str = "MAX_TASKS";
    pub const GLOBAL_IDLE_ROWS: &str = "IDLE_ROWS";
    /// Waits of at least this many ns go to the ring buffer; 0 = off.
    pub const GLOBAL_SLOW_NS: &str = "SLOW_NS";
    pub const GLOBAL_TASK_COMM_OFF: &str = "TASK_COMM_OFF";
    pub const GLOBAL_TASK_POLICY_OFF: &str = "TASK_POLICY_OFF";
    pub const GLOBAL_TASK_STATIC_PRIO_OFF: &str = "TASK_STATIC_PRIO_OFF";
    pub const GLOBAL_TASK_RT_PRIORITY_OFF: &str = "TASK_RT_PRIORITY_OFF";
    /// task->se.cfs_rq, cfs_rq->rq, rq->nr_running: the run-queue length
    /// of slow events; RQ_LEN 0 when the kernel's BTF lacks the chain.
    pub const GLOBAL_RQ_LEN: &str = "RQ_LEN";
    pub const GLOBAL_TASK_CFS_RQ_OFF: &str = "TASK_CFS_RQ_OFF";
    pub const GLOBAL_CFS_RQ_RQ_OFF: &str = "CFS_RQ_RQ_OFF";
    pub const GLOBAL_RQ_NR_RUNNING_OFF: &str = "RQ_NR_RUNNING_OFF";
    /// Classic tracepoint record offsets, parsed from tracefs format files.
    pub const GLOBAL_TP_SWITCH_PREV_PID_OFF: &str = "TP_SWITCH_PREV_PID_OFF";
    pub const GLOBAL_TP_SWITCH_PREV_STATE_OFF: &str = "TP_SWITCH_PREV_STATE_OFF";
    pub const GLOBAL_TP_SWITCH_NEXT_PID_OFF: &str = "TP_SWITCH_NEXT_PID_OFF";
    pub const GLOBAL_TP_WAKEUP_PID_OFF: &str = "TP_WAKEUP_PID_OFF";
    pub const GLOBAL_TP_EXIT_PID_OFF: &str = "TP_EXIT_PID_OFF";
    /// Bits of the classic `prev_state` that mean "not runnable" (the
    /// preemption marker TASK_REPORT_MAX lies above them).
    pub const GLOBAL_TP_STATE_MASK: &str = "TP_STATE_MASK";

    /// (program, tracepoint) pairs for each hook mode.
    pub const BTF_PROGRAMS: [(&str, &str); 4] = [
        ("sched_wakeup", "sched_wakeup"),
        ("sched_wakeup_new", "sched_wakeup_new"),
        ("sched_switch", "sched_switch"),
        ("sched_process_exit", "sched_process_exit"),
    ];
    /// The victims mode's sched_switch, which replaces `sched_switch`.
    pub const BTF_SWITCH_VICTIMS: &str = "sched_switch_victims";
    pub const TP_PROGRAMS: [(&str, &str); 4] = [
        ("tp_sched_wakeup", "sched_wakeup"),
        ("tp_sched_wakeup_new", "sched_wakeup_new"),
        ("tp_sched_switch", "sched_switch"),
        ("tp_sched_process_exit", "sched_process_exit"),
    ];
}
