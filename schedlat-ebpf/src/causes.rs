//! The cause split of each wait (docs/causes.md): how it began, where it
//! ended against the CPU the task last ran on, who held the CPU, how deep
//! the queue was, and for a wait that ends on the CPU it was queued on,
//! what else took that CPU meanwhile (steal, IRQ, bandwidth throttling).
//!
//! How it began, the depth and the last-run CPU travel in the task's start
//! word (schedlat_common::start): the split adds no per-task map. Overlaps
//! need the kernel's accounting at the enqueue: a snapshot slot per CPU and
//! TID modulo SLOTS_PER_CPU, tagged with the start word, so a slot another
//! task took since is never read as this wait's.
//!
//! Off unless Compute.causes: the verifier removes all of it.

use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};
use schedlat_common::{
    bucket_index,
    causes::{
        Cause, CauseStats, CpuTopology, NR_OVERLAPS, OVERLAP_IRQ, OVERLAP_STEAL, OVERLAP_THROTTLED,
        OverlapSlot, SLOTS_PER_CPU,
    },
    start,
};

use crate::{
    bpf::{barrier_var, equal, select},
    config::{CAUSE, COMPUTE, DECISION, RQ, get},
    keying::SharedCauses,
    memory::{CfsRq, Rq, TaskPtr},
};

/// The split of the total, per CPU, cumulative since load.
#[map]
static CAUSES: PerCpuArray<CauseStats> = PerCpuArray::with_max_entries(1, 0);

/// nr_cpus x SLOTS_PER_CPU snapshots when the overlaps are on (the loader
/// sizes it; 1 entry otherwise).
#[map]
static CAUSE_SLOTS: Array<OverlapSlot> = Array::with_max_entries(1, 0);

/// Per CPU, its last-level cache and NUMA node (filled by the loader when
/// Compute.topology).
#[map]
static TOPOLOGY: Array<CpuTopology> = Array::with_max_entries(1, 0);

/// task->flags bits (include/linux/sched.h): the idle tasks, kernel
/// threads.
const PF_IDLE: u32 = 0x0000_0002;
const PF_KTHREAD: u32 = 0x0020_0000;

#[inline(always)]
pub fn on() -> bool {
    get(&COMPUTE.causes) != 0
}

/// `task` with the pointer fields the split follows from it read now
/// (memory.rs with_links() says why): for sched_switch's prev and next,
/// before its paths branch.
#[inline(always)]
pub fn linked(task: TaskPtr) -> TaskPtr {
    task.with_links(on() && get(&RQ.resolved) != 0, on())
}

/// sched_switch's `next` with the fields `linked` reads, read through
/// `rq->curr` of prev's run queue (prev's `se.cfs_rq->rq`, read by
/// `linked(prev)` already): __schedule() sets rq->curr to next before
/// sched_switch fires, on every kernel with tp_btf (kernel/sched/core.c).
/// A pointer loaded from prev is a plain BTF pointer, so next's
/// `se.cfs_rq` and scheduler group cost the verifier no scans of the kernel's
/// BTF by name, which read from the argument they do (memory.rs
/// with_links). `rq->curr`'s offset is resolved with the decision split;
/// without it, next's own fields are read.
#[inline(always)]
pub fn linked_next(next: TaskPtr, prev: TaskPtr) -> TaskPtr {
    if on() && get(&RQ.resolved) != 0 && get(&DECISION.rq_curr) != 0 {
        next.with_links_through(prev.cfs_rq().rq().curr(), true, true)
    } else {
        linked(next)
    }
}

/// The queue a task was just put on: its group's CFS queue on that CPU,
/// and the CPU's run queue.
#[derive(Clone, Copy)]
pub struct Queue {
    cfs_rq: CfsRq,
    rq: Rq,
}

impl Queue {
    #[inline(always)]
    pub fn rq(self) -> Rq {
        self.rq
    }
}

/// `task`'s queue, when the split is on and the kernel has the chain.
#[inline(always)]
pub fn queue(task: Option<TaskPtr>) -> Option<Queue> {
    if !on() || get(&RQ.resolved) == 0 {
        return None;
    }
    let cfs_rq = task?.cfs_rq();
    Some(Queue {
        cfs_rq,
        rq: cfs_rq.rq(),
    })
}

