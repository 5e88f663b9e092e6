//! The scheduler's decision of each wait (docs/decision.md): at the
//! wakeup, whether it asked for the CPU and, if not, which fair-class rule
//! declined; at the switch-in, how many times the CPU went to others
//! meanwhile and how the holder left it.
//!
//! The wakeup's state rides in the enqueue's overlap snapshot slot
//! (causes.rs, `Snapshot::decision`): no per-task memory. Reading the
//! target CPU's running task needs no kernel symbol: the wakee was just
//! enqueued on that CPU, so `p->se.cfs_rq->rq->curr` is it.
//!
//! Off unless Compute.decision (and the cause split, whose slots it uses):
//! the verifier removes all of it.

use aya_ebpf::{macros::map, maps::PerCpuArray};
use schedlat_common::{
    bucket_index,
    decision::{
        self, Decision, DecisionStats, KeyDecision, NO_CLASS, ReschedSet, SLOT_MASK, TABLE_CELLS,
        TABLE_STRIDE,
    },
    start,
};

use crate::{
    atomic,
    bpf::{barrier_var, cpu, equal, masked, nonzero, select},
    config::{COMPUTE, DECISION, RQ, get},
    memory::{Rq, Se, TaskPtr},
};

/// The totals, per CPU, cumulative since load.
#[map]
static DECISIONS: PerCpuArray<DecisionStats> = PerCpuArray::with_max_entries(1, 0);

/// Per CPU, the last need-resched set it reported (sched_set_need_resched_tp).
#[map]
static RESCHED_SETS: PerCpuArray<ReschedSet> = PerCpuArray::with_max_entries(1, 0);

/// task->flags' PF_IDLE (include/linux/sched.h); TASK_DEAD in __state.
const PF_IDLE: u32 = 0x0000_0002;
const TASK_DEAD: u32 = 0x0080;
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

/// sched_set_need_resched_tp(tsk, cpu, tif) on this CPU: keep it, for the
/// wakeup under way here (or the switch that follows) to tell its own set
/// from an earlier one.
#[inline(always)]
pub fn need_resched_set(task: TaskPtr, target: u32, tif: u32) {
    if !on() || get(&DECISION.has_set_tp) == 0 {
        return;
    }
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(set) = RESCHED_SETS.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    let bit = 1u64 << (tif & 63);
    set.tif_any |= bit;
    if task.flags() & PF_IDLE != 0 {
        set.tif_on_idle |= bit;
    }
    set.task = tag(task);
    set.rq_clock = task.cfs_rq().rq().clock();
    set.cpu = target;
    set.tif = tif;
}

/// The packed decision state of a wait that begins now: `kind` how it
/// began, `task` the task (woken: just enqueued on `rq`).
#[inline(always)]
pub fn at_enqueue(task: TaskPtr, rq: Rq, woken: bool) -> u64 {
    let switches = rq.nr_switches();
    if !woken {
        return decision::pack(Decision::RequestNa as u64, 0, switches, 0);
    }
    let curr = rq.curr();
    if curr.flags() & PF_IDLE != 0 {
        return decision::pack(Decision::Idle as u64, 0, switches, 0);
    }
    let request = request(curr, rq);
    if request == Decision::Requested as u64 {
        return decision::pack(request, slice_ended(task, curr), switches, 0);
    }
    if request != Decision::NotRequested as u64 {
        return decision::pack(request, 0, switches, 0);
    }
    let (rule, predicted) = rule(task, curr);
    decision::pack(request, rule, switches, predicted)
}

