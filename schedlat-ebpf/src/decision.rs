//! The scheduler's decision of each wait (docs/decision.md): at the
//! wakeup, whether it asked for the CPU and, if not, which fair-class rule
//! declined; at the switch-in, how many times the CPU went to others
//! meanwhile and how the holder left it.
//!
//! The wakeup's state rides in the enqueue's overlap snapshot slot
//! (causes.rs, `OverlapSlot::decision`): no per-task memory. Reading the
//! target CPU's running task needs no kernel symbol: the wakee was just
//! enqueued on that CPU, so `p->se.cfs_rq->rq->curr` is it.
//!
//! The switch-in's work is a global BPF function (`schedlat_decision_at_switch`): the
//! verifier checks it once, on its own, instead of once per path of
//! sched_switch that reaches it. It takes and returns plain numbers (5.10
//! lets a global function take no kernel pointer), so sched_switch reads
//! the few fields it needs and hands them over.
//!
//! Off unless Compute.decision (and the cause split, whose slots it uses):
//! the verifier removes all of it.

use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};
use schedlat_common::{
    bucket::bucket_index_flat,
    decision::{
        self, Decided, Decision, DecisionStats, EnqueueWord, HolderLeft, NR_CELLS, NR_HOLDERS,
        NR_OUTCOME_SLOTS, NR_PASSES, Outcome, Pass,
    },
    flat::{above, min, nonzero, select},
    start,
};

use crate::{
    bpf::{barrier_var, cpu, masked},
    causes,
    config::{CAUSE, COMPUTE, DECISION, RQ, get},
    memory::{Rq, Se, TaskPtr},
};

/// The totals, per CPU, cumulative since load.
#[map]
static DECISIONS: PerCpuArray<DecisionStats> = PerCpuArray::with_max_entries(1, 0);

/// Per target CPU (`rq->cpu`), the last wakeup onto it that found
/// need-resched set: the running task's TID and the CPU's switch count
/// then (low 32 bits each). A later wakeup that finds the same is
/// `pending`. Sized to the CPUs by the loader (1 entry when off).
#[map]
static REQUESTS: Array<u64> = Array::with_max_entries(1, 0);

/// task->flags' PF_IDLE (include/linux/sched.h); TASK_DEAD in __state.
const PF_IDLE: u32 = 0x0000_0002;
const TASK_DEAD: u64 = 0x0080;
/// sched policies: bits 1, 2, 6 (FIFO, RR, DEADLINE) outrank the fair
/// class; 3 and 5 (BATCH, IDLE) never preempt on wakeup.
const OUTRANKS: u64 = 0x46;
const NO_WAKEUP_PREEMPTION: u64 = 0x28;
/// Levels of task groups walked up to find the queue the running task
/// and the wakee share (kernel/sched/fair.c find_matching_se()).
const MAX_GROUP_WALK: usize = 8;

#[inline(always)]
pub fn on() -> bool {
    get(&COMPUTE.decision) != 0 && get(&RQ.resolved) != 0
}

/// The word `at_enqueue` packed for a preempted task (`NotWakeup`), made
/// `OtherClass` when `outranked` is 1: a task of a higher class
/// (real-time, deadline) took the CPU from it, so its wait is that class's
/// as a wakeup declined for it would be, and a fair task preempted behind
/// a real-time loop is told from one preempted by fair sharing. One xor of
/// the nibble, without a branch, made inside the enqueue's own `on()` arm
/// (wait.rs): computed before it on sched_switch's path, the bit made LLVM
/// specialize the enqueue's path on it, and sched_switch verified 13,731
/// instructions on 6.18 instead of 10,548.
#[inline(always)]
pub fn outranked_word(word: u64, outranked: u64) -> u64 {
    const TO_OTHER_CLASS: u64 = Decision::NotWakeup as u64 ^ Decision::OtherClass as u64;
    word ^ ((outranked & 1) * TO_OTHER_CLASS)
}

/// 1 when `by`, switched in, took the CPU from `prev` (still runnable)
/// and is of a higher class (real-time, deadline) than `prev`'s.
#[inline(always)]
pub fn outranked(prev: TaskPtr, by: Option<TaskPtr>) -> u64 {
    let class = |t: TaskPtr| (OUTRANKS >> u64::from(t.policy() & 63)) & 1;
    by.map_or(0, |by| class(by) & (class(prev) ^ 1))
}

