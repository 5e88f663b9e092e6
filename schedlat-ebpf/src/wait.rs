//! The measurement itself, shared by both hook modes: a task's wait starts
//! when it is enqueued (woken, or switched out while still runnable) and ends
//! when it is switched in.

use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};
use schedlat_common::{
    CpuStats, Extremes, bucket_index, log2_slot,
    start::{self, Kind},
};

use crate::{
    bpf::{barrier_var, cpu, now},
    causes,
    config::{COMPUTE, get},
    decision, filter,
    keying::{self, Key, SharedKey},
    memory::TaskPtr,
    workload,
};

/// Per TID, its start word (schedlat_common::start): the enqueue
/// timestamp, how the wait began (0 = not waiting), the queue depth and
/// the CPU it last ran on. Indexed by TID and sized from pid_max by the
/// loader, so a lookup is an array index (no hashing, no capacity to fill
/// up: every TID the kernel can hand out has a slot).
#[map]
static START: Array<u64> = Array::with_max_entries(4_194_304, 0);

/// One `CpuStats` per CPU: no atomics, no shared cache lines.
#[map]
static STATS: PerCpuArray<CpuStats> = PerCpuArray::with_max_entries(1, 0);

/// Per-CPU shortest/longest wait of the current and the previous interval,
/// indexed by `EPOCH & 1` (see `schedlat_common::Extremes`).
#[map]
static EXTREMES: PerCpuArray<Extremes> = PerCpuArray::with_max_entries(2, 0);

/// Interval counter, incremented by userspace at each interval end; its low
/// bit also picks the victims mode's current tables (victims.rs).
#[map]
pub static EPOCH: Array<u32> = Array::with_max_entries(1, 0);

#[inline(always)]
fn stats() -> Option<&'static mut CpuStats> {
    // SAFETY: per-CPU value, and BPF programs do not nest on one CPU for the
    // sched tracepoints (they run with preemption disabled).
    STATS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// `tid` became runnable now, the `kind` way; `task` is its task_struct
/// (None in the tp hook mode). `D`: the decision split's programs (main.rs
/// says why they are programs of their own).
#[inline(always)]
pub fn enqueue<const D: bool>(tid: u32, kind: Kind, task: Option<TaskPtr>) {
    enqueue_at::<D>(tid, now(), kind, task, None);
}

/// `enqueue` at `now`; `taken_by`: the task that took the CPU from a
/// preempted one (decision.rs `outranked`).
#[inline(always)]
fn enqueue_at<const D: bool>(
    tid: u32,
    now: u64,
    kind: Kind,
    task: Option<TaskPtr>,
    taken_by: Option<TaskPtr>,
) {
    // The idle task (pid 0) is never waiting for a CPU.
    if tid == 0 {
        return;
    }
    let Some(slot) = START.get_ptr_mut(tid) else {
        if let Some(s) = stats() {
            s.untracked_tid += 1;
        }
        return;
    };
    if kind == Kind::Woken {
        // SAFETY: as below.
        causes::waking(unsafe { *slot }, now);
    }
    let queue = causes::queue(task);
    // SAFETY: pointer into the map value, valid for this program run.
    let word = unsafe { start::begin(*slot, now, kind, causes::depth(queue)) };
    // SAFETY: as above.
    unsafe { *slot = word };
    if !D {
        causes::snapshot(queue, tid, word);
        return;
    }
    let decided = match (queue, task) {
        (Some(q), Some(t)) if decision::on() => {
            let word = decision::at_enqueue(t, q.rq(), kind == Kind::Woken);
            decision::outranked_word(word, decision::outranked(t, taken_by))
        }
        _ => 0,
    };
    causes::snapshot_decided(queue, tid, word, decided);
}

