//! Scopes: the cgroup and CPU filters, and the breakdown histograms, one per
//! key (process, thread, PID namespace, cgroup, CPU), of the task that
//! waited. Every part reads the waiting task's own task_struct; each is off
//! unless its global says otherwise, and the verifier removes what is off.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_smp_processor_id, bpf_probe_read_kernel},
    macros::map,
    maps::{Array, HashMap},
};
use schedlat_common::scope::{Breakdown, KeyStats, MAX_CGROUP_DEPTH};

use crate::{
    atomic,
    globals::{self, cpu_mask_word, load},
    task::{BtfPtr, TaskPtr},
    wait::{self, barrier_var},
};

/// One histogram per key; sized by the loader (`--max-keys`), 1 entry when
/// no breakdown is asked for.
#[map]
static KEYED: HashMap<u64, KeyStats> = HashMap::with_max_entries(1, 0);

/// A zeroed `KeyStats` to insert new keys from (1.4 KiB: too big for the
/// 512-byte BPF stack).
#[map]
static KEY_ZERO: Array<KeyStats> = Array::with_max_entries(1, 0);

/// Whether `task` is in cgroup `target` or below it, in the hierarchy the
/// loader chose: walks up from the task's own cgroup at most
/// MAX_CGROUP_DEPTH levels (deeper targets never match; the loader refuses
/// them).
#[inline(always)]
pub fn in_cgroup(task: TaskPtr, target: u64) -> bool {
    let mut css = task_css(task);
    for _ in 0..MAX_CGROUP_DEPTH {
        if css.is_null() {
            return false;
        }
        if css_cgroup_id(css) == target {
            return true;
        }
        css = css.read_ptr(load(&globals::CSS_PARENT_OFF));
    }
    false
}

/// The task's css in the chosen hierarchy: `task->cgroups->dfl_cgrp` (cgroup
/// v2; its `self` css is at offset 0, which the loader checks, so css
/// offsets apply to it) or `task->cgroups->subsys[id]` (a v1 controller).
#[inline(always)]
fn task_css(task: TaskPtr) -> BtfPtr {
    let cset = task.btf().read_ptr(load(&globals::TASK_CGROUPS_OFF));
    cset.read_ptr(load(&globals::CSET_CSS_OFF))
}

/// `css->cgroup->kn->id`: the inode number of the cgroup's directory.
#[inline(always)]
fn css_cgroup_id(css: BtfPtr) -> u64 {
    let cgroup = css.read_ptr(load(&globals::CSS_CGROUP_OFF));
    let kn = cgroup.read_ptr(load(&globals::CGROUP_KN_OFF));
    kn.read_u64(load(&globals::KN_ID_OFF))
}

/// `--cpu`: whether waits ending on this CPU are measured.
#[inline(always)]
pub fn cpu_wanted() -> bool {
    if load(&globals::FILTER_CPUS) == 0 {
        return true;
    }
    let cpu = cpu() as usize;
    cpu_mask_word(cpu / 64) & (1 << (cpu % 64)) != 0
}

#[inline(always)]
fn cpu() -> u32 {
    // SAFETY: helper without arguments.
    unsafe { bpf_get_smp_processor_id() }
}