/// The packed decision state (`EnqueueWord`) of a wait of `task` that
/// begins now on `rq`: woken (just enqueued there), or not (preempted,
/// new: `NotWakeup`, which `outranked_word` may make `OtherClass`).
#[inline(always)]
pub fn at_enqueue(task: TaskPtr, rq: Rq, woken: bool) -> u64 {
    let switches = rq.nr_switches();
    if !woken {
        return EnqueueWord::plain(Decision::NotWakeup as u64, switches);
    }
    // Before the first branch: `task` is a tp_btf argument (a trusted
    // pointer), and each load of a pointer field from it costs the
    // verifier scans of the kernel's BTF on every path that reaches it.
    let wakee = Wakee::of_task(task);
    let curr = rq.curr();
    if curr.flags() & PF_IDLE != 0 {
        return EnqueueWord::plain(Decision::Idle as u64, switches);
    }
    let flags = curr.ti_flags();
    if flags & get(&DECISION.need_resched_mask) != 0 {
        let asked = if pending(rq, curr, switches) {
            Decision::Pending as u64
        } else if task.in_ext() || curr.in_ext() {
            // A BPF scheduler's request: the fair fields below are stale.
            Decision::Requested as u64
        } else if slice_ended(wakee, curr) {
            Decision::SliceEnded as u64
        } else if spent(task, wakee, curr, rq) {
            decision::REQUESTED_SPENT
        } else {
            Decision::Requested as u64
        };
        return EnqueueWord::plain(asked, switches);
    }
    if flags & get(&DECISION.lazy_mask) != 0 {
        return EnqueueWord::plain(Decision::Lazy as u64, switches);
    }
    let (rule, share_predicted) = rule(task, wakee, curr);
    EnqueueWord::pack(rule, share_predicted, switches)
}

/// Whether the need-resched bit found on `curr` (running on `rq`) was
/// already there for an earlier wakeup onto that CPU, with no switch
/// since; records this one otherwise. A bit set by the tick or any path
/// other than a wakeup before this wakeup is not seen here (telling those
/// apart takes a program on every need-resched set: docs/decision.md).
#[inline(always)]
fn pending(rq: Rq, curr: TaskPtr, switches: u64) -> bool {
    if get(&CAUSE.has_rq_cpu) == 0 {
        return false;
    }
    let Some(last) = REQUESTS.get_ptr_mut(rq.cpu()) else {
        return false;
    };
    let seen = (switches << 32) | u64::from(curr.pid());
    // SAFETY: a map value; wakeups onto one CPU hold its rq lock.
    unsafe {
        if *last == seen {
            return true;
        }
        *last = seen;
    }
    false
}

/// Whether a wakeup of `wakee` that found need-resched set on `curr` set
/// it because its enqueue found curr's slice used up (both on one queue:
/// the enqueue updates that queue's running entity).
#[inline(always)]
fn slice_ended(wakee: Wakee, curr: TaskPtr) -> bool {
    if get(&DECISION.fair) != 1 {
        return false;
    }
    let curr = curr.se();
    if wakee.queue != curr.queue_addr() {
        return false;
    }
    let left = curr.deadline().wrapping_sub(curr.vruntime()) as i64;
    decision::slice_renewed(left, curr.weight(), curr.slice())
}

/// Whether a request (not `slice_ended`) left curr's slice for its next
/// update to renew whenever the switch comes (`Decided::SPENT`): the
/// wakee (`task`) is not in the fair class (its enqueue updates no fair
/// queue, and it preempts by class), or curr is on another queue than
/// the wakee's (another task group: the enqueue updated only the wakee's
/// queues) and what curr has run since its queue's last update
/// (`rq->clock_task - se->exec_start`, in its virtual time) reaches its
/// deadline. EEVDF only (a renewed holder is EEVDF's).
#[inline(always)]
fn spent(task: TaskPtr, wakee: Wakee, curr: TaskPtr, rq: Rq) -> bool {
    if get(&DECISION.fair) != 1 {
        return false;
    }
    if (OUTRANKS >> u64::from(task.policy() & 63)) & 1 != 0 {
        return true;
    }
    let curr = curr.se();
    if wakee.queue == curr.queue_addr() {
        return false;
    }
    let left = curr.deadline().wrapping_sub(curr.vruntime()) as i64;
    let ran = rq.clock_task().wrapping_sub(curr.exec_start()) as i64;
    decision::slice_spent(left, ran, curr.weight())
}