/// The request class of a wakeup whose target CPU runs `curr` on `rq`.
#[inline(always)]
fn request(curr: TaskPtr, rq: Rq) -> u64 {
    let flags = curr.ti_flags();
    let full = get(&DECISION.need_resched_mask);
    let lazy = get(&DECISION.lazy_mask);
    if get(&DECISION.has_set_tp) != 0 {
        // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
        if let Some(set) = RESCHED_SETS.get_ptr_mut(0).map(|p| unsafe { &mut *p }) {
            // This wakeup's own set: for this task, at this wakeup's
            // clock (ttwu updates it once, before the enqueue and the
            // check). Used once: the next wakeup in the same batch finds
            // the bit already set, pending.
            if set.task == tag(curr) && set.rq_clock == rq.clock() {
                set.task = 0;
                return if lazy != 0 && (1u64 << (set.tif & 63)) == lazy {
                    Decision::Lazy as u64
                } else {
                    Decision::Requested as u64
                };
            }
        }
        if flags & (full | lazy) != 0 {
            return Decision::Pending as u64;
        }
        return Decision::NotRequested as u64;
    }
    if flags & full != 0 {
        Decision::Requested as u64
    } else if flags & lazy != 0 {
        Decision::Lazy as u64
    } else {
        Decision::NotRequested as u64
    }
}

/// `SliceEnded` when a wakeup of `task` that requested the CPU from `curr`
/// did so because its enqueue found curr's slice used up (both on one
/// queue: the enqueue updates that queue's running entity), else 0.
#[inline(always)]
fn slice_ended(task: TaskPtr, curr: TaskPtr) -> u64 {
    if get(&DECISION.fair) != 1 {
        return 0;
    }
    let (wakee, curr) = (task.se(), curr.se());
    if wakee.queue_addr() != curr.queue_addr() {
        return 0;
    }
    let left = curr.deadline().wrapping_sub(curr.vruntime()) as i64;
    if decision::slice_renewed(left, curr.weight(), curr.slice()) {
        Decision::SliceEnded as u64
    } else {
        0
    }
}

/// Which rule declined the wakeup of `task` while `curr` ran, and the
/// wait it predicts (ns, 0 for none), recomputed from the fields the fair
/// class decided with (kernel/sched/fair.c check_preempt_wakeup_fair(),
/// check_preempt_wakeup() before 6.7, and pick_eevdf()).
#[inline(always)]
fn rule(task: TaskPtr, curr: TaskPtr) -> (u64, u64) {
    let wakee_policy = u64::from(task.policy() & 63);
    let curr_policy = u64::from(curr.policy() & 63);
    if (OUTRANKS >> wakee_policy) & 1 != 0 || (OUTRANKS >> curr_policy) & 1 != 0 {
        return (Decision::OtherClass as u64, 0);
    }
    if (NO_WAKEUP_PREEMPTION >> wakee_policy) & 1 != 0 {
        return (Decision::PolicyGate as u64, 0);
    }
    match get(&DECISION.fair) {
        1 => eevdf_rule(task.se(), curr.se()),
        2 => (Decision::WakeupGranularity as u64, 0),
        _ => (Decision::RuleUnknown as u64, 0),
    }
}

/// The EEVDF rule, at the queue the two entities share.
#[inline(always)]
fn eevdf_rule(wakee: Se, curr: Se) -> (u64, u64) {
    let Some((wakee, curr)) = matching(wakee, curr) else {
        return (Decision::RuleUnknown as u64, 0);
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
                return (
                    Decision::Protected as u64,
                    decision::virtual_to_ns(left, curr_weight),
                );
            }
        } else if marker == deadline {
            // 6.6-6.16: vlag == deadline until the slice it was picked
            // with ends.
            return (Decision::Protected as u64, slice_left);
        }
    }
    if !decision::eligible(avg, load, key(wakee)) {
        return (Decision::NotEligible as u64, slice_left);
    }
    (Decision::LaterDeadline as u64, slice_left)
}

/// The entities of the wakee's and the running task's hierarchies that
/// share a queue (find_matching_se()), within MAX_GROUP_WALK levels.
#[inline(always)]
fn matching(mut wakee: Se, mut curr: Se) -> Option<(Se, Se)> {
    let mut wakee_depth = wakee.depth();
    let mut curr_depth = curr.depth();
    for _ in 0..MAX_GROUP_WALK {
        if wakee_depth == curr_depth {
            if wakee.queue_addr() == curr.queue_addr() {
                return Some((wakee, curr));
            }
            // Both at the root and still apart: not one CPU's queues.
            if wakee_depth == 0 {
                return None;
            }
            wakee = wakee.parent();
            curr = curr.parent();
            wakee_depth -= 1;
            curr_depth -= 1;
        } else if wakee_depth > curr_depth {
            wakee = wakee.parent();
            wakee_depth -= 1;
        } else {
            curr = curr.parent();
            curr_depth -= 1;
        }
    }
    None
}

