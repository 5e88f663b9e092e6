//! The breakdown histograms (`-P`, `-L`, `--pidnss`, `--cgroups`,
//! `--cpus`): one per key of the task that waited, kept beside the total
//! histogram. Off unless Compute.breakdown says otherwise, and then the
//! verifier removes all of it.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{Array, HashMap},
};
use schedlat_common::scope::{Breakdown, KeyStats};

use crate::{
    atomic,
    bpf::{barrier_var, cpu},
    config::{COMPUTE, get},
    memory::TaskPtr,
};

/// One histogram per key; sized by the loader (`--max-keys`), 1 entry when
/// no breakdown is asked for.
#[map]
static KEYED: HashMap<u64, KeyStats> = HashMap::with_max_entries(1, 0);

/// A zeroed `KeyStats` to insert new keys from (1.4 KiB: too big for the
/// 512-byte BPF stack).
#[map]
static KEY_ZERO: Array<KeyStats> = Array::with_max_entries(1, 0);

/// The breakdown histogram a wait goes to, besides the total.
pub enum Key {
    /// No breakdown is asked for.
    Off,
    /// The key map is full (`--max-keys`): the wait is only in the total,
    /// counted there as `unkeyed`.
    Full,
    /// The key's histogram, shared by all CPUs.
    Stats(&'static mut KeyStats),
}

/// The histogram of `next`'s key: found, or inserted zeroed at the key's
/// first wait. wait.rs record() adds the wait to it alongside the total,
/// index by index.
#[inline(always)]
pub fn key_histogram(next: TaskPtr) -> Key {
    let kind = get(&COMPUTE.breakdown);
    if kind == Breakdown::None as u64 {
        return Key::Off;
    }
    let key = if kind == Breakdown::Process as u64 {
        u64::from(next.tgid())
    } else if kind == Breakdown::Thread as u64 {
        u64::from(next.pid())
    } else if kind == Breakdown::PidNamespace as u64 {
        next.pid_namespace()
    } else if kind == Breakdown::Cgroup as u64 {
        next.css().cgroup_id()
    } else {
        u64::from(cpu())
    };
    let Some(stats) = key_stats(key) else {
        return Key::Full;
    };
    // SAFETY: a map value, valid for this program run; other CPUs update it
    // too, hence the atomic adds below (BPF_XADD, every kernel).
    let stats = unsafe { &mut *stats };
    if kind == Breakdown::Process as u64 || kind == Breakdown::Thread as u64 {
        // A thread names itself after it starts, so the latest name is kept
        // (a racy 16-byte write between threads of a process: it is a label).
        stats.comm = next.comm();
    }
    Key::Stats(stats)
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
    if let Some(p) = KEYED.get_ptr_mut(key) {
        return Some(p);
    }
    let zero = KEY_ZERO.get(0)?;
    let _ = KEYED.insert(key, zero, u64::from(BPF_NOEXIST));
    KEYED.get_ptr_mut(key)
}