/// Which rule declined the wakeup of `task` while `curr` ran, and the
/// wakee's fair share in per mille plus one (0 where not computed) and
/// the wait the rule predicts (ns, 0 for none), recomputed from the fields the fair class
/// decided with (kernel/sched/fair.c check_preempt_wakeup_fair(),
/// check_preempt_wakeup() before 6.7, and pick_eevdf()).
#[inline(always)]
fn rule(task: TaskPtr, wakee: Wakee, curr: TaskPtr) -> (u64, (u64, u64)) {
    const NONE: (u64, u64) = (0, 0);
    let wakee_policy = u64::from(task.policy() & 63);
    let curr_policy = u64::from(curr.policy() & 63);
    if (OUTRANKS >> wakee_policy) & 1 != 0 || (OUTRANKS >> curr_policy) & 1 != 0 {
        return (Decision::OtherClass as u64, NONE);
    }
    // Its dispatch queues decide (any policy but those above runs there
    // while a scheduler is attached): no EEVDF rule applies.
    if task.in_ext() || curr.in_ext() {
        return (Decision::Ext as u64, NONE);
    }
    if (NO_WAKEUP_PREEMPTION >> wakee_policy) & 1 != 0 {
        return (Decision::PolicyGate as u64, NONE);
    }
    match get(&DECISION.fair) {
        1 => eevdf_rule(wakee, curr.se()),
        2 => (Decision::WakeupGranularity as u64, NONE),
        _ => (Decision::RuleUnknown as u64, NONE),
    }
}

/// The EEVDF rule, at the queue the two entities share.
#[inline(always)]
fn eevdf_rule(wakee: Wakee, curr: Se) -> (u64, (u64, u64)) {
    let Some((wakee, curr, _)) = matching(wakee, curr) else {
        return (Decision::RuleUnknown as u64, (0, 0));
    };
    let q = curr.cfs_rq();
    let zero = q.zero();
    let key = |se: Se| se.vruntime().wrapping_sub(zero) as i64;
    let mut avg = q.key_sum();
    let mut load = q.weight_sum() as i64;
    let curr_weight = curr.weight();
    let curr_key = key(curr);
    // The running entity is not in the queue's sums (avg_vruntime()).
    if curr.on_rq() {
        avg = avg.wrapping_add(curr_key.wrapping_mul(curr_weight as i64));
        load += curr_weight as i64;
    }
    // Plus one: 0 is "not computed" in the enqueue word.
    let share = decision::share_permille(wakee.weight(), load as u64) + 1;
    let curr_vruntime = curr.vruntime();
    let deadline = curr.deadline();
    // The holder runs until its deadline, where the tick picks again.
    let slice_left =
        decision::virtual_to_ns(deadline.wrapping_sub(curr_vruntime) as i64, curr_weight);
    let curr_eligible = decision::eligible(avg, load, curr_key);
    let shorter = get(&DECISION.preempt_short) != 0 && wakee.slice() < curr.slice();
    if curr_eligible && !shorter {
        let marker = curr.vlag();
        if get(&DECISION.has_vprot) != 0 {
            // 6.17+: protected while vruntime < vprot.
            let left = marker.wrapping_sub(curr_vruntime) as i64;
            if left > 0 {
                let protected = decision::virtual_to_ns(left, curr_weight);
                return (Decision::Protected as u64, (share, protected));
            }
        } else if marker == deadline {
            // 6.6-6.16: vlag == deadline until the slice it was picked
            // with ends.
            return (Decision::Protected as u64, (share, slice_left));
        }
    }
    if !decision::eligible(avg, load, key(wakee)) {
        return (Decision::NotEligible as u64, (share, slice_left));
    }
    (Decision::LaterDeadline as u64, (share, slice_left))
}

/// The entity of `waiter`'s hierarchy that met `holder`'s at the queue
/// the two share, when that is above `waiter`'s own queue: a group's
/// entity, the group of the waiter's that lost there. None on one queue,
/// or not known (not EEVDF, whose offsets the walk reads; apart beyond
/// the walk; a holder outside the fair class, which won by class, not at
/// a queue).
#[inline(always)]
pub fn group_met(waiter: TaskPtr, holder: TaskPtr) -> Option<Se> {
    let outranks = (OUTRANKS >> u64::from(holder.policy() & 63)) & 1 != 0;
    if get(&DECISION.fair) != 1 || outranks || holder.in_ext() {
        return None;
    }
    let (se, _, above) = matching(Wakee::of(waiter.se()), holder.se())?;
    (above != 0).then_some(se)
}