/// At the switch on this CPU from `prev`: 1 when the CPU's last
/// need-resched set was for prev, on this CPU, and no wakeup used it: the
/// tick (or another reschedule outside a wakeup) ended prev's run. Used
/// once; only where the kernel reports its sets. Without branches
/// (causes.rs placement_class() says why): it feeds every later path.
#[inline(always)]
pub fn switched_out(prev_tag: u64, preempted: u64) -> u64 {
    if !on() || get(&DECISION.has_set_tp) == 0 {
        return 0;
    }
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(set) = RESCHED_SETS.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return 0;
    };
    let mine = equal(set.task, prev_tag);
    // Consumed when it was prev's: all ones keeps it, 0 clears it.
    set.task &= mine.wrapping_sub(1);
    mine & preempted & equal(u64::from(set.cpu), u64::from(cpu()))
}

/// A task as RESCHED_SETS names it: its TID plus one (0 is "used"). Not
/// its address: the verifier allows no arithmetic on a task pointer, and
/// the switch compares without branching.
#[inline(always)]
fn tag(task: TaskPtr) -> u64 {
    u64::from(task.pid()) + 1
}

/// How the task switched out (`prev`, switched out with `preempt` 0 or 1)
/// left the CPU: a `Decision` index, computed without branches (wait.rs
/// Holder::NONE when the split is off). Still runnable is preempted,
/// whatever sched_switch's `preempt` says: a task preempted at its return
/// to user space goes through schedule() with `preempt` false, as
/// sched_yield() does (kernel/entry/common.c exit_to_user_mode_loop()), so
/// yielding is not told apart here (`HolderYielded` stays 0).
#[inline(always)]
pub fn holder(prev: TaskPtr, preempt: u64) -> u64 {
    if !on() {
        return u64::MAX;
    }
    let state = u64::from(prev.state());
    let runnable = preempt | (1 ^ nonzero(state));
    let dead = nonzero(state & u64::from(TASK_DEAD));
    let blocked = select(
        dead,
        Decision::HolderExited as u64,
        Decision::HolderBlocked as u64,
    );
    select(runnable, Decision::HolderPreempted as u64, blocked)
}

/// How the task switched out left the CPU (a `Decision` index, from
/// `holder()`), its TID tag and whether it was still runnable (0 or 1),
/// for the tick-ended count (switched_out(), looked up in count(): looked
/// up before the switch's paths branch, it multiplied their verifier
/// states, 31,758 -> 177,676 verified instructions). Plain values, not an Option: an Option of a
/// struct leaves the fields of its None uninitialised, which the verifier
/// refuses to read ("!read_ok").
#[derive(Clone, Copy)]
pub struct Holder {
    pub left: u64,
    pub tag: u64,
    pub preempted: u64,
}

impl Holder {
    /// Not measured (classic tracepoints, or the split is off).
    pub const NONE: u64 = u64::MAX;

    #[inline(always)]
    pub fn of(prev: TaskPtr, preempted: u64) -> Holder {
        Holder {
            left: holder(prev, preempted),
            tag: tag(prev),
            preempted,
        }
    }
}

/// The switch-in's view of a wait: the enqueue's packed state
/// (`NOT_FOUND` when its slot was not), and this CPU's switch count now.
#[derive(Clone, Copy)]
pub struct AtSwitchIn {
    pub packed: u64,
    pub switches: u64,
}

/// No packed word has all bits set (its request class is at most 5).
pub const NOT_FOUND: u64 = u64::MAX;

