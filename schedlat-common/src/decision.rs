//! The scheduler's decision (docs/decision.md): for every measured wait,
//! whether the wakeup asked for the CPU (the need-resched state of the
//! target CPU's running task at sched_wakeup), how many times the CPU was
//! given to other tasks during the wait (pass-overs), how the task that
//! held the CPU left it at the switch that ended the wait, and for a wakeup
//! that did not ask, which scheduler rule declined it, with the wait that
//! rule predicts.
//!
//! One flat index space ([`Decision`]) serves the per-CPU totals
//! ([`DecisionStats`]) and the breakdown keys ([`KeyDecision`]), as the
//! cause split does.
//!
//! The per-wait state lives in the overlap snapshot slot of the enqueue
//! (`causes::Snapshot::decision`, packed by [`pack`]): no per-task memory.

use crate::NR_BUCKETS;

/// A class of one of the decision's splits; the value indexes `count` and
/// `sum_ns`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    // The request, at sched_wakeup: the target CPU's running task's
    // need-resched bits.
    /// This wakeup set TIF_NEED_RESCHED (where the kernel tells which
    /// wakeup set it; elsewhere: set at the wakeup, see `pending`).
    Requested = 0,
    /// Already set before this wakeup (its check returned early).
    Pending = 1,
    /// This wakeup set only TIF_NEED_RESCHED_LAZY (preempt=lazy, 6.13+).
    Lazy = 2,
    /// Not set: the scheduler declined to preempt.
    NotRequested = 3,
    /// The target CPU was running its idle task.
    Idle = 4,
    /// Not a wakeup (a new task, whose check follows the tracepoint, or a
    /// task preempted while runnable), or the request was not read.
    RequestNa = 5,
    // Pass-overs: switches on the waiting CPU to other tasks during the
    // wait.
    Passed0 = 6,
    Passed1 = 7,
    Passed2 = 8,
    Passed3Plus = 9,
    /// The wait ended on another CPU than its queue's: not counted.
    PassMigrated = 10,
    /// The enqueue's snapshot was not found (its slot was taken by another
    /// waiting thread, or the kernel has no switch count).
    PassUnknown = 11,
    // How the task that held the CPU left it at the switch that ended the
    // wait (prev).
    HolderBlocked = 12,
    /// Switched out still runnable by a preemption.
    HolderPreempted = 13,
    /// Its final switch (TASK_DEAD).
    HolderExited = 14,
    /// Called schedule() while runnable, not preempted (sched_yield).
    HolderYielded = 15,
    // The rule that declined a wakeup that did not request the CPU.
    /// EEVDF (6.6+): the wakee's lag was negative (its vruntime ahead of
    /// the queue's weighted average).
    NotEligible = 16,
    /// EEVDF: eligible, but the running (or a queued) entity's deadline
    /// was earlier.
    LaterDeadline = 17,
    /// EEVDF RUN_TO_PARITY: the running task's slice was protected.
    Protected = 18,
    /// SCHED_BATCH or SCHED_IDLE wakee (never preempts on wakeup).
    PolicyGate = 19,
    /// The running task or the wakee is not in the fair class.
    OtherClass = 20,
    /// CFS (before 6.6): the wakee's vruntime was not a wakeup
    /// granularity behind the running task's.
    WakeupGranularity = 21,
    /// Not computed: fields this kernel lacks, or a group hierarchy deeper
    /// than the walk's bound.
    RuleUnknown = 22,
    /// Subsets: a wait that ended when its holder was preempted after a
    /// need-resched set on its own CPU outside a wakeup (the tick finding
    /// its slice used up), where the kernel reports each set.
    TickEnded = 23,
    /// Of `Requested`: the bit was set because the wakeup's enqueue found
    /// the running task's slice used up (update_curr() -> update_deadline()
    /// renews the deadline and reschedules), not by wakeup preemption. EEVDF
    /// kernels, when the two tasks share a queue.
    SliceEnded = 24,
}

