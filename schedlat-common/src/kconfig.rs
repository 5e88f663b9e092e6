//! The kernel configuration: every value the loader hands the programs
//! before they load, as one `#[repr(C)]` struct per concern. Each struct is
//! one read-only global of the object, named after its type
//! ([`KernelGlobal::SYMBOL`]); the kernel side declares it with
//! [`kernel_global!`](crate::kernel_global) and reads its fields one by one,
//! the loader sets it whole. A misspelt field or type is a compile error on
//! both sides, and the symbol is written nowhere else.
//!
//! aya freezes `.rodata` before the programs load, so the verifier reads
//! every field as a known constant: branches on a field that is off are
//! dead code it removes (histogram mode pays nothing for the others), and
//! offsets into kernel structs are constants it checks against their BTF.
//!
//! Layouts: u64 fields (and arrays of them) only, so there is no implicit
//! padding and no bool (a flag is a u64, 0 or 1); the tests check sizes.
//!
//! Adding a kernel field: the field here, its resolution (BTF or tracefs),
//! its use in the eBPF crate.

use crate::scope::CPU_MASK_WORDS;

/// A configuration struct that is one read-only global of the eBPF object.
pub trait KernelGlobal: Copy + 'static {
    /// The global's symbol: the type's own name.
    const SYMBOL: &'static str;
}

/// Declares the eBPF object's global for configuration struct `$ty`, as
/// `static $name`, exported under the type's name (the symbol
/// [`KernelGlobal::SYMBOL`] names) and zeroed until the loader sets it.
#[macro_export]
macro_rules! kernel_global {
    ($name:ident: $ty:ident) => {
        #[unsafe(export_name = stringify!($ty))]
        pub static $name: $crate::kconfig::$ty = $crate::kconfig::$ty::ZERO;
    };
}

macro_rules! symbol_is_type_name {
    ($($ty:ident),*) => {$(
        impl KernelGlobal for $ty {
            const SYMBOL: &'static str = stringify!($ty);
        }
        impl $ty {
            /// Every field 0: the kernel side's value until the loader sets it.
            // SAFETY: u64 fields only, for which all-zero bytes are 0.
            pub const ZERO: $ty = unsafe { core::mem::zeroed() };
        }
        #[cfg(feature = "user")]
        // SAFETY: repr(C), u64 fields and u64 arrays only: no padding (the
        // tests check the sizes), valid for any bit pattern.
        unsafe impl aya::Pod for $ty {}
    )*};
}

symbol_is_type_name!(
    TaskOffsets,
    RqOffsets,
    CgroupOffsets,
    PidnsOffsets,
    TpOffsets,
    TaskFilter,
    Compute,
    CauseOffsets,
    DecisionOffsets
);

/// Byte offsets in `struct task_struct` (tp_btf hook mode), from BTF.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskOffsets {
    pub pid: u64,
    pub tgid: u64,
    /// `__state` since 5.14, `state` before.
    pub state: u64,
    /// What the victims and slow modes report of a task.
    pub comm: u64,
    pub policy: u64,
    pub static_prio: u64,
    pub rt_priority: u64,
}

/// The chain task->se.cfs_rq->rq->nr_running: the run-queue length of slow
/// events. `se.cfs_rq` and `cfs_rq.rq` exist only with
/// CONFIG_FAIR_GROUP_SCHED, hence `resolved`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqOffsets {
    /// 1 when this kernel has the chain (the offsets below are valid).
    pub resolved: u64,
    /// `se` in task_struct plus `cfs_rq` in sched_entity.
    pub task_cfs_rq: u64,
    pub cfs_rq_rq: u64,
    pub rq_nr_running: u64,
    /// How the tasks that block under delayed dequeue (6.12+: they stay
    /// queued, and counted in rq->nr_running, until picked) are taken
    /// out of the count ([`DelayedCount`]), and the offsets in `struct rq`
    /// of its root cfs_rq's counters that say how many there are.
    pub delayed: u64,
    pub cfs_counter_a: u64,
    pub cfs_counter_b: u64,
}