/// Counts the decision of a wait of `wait` ns at fine bucket `bucket`,
/// with start word `word`, ended on `cpu` by a switch from `holder`.
///
/// Without branches (causes.rs placement_class() says why: here each
/// branch doubled the verifier's states of sched_switch, 117,000 verified
/// instructions before): every class is computed as a value and added,
/// "no class" to a slot of its own.
#[inline(always)]
pub fn count(
    (word, wait): (u64, u64),
    cpu: u32,
    seen: AtSwitchIn,
    holder: Holder,
    key: Option<&mut KeyDecision>,
) {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest.
    let Some(ds) = DECISIONS.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        return;
    };
    let packed = seen.packed;
    let found = nonzero(packed ^ NOT_FOUND);
    let passes = decision::passes(packed, seen.switches) & found.wrapping_neg();
    let capped = select(nonzero(passes >> 2), 3, passes & 3);
    let migrated = nonzero(start::last_cpu_plus_one(word) ^ (u64::from(cpu) + 1));
    // Relative to Passed0: 0..=3 counted, 4 migrated, 5 not found.
    let lost = select(migrated, 4, 5);
    let pass = select(found, capped, lost) & 7;
    let request = select(
        found,
        decision::request_of(packed),
        Decision::RequestNa as u64,
    ) & 7;
    let rule = decision::rule_of(packed) & found.wrapping_neg();
    let rule = select(nonzero(rule), rule, NO_CLASS);
    let mut sink = Sink { ds, key, wait };
    sink.add_at(request);
    sink.add_at(Decision::Passed0 as u64 + pass);
    sink.add_at(holder.left);
    sink.add_at(rule);
    let tick = switched_out(holder.tag, holder.preempted);
    sink.add_at(select(tick, Decision::TickEnded as u64, NO_CLASS));
    let ds = sink.ds;
    ds.passes += passes;
    // The rule's prediction, where it made one (0 otherwise adds 0).
    let predicted = decision::predicted_ns(packed) & found.wrapping_neg();
    let predicts = nonzero(predicted);
    ds.predicted_waits += predicts;
    ds.predicted_ns += predicted;
    ds.predicted_actual_ns += wait & predicts.wrapping_neg();
    // wait > predicted + tick: the top bit of their difference (both far
    // below 2^63).
    let over = (predicted + get(&DECISION.tick_ns)).wrapping_sub(wait) >> 63;
    ds.beyond_prediction += over & predicts;
    let cell = masked(request * TABLE_STRIDE as u64 + pass, TABLE_CELLS as u64 - 1) as usize;
    ds.table_count[cell] += 1;
    ds.table_sum_ns[cell] += wait;
    // The histograms last: their bounds checks split the verifier's
    // states, and nothing is left to run after them.
    let outcome = outcome(request, pass);
    // Computed again, not handed over from the histogram's: a bucket kept
    // in a variable across the switch's paths multiplied their verifier
    // states (939c2ac: 31,758 -> 177,676 verified insns with the lookup
    // moved; 191,000 with it back).
    let bucket = barrier_var(bucket_index(wait));
    if let Some(h) = ds.outcome_buckets.get_mut(barrier_var(outcome as usize))
        && let Some(n) = h.get_mut(bucket)
    {
        *n += 1;
    }
}

/// schedlat_common::decision::outcome() without branches: `pass` is the
/// pass-over class relative to Passed0 (0..=5).
#[inline(always)]
fn outcome(request: u64, pass: u64) -> u64 {
    // Nibble p: the outcome of pass-over class p when it does not depend
    // on the request (1-3 passed over, 4-5 other); 0 reads the request's.
    const BY_PASS: u64 = 0x44_2220;
    let by_pass = (BY_PASS >> ((pass & 7) * 4)) & 0xf;
    let of_request = decision::outcome(request, Decision::Passed0 as u64);
    select(nonzero(pass), by_pass, of_request)
}

/// The per-CPU total and the key's split of one wait (causes.rs Sink).
struct Sink<'a> {
    ds: &'a mut DecisionStats,
    key: Option<&'a mut KeyDecision>,
    wait: u64,
}

impl Sink<'_> {
    /// Adds the wait to `class` (masked into the slots: no bounds check).
    #[inline(always)]
    fn add_at(&mut self, class: u64) {
        let class = masked(class, SLOT_MASK) as usize;
        self.ds.count[class] += 1;
        self.ds.sum_ns[class] += self.wait;
        if let Some(key) = self.key.as_deref_mut() {
            // SAFETY: aligned integers in a map value.
            unsafe {
                atomic::add_u32(&mut key.count[class], 1);
                atomic::add_u64(&mut key.sum_ns[class], self.wait);
            }
        }
    }
}