/// The entities of the wakee's and the running task's hierarchies that
/// share a queue (find_matching_se()), within MAX_GROUP_WALK steps up
/// (one step moves the deeper entity, or both at equal depths), and the
/// steps the wakee's side took: the levels above its own queue where the
/// two met.
///
/// In two phases, the deeper entity up to the other's depth and then both
/// together, so that each branch compares a loop counter with a value
/// bounded once (the depth difference, the common depth): every path the
/// verifier follows decides the branches after it, and it follows
/// O(MAX_GROUP_WALK) of them. A single loop that branches three ways on
/// two depths it keeps decrementing (the kernel's shape) leaves the
/// verifier 3-way choices at every step, most of its time at load.
#[inline(always)]
fn matching(mut wakee: Wakee, mut curr: Se) -> Option<(Se, Se, u64)> {
    let (wakee_depth, curr_depth) = (wakee.se.depth(), curr.depth());
    let wakee_deeper = wakee_depth > curr_depth;
    let (apart, common) = if wakee_deeper {
        (wakee_depth - curr_depth, curr_depth)
    } else {
        (curr_depth - wakee_depth, wakee_depth)
    };
    // Equalising the depths takes `apart` of the steps.
    if apart >= MAX_GROUP_WALK as u32 {
        return None;
    }
    for step in 0..MAX_GROUP_WALK as u32 {
        if step < apart {
            if wakee_deeper {
                wakee = wakee.up();
            } else {
                curr = curr.parent();
            }
        }
    }
    for level in 0..MAX_GROUP_WALK as u32 {
        if level + apart >= MAX_GROUP_WALK as u32 {
            return None;
        }
        if wakee.queue == curr.queue_addr() {
            let above = u64::from(level) + select(u64::from(wakee_deeper), u64::from(apart), 0);
            return Some((wakee.se, curr, above));
        }
        // Both at the root and still apart: not one CPU's queues.
        if level >= common {
            return None;
        }
        wakee = wakee.up();
        curr = curr.parent();
    }
    None
}

/// The wakee's side of the walk: an entity with its two pointer fields
/// (`se->cfs_rq`, as a number, and `se->parent`) read when it is reached.
///
/// The wakee's own entity is inside a tp_btf argument, a trusted pointer:
/// each load of a pointer field from it makes the verifier scan the
/// kernel's BTF by name four times (docs/architecture.md, "Load BTF
/// pointer fields before the paths branch"), on every path that reaches
/// the load, on kernels where it is not read through a cast (memory.rs
/// `BtfPtr`). So the task's are read once, in `at_enqueue` before its first
/// branch (its `se.cfs_rq` is the one main.rs read for the queue); the
/// entities above it (`se->parent`) are plain BTF pointers, whose loads
/// cost no scan.
#[derive(Clone, Copy)]
struct Wakee {
    se: Se,
    queue: u64,
    parent: Se,
}

impl Wakee {
    /// The task's own entity; `task.cfs_rq()` was read already.
    #[inline(always)]
    fn of_task(task: TaskPtr) -> Wakee {
        let se = task.se();
        Wakee {
            se,
            queue: task.cfs_rq().addr(),
            parent: se.parent(),
        }
    }

    #[inline(always)]
    fn of(se: Se) -> Wakee {
        Wakee {
            se,
            queue: se.queue_addr(),
            parent: se.parent(),
        }
    }

    /// The group entity one level up.
    #[inline(always)]
    fn up(self) -> Wakee {
        Wakee::of(self.parent)
    }
}

