//! Map values of the victims and slow modes (README "Victims, culprits and
//! slow waits", docs/victims.md): who waited, who held the CPU when the wait
//! ended (the culprit), and single waits over a threshold.
//!
//! Rows are found through a per-TID [`RowSlot`] (schedlat-ebpf victims.rs)
//! and updated without atomics: a task is switched in (victim) or out
//! (culprit) on one CPU at a time, under that CPU's run-queue lock, so two
//! updates of one row never overlap.

/// A task as the kernel saw it at the switch: identity and scheduling
/// parameters, read from its `task_struct`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskInfo {
    /// `task->pid` (the thread id).
    pub tid: u32,
    /// `task->tgid` (the process id).
    pub tgid: u32,
    /// `task->comm`, NUL-padded (not terminated when 16 bytes long).
    pub comm: [u8; 16],
    /// `task->policy`: SCHED_NORMAL 0, FIFO 1, RR 2, BATCH 3, IDLE 5,
    /// DEADLINE 6, EXT 7.
    pub policy: u32,
    /// `task->static_prio`: 120 + nice for every policy.
    pub static_prio: u32,
    /// `task->rt_priority`: 1..99 for FIFO/RR, 0 otherwise.
    pub rt_priority: u32,
    pub _pad: u32,
}

/// One row of the victims mode's tables, for one interval: a victim (a
/// task that waited) or a culprit (a task switched out in favour of one that
/// waited). The two tables count the same waits from either side, so one
/// row type and one kernel update serve both.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    pub task: TaskInfo,
    /// Waits that ended in the interval: of this task (victim), or when
    /// this task left the CPU (culprit).
    pub count: u64,
    /// Their sum: for a culprit, the wait this task is charged with.
    pub total_ns: u64,
    pub max_ns: u64,
    /// CLOCK_MONOTONIC (bpf_ktime_get_ns) when the longest wait ended.
    pub max_at_ns: u64,
    /// CPU the longest wait ended on.
    pub max_cpu: u32,
    pub _pad: u32,
    /// The other side of the longest wait: the task that held the CPU
    /// until it ended (victim row), or the task that waited (culprit row).
    pub max_other: TaskInfo,
    /// The waits by how they began (`causes::Cause` Woken, New, Preempted)
    /// and those that ended on another CPU than the task last ran on.
    pub kinds: [u32; 3],
    pub migrated: u32,
    /// The decision split of the waits it saw (off with `--no-decision`):
    /// by decision (`decision::Decision` index), by outcome
    /// (`decision::Outcome` index), by how the holder left the CPU
    /// (`decision::HolderLeft` index), and the pass-overs counted.
    pub decisions: [u32; ROW_DECISIONS],
    pub outcomes: [u32; ROW_OUTCOMES],
    pub holders: [u32; ROW_HOLDERS],
    pub passes: u32,
    pub _pad2: u32,
    /// A culprit row's charge by time: its time on a CPU inside the waits
    /// that ended there, each wait's runs walked back to its start at the
    /// switch that ended it (docs/victims.md). 0 in a victim row.
    pub held_ns: u64,
}

/// A row's decision and outcome slots (`decision::NR_DECISIONS` and
/// `NR_OUTCOME_SLOTS`: powers of two, indexed masked).
pub const ROW_DECISIONS: usize = 16;
pub const ROW_OUTCOMES: usize = 8;
/// A row's holder slots (`decision::NR_HOLDERS`, indexed masked).
pub const ROW_HOLDERS: usize = 8;

/// One wait over the slow threshold, sent through the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowEvent {
    /// CLOCK_MONOTONIC when the wait ended (the switch-in).
    pub at_ns: u64,
    pub wait_ns: u64,
    pub cpu: u32,
    /// `rq->nr_running` of that CPU at the switch (runnable tasks including
    /// the victim); [`RQ_LEN_UNKNOWN`] when the kernel's BTF lacks the chain.
    pub rq_len: u32,
    pub victim: TaskInfo,
    pub culprit: TaskInfo,
    /// The decision split's word of the wait (`decision::Decided`): 0
    /// when the split is off.
    pub decided: u64,
}

pub const RQ_LEN_UNKNOWN: u32 = u32::MAX;

/// Frames kept of each stack of a [`SlowStacks`] event: perf's default
/// `kernel.perf_event_max_stack`, the most the kernel walks by default.
pub const STACK_FRAMES: usize = 127;

/// No waker, or no waker stack, in a [`SlowStacks`].
pub const NO_WAKER: u32 = u32::MAX;