/// [`RqOffsets::delayed`]: where this kernel counts its delayed tasks.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayedCount {
    /// None to take out: no delayed dequeue (before 6.12), or no counter
    /// for it (6.12 kernels before h_nr_delayed), which the loader says.
    None = 0,
    /// `cfs.h_nr_queued - cfs.h_nr_runnable` (6.14+): a is h_nr_queued,
    /// b h_nr_runnable.
    QueuedLessRunnable = 1,
    /// `cfs.h_nr_delayed` (6.12.y, 6.13): a is it, b unused.
    Delayed = 2,
}

/// The chain from a task to the kernfs id of its cgroup in one hierarchy:
/// task->cgroups, then the css (css_set's dfl_cgrp for cgroup v2,
/// `subsys[id]` for a v1 controller), css->cgroup, css->parent, cgroup->kn,
/// kn->id. Only resolved with `-c` or `--cgroups`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupOffsets {
    pub task_cgroups: u64,
    pub cset_css: u64,
    pub css_cgroup: u64,
    pub css_parent: u64,
    pub cgroup_kn: u64,
    pub kn_id: u64,
    /// `cgroup->root` and `cgroup_root->hierarchy_id`, and the id of the
    /// hierarchy the chain reads (0: cgroup v2; as /proc/PID/cgroup
    /// numbers them): the cgroup_mkdir program names only its cgroups.
    pub cgroup_root: u64,
    pub root_hierarchy_id: u64,
    pub hierarchy_id: u64,
}

/// The chain `task->thread_pid->numbers[level].ns->ns.inum`: the active PID
/// namespace's inode number. Only resolved with `--pidnss`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PidnsOffsets {
    pub task_thread_pid: u64,
    pub pid_level: u64,
    pub pid_numbers: u64,
    /// sizeof(struct upid).
    pub upid_size: u64,
    pub upid_ns: u64,
    /// `ns.inum` in struct pid_namespace.
    pub pidns_inum: u64,
}

/// Field offsets in the classic tracepoints' records (tp hook mode), from
/// their tracefs format files.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TpOffsets {
    pub switch_prev_pid: u64,
    pub switch_prev_state: u64,
    pub switch_next_pid: u64,
    pub wakeup_pid: u64,
    pub exit_pid: u64,
    /// Bits of the record's `prev_state` that mean "not runnable": the
    /// preemption marker (TASK_REPORT_MAX) lies above them.
    pub state_mask: u64,
}

/// Which waits are measured: filters on the task that waited, and on the
/// CPU the wait ended on. Each is off at 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only this process (`-p`, `task->tgid`).
    pub tgid: u64,
    /// Only this thread (`-t`, `task->pid`).
    pub tid: u64,
    /// 1: only tasks named `comm` (`--comm`).
    pub by_comm: u64,
    /// The name, NUL-padded to 16 bytes, as the two native-endian words
    /// the programs load from `task->comm`.
    pub comm: [u64; 2],
    /// The bytes of `comm` that decide, in the same words: the name and
    /// its NUL. Kernels before 6.x renamed a task with strlcpy, which
    /// leaves the old name's tail after the NUL, so the bytes past it are
    /// not compared.
    pub comm_mask: [u64; 2],
    /// Only tasks in this cgroup or below it (`-c`: its kernfs id in the
    /// hierarchy [`CgroupOffsets`] leads to).
    pub cgroup_id: u64,
    /// 1: only waits that end on a CPU set in `cpu_mask` (`--cpu`).
    pub by_cpu: u64,
    pub cpu_mask: [u64; CPU_MASK_WORDS],
}