/// Classes in [`Decision`].
pub const NR_DECISIONS: usize = 25;
/// Slots of the `count` and `sum_ns` arrays: the classes, then one the
/// kernel adds "no class" to (so that it counts without branching), up to
/// a power of two: an index masked with `SLOT_MASK` is in bounds, so the
/// kernel needs no bounds check (each one split the verifier's states).
pub const NR_DECISION_SLOTS: usize = 32;
pub const SLOT_MASK: u64 = NR_DECISION_SLOTS as u64 - 1;
/// The slot of "no class": a wait without a rule, not tick-ended.
pub const NO_CLASS: u64 = NR_DECISIONS as u64;
/// Request classes (rows of the request x pass-over table).
pub const NR_REQUESTS: usize = 6;
/// Pass-over classes of the request x pass-overs table.
pub const NR_PASS_CLASSES: usize = 6;
/// The table's cells: request class x 8 + pass-over class (relative to
/// `Passed0`), both below 8, so that a masked index needs no check.
pub const TABLE_STRIDE: usize = 8;
pub const TABLE_CELLS: usize = TABLE_STRIDE * TABLE_STRIDE;

/// The classes of each split, in order: every wait is in one class of
/// each of the first three; a rule only for not-requested wakeups.
pub const REQUEST: [Decision; 6] = [
    Decision::Requested,
    Decision::Pending,
    Decision::Lazy,
    Decision::NotRequested,
    Decision::Idle,
    Decision::RequestNa,
];
pub const PASS_OVERS: [Decision; 6] = [
    Decision::Passed0,
    Decision::Passed1,
    Decision::Passed2,
    Decision::Passed3Plus,
    Decision::PassMigrated,
    Decision::PassUnknown,
];
pub const HOLDER: [Decision; 4] = [
    Decision::HolderBlocked,
    Decision::HolderPreempted,
    Decision::HolderExited,
    Decision::HolderYielded,
];
pub const RULE: [Decision; 7] = [
    Decision::NotEligible,
    Decision::LaterDeadline,
    Decision::Protected,
    Decision::PolicyGate,
    Decision::OtherClass,
    Decision::WakeupGranularity,
    Decision::RuleUnknown,
];

/// What became of a wait, one class per wait, each with a fine histogram
/// (so that "waits over 1 ms" can be split by it): the wakeup asked for
/// the CPU and got it at the next switch; it did not ask, and the task ran
/// at the next switch; others ran first (passed over, whatever the
/// request); an idle CPU took it; anything else (a pending bit, not a
/// wakeup, migrated, not measured).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Granted = 0,
    Declined = 1,
    PassedOver = 2,
    IdleCpu = 3,
    Other = 4,
}

pub const NR_OUTCOMES: usize = 5;

/// The outcome of a wait with request class `request` (a `Decision`
/// index 0..=5) and pass-over class `pass` (a `Decision` index), without
/// branches but one (the verifier's states, causes.rs placement_class()):
/// a nibble per request class, for waits with no pass-over.
#[inline(always)]
pub fn outcome(request: u64, pass: u64) -> u64 {
    if pass > Decision::Passed0 as u64 && pass <= Decision::Passed3Plus as u64 {
        return Outcome::PassedOver as u64;
    }
    if pass != Decision::Passed0 as u64 {
        return Outcome::Other as u64;
    }
    (OUTCOME_OF_REQUEST >> ((request & 7) * 4)) & 0xf
}

/// Nibble r: the outcome of request class r with no pass-over: requested
/// 0 and lazy 2 granted, not requested 3 declined, idle 4, the rest other.
const OUTCOME_OF_REQUEST: u64 = 0x4443_1040;