/// A slow event with the holder's stacks (`slow --stacks`), taken by
/// `bpf_get_stack` at the switch that ends the wait, where the holder
/// (`prev`) is still `current`. Told apart from a plain [`SlowEvent`] by
/// its size in the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowStacks {
    pub event: SlowEvent,
    /// Bytes of `kernel` and `user` the kernel filled (8 a frame,
    /// innermost first), or a negative errno: no user stack for a kernel
    /// thread (`-EFAULT`).
    pub kernel_bytes: i32,
    pub user_bytes: i32,
    /// The task that was `current` at the sched_wakeup that began the
    /// wait (in an interrupt, the task it interrupted), and the id of its
    /// kernel stack there in the waker stack map; both [`NO_WAKER`] when
    /// the wait did not begin with a wakeup, the id alone when the stack
    /// was not kept (its bucket of the map held another).
    pub waker_tid: u32,
    pub waker_stack: u32,
    /// Return addresses in the kernel, from the tracepoint down.
    pub kernel: [u64; STACK_FRAMES],
    /// The holder's user-space stack, walked by frame pointers from the
    /// registers it entered the kernel with.
    pub user: [u64; STACK_FRAMES],
    /// 1 when the wait began queued on another CPU (a preempted task
    /// moved by load balancing): `runs` are not what it waited through.
    pub queued_elsewhere: u32,
    pub _pad: u32,
    /// The CPU's last runs, the holder's up to this switch the newest
    /// (holders by TID): the tasks that ran while the task waited, and
    /// for how long, are those that overlap the wait.
    pub runs: crate::workload::SwitchRing,
}

impl SlowStacks {
    /// The frames of a stack that the kernel reported `bytes` of.
    pub fn frames(stack: &[u64; STACK_FRAMES], bytes: i32) -> &[u64] {
        let n = usize::try_from(bytes).unwrap_or(0) / 8;
        &stack[..n.min(STACK_FRAMES)]
    }
}

/// Per-CPU counters of the victims and slow modes, cumulative since load.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeCounters {
    /// Waits not in the victims table: it was full (`--max-tasks`).
    pub victims_overflow: u64,
    /// Waits not charged in the culprits table: it was full.
    pub culprits_overflow: u64,
    /// Slow events written to the ring buffer.
    pub slow_events: u64,
    /// Slow events lost: the ring buffer was full (reserve failed).
    pub slow_lost: u64,
    /// Wait time the culprits' charge by time could not give to a run:
    /// before the oldest run the CPU's record keeps, in a run of the
    /// previous interval, of a task whose row did not fit, or a wait that
    /// was queued on another CPU.
    pub culprits_unapportioned_ns: u64,
}

/// Where a task's row is in the current interval (victims mode, per TID).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowSlot {
    /// The interval (EPOCH) plus one that `index` belongs to; 0 = never.
    pub tag: u32,
    pub index: u32,
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // Each of the four: repr(C), integer fields and byte arrays only, no
    // implicit padding (explicit `_pad` fields), valid for any bit pattern.
    // SAFETY: as above.
    unsafe impl aya::Pod for TaskInfo {}
    // SAFETY: as above.
    unsafe impl aya::Pod for WaitStats {}
    // SAFETY: as above.
    unsafe impl aya::Pod for ModeCounters {}
    // SAFETY: as above.
    unsafe impl aya::Pod for RowSlot {}
    // SAFETY: as above.
    unsafe impl aya::Pod for SlowStacks {}
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(size_of::<TaskInfo>(), 4 + 4 + 16 + 4 * 4);
        // task, 4 u64s, max_cpu and pad, max_other, kinds and migrated,
        // the decision split (16 + 8 + 8 u32s, passes and pad), held_ns.
        assert_eq!(
            size_of::<WaitStats>(),
            40 + 4 * 8 + 8 + 40 + 16 + 4 * (ROW_DECISIONS + ROW_OUTCOMES + ROW_HOLDERS + 2) + 8
        );
        assert_eq!(size_of::<WaitStats>(), 280);
        assert_eq!(ROW_HOLDERS, crate::decision::NR_HOLDERS);
        assert_eq!(ROW_DECISIONS, crate::decision::NR_DECISIONS);
        assert_eq!(ROW_OUTCOMES, crate::decision::NR_OUTCOME_SLOTS);
        // at, wait, cpu, rq_len, victim, culprit, the decision's word.
        assert_eq!(size_of::<SlowEvent>(), 8 + 8 + 4 + 4 + 40 + 40 + 8);
        // The ring buffer hands out 8-byte aligned records.
        assert_eq!(8 % core::mem::align_of::<SlowEvent>(), 0);
        assert_eq!(
            size_of::<SlowStacks>(),
            size_of::<SlowEvent>()
                + 16
                + 2 * 8 * STACK_FRAMES
                + 8
                + size_of::<crate::workload::SwitchRing>()
        );
        assert_eq!(size_of::<RowSlot>(), 8);
    }
}
