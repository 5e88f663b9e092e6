//! The workload views: the neighbour-pair table (per pair of cgroups,
//! the waits of the first's tasks that ended when a task of the second
//! left the CPU) and the names of cgroups sent at their creation. Both
//! off unless the loader says (Compute.pairs; the cgroup_mkdir program is
//! attached only when cgroups are named): the verifier removes the first,
//! the second is not loaded.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_probe_read_kernel_str_bytes,
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
};
use schedlat_common::workload::{
    HOLDER_IDLE, NameHeader, NameRecord, PairKey, PairStats, WorkloadCounters,
};

use crate::{
    atomic,
    config::{CGROUP, COMPUTE, get},
    memory::{CgroupPtr, TaskPtr},
};

/// Pairs, cumulative since load; sized by the loader (`--max-pairs`), 1
/// entry when off. Userspace deletes the pairs of cgroups that are gone.
#[map]
static PAIRS: HashMap<PairKey, PairStats> = HashMap::with_max_entries(1, 0);

#[map]
static WORKLOAD_COUNTERS: PerCpuArray<WorkloadCounters> = PerCpuArray::with_max_entries(1, 0);

/// Name records (schedlat_common::workload::NameHeader + path); the
/// loader sizes it (one page when cgroups are not named).
#[map]
static CGROUP_NAMES: RingBuf = RingBuf::with_byte_size(4096, 0);

/// Where a name record is built: 1 KiB of path is too big for the
/// 512-byte stack.
#[map]
static NAME_SCRATCH: PerCpuArray<NameRecord> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn counters() -> Option<&'static mut WorkloadCounters> {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest
    // on a CPU.
    WORKLOAD_COUNTERS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// Counts the `wait` of `next`, which `prev` (TID `prev_tid`) held the
/// CPU until, in the pair (next's cgroup, prev's cgroup): an idle prev is
/// the holder HOLDER_IDLE. A pair the full table cannot take is counted as
/// overflow. The task pointers are None in the tp hook mode, which the
/// loader refuses with pairs.
///
/// wait.rs calls it as soon as the wait is known, before the histogram's
/// and the split's branches: called after them, each of their paths went
/// through this code again (sched_switch with --cgroups took 35,918
/// verified instructions and 141 ms to load, against 11,614 and 48 ms
/// without pairs).
#[inline(always)]
pub fn count_pair(prev: Option<TaskPtr>, next: Option<TaskPtr>, prev_tid: u32, wait: u64) {
    if get(&COMPUTE.pairs) == 0 {
        return;
    }
    let (Some(prev), Some(next)) = (prev, next) else {
        return;
    };
    let holder = match prev_tid {
        0 => HOLDER_IDLE,
        _ => prev.css().cgroup_id(),
    };
    let key = PairKey {
        victim: next.css().cgroup_id(),
        holder,
    };
    let Some(stats) = pair_stats(&key) else {
        if let Some(c) = counters() {
            c.pairs_overflow += 1;
            c.pairs_overflow_ns += wait;
        }
        return;
    };
    // SAFETY: a map value, valid for this program run; other CPUs update
    // it too: count and sum are atomic adds.
    unsafe {
        atomic::add_u64(&mut (*stats).count, 1);
        atomic::add_u64(&mut (*stats).sum_ns, wait);
        let max = &raw mut (*stats).max_ns;
        if wait > core::ptr::read_volatile(max) {
            core::ptr::write_volatile(max, wait);
        }
    }
}

/// The pair's entry, inserted zeroed at its first wait (BPF_NOEXIST: of
/// two CPUs inserting it at once, the second finds the first's).
#[inline(always)]
fn pair_stats(key: &PairKey) -> Option<*mut PairStats> {
    if let Some(p) = PAIRS.get_ptr_mut(key) {
        return Some(p);
    }
    let _ = PAIRS.insert(key, PairStats::default(), u64::from(BPF_NOEXIST));
    PAIRS.get_ptr_mut(key)
}

/// A cgroup was just made, `path` its path from its hierarchy's root:
/// sends its id and path if it is in the hierarchy the cgroup chain reads,
/// so userspace can name it even if it is gone before its waits are shown.
/// A record the ring buffer has no room for is counted.
#[inline(always)]
pub fn created(cgroup: CgroupPtr, path: *const u8) {
    if cgroup.hierarchy_id() != get(&CGROUP.hierarchy_id) {
        return;
    }
    let Some(record) = NAME_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: per-CPU value, no nesting (counters()).
    let record = unsafe { &mut *record };
    // SAFETY: the tracepoint's path argument is a kernel string.
    let len = match unsafe { bpf_probe_read_kernel_str_bytes(path, &mut record.path) } {
        Ok(bytes) => bytes.len(),
        Err(_) => return,
    };
    record.header = NameHeader {
        id: cgroup.id(),
        len: len as u64,
    };
    let size = size_of::<NameHeader>() + len;
    let Some(bytes) = record_bytes(record, size) else {
        return;
    };
    if CGROUP_NAMES.output::<[u8]>(bytes, 0).is_err()
        && let Some(c) = counters()
    {
        c.names_lost += 1;
    }
}

/// The first `size` bytes of `record`, when that many are in it.
#[inline(always)]
fn record_bytes(record: &NameRecord, size: usize) -> Option<&[u8]> {
    if size > size_of::<NameRecord>() {
        return None;
    }
    // SAFETY: `size` bytes from the start of the record are inside it.
    Some(unsafe { core::slice::from_raw_parts((record as *const NameRecord).cast::<u8>(), size) })
}