/// The decision of a wait that a switch from `prev` (still runnable when
/// sched_switch's `preempt` is set or its state is 0) to `next` ended after
/// `wait` ns, `word` its start word: read here (plain loads, no branch),
/// decided and counted in `schedlat_decision_at_switch`. A `Decided` word, 0 when the split
/// is off.
#[inline(always)]
pub fn switched_in(
    (word, wait): (u64, u64),
    next_tid: u32,
    (prev, preempt): (TaskPtr, u64),
    rq: Rq,
) -> u64 {
    if !on() {
        return 0;
    }
    let switches = rq.nr_switches() & 0xffff_ffff;
    let state = u64::from(prev.state()) & 0xffff;
    // The idle task leaves with state 0 and no preempt: without its own
    // bit it would read as a runnable holder (preempted or slice-ended).
    let idle = u64::from(prev.flags() >> PF_IDLE.trailing_zeros()) & 1;
    // Only a runnable prev that was not preempted can have yielded
    // (`holder`): the marker's read, a helper call and prev's saved
    // registers, is left out of every other switch: a task that blocks,
    // one preempted, the idle task (14 ns less a run of sched_switch on
    // 6.18, of 272; 27 if no switch read it, but a task preempted on its
    // return to user space leaves as a yield does and is read).
    // One compare of an opaque value rather than three (14,054 -> 13,651
    // verified instructions on 6.18; 10,165 without the branch: the
    // verifier walks what follows it twice).
    let other = barrier_var((state | (preempt & 0xff) | idle) as usize);
    let yielded = if other == 0 { in_yield(prev) } else { 0 };
    let facts = switches
        | (u64::from(next_tid & 0xff) << 32)
        | (nonzero(preempt & 0xff) << 40)
        | (idle << 41)
        | (yielded << 42)
        | (state << 48);
    // EEVDF: what is left of prev's request, its weight and slice (the
    // verifier drops these loads elsewhere).
    // A holder in the sched_ext class has stale fair fields: never renewed.
    let (left, weight_slice) = if get(&DECISION.fair) == 1 && !prev.in_ext() {
        let se = prev.se();
        let left = se.deadline().wrapping_sub(se.vruntime());
        (left, (se.weight() & 0xffff_ffff) | (se.slice() << 32))
    } else {
        (0, 0)
    };
    schedlat_decision_at_switch(word, wait, facts, left, weight_slice)
}

/// The switch-in's decision of one wait (`switched_in` packs the
/// arguments): the enqueue's state from this CPU's snapshot slot, the
/// pass-overs since, how the holder left; counted in DECISIONS in the
/// histogram modes; returned as a `Decided` word for the breakdown key,
/// slow events and victims rows.
///
/// A global function (external linkage: its BTF says so), never inlined:
/// the verifier checks it once (kernel/bpf/verifier.c, a global
/// function's body is verified independently of its callers' states).
/// Inside, every decision is made without a branch (schedlat_common::
/// flat): with branches, its own paths took 10,700 of sched_switch's
/// 16,474 verified instructions on 6.18.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_decision_at_switch(
    word: u64,
    wait: u64,
    facts: u64,
    prev_left: u64,
    prev_weight_slice: u64,
) -> u64 {
    let cpu = cpu();
    let packed = causes::decision_of(word, cpu, ((facts >> 32) & 0xff) as u32);
    let found = nonzero(packed ^ EnqueueWord::NOT_FOUND);
    let w = EnqueueWord(packed & found.wrapping_neg());
    let passes = w.passes(facts & 0xffff_ffff) & found.wrapping_neg();
    // Not found: migrated when the task last ran elsewhere, else unknown.
    let last = start::last_cpu_plus_one(word);
    let moved = nonzero(last) & nonzero(last ^ (u64::from(cpu) + 1));
    let lost = select(moved, Pass::Migrated as u64, Pass::Unknown as u64);
    let pass = select(found, min(passes, Pass::ThreePlus as u64), lost);
    let decision = select(found, w.decision(), Decision::Unknown as u64);
    let spent = w.spent() & found;
    let holder = holder(facts, prev_left, prev_weight_slice);
    // sched_switch's `preempt`: prev was preempted inside the kernel.
    let preempted = (facts >> 40) & 1;
    let (share, predicted_us) = (w.share(), w.predicted_us());
    if get(&COMPUTE.histogram) != 0 {
        count(
            (decision, pass, holder, (spent, preempted)),
            wait,
            passes,
            (share, predicted_us),
        );
    }
    // The enqueue's nibble again: REQUESTED_SPENT packs as Requested
    // with the spent bit.
    let nibble = decision | (spent * decision::REQUESTED_SPENT);
    Decided::pack((nibble, pass, holder), share, predicted_us, passes)
        | (preempted * Decided::IN_KERNEL_PREEMPT)
}