/// What the programs compute for each wait.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compute {
    /// Nanoseconds per log2 histogram unit: 1000 (usecs) or 1000000 (`-m`).
    pub unit_ns: u64,
    /// 1: add each wait to the histogram (0 in the victims and slow modes;
    /// `schedlat top` keeps it with the victims tables).
    pub histogram: u64,
    /// What the breakdown histograms are keyed by (`scope::Breakdown`).
    pub breakdown: u64,
    /// Victims and culprits: rows per half of each table; 0 = off.
    pub max_tasks: u64,
    /// Culprit rows reserved per half for idle tasks: one per possible CPU.
    pub idle_rows: u64,
    /// Send waits of at least this many ns to the ring buffer; 0 = off.
    pub slow_ns: u64,
    /// 1: split each wait by cause (docs/causes.md) into CAUSES, the keys'
    /// `causes` and the victims rows' kinds.
    pub causes: u64,
    /// 1: the loader filled TOPOLOGY (cross-LLC and cross-node waits).
    pub topology: u64,
    /// 1: the overlaps are measured: CAUSE_SLOTS holds nr_cpus times
    /// `causes::SLOTS_PER_CPU` snapshots, and at least one of steal, IRQ
    /// and throttled time is in this kernel.
    pub overlaps: u64,
    /// 1: `--waking`: the sched_waking program is attached and each
    /// sched_wakeup adds the wakeup path before it to CAUSES.
    pub waking: u64,
    /// 1: the scheduler's decision (docs/decision.md) is split, with the
    /// fields `DecisionOffsets` gives (off with `--no-decision`).
    pub decision: u64,
    /// 1: count each wait in the neighbour-pair table PAIRS (victim cgroup,
    /// holder cgroup), sized by the loader.
    pub pairs: u64,
}

/// What the cause split reads besides the run-queue chain ([`RqOffsets`]):
/// each field's offset, and whether this kernel has it (a field the kernel
/// lacks stays 0 and its code is dead for the verifier).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CauseOffsets {
    /// `task->flags` (PF_KTHREAD).
    pub task_flags: u64,
    /// The group the CPU scheduler puts a task in, which "held by the
    /// same cgroup" compares: the pointer at `task_group` in task_struct
    /// (`sched_task_group`, CONFIG_CGROUP_SCHED: the cpu controller's
    /// group, or the session's autogroup), or, where `group_in_cset` is 1,
    /// the pointer at `cset_group` in the css_set that one names (the cpu
    /// controller's css of `task->cgroups`). Without either, `task_group`
    /// is `task->cgroups` itself: the same css_set, every hierarchy alike.
    pub task_group: u64,
    pub group_in_cset: u64,
    pub cset_group: u64,
    /// 1 when `rq->cpu` is known (CONFIG_SMP): the CPU of a task's queue.
    pub has_rq_cpu: u64,
    pub rq_cpu: u64,
    /// `rq->prev_steal_time_rq` (CONFIG_PARAVIRT_TIME_ACCOUNTING).
    pub has_steal: u64,
    pub rq_steal: u64,
    /// `rq->prev_irq_time` (CONFIG_IRQ_TIME_ACCOUNTING).
    pub has_irq: u64,
    pub rq_irq: u64,
    /// `cfs_rq->tg`, then `tg->cfs_bandwidth.throttled_time`
    /// (CONFIG_CFS_BANDWIDTH).
    pub has_throttled: u64,
    pub cfs_rq_tg: u64,
    pub tg_throttled_time: u64,
}