/// The start word's depth field for a task just counted in its queue's
/// nr_running (at sched_wakeup it is enqueued; a preempted prev still is).
#[inline(always)]
pub fn depth(queue: Option<Queue>) -> u64 {
    match queue {
        Some(q) => start::depth_field(q.rq.nr_running().saturating_sub(1)),
        None => start::DEPTH_UNKNOWN,
    }
}

/// At the sched_wakeup at `now` of a task whose word is `word`: the
/// wakeup path since its sched_waking, if `--waking` stamped one.
#[inline(always)]
pub fn waking(word: u64, now: u64) {
    if !on() || get(&COMPUTE.waking) == 0 {
        return;
    }
    let Some(ns) = start::waking_ns(word, now) else {
        return;
    };
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(cs) = CAUSES.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    cs.waking_count += 1;
    cs.waking_sum_ns += ns;
    if let Some(n) = cs.waking_buckets.get_mut(barrier_var(bucket_index(ns))) {
        *n += 1;
    }
}

/// Keeps the accounting of `queue` at the enqueue of `tid`'s wait `word`.
/// The slot is that of the queue's CPU (a wakeup often runs on the
/// waker's), where the switch-in on that CPU looks. The slot's `decision`
/// is left as it is: only the decision split's programs read it.
#[inline(always)]
pub fn snapshot(queue: Option<Queue>, tid: u32, word: u64) {
    if get(&COMPUTE.overlaps) == 0 {
        return;
    }
    let Some(q) = queue else {
        return;
    };
    let index = q.rq.cpu() * SLOTS_PER_CPU + (tid & (SLOTS_PER_CPU - 1));
    if let Some(slot) = CAUSE_SLOTS.get_ptr_mut(index) {
        // SAFETY: a map value, valid for this program run.
        unsafe {
            (*slot).word = word;
            (*slot).at = accounting(q);
        };
    }
}

/// `snapshot`, with the decision split's state of the wait (`decision`,
/// packed), for the decision split's programs: the slots are written for
/// either split.
#[inline(always)]
pub fn snapshot_decided(queue: Option<Queue>, tid: u32, word: u64, decision: u64) {
    if !slots_on() {
        return;
    }
    let Some(q) = queue else {
        return;
    };
    let index = q.rq.cpu() * SLOTS_PER_CPU + (tid & (SLOTS_PER_CPU - 1));
    if let Some(slot) = CAUSE_SLOTS.get_ptr_mut(index) {
        // SAFETY: a map value, valid for this program run.
        unsafe {
            *slot = OverlapSlot {
                word,
                at: accounting(q),
                decision,
            }
        };
    }
}

/// The snapshot slots are written: for the overlaps, or the decision.
#[inline(always)]
fn slots_on() -> bool {
    get(&COMPUTE.overlaps) != 0 || get(&COMPUTE.decision) != 0
}

/// The decision state the enqueue of `tid`'s wait `word` left in this
/// CPU's slot, if the slot still holds that wait (it is not cleared here:
/// the overlaps read it after); `EnqueueWord::NOT_FOUND` (all ones) if not.
#[inline(always)]
pub fn decision_of(word: u64, cpu: u32, tid: u32) -> u64 {
    let index = cpu * SLOTS_PER_CPU + (tid & (SLOTS_PER_CPU - 1));
    match CAUSE_SLOTS.get(index) {
        Some(slot) => select(equal(slot.word, word), slot.decision, u64::MAX),
        None => u64::MAX,
    }
}

/// Steal, IRQ and throttled time of the queue's accounting now; 0 for what
/// the kernel lacks.
#[inline(always)]
fn accounting(q: Queue) -> [u64; NR_OVERLAPS] {
    let mut at = [0; NR_OVERLAPS];
    if get(&CAUSE.has_steal) != 0 {
        at[OVERLAP_STEAL] = q.rq.steal_ns();
    }
    if get(&CAUSE.has_irq) != 0 {
        at[OVERLAP_IRQ] = q.rq.irq_ns();
    }
    if get(&CAUSE.has_throttled) != 0 {
        at[OVERLAP_THROTTLED] = q.cfs_rq.group_throttled_ns();
    }
    at
}

