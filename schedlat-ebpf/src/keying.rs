//! The breakdown histograms (`-P`, `-L`, `--pidnss`, `--cgroups`,
//! `--cpus`): one per key of the task that waited, kept beside the total
//! histogram. Off unless Compute.breakdown says otherwise, and then the
//! verifier removes all of it.

use core::ptr::NonNull;

use aya_ebpf::{
    bindings::{BPF_F_MMAPABLE, BPF_NOEXIST},
    macros::map,
    maps::{Array, HashMap, PerCpuArray, Queue},
};
use schedlat_common::{
    NR_BUCKETS, NR_LOG2_SLOTS,
    causes::{KeyCauses, NR_CAUSES, NR_OVERLAPS},
    decision::{
        Decided, KEY_SLOW_NS, KeyDecision, NR_DECISIONS, NR_HOLDERS, NR_OUTCOME_SLOTS, NR_PASSES,
    },
    flat::above,
    scope::{Breakdown, KeyStats, KeySummary},
};

use crate::{
    atomic,
    bpf::{barrier_var, cpu, masked},
    config::{COMPUTE, get},
    memory::TaskPtr,
};

/// One histogram per key; sized by the loader (`--max-keys`), 1 entry when
/// no breakdown is asked for.
#[map]
static KEYED: HashMap<u64, KeyStats> = HashMap::with_max_entries(1, 0);

/// Per key, its waits and their sum (`KeySummary`), in the row the key's
/// `KeyStats::summary_slot` names: what a scrape reads of every key, in
/// place through a memory mapping (an idle key costs it one compare, no
/// syscall and no copy), where KEYED is read only for the keys it
/// exports. Sized by the loader as KEYED.
#[map]
static KEY_SUMMARY: Array<KeySummary> = Array::with_max_entries(1, BPF_F_MMAPABLE);

/// The free rows of KEY_SUMMARY: userspace pushes every row at load and
/// each row of a key it deletes (zeroed, a reading later); a new key pops
/// one. A queue, because 5.10 cannot fetch-and-add in these programs (no
/// bump allocator: atomic.rs). Sized by the loader as KEYED.
#[map]
static KEY_FREE: Queue<u32> = Queue::with_max_entries(1, 0);

/// A zeroed `KeyStats` to insert new keys from (1,704 bytes: too big for
/// the 512-byte BPF stack), per CPU so that the new key's summary row can
/// be written into it before the insert. The programs do not nest on a
/// CPU, so nothing else writes this CPU's copy meanwhile.
#[map]
static KEY_ZERO: PerCpuArray<KeyStats> = PerCpuArray::with_max_entries(1, 0);

/// Per key, its decision split (the decision split's programs only): a map
/// of its own, keyed as KEYED, so that a key's histogram stays the size it
/// is without the split. Sized by the loader as KEYED when the split is
/// on, 1 entry otherwise.
#[map]
static KEY_DECISIONS: HashMap<u64, KeyDecision> = HashMap::with_max_entries(1, 0);

/// A zeroed `KeyDecision` to insert new keys from (712 bytes: over the
/// 512-byte BPF stack).
#[map]
static KEY_DECISION_ZERO: Array<KeyDecision> = Array::with_max_entries(1, 0);

/// The breakdown histogram a wait goes to, besides the total.
pub enum Key {
    /// No breakdown is asked for.
    Off,
    /// The key map is full (`--max-keys`): the wait is only in the total,
    /// counted there as `unkeyed`.
    Full,
    /// The key's histogram, shared by all CPUs.
    Stats(SharedKey),
}

/// The histogram of `next`'s key: found, or inserted zeroed at the key's
/// first wait. wait.rs record() adds the wait to it alongside the total,
/// index by index. `decided` is the wait's `Decided` word (0 without the
/// decision split) and `wait` its length: counted here in the key's
/// decision split, where the key is known.
#[inline(always)]
pub fn key_histogram(next: TaskPtr, (decided, wait): (u64, u64)) -> Key {
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
    // A key without a histogram (the map full, or no free summary row) is
    // unkeyed; one with a histogram has a summary row too.
    let Some(stats) = key_stats(key).and_then(NonNull::new) else {
        return Key::Full;
    };
    count_summary(stats, wait);
    if decided & Decided::MEASURED != 0 {
        count_decision(key, Decided(decided), wait);
    }
    let stats = SharedKey(stats);
    if kind == Breakdown::Process as u64 || kind == Breakdown::Thread as u64 {
        // A thread names itself after it starts, so the latest name is kept.
        stats.set_comm(next.comm());
    }
    Key::Stats(stats)
}