/// The histogram of `next`'s key, if a breakdown is on: found, or
/// inserted zeroed at the key's first wait. None when the map is full: the
/// wait is then counted in CpuStats' `unkeyed` (it is still in the total).
/// wait.rs record() adds the wait to it alongside the total, index by index.
#[inline(always)]
pub fn key_histogram(next: TaskPtr) -> Option<&'static mut KeyStats> {
    let kind = load(&globals::BREAKDOWN);
    if kind == Breakdown::None as u64 {
        return None;
    }
    let key = if kind == Breakdown::Process as u64 {
        u64::from(next.tgid())
    } else if kind == Breakdown::Thread as u64 {
        u64::from(next.pid())
    } else if kind == Breakdown::PidNamespace as u64 {
        pid_namespace(next)
    } else if kind == Breakdown::Cgroup as u64 {
        css_cgroup_id(task_css(next))
    } else {
        u64::from(cpu())
    };
    let Some(stats) = key_stats(key) else {
        if let Some(s) = wait::stats() {
            s.unkeyed += 1;
        }
        return None;
    };
    // SAFETY: a map value, valid for this program run; other CPUs update it
    // too, hence the atomic adds below (BPF_XADD, every kernel).
    let stats = unsafe { &mut *stats };
    if kind == Breakdown::Process as u64 || kind == Breakdown::Thread as u64 {
        // A thread names itself after it starts, so the latest name is kept
        // (a racy 16-byte write between threads of a process: it is a label).
        stats.comm = next.comm();
    }
    Some(stats)
}

/// One more wait in fine bucket `bucket` of a key's histogram.
#[inline(always)]
pub fn count_bucket(stats: &mut KeyStats, bucket: usize) {
    if let Some(count) = stats.buckets.get_mut(barrier_var(bucket)) {
        add_u32(count);
    }
}

/// One more wait in log2 slot `slot` of a key's histogram.
#[inline(always)]
pub fn count_slot(stats: &mut KeyStats, slot: usize) {
    if let Some(count) = stats.log2.get_mut(barrier_var(slot)) {
        add_u32(count);
    }
}

/// `wait` more nanoseconds in a key's sum.
#[inline(always)]
pub fn add_sum(stats: &mut KeyStats, wait: u64) {
    // SAFETY: an aligned u64 in a map value.
    unsafe { atomic::add_u64(&mut stats.sum_ns, wait) };
}

#[inline(always)]
fn add_u32(count: &mut u32) {
    // SAFETY: an aligned u32 in a map value.
    unsafe { atomic::add_u32(count, 1) };
}

/// The key's histogram, inserted zeroed on its first wait. Two CPUs may
/// insert the same new key at once: BPF_NOEXIST makes one of them fail,
/// and its second lookup finds the other's entry.
#[inline(always)]
fn key_stats(key: u64) -> Option<*mut KeyStats> {
    if let Some(p) = KEYED.get_ptr_mut(&key) {
        return Some(p);
    }
    let zero = KEY_ZERO.get(0)?;
    let _ = KEYED.insert(&key, zero, u64::from(BPF_NOEXIST));
    KEYED.get_ptr_mut(&key)
}

/// The inode number of the task's active PID namespace (what `ls -l
/// /proc/PID/ns/pid` shows): `task->thread_pid->numbers[level].ns->ns.inum`,
/// as libbpf-tools runqlat's `--pidnss`. The array index is not a load-time
/// constant, and 6.1's verifier refuses variable arithmetic on a BTF pointer
/// (found by `cargo xtask vm-test`), so the `struct pid` address is read as
/// a plain number and the rest goes through bpf_probe_read_kernel.
#[inline(always)]
fn pid_namespace(task: TaskPtr) -> u64 {
    let thread_pid = load(&globals::TASK_THREAD_PID_OFF);
    let level = u64::from(
        task.btf()
            .read_ptr(thread_pid)
            .read_u32(load(&globals::PID_LEVEL_OFF)),
    );
    let Some(pid) = probe_read::<u64>(task.btf().addr(thread_pid)) else {
        return 0;
    };
    let upid = pid + load(&globals::PID_NUMBERS_OFF) + level * load(&globals::UPID_SIZE);
    let Some(ns) = probe_read::<u64>(upid + load(&globals::UPID_NS_OFF)) else {
        return 0;
    };
    probe_read::<u32>(ns + load(&globals::PIDNS_INUM_OFF)).map_or(0, u64::from)
}

#[inline(always)]
fn probe_read<T>(addr: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel checks the address and fails cleanly.
    unsafe { bpf_probe_read_kernel(addr as *const T).ok() }
}