/// The per-CPU totals, cumulative since load (a `PERCPU_ARRAY` value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionStats {
    pub count: [u64; NR_DECISION_SLOTS],
    pub sum_ns: [u64; NR_DECISION_SLOTS],
    /// Fine histograms of the outcomes (`Outcome` index).
    pub outcome_buckets: [[u64; NR_BUCKETS]; NR_OUTCOMES],
    /// Request class x pass-over class: waits and their sum.
    pub table_count: [u64; TABLE_CELLS],
    pub table_sum_ns: [u64; TABLE_CELLS],
    /// Pass-overs summed over the waits counted in Passed0..Passed3Plus.
    pub passes: u64,
    /// Waits whose rule predicted a wait, the predictions' sum and the
    /// actual waits' sum; and those that waited longer than predicted
    /// plus `DecisionOffsets::tick_ns`.
    pub predicted_waits: u64,
    pub predicted_ns: u64,
    pub predicted_actual_ns: u64,
    pub beyond_prediction: u64,
}

impl DecisionStats {
    pub const ZERO: DecisionStats = DecisionStats {
        count: [0; NR_DECISION_SLOTS],
        sum_ns: [0; NR_DECISION_SLOTS],
        outcome_buckets: [[0; NR_BUCKETS]; NR_OUTCOMES],
        table_count: [0; TABLE_CELLS],
        table_sum_ns: [0; TABLE_CELLS],
        passes: 0,
        predicted_waits: 0,
        predicted_ns: 0,
        predicted_actual_ns: 0,
        beyond_prediction: 0,
    };
}

/// One breakdown key's decision split (inside `scope::KeyStats`): counts
/// and sums, shared by CPUs, updated with atomic adds.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDecision {
    pub count: [u32; NR_DECISION_SLOTS],
    pub sum_ns: [u64; NR_DECISION_SLOTS],
}

impl KeyDecision {
    pub const ZERO: KeyDecision = KeyDecision {
        count: [0; NR_DECISION_SLOTS],
        sum_ns: [0; NR_DECISION_SLOTS],
    };
}

/// The last need-resched set the kernel reported on one CPU (a per-CPU
/// `RESCHED_SETS` value, from sched_set_need_resched_tp): for which task,
/// the rq clock of that task's queue at the set, its CPU and the bit; and
/// every bit number reported there, as masks (all sets, and the sets on
/// idle tasks, always the full TIF_NEED_RESCHED): one lookup per set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReschedSet {
    /// The task's TID plus one; 0 once a wakeup or a switch used it.
    pub task: u64,
    pub rq_clock: u64,
    pub cpu: u32,
    pub tif: u32,
    pub tif_any: u64,
    pub tif_on_idle: u64,
}

/// Packs the state an enqueue leaves for its switch-in: the request class
/// (a `Decision` index, 0..=5), the rule (`Decision` index, or 0 for
/// none; `SliceEnded` for a request that a slice's end made), the queue's switch count then, and the rule's predicted wait in
/// microseconds (saturating at 2^24 - 1).
#[inline(always)]
pub fn pack(request: u64, rule: u64, switches: u64, predicted_ns: u64) -> u64 {
    let us = predicted_ns / 1000;
    let us = if us > PREDICTED_MAX_US {
        PREDICTED_MAX_US
    } else {
        us
    };
    (request & 7) | ((rule & 31) << 3) | ((switches & 0xffff_ffff) << 8) | (us << 40)
}

const PREDICTED_MAX_US: u64 = (1 << 24) - 1;

/// The request class of a packed word (a `Decision` index 0..=5).
#[inline(always)]
pub fn request_of(word: u64) -> u64 {
    word & 7
}

/// The rule of a packed word: a `Decision` index, 0 for none.
#[inline(always)]
pub fn rule_of(word: u64) -> u64 {
    (word >> 3) & 31
}

/// Switches of the queue's CPU between the enqueue (whose count is in
/// `word`) and the switch-in that ended the wait (`now_switches`, already
/// counting it), to other tasks: the pass-overs.
#[inline(always)]
pub fn passes(word: u64, now_switches: u64) -> u64 {
    (now_switches.wrapping_sub(word >> 8).wrapping_sub(1)) & 0xffff_ffff
}