/// The placement class (`Cause::SameCpu`, `Migrated`, `PlacementUnknown`)
/// of a wait whose task last ran on CPU `last_plus_one - 1` (0: unknown)
/// and that ended on `cpu`, computed without a branch.
///
/// A run of short decisions (this one, who held the CPU) each made with
/// if/else multiplies the paths the verifier walks: it only prunes a path
/// where it chose to keep a state to compare with, and short diamonds
/// rarely get one (held by alone took 10,000 of 15,000 verified
/// instructions). The bit tricks go through `barrier_var`, or LLVM turns
/// them back into comparisons, which are branches in BPF.
#[inline(always)]
fn placement_class(last_plus_one: u64, cpu: u32) -> u64 {
    // Both below 2^63: the top bit of `x - 1` is set only for x = 0, that
    // of `d | -d` only for d != 0.
    let unknown = barrier_var(last_plus_one.wrapping_sub(1) as usize) as u64 >> 63;
    let d = last_plus_one ^ (u64::from(cpu) + 1);
    let other = (d | barrier_var(d.wrapping_neg() as usize) as u64) >> 63;
    Cause::SameCpu as u64 + other + unknown
}

/// Whether a wait with start word `word` that ends on `cpu` migrated: it
/// last ran on another CPU (known).
#[inline(always)]
pub fn migrated(word: u64, cpu: u32) -> bool {
    let last = start::last_cpu_plus_one(word);
    last != 0 && last != u64::from(cpu) + 1
}

/// Where a wait's classes are counted: the per-CPU total, and the split of
/// its breakdown key when there is one.
///
/// Each class is counted where it is decided, with a constant index, not
/// collected first and counted after: a class carried as a value through
/// the later decisions multiplies the verifier's states by the number of
/// values it can take (1M instructions, refused, when the whole split was
/// built first).
struct Sink<'a> {
    cs: &'a mut CauseStats,
    key: Option<SharedCauses>,
    wait: u64,
}

impl Sink<'_> {
    #[inline(always)]
    fn add(&mut self, class: Cause) {
        self.add_at(class as usize);
    }

    /// `class` bounded by the caller (a `Cause` index, or checked here).
    #[inline(always)]
    fn add_at(&mut self, class: usize) {
        let class = barrier_var(class);
        if let Some(n) = self.cs.count.get_mut(class) {
            *n += 1;
        }
        if let Some(sum) = self.cs.sum_ns.get_mut(class) {
            *sum += self.wait;
        }
        if let Some(key) = self.key {
            key.add(class, self.wait);
        }
    }

    #[inline(always)]
    fn overlap(&mut self, i: usize, ns: u64) {
        self.cs.overlap_ns[i] += ns;
        if let Some(key) = self.key {
            key.add_overlap(i, ns);
        }
    }
}

/// Adds the wait `word` that ended on `cpu` to the histograms of how it
/// began and of where it ended (same CPU or migrated), at fine bucket
/// `bucket` (the total only: keys keep counts and sums).
#[inline(always)]
pub fn histograms(word: u64, cpu: u32, bucket: usize) {
    if !on() {
        return;
    }
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(cs) = CAUSES.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    let mut one = |class: usize| {
        if let Some(h) = cs.buckets.get_mut(barrier_var(class))
            && let Some(n) = h.get_mut(barrier_var(bucket))
        {
            *n += 1;
        }
    };
    one(start::kind_cause(word) as usize);
    // PlacementUnknown has no histogram: its row is out of bounds.
    one(placement_class(start::last_cpu_plus_one(word), cpu) as usize);
}

/// Splits the wait `word` of `next_tid` that ended after `wait` ns on
/// `cpu`, when `prev` was switched out for it (`next`): into the per-CPU
/// total and `key`'s split. The task pointers are None in the tp hook
/// mode.
#[inline(always)]
pub fn count(
    (word, wait): (u64, u64),
    cpu: u32,
    prev: Option<TaskPtr>,
    (next_tid, next): (u32, Option<TaskPtr>),
    key: Option<SharedCauses>,
) {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(cs) = CAUSES.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    let mut sink = Sink { cs, key, wait };
    // How it began: bits of the word, 0..=2.
    let kind = start::kind_cause(word) as usize;
    sink.add_at(kind);
    // Where it ended, against where the task last ran.
    let last = start::last_cpu_plus_one(word);
    let placement = placement_class(last, cpu);
    sink.add_at(placement as usize);
    if placement == Cause::Migrated as u64 {
        crossings(&mut sink, (last - 1) as u32, cpu);
    }
    sink.add_at(held_by(prev, next) as usize);
    sink.add_at(start::depth_cause(word) as usize);
    overlap(&mut sink, word, cpu, next_tid, next);
}