/// 1 when `prev`, switched out, is inside sched_yield(): its user
/// registers, which the kernel keeps for the whole system call, hold
/// sched_yield()'s number (x86-64 `orig_ax`, arm64 `syscallno`). The
/// switch is then the one its yield's schedule() made. sched_switch has
/// no other sign of a yield: a task preempted on its return to user
/// space reaches it the same way, runnable with `preempt` false, and so
/// does a sleep its wakeup raced. 0 where the kernel cannot tell
/// (`yield_nr` 0: before 5.15, no bpf_task_pt_regs), for the verifier to
/// drop.
#[inline(always)]
fn in_yield(prev: TaskPtr) -> u64 {
    let nr = get(&DECISION.yield_nr);
    if nr == 0 {
        return 0;
    }
    1 ^ nonzero(prev.syscall_nr() ^ nr)
}

/// How the switch's prev left the CPU (a `HolderLeft` index), from the facts
/// `switched_in` packed, without a branch: the idle task is idle whatever
/// its state and preempt read; still runnable is yielded when it was
/// inside sched_yield() (`in_yield`; never an involuntary preemption,
/// `preempt` true, which a yield's own schedule() is not),
/// slice-ended when its deadline was renewed just now (EEVDF), else
/// preempted.
#[inline(always)]
fn holder(facts: u64, left: u64, weight_slice: u64) -> u64 {
    let preempt = (facts >> 40) & 1;
    let idle = (facts >> 41) & 1;
    let yielded = (facts >> 42) & 1 & (1 ^ nonzero(preempt));
    let state = facts >> 48;
    let runnable = nonzero(preempt) | (1 ^ nonzero(state));
    let renewed = if get(&DECISION.fair) == 1 {
        u64::from(decision::slice_renewed(
            left as i64,
            weight_slice & 0xffff_ffff,
            weight_slice >> 32,
        ))
    } else {
        0
    };
    // yield_task_fair() pushes the deadline out by a slice (EEVDF), which
    // reads as renewed: the yield decides first.
    let ran_on = select(
        renewed,
        HolderLeft::SliceEnded as u64,
        HolderLeft::Preempted as u64,
    );
    let ran_on = select(yielded, HolderLeft::Yielded as u64, ran_on);
    let dead = nonzero(state & TASK_DEAD);
    let left_it = select(dead, HolderLeft::Exited as u64, HolderLeft::Blocked as u64);
    let other = select(runnable, ran_on, left_it);
    select(idle, HolderLeft::Idle as u64, other)
}

/// Adds one wait to this CPU's totals, without a branch but the bounds
/// of the outcome histogram at the end.
#[inline(always)]
fn count(
    (decision, pass, holder, spent_preempted): (u64, u64, u64, (u64, u64)),
    wait: u64,
    passes: u64,
    (share, predicted_us): (u64, u64),
) {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(ds) = DECISIONS.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    let cell = masked(decision * NR_PASSES as u64 + pass, NR_CELLS as u64 - 1) as usize;
    ds.count[cell] += 1;
    ds.sum_ns[cell] += wait;
    let holder = masked(holder, NR_HOLDERS as u64 - 1) as usize;
    ds.holder_count[holder] += 1;
    ds.holder_sum_ns[holder] += wait;
    // 0 for the waits without a counted class.
    ds.passes += passes;
    let predicts = nonzero(predicted_us);
    let predicted = predicted_us * 1000;
    ds.predicted_waits += predicts;
    ds.predicted_ns += predicted;
    ds.predicted_actual_ns += wait & predicts.wrapping_neg();
    // Waited longer than predicted plus a tick (all far below 2^63).
    let beyond = above(wait, predicted + get(&DECISION.tick_ns));
    ds.beyond_prediction += beyond & predicts;
    // 1 when a share was computed (it is then 1..=1001).
    let shared = (share + 1023) >> 10;
    ds.share_waits += shared;
    ds.share_permille += share - shared;
    let outcome = Outcome::of_indices(decision, pass, holder as u64, spent_preempted);
    ds.outcome_sum_ns[masked(outcome, NR_OUTCOME_SLOTS as u64 - 1) as usize] += wait;
    let outcome = outcome as usize;
    if let Some(h) = ds.outcome_buckets.get_mut(barrier_var(outcome))
        && let Some(n) = h.get_mut(barrier_var(bucket_index_flat(wait)))
    {
        *n += 1;
    }
}