/// A wait that just ended: its length, the clock at its end, the TIDs of
/// the switch that ended it (already read: the victims mode reuses them),
/// how it began and whether it ended on another CPU than the task last ran
/// on.
#[derive(Clone, Copy)]
pub struct Ended {
    pub wait_ns: u64,
    pub now: u64,
    pub prev_tid: u32,
    pub next_tid: u32,
    pub began: Began,
    pub migrated: bool,
    /// The decision split's `Decided` word of the wait (0 when the split is
    /// off), for the slow events.
    pub decided: u64,
}

/// How a wait began, as its class index among the split's first three
/// (schedlat_common::causes::BEGAN: woken 0, new 1, preempted 2). Kept as
/// the number the start word yields rather than matched into an enum: each
/// arm of such a match would be another path for the verifier.
#[derive(Clone, Copy)]
pub struct Began(u64);

impl Began {
    /// The index into a `[_; 3]` of the three (bounded by the caller).
    #[inline(always)]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A context switch from `prev` to `next`; the wait of `next` that it ends,
/// if one was measured (for the victims and slow modes), added to the
/// histogram when `histogram` (off in those modes), and to the breakdown
/// histogram of `next`'s key, if any (keying.rs key_histogram(), given the
/// wait's `Decided` word and length).
/// `prev` and `next` are the task_structs (None in the tp hook mode), for
/// the cause and decision splits, and `preempt` sched_switch's argument
/// (for the decision split, on in the `D` programs); the wait is charged
/// to its CPU's holders in the `P` programs (the neighbour pairs).
#[inline(always)]
pub fn switch<const D: bool, const P: bool>(
    (prev_tid, prev): (u32, Option<TaskPtr>),
    (prev_runnable, preempt): (bool, u64),
    (next_tid, next): (u32, Option<TaskPtr>),
    histogram: bool,
) -> Option<Ended> {
    // One clock read serves both sides of the switch.
    let now = now();
    if prev_runnable {
        enqueue_at::<D>(prev_tid, now, Kind::Preempted, prev, next);
    }
    // A wait ending on a CPU outside `--cpu` is not measured. Its start time
    // stays: the task's next enqueue overwrites it before any switch-in.
    if next_tid == 0 || !filter::cpu_wanted() {
        return None;
    }
    let slot = START.get_ptr_mut(next_tid)?;
    // SAFETY: pointer into the map value, valid for this program run.
    let word = unsafe { *slot };
    if !start::waiting(word) {
        // Enqueued before we attached: no start time, nothing to measure.
        return None;
    }
    let cpu = cpu();
    // Not waiting any more, and last run here.
    // SAFETY: as above.
    unsafe { *slot = start::ended_on(cpu) };
    let s = stats()?;
    let Some(wait_ns) = start::wait_ns(word, now) else {
        s.discarded_negative += 1;
        return None;
    };
    if P {
        workload::count_pair((prev, prev_tid), next, (word, wait_ns, now));
    }
    // Before the cause split's overlaps, which clear the snapshot slot.
    let mut decided = 0;
    if D && decision::on()
        && let (Some(p), Some(q)) = (prev, causes::queue(next))
    {
        decided = decision::switched_in((word, wait_ns), next_tid, (p, preempt), q.rq());
    }
    if P && D {
        workload::count_share((prev, prev_tid), next, decided, (wait_ns, now));
    }
    if histogram {
        let key = record(s, wait_ns, (next, decided), |bucket| {
            causes::histograms(word, cpu, bucket);
        });
        if causes::on() {
            causes::count(
                (word, wait_ns),
                cpu,
                prev,
                (next_tid, next),
                key.map(SharedKey::causes),
            );
        }
    }
    Some(Ended {
        wait_ns,
        now,
        prev_tid,
        next_tid,
        began: Began(start::kind_cause(word)),
        migrated: causes::migrated(word, cpu),
        decided,
    })
}

/// Adds `wait` to the total histogram and to the key's of the task that
/// waited (`next`, None in the tp hook mode), if a breakdown is on (when
/// the key map is full, the wait counts as unkeyed); `decided` is its
/// `Decided` word, for the key's decision split.
///
/// Each index is computed once and used for both histograms as soon as it
/// is known. Computing it again for the key let LLVM specialise the
/// arithmetic on what the first pass learnt, into paths the 6.1 verifier
/// cannot rule out (found by `cargo xtask vm-test`). Holding both indices
/// at once multiplied the verifier's states by their ranges: 5x the
/// verified instructions, and 3 -> 14 ms of load time (43 ms with a
/// breakdown), measured with bpf_prog_info's `verified_insns`.
///
/// `cause_rows` adds the wait to the cause split's histograms, given the
/// fine bucket as soon as it is known, and the key is returned for the
/// rest of the split: a bucket kept for later multiplies the verifier's
/// states (40k more verified instructions when the split took it after).
#[inline(always)]
fn record(
    s: &mut CpuStats,
    wait: u64,
    (next, decided): (Option<TaskPtr>, u64),
    cause_rows: impl FnOnce(usize),
) -> Option<SharedKey> {
    // A plain call, not a closure: a closure called from two programs
    // (the histogram's and the victims' switch) was left out of line by
    // LLVM once the per-key split made it large, a BPF subprogram the
    // verifier walked again on every path (8,735 -> 11,193 verified
    // instructions on 6.18).
    let key = match next {
        Some(next) => keying::key_histogram(next, (decided, wait)),
        None => Key::Off,
    };
    let key = match key {
        Key::Stats(k) => Some(k),
        Key::Full => {
            s.unkeyed += 1;
            None
        }
        Key::Off => None,
    };
    let bucket = bucket_index(wait);
    if let Some(count) = s.buckets.get_mut(barrier_var(bucket)) {
        *count += 1;
    }
    cause_rows(bucket);
    if let Some(k) = key {
        k.count_bucket(bucket);
    }
    // checked_div: a plain `/` would carry a panic path the verifier rejects.
    // The division stays: the slot taken from log2(wait) - log2(unit_ns)
    // and one compare instead saved nothing measurable at run time (one
    // bench run on 6.18: 437 -> 433 ns/switch, --no-decision 310 -> 318)
    // and cost the verifier 292 more instructions in sched_switch_decision,
    // 833 more branch-free.
    let in_unit = wait.checked_div(get(&COMPUTE.unit_ns)).unwrap_or(0);
    let slot = log2_slot(in_unit);
    if let Some(count) = s.log2.get_mut(barrier_var(slot)) {
        *count += 1;
    }
    if let Some(k) = key {
        k.count_slot(slot);
        k.add_sum(wait);
    }
    s.sum_ns += wait;

    let epoch = EPOCH.get(0).copied().unwrap_or(0) & 1;
    if let Some(x) = EXTREMES.get_ptr_mut(epoch) {
        // SAFETY: per-CPU value, no nesting (see stats()).
        let x = unsafe { &mut *x };
        if wait > x.max_ns {
            x.max_ns = wait;
        }
        if x.min_ns == 0 || wait < x.min_ns {
            x.min_ns = wait;
        }
    }
    key
}

/// `tid`'s sched_waking (`--waking`): stamp its word with the wakeup
/// path's start, unless it is waiting already (start::waking).
#[inline(always)]
pub fn waking(tid: u32) {
    if tid == 0 {
        return;
    }
    if let Some(slot) = START.get_ptr_mut(tid) {
        // SAFETY: pointer into the map value, valid for this program run.
        unsafe {
            if let Some(word) = start::waking(*slot, now()) {
                *slot = word;
            }
        }
    }
}

/// `tid` exited: drop its word so a reused TID inherits neither a start
/// time nor a last CPU.
#[inline(always)]
pub fn forget(tid: u32) {
    if let Some(slot) = START.get_ptr_mut(tid) {
        // SAFETY: pointer into the map value, valid for this program run.
        unsafe { *slot = 0 };
    }
}