/// A migration from `from` to `to` that left a last-level cache or a node.
#[inline(always)]
fn crossings(sink: &mut Sink<'_>, from: u32, to: u32) {
    if get(&COMPUTE.topology) == 0 {
        return;
    }
    let (Some(a), Some(b)) = (TOPOLOGY.get(from), TOPOLOGY.get(to)) else {
        return;
    };
    if a.llc != b.llc {
        sink.add(Cause::CrossLlc);
    }
    if a.node != b.node {
        sink.add(Cause::CrossNode);
    }
}

/// Who held the CPU until the wait ended: `prev`, by its relation to the
/// task that waited, in this order: the idle task, a higher class (RT or
/// deadline, the waiter not), a kernel thread, the same cgroup (the same
/// group of the CPU scheduler), another cgroup. Without branches but one (placement_class
/// says why): the first three facts make an index into a table of classes
/// (a nibble each), one table for the same cgroup and one for another.
/// Every field is read, even for the idle task.
#[inline(always)]
fn held_by(prev: Option<TaskPtr>, next: Option<TaskPtr>) -> u64 {
    let (Some(prev), Some(next)) = (prev, next) else {
        return Cause::HeldByUnknown as u64;
    };
    // The idle task is told by PF_IDLE, not by its pid 0: the class is
    // an array index, so the verifier tracks every value it came from,
    // and prev's pid went through the enqueue's branches (tid 0, the
    // start array's bounds). Taken from there, it kept those paths apart:
    // 8,700 of 14,000 verified instructions.
    let flags = prev.flags();
    let idle = u64::from(flags >> PF_IDLE.trailing_zeros()) & 1;
    // Bits 1, 2 and 6: SCHED_FIFO, SCHED_RR, SCHED_DEADLINE.
    let outranks = |t: TaskPtr| (0x46u64 >> (t.policy() & 63)) & 1;
    let higher = outranks(prev) & (outranks(next) ^ 1);
    let kthread = u64::from(flags >> PF_KTHREAD.trailing_zeros()) & 1;
    let index = barrier_var((idle * 4 + higher * 2 + kthread) as usize) as u64;
    // The group the CPU scheduler shares the CPU between (memory.rs
    // sched_group: the task group, not the css_set, which differs for
    // tasks in one cpu cgroup whose groups of another hierarchy, say v1
    // memory, differ). The verifier types the pointers: comparing them is
    // allowed, arithmetic on them is not. Nibble i: the class of index i.
    let table: u64 = if prev.sched_group() == next.sched_group() {
        HELD_BY_SAME_CGROUP
    } else {
        HELD_BY_OTHER_CGROUP
    };
    (table >> ((index * 4) & 63)) & 0xf
}

/// Classes of `held_by`'s index (idle 4, higher class 2, kernel thread 1),
/// a nibble each, index 0 lowest: 4-7 idle (10), 2-3 higher class (8), 1
/// kernel (9), 0 the same cgroup (11) or another (12).
const HELD_BY_SAME_CGROUP: u64 = 0xAAAA_889B;
const HELD_BY_OTHER_CGROUP: u64 = 0xAAAA_889C;

/// The overlaps of a wait that ends on the CPU it was queued on: the
/// snapshot its enqueue left in this CPU's slot, against the accounting
/// now. Each delta is capped at the wait: the throttled time of a group
/// is summed over its CPUs and added at the unthrottle.
#[inline(always)]
fn overlap(sink: &mut Sink<'_>, word: u64, cpu: u32, tid: u32, next: Option<TaskPtr>) {
    if get(&COMPUTE.overlaps) == 0 {
        return;
    }
    let index = cpu * SLOTS_PER_CPU + (tid & (SLOTS_PER_CPU - 1));
    let Some(slot) = CAUSE_SLOTS.get_ptr_mut(index) else {
        return;
    };
    // SAFETY: a map value, valid for this program run.
    let slot = unsafe { &mut *slot };
    if slot.word != word {
        return;
    }
    slot.word = 0;
    let Some(queue) = queue(next) else {
        return;
    };
    let now = accounting(queue);
    let wait = sink.wait;
    for (i, (now, then)) in now.iter().zip(slot.at).enumerate() {
        sink.overlap(i, now.saturating_sub(then).min(wait));
    }
    sink.cs.overlap_waits += 1;
    sink.cs.overlap_wait_ns += wait;
    if let Some(key) = sink.key {
        key.add_overlap_wait(wait);
    }
}
