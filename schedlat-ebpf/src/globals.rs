//! Read-only globals the loader sets before loading (`EbpfLoader::
//! override_global`). They live in `.rodata`, which aya freezes, so the
//! verifier sees them as constants. Names must match `schedlat_common::names`.

use schedlat_common::scope::CPU_MASK_WORDS;

/// Nanoseconds per histogram unit: 1000 (usecs) or 1000000 (msecs, `-m`).
#[unsafe(no_mangle)]
pub static UNIT_NS: u64 = 1000;

// task_struct offsets for the btf hook mode; 0 until the loader sets them.
#[unsafe(no_mangle)]
pub static TASK_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_STATE_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_TGID_OFF: u64 = 0;

// task_struct fields the victims and slow modes report (btf mode only).
#[unsafe(no_mangle)]
pub static TASK_COMM_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_POLICY_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_STATIC_PRIO_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_RT_PRIORITY_OFF: u64 = 0;

/// 1 when the chain task->se.cfs_rq->rq->nr_running resolved from BTF (it
/// needs CONFIG_FAIR_GROUP_SCHED); the three offsets below are then valid.
#[unsafe(no_mangle)]
pub static RQ_LEN: u64 = 0;
/// Offset of `se.cfs_rq` in task_struct (se's offset plus cfs_rq's in it).
#[unsafe(no_mangle)]
pub static TASK_CFS_RQ_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static CFS_RQ_RQ_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static RQ_NR_RUNNING_OFF: u64 = 0;

// What the programs compute. The verifier sees these frozen values as
// constants and removes the code of the modes that are off, so histogram
// mode pays nothing for the others.
/// 1: add each wait to the histogram (off in the slow and victims modes;
/// on in `schedlat top`, which also loads the victims mode's program).
#[unsafe(no_mangle)]
pub static HISTOGRAM: u64 = 1;
/// Rows per half of each table (`--max-tasks`).
#[unsafe(no_mangle)]
pub static MAX_TASKS: u64 = 0;
/// Culprit rows reserved per half for idle tasks: one per possible CPU.
#[unsafe(no_mangle)]
pub static IDLE_ROWS: u64 = 0;
/// Send waits of at least this many ns to the ring buffer; 0 = off.
#[unsafe(no_mangle)]
pub static SLOW_NS: u64 = 0;

/// Only waits of this process (tgid) are measured; 0 = every process.
#[unsafe(no_mangle)]
pub static FILTER_TGID: u64 = 0;

// The other filters on the task that waited (scope.rs); 0 = off.
/// Only this thread (`task->pid`).
#[unsafe(no_mangle)]
pub static FILTER_TID: u64 = 0;
/// 1: only tasks whose comm is FILTER_COMM_LO/HI (16 bytes, NUL-padded).
#[unsafe(no_mangle)]
pub static FILTER_COMM: u64 = 0;
#[unsafe(no_mangle)]
pub static FILTER_COMM_LO: u64 = 0;
#[unsafe(no_mangle)]
pub static FILTER_COMM_HI: u64 = 0;
/// Only tasks in this cgroup or below it (kernfs id in the hierarchy the
/// CSET_CSS_OFF offset picks).
#[unsafe(no_mangle)]
pub static FILTER_CGROUP_ID: u64 = 0;
/// 1: only waits that end on a CPU set in FILTER_CPU_MASK.
#[unsafe(no_mangle)]
pub static FILTER_CPUS: u64 = 0;
#[unsafe(no_mangle)]
pub static FILTER_CPU_MASK: [u64; CPU_MASK_WORDS] = [0; CPU_MASK_WORDS];

/// What the breakdown histograms are keyed by (`scope::Breakdown`); 0 = none.
#[unsafe(no_mangle)]
pub static BREAKDOWN: u64 = 0;

// The cgroup chain (names::GLOBAL_TASK_CGROUPS_OFF and after).
#[unsafe(no_mangle)]
pub static TASK_CGROUPS_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static CSET_CSS_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static CSS_CGROUP_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static CSS_PARENT_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static CGROUP_KN_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static KN_ID_OFF: u64 = 0;

// The PID namespace chain (names::GLOBAL_TASK_THREAD_PID_OFF and after).
#[unsafe(no_mangle)]
pub static TASK_THREAD_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static PID_LEVEL_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static PID_NUMBERS_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static UPID_SIZE: u64 = 0;
#[unsafe(no_mangle)]
pub static UPID_NS_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static PIDNS_INUM_OFF: u64 = 0;

// Classic tracepoint record offsets for the tp hook mode.
#[unsafe(no_mangle)]
pub static TP_SWITCH_PREV_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_SWITCH_PREV_STATE_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_SWITCH_NEXT_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_WAKEUP_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_EXIT_PID_OFF: u64 = 0;
/// Mask of the real state bits in the classic record's prev_state.
#[unsafe(no_mangle)]
pub static TP_STATE_MASK: u64 = 0xff;

/// Word `i` of the `--cpu` mask, 0 beyond it.
#[inline(always)]
pub fn cpu_mask_word(i: usize) -> u64 {
    match FILTER_CPU_MASK.get(i) {
        // SAFETY: a valid, aligned reference into a static.
        Some(word) => unsafe { core::ptr::read_volatile(word) },
        None => 0,
    }
}

/// Reads a global through a volatile load so the compiler cannot fold the
/// compile-time placeholder into the code.
#[inline(always)]
pub fn load(global: &'static u64) -> u64 {
    // SAFETY: a valid, aligned reference to a static.
    unsafe { core::ptr::read_volatile(global) }
}