/// A breakdown key's histogram in the map, which every CPU adds to at once:
/// a pointer whose methods are the only writes, each an atomic add (BPF_XADD,
/// every kernel), rather than a `&mut`, which would promise that this
/// program alone writes it. NonNull, so that an `Option` of it is one
/// register, as an `Option<&mut>` was (a raw pointer's `Option` carries a
/// tag beside it: 1,955 -> 2,145 verified instructions on 6.1).
#[derive(Clone, Copy)]
pub struct SharedKey(NonNull<KeyStats>);

impl SharedKey {
    /// One more wait in fine bucket `bucket`.
    #[inline(always)]
    pub fn count_bucket(self, bucket: usize) {
        // SAFETY: a map value, valid for this program run.
        let buckets = unsafe { &raw mut (*self.0.as_ptr()).buckets };
        add_one(buckets.cast(), NR_BUCKETS, barrier_var(bucket));
    }

    /// One more wait in log2 slot `slot`.
    #[inline(always)]
    pub fn count_slot(self, slot: usize) {
        // SAFETY: as above.
        let log2 = unsafe { &raw mut (*self.0.as_ptr()).log2 };
        add_one(log2.cast(), NR_LOG2_SLOTS, barrier_var(slot));
    }

    /// `wait` more nanoseconds in the key's sum.
    #[inline(always)]
    pub fn add_sum(self, wait: u64) {
        // SAFETY: an aligned u64 in a map value.
        unsafe { atomic::add_u64(&raw mut (*self.0.as_ptr()).sum_ns, wait) };
    }

    /// The name of the task that waited last under this key: a plain
    /// 16-byte write, racing with other threads of the key (it is a label).
    #[inline(always)]
    pub fn set_comm(self, comm: [u8; 16]) {
        // SAFETY: a map value; a torn name is the worst a race leaves.
        unsafe { (&raw mut (*self.0.as_ptr()).comm).write(comm) };
    }

    /// The key's cause split.
    #[inline(always)]
    pub fn causes(self) -> SharedCauses {
        // SAFETY: a field of the map value: not null either.
        SharedCauses(unsafe { NonNull::new_unchecked(&raw mut (*self.0.as_ptr()).causes) })
    }
}

/// A breakdown key's cause split, shared by all CPUs as its histogram is.
#[derive(Clone, Copy)]
pub struct SharedCauses(NonNull<KeyCauses>);

impl SharedCauses {
    /// One more wait of `wait` ns in class `class` (a `Cause` index, already
    /// through barrier_var: causes.rs uses the same index for the total).
    #[inline(always)]
    pub fn add(self, class: usize, wait: u64) {
        // SAFETY: a map value, valid for this program run.
        let count = unsafe { &raw mut (*self.0.as_ptr()).count };
        add_one(count.cast(), NR_CAUSES, class);
        // SAFETY: as above.
        let sums = unsafe { &raw mut (*self.0.as_ptr()).sum_ns };
        add_u64_at(sums.cast(), NR_CAUSES, class, wait);
    }

    /// `ns` more of overlap `i` (steal, IRQ, throttled).
    #[inline(always)]
    pub fn add_overlap(self, i: usize, ns: u64) {
        // SAFETY: as above.
        let overlaps = unsafe { &raw mut (*self.0.as_ptr()).overlap_ns };
        add_u64_at(overlaps.cast(), NR_OVERLAPS, i, ns);
    }

    /// One more overlap-measured wait, of `wait` ns.
    #[inline(always)]
    pub fn add_overlap_wait(self, wait: u64) {
        // SAFETY: aligned u64s in a map value.
        unsafe {
            atomic::add_u64(&raw mut (*self.0.as_ptr()).overlap_waits, 1);
            atomic::add_u64(&raw mut (*self.0.as_ptr()).overlap_wait_ns, wait);
        }
    }
}

/// Adds one to `counts[index]` of an array of `len` u32s, atomically;
/// nothing when `index` is out of bounds. The index is the one the
/// verifier tracks (through barrier_var, bpf.rs), checked here itself.
#[inline(always)]
fn add_one(counts: *mut u32, len: usize, index: usize) {
    if index < len {
        // SAFETY: in bounds of the array, an aligned u32 in a map value.
        unsafe { atomic::add_u32(counts.add(index), 1) };
    }
}

/// Adds `n` to `values[index]` of an array of `len` u64s, atomically.
#[inline(always)]
fn add_u64_at(values: *mut u64, len: usize, index: usize, n: u64) {
    if index < len {
        // SAFETY: in bounds of the array, an aligned u64 in a map value.
        unsafe { atomic::add_u64(values.add(index), n) };
    }
}

