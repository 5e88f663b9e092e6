//! Which waits are measured: the filters on the task that waited (`-p`,
//! `-t`, `--comm`, `-c`) and on the CPU its wait ended on (`--cpu`). The
//! wait is attributed to the task that waits, read from its own
//! task_struct, never to the task running the tracepoint (the waker, or
//! prev). Each filter that is off is a constant the verifier removes.

use schedlat_common::scope::MAX_CGROUP_DEPTH;

use crate::{
    bpf::cpu,
    config::{FILTER, cpu_mask_word, get},
    memory::TaskPtr,
};

/// Whether this task's waits are measured: every filter that is on holds.
#[inline(always)]
pub fn wanted(task: TaskPtr) -> bool {
    let tgid = get(&FILTER.tgid);
    if tgid != 0 && u64::from(task.tgid()) != tgid {
        return false;
    }
    let tid = get(&FILTER.tid);
    if tid != 0 && u64::from(task.pid()) != tid {
        return false;
    }
    if get(&FILTER.by_comm) != 0
        && (task.comm_word(0) & get(&FILTER.comm_mask[0]) != get(&FILTER.comm[0])
            || task.comm_word(1) & get(&FILTER.comm_mask[1]) != get(&FILTER.comm[1]))
    {
        return false;
    }
    let cgroup = get(&FILTER.cgroup_id);
    cgroup == 0 || in_cgroup(task, cgroup)
}

/// Whether `task` is in cgroup `target` or below it, in the hierarchy the
/// loader chose: walks up from the task's own cgroup at most
/// MAX_CGROUP_DEPTH levels (deeper targets never match; the loader refuses
/// them).
#[inline(always)]
fn in_cgroup(task: TaskPtr, target: u64) -> bool {
    let mut css = task.css();
    for _ in 0..MAX_CGROUP_DEPTH {
        if css.is_null() {
            return false;
        }
        if css.cgroup_id() == target {
            return true;
        }
        css = css.parent();
    }
    false
}

/// `--cpu`: whether waits ending on this CPU are measured.
#[inline(always)]
pub fn cpu_wanted() -> bool {
    if get(&FILTER.by_cpu) == 0 {
        return true;
    }
    let cpu = cpu() as usize;
    cpu_mask_word(cpu / 64) & (1 << (cpu % 64)) != 0
}