/// What the decision split reads (tp_btf only): the target CPU's running
/// task through the run-queue chain (`RqOffsets`), its need-resched bits,
/// the queue's switch count, and the scheduling entities' fields the fair
/// class decides with. A field the kernel lacks stays 0, with its `has_`
/// flag, and the verifier drops the code that reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecisionOffsets {
    /// `rq->curr` (a union with `donor` since 6.14) and `rq->nr_switches`.
    pub rq_curr: u64,
    pub rq_nr_switches: u64,
    /// `task->thread_info.flags` (CONFIG_THREAD_INFO_IN_TASK).
    pub task_ti_flags: u64,
    /// TIF_NEED_RESCHED and TIF_NEED_RESCHED_LAZY as masks (0 where the
    /// kernel has no lazy bit).
    pub need_resched_mask: u64,
    pub lazy_mask: u64,
    /// 1: EEVDF fields (6.6+: `se.deadline`); 2: CFS (before 6.6).
    pub fair: u64,
    /// 1: `se.vprot` (6.17+) marks the protected slice, else `se.vlag`
    /// equal to `se.deadline` (6.6-6.16).
    pub has_vprot: u64,
    /// 1: PREEMPT_SHORT exists (6.12+, with `se.custom_slice`): a wakee
    /// with a shorter slice than the running task's is not held off by
    /// its protection.
    pub preempt_short: u64,
    /// `task->se`, then fields of struct sched_entity.
    pub task_se: u64,
    pub se_weight: u64,
    pub se_vruntime: u64,
    pub se_deadline: u64,
    pub se_vlag: u64,
    pub se_slice: u64,
    pub se_on_rq: u64,
    pub se_depth: u64,
    pub se_parent: u64,
    pub se_cfs_rq: u64,
    /// A group entity's own queue (`se->my_q`), that queue's group
    /// (`cfs_rq->tg`) and the group's css (`tg->css`): the cgroup whose
    /// share a wakeup declined above its own queue was charged to (the
    /// neighbour pairs). `se_my_q` 0 where the kernel has no task groups
    /// (CONFIG_FAIR_GROUP_SCHED off): no level is then above a task's own.
    pub se_my_q: u64,
    pub cfs_rq_tg: u64,
    pub tg_css: u64,
    /// `se->exec_start` and `rq->clock_task`, the clock it is on (EEVDF):
    /// what the running entity has run since its queue's last update.
    pub se_exec_start: u64,
    pub rq_clock_task: u64,
    /// struct cfs_rq: the weighted key sum (`avg_vruntime`, renamed
    /// `sum_w_vruntime`), its weight (`avg_load`, `sum_weight`) and the
    /// keys' zero point (`min_vruntime`, `zero_vruntime`).
    pub cfs_key_sum: u64,
    pub cfs_weight_sum: u64,
    pub cfs_zero: u64,
    /// The tick (1e9 / HZ): a wait longer than its prediction plus this is
    /// counted as beyond it.
    pub tick_ns: u64,
    /// A holder that yielded: the system call number in the user
    /// registers the kernel keeps for it (`pt_regs.orig_ax` on x86-64,
    /// `pt_regs.syscallno` on arm64, read through bpf_task_pt_regs(),
    /// 5.15+) at this offset, against `yield_nr`, sched_yield()'s number
    /// there. `yield_nr` 0: not told on this kernel or architecture.
    pub regs_syscall: u64,
    pub yield_nr: u64,
    /// A task in the sched_ext class (6.12+): the state bits of
    /// `task->scx.flags` (`SCX_TASK_STATE_MASK`) read `SCX_TASK_ENABLED`
    /// (shifted into place), the state a task holds from entering the
    /// class to leaving it (scx_enable_task(), scx_disable_task()). All
    /// from BTF; `ext_state_mask` 0 where the kernel has no sched_ext: the
    /// check is then dead code.
    pub task_scx_flags: u64,
    pub ext_state_mask: u64,
    pub ext_enabled: u64,
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn layouts_are_u64_words_without_padding() {
        assert_eq!(size_of::<TaskOffsets>(), 7 * 8);
        assert_eq!(size_of::<RqOffsets>(), 7 * 8);
        assert_eq!(size_of::<CgroupOffsets>(), 9 * 8);
        assert_eq!(size_of::<PidnsOffsets>(), 6 * 8);
        assert_eq!(size_of::<TpOffsets>(), 6 * 8);
        assert_eq!(size_of::<TaskFilter>(), (9 + CPU_MASK_WORDS) * 8);
        assert_eq!(size_of::<Compute>(), 12 * 8);
        assert_eq!(size_of::<CauseOffsets>(), 13 * 8);
        assert_eq!(size_of::<DecisionOffsets>(), 32 * 8);
    }

    #[test]
    fn symbols_are_the_type_names() {
        assert_eq!(TaskOffsets::SYMBOL, "TaskOffsets");
        assert_eq!(TaskFilter::SYMBOL, "TaskFilter");
        assert_eq!(Compute::SYMBOL, "Compute");
    }
}