/// The rule's predicted wait of a packed word, in ns (0: none).
#[inline(always)]
pub fn predicted_ns(word: u64) -> u64 {
    (word >> 40) * 1000
}

/// The pass-over class of `passes` pass-overs (a `Decision` index).
#[inline(always)]
pub fn pass_class(passes: u64) -> u64 {
    let capped = if passes > 3 { 3 } else { passes };
    Decision::Passed0 as u64 + capped
}

/// The EEVDF eligibility test (kernel/sched/fair.c entity_eligible(), 6.6+):
/// an entity whose key (vruntime minus the queue's zero point) is `key` is
/// eligible when the queue's weighted key sum `avg` (the running entity
/// added) is at least `key` times the queue's weight `load`.
#[inline(always)]
pub fn eligible(avg: i64, load: i64, key: i64) -> bool {
    avg >= key.wrapping_mul(load)
}

/// Whether a running entity's deadline was renewed just now: what is left
/// of its request (`deadline - vruntime`, virtual ns, as CPU time by
/// `weight`) is still at least 15/16 of its `slice`. update_deadline()
/// sets the deadline one slice ahead; nothing has run since at a wakeup.
#[inline(always)]
pub fn slice_renewed(left: i64, weight: u64, slice: u64) -> bool {
    virtual_to_ns(left, weight) >= slice - slice / 16
}

/// Virtual nanoseconds `dv` of an entity of weight `weight` (scaled down,
/// NICE_0 = 1024) as the CPU time it takes to run them:
/// vruntime grows by delta_exec * 1024 / weight (calc_delta_fair()).
#[inline(always)]
pub fn virtual_to_ns(dv: i64, weight: u64) -> u64 {
    if dv <= 0 {
        return 0;
    }
    // Capped so that the product fits 64 bits (weights are under 2^17):
    // 2^40 ns is 18 minutes, and BPF has no 128-bit multiply.
    let dv = if dv as u64 > MAX_VIRTUAL {
        MAX_VIRTUAL
    } else {
        dv as u64
    };
    let weight = if weight > MAX_WEIGHT {
        MAX_WEIGHT
    } else {
        weight
    };
    dv * weight / 1024
}

const MAX_VIRTUAL: u64 = 1 << 40;
const MAX_WEIGHT: u64 = 1 << 20;

#[cfg(feature = "user")]
// SAFETY: repr(C), u64 fields and arrays only, no padding (checked below).
unsafe impl aya::Pod for DecisionStats {}

#[cfg(feature = "user")]
// SAFETY: repr(C); u32 array of even length then u64s: no padding.
unsafe impl aya::Pod for KeyDecision {}