/// Adds one wait of `wait` ns, decided `d`, to `key`'s decision split,
/// inserted zeroed at its first. Each class is an index masked to its
/// power-of-two array (no branch, no bounds check: bpf.rs `masked`).
#[inline(always)]
fn count_decision(key: u64, d: Decided, wait: u64) {
    let Some(split) = key_decision(key) else {
        return;
    };
    let decision = masked(d.decision_index(), NR_DECISIONS as u64 - 1) as usize;
    let pass = masked(d.pass_index(), NR_PASSES as u64 - 1) as usize;
    let holder = masked(d.holder_index(), NR_HOLDERS as u64 - 1) as usize;
    let outcome = d.outcome_index();
    let outcome = masked(outcome, NR_OUTCOME_SLOTS as u64 - 1) as usize;
    // 1 for a wait of at least KEY_SLOW_NS (waits are far below 2^63).
    let slow = above(wait, KEY_SLOW_NS - 1);
    // SAFETY: aligned u64s of a map value, each index within its array.
    unsafe {
        let s = split.as_ptr();
        atomic::add_u64(
            (&raw mut (*s).decision_count).cast::<u64>().add(decision),
            1,
        );
        atomic::add_u64(
            (&raw mut (*s).decision_sum_ns).cast::<u64>().add(decision),
            wait,
        );
        atomic::add_u64((&raw mut (*s).pass_count).cast::<u64>().add(pass), 1);
        atomic::add_u64((&raw mut (*s).pass_sum_ns).cast::<u64>().add(pass), wait);
        atomic::add_u64((&raw mut (*s).holder_count).cast::<u64>().add(holder), 1);
        atomic::add_u64(
            (&raw mut (*s).holder_sum_ns).cast::<u64>().add(holder),
            wait,
        );
        atomic::add_u64((&raw mut (*s).outcome_count).cast::<u64>().add(outcome), 1);
        atomic::add_u64(
            (&raw mut (*s).outcome_sum_ns).cast::<u64>().add(outcome),
            wait,
        );
        atomic::add_u64(
            (&raw mut (*s).outcome_slow).cast::<u64>().add(outcome),
            slow,
        );
        atomic::add_u64(&raw mut (*s).passes, d.passes());
    }
}

/// One more wait of `wait` ns in the summary row of the key whose
/// histogram is `stats`.
#[inline(always)]
fn count_summary(stats: NonNull<KeyStats>, wait: u64) {
    // SAFETY: a map value, valid for this program run; the row number is
    // only written before the key's insert.
    let slot = unsafe { (*stats.as_ptr()).summary_slot };
    let Some(s) = KEY_SUMMARY.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: aligned u64s of a map value, valid for this program run.
    unsafe {
        atomic::add_u64(&raw mut (*s).waits, 1);
        atomic::add_u64(&raw mut (*s).sum_ns, wait);
    }
}

/// The key's decision split, inserted zeroed on its first wait (as
/// `key_stats`).
#[inline(always)]
fn key_decision(key: u64) -> Option<NonNull<KeyDecision>> {
    if let Some(p) = KEY_DECISIONS.get_ptr_mut(key) {
        return NonNull::new(p);
    }
    let zero = KEY_DECISION_ZERO.get(0)?;
    let _ = KEY_DECISIONS.insert(key, zero, u64::from(BPF_NOEXIST));
    KEY_DECISIONS.get_ptr_mut(key).and_then(NonNull::new)
}

/// The key's histogram, inserted zeroed on its first wait with a free
/// summary row. Two CPUs may insert the same new key at once: BPF_NOEXIST
/// makes one of them fail, its row goes back to the queue, and its second
/// lookup finds the other's entry. The row's key is written after the
/// insert: a wait another CPU counts in between is in the row's count
/// before the row names its key, which a scrape then reads as the new
/// key's (userspace skips rows whose key is 0).
#[inline(always)]
fn key_stats(key: u64) -> Option<*mut KeyStats> {
    if let Some(p) = KEYED.get_ptr_mut(key) {
        return Some(p);
    }
    let slot = KEY_FREE.pop().ok().flatten()?;
    let Some(zero) = KEY_ZERO.get_ptr_mut(0) else {
        let _ = KEY_FREE.push(slot, 0);
        return None;
    };
    // SAFETY: this CPU's copy of a per-CPU map value (the programs do not
    // nest, so no other writes it meanwhile).
    unsafe { (*zero).summary_slot = slot };
    // SAFETY: as above; the insert copies it.
    let zero: &KeyStats = unsafe { &*zero };
    let inserted = KEYED.insert(key, zero, u64::from(BPF_NOEXIST));
    match (inserted, KEY_SUMMARY.get_ptr_mut(slot)) {
        // SAFETY: an aligned u64 of a map value; no program writes a row's
        // key but the one that took the row.
        (Ok(()), Some(row)) => unsafe { (&raw mut (*row).key).write_volatile(key) },
        (Ok(()), None) => {}
        (Err(_), _) => {
            let _ = KEY_FREE.push(slot, 0);
        }
    }
    KEYED.get_ptr_mut(key)
}