#[cfg(feature = "user")]
// SAFETY: repr(C), two u64s, two u32s, two u64s: no padding.
unsafe impl aya::Pod for ReschedSet {}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(
            size_of::<DecisionStats>(),
            8 * (2 * NR_DECISION_SLOTS + NR_OUTCOMES * NR_BUCKETS + 2 * TABLE_CELLS + 5)
        );
        assert_eq!(size_of::<KeyDecision>(), 12 * NR_DECISION_SLOTS);
        assert_eq!(size_of::<ReschedSet>(), 40);
        // A per-CPU map value may not exceed 32 KiB (PCPU_MIN_UNIT_SIZE).
        assert!(size_of::<DecisionStats>() <= 32 * 1024);
        assert_eq!(Decision::SliceEnded as usize, NR_DECISIONS - 1);
        const {
            assert!(NR_DECISION_SLOTS > NR_DECISIONS);
            assert!(NR_REQUESTS <= TABLE_STRIDE && NR_PASS_CLASSES <= TABLE_STRIDE);
        }
        assert!(NR_DECISION_SLOTS.is_power_of_two());
    }

    #[test]
    fn packed_words_round_trip() {
        let w = pack(
            Decision::NotRequested as u64,
            Decision::Protected as u64,
            0x1_2345_6789,
            1_234_567,
        );
        assert_eq!(request_of(w), Decision::NotRequested as u64);
        assert_eq!(rule_of(w), Decision::Protected as u64);
        assert_eq!(predicted_ns(w), 1_234_000);
        // The switch that ends the wait is counted already: not a pass-over.
        assert_eq!(passes(w, 0x2345_678a), 0);
        assert_eq!(passes(w, 0x2345_678d), 3);
        // The kernel's count wraps past the 32 bits kept.
        let w = pack(0, 0, 0xffff_fffe, 0);
        assert_eq!(passes(w, 0x1_0000_0001), 2);
        assert_eq!(
            predicted_ns(pack(0, 0, 0, u64::MAX)),
            PREDICTED_MAX_US * 1000
        );
    }

    #[test]
    fn outcomes_partition_requests_and_pass_overs() {
        let p0 = Decision::Passed0 as u64;
        let o = |r: Decision, p: u64| outcome(r as u64, p);
        assert_eq!(o(Decision::Requested, p0), Outcome::Granted as u64);
        assert_eq!(o(Decision::Lazy, p0), Outcome::Granted as u64);
        assert_eq!(o(Decision::NotRequested, p0), Outcome::Declined as u64);
        assert_eq!(o(Decision::Idle, p0), Outcome::IdleCpu as u64);
        assert_eq!(o(Decision::Pending, p0), Outcome::Other as u64);
        assert_eq!(o(Decision::RequestNa, p0), Outcome::Other as u64);
        for pass in [Decision::Passed1, Decision::Passed2, Decision::Passed3Plus] {
            for r in REQUEST {
                assert_eq!(o(r, pass as u64), Outcome::PassedOver as u64);
            }
        }
        for pass in [Decision::PassMigrated, Decision::PassUnknown] {
            assert_eq!(o(Decision::Requested, pass as u64), Outcome::Other as u64);
        }
    }

    #[test]
    fn pass_classes_cap_at_three() {
        assert_eq!(pass_class(0), Decision::Passed0 as u64);
        assert_eq!(pass_class(2), Decision::Passed2 as u64);
        assert_eq!(pass_class(3), Decision::Passed3Plus as u64);
        assert_eq!(pass_class(400), Decision::Passed3Plus as u64);
    }

    #[test]
    fn eligibility_follows_the_weighted_average() {
        // Two nice-0 entities at keys 0 and 2000 (avg 2000*1024, load
        // 2048): the average key is 1000, so 1000 is eligible, 1001 not.
        let (avg, load) = (2000 * 1024, 2048);
        assert!(eligible(avg, load, 0));
        assert!(eligible(avg, load, 1000));
        assert!(!eligible(avg, load, 1001));
        assert!(!eligible(avg, load, 2000));
        // Negative keys (behind the zero point) are eligible.
        assert!(eligible(-1024, 1024, -1));
        assert!(!eligible(-1024, 1024, 0));
    }

    #[test]
    fn a_renewed_deadline_is_told_from_a_running_slice() {
        let slice = 1_400_000;
        // Renewed at nice 0: the whole slice ahead.
        assert!(slice_renewed(1_400_000, 1024, slice));
        // Half of it run.
        assert!(!slice_renewed(700_000, 1024, slice));
        // Nice -5 (3121): a third of the virtual time for the same slice.
        assert!(slice_renewed(1_400_000 * 1024 / 3121, 3121, slice));
        assert!(!slice_renewed(-1, 1024, slice));
    }

    #[test]
    fn virtual_time_converts_by_weight() {
        // A nice-0 task runs 1 ms for 1 ms of vruntime; a weight-3121
        // (nice -5) task runs 3x longer per virtual ns.
        assert_eq!(virtual_to_ns(1_000_000, 1024), 1_000_000);
        assert_eq!(virtual_to_ns(1_000_000, 3121), 3_047_851);
        assert_eq!(virtual_to_ns(-5, 1024), 0);
    }
}
