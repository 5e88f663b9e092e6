//! The scheduler's decision (docs/decision.md): for every measured wait,
//! what the scheduler decided at its wakeup ([`Decision`]: the wakeup asked
//! for the CPU, or which rule declined it), how many times the CPU was
//! given to other tasks during the wait ([`Pass`]), and how the task that
//! held the CPU left it at the switch that ended the wait ([`HolderLeft`]).
//!
//! Per CPU the kernel counts the wait once in a decision x pass-over table
//! ([`DecisionStats::count`]), once by holder, and once in a fine
//! histogram of its [`Outcome`]; every other split is a sum of cells.
//!
//! The state of a wait in progress is one word in its enqueue's overlap
//! snapshot slot (`causes::OverlapSlot::decision`, [`EnqueueWord`]): no
//! per-task memory. The switch-in hands back one word per wait
//! ([`Decided`]), for slow events and victims rows to carry.

use crate::{
    NR_BUCKETS,
    flat::{above, equal, min, nonzero, opaque, select},
};

/// What the scheduler decided at a wait's start (one per wait): the
/// need-resched state of the target CPU's running task at sched_wakeup,
/// and for a wakeup that did not ask, the fair-class rule that declined.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The wakeup set TIF_NEED_RESCHED: it asked for the CPU.
    Requested = 0,
    /// It asked because its enqueue found the running task's slice used up
    /// (update_curr() -> update_deadline() renews the deadline and
    /// reschedules), not by wakeup preemption. EEVDF, one queue.
    SliceEnded = 1,
    /// The bit was already set by an earlier wakeup onto that CPU, with no
    /// switch since (the check returned early).
    Pending = 2,
    /// Only TIF_NEED_RESCHED_LAZY was set (preempt=lazy, 6.13+).
    Lazy = 3,
    /// The target CPU ran its idle task.
    Idle = 4,
    /// Not a wakeup: a task preempted while runnable by one of its own
    /// class or a lower one, or a new task (its check follows
    /// sched_wakeup_new).
    NotWakeup = 5,
    /// Not known: the enqueue's snapshot slot was taken by another waiting
    /// thread before the switch-in.
    Unknown = 6,
    /// The wakee or the running task is in the sched_ext class (6.12+): a
    /// BPF scheduler's dispatch queues decided, not EEVDF's rules. A rule
    /// (`declined()`), numbered below the fair class's because nibble 15
    /// of the enqueue word is taken (`REQUESTED_SPENT`).
    Ext = 7,
    // The rules that declined a wakeup which did not ask (8..=14).
    /// EEVDF (6.6+): the wakee's lag was negative (its vruntime ahead of
    /// the queue's weighted average): not eligible.
    NotEligible = 8,
    /// EEVDF: eligible, but the running entity's deadline was earlier.
    LaterDeadline = 9,
    /// EEVDF RUN_TO_PARITY: the running task's slice was protected.
    Protected = 10,
    /// A SCHED_BATCH or SCHED_IDLE wakee: never preempts on wakeup.
    PolicyGate = 11,
    /// The running task or the wakee is not in the fair class; or a task
    /// of a higher class (real-time, deadline) preempted this one.
    OtherClass = 12,
    /// CFS (before 6.6): the wakee's vruntime was not a wakeup granularity
    /// behind the running task's.
    WakeupGranularity = 13,
    /// Not recomputed: a group hierarchy deeper than the walk's bound.
    RuleUnknown = 14,
}

/// Slots of the decision dimension (classes 0..=14, a power of two: the
/// kernel indexes masked, without a bounds check).
pub const NR_DECISIONS: usize = 16;

/// Every class, in the order reports list them (`Ext` last, after the
/// fair class's rules); `DECLINED` are the rules.
pub const DECISIONS: [Decision; 15] = [
    Decision::Requested,
    Decision::SliceEnded,
    Decision::Pending,
    Decision::Lazy,
    Decision::Idle,
    Decision::NotWakeup,
    Decision::Unknown,
    Decision::NotEligible,
    Decision::LaterDeadline,
    Decision::Protected,
    Decision::PolicyGate,
    Decision::OtherClass,
    Decision::WakeupGranularity,
    Decision::RuleUnknown,
    Decision::Ext,
];
pub const DECLINED: [Decision; 8] = [
    Decision::NotEligible,
    Decision::LaterDeadline,
    Decision::Protected,
    Decision::PolicyGate,
    Decision::OtherClass,
    Decision::WakeupGranularity,
    Decision::RuleUnknown,
    Decision::Ext,
];

impl Decision {
    /// Its name in text, JSON and the exposition's label values.
    pub const fn name(self) -> &'static str {
        match self {
            Decision::Requested => "requested",
            Decision::SliceEnded => "slice_ended",
            Decision::Pending => "pending",
            Decision::Lazy => "lazy",
            Decision::Idle => "idle",
            Decision::NotWakeup => "not_wakeup",
            Decision::Unknown => "unknown",
            Decision::NotEligible => "not_eligible",
            Decision::LaterDeadline => "later_deadline",
            Decision::Protected => "protected",
            Decision::PolicyGate => "policy_gate",
            Decision::OtherClass => "other_class",
            Decision::WakeupGranularity => "wakeup_granularity",
            Decision::RuleUnknown => "rule_unknown",
            Decision::Ext => "ext",
        }
    }

    /// A rule: the wakeup did not ask for the CPU.
    pub const fn declined(self) -> bool {
        self as u32 >= Decision::NotEligible as u32 || matches!(self, Decision::Ext)
    }

    /// The wakeup asked (at once or lazily).
    pub const fn asked(self) -> bool {
        matches!(
            self,
            Decision::Requested | Decision::SliceEnded | Decision::Lazy
        )
    }

    pub fn from_index(i: u64) -> Option<Decision> {
        DECISIONS.iter().copied().find(|&d| d as u64 == i)
    }
}

/// Switches on the waiting CPU to other tasks during a wait.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Zero = 0,
    One = 1,
    Two = 2,
    ThreePlus = 3,
    /// The wait ended on another CPU than the one it was queued on (its
    /// snapshot was not there, and the task last ran elsewhere): not
    /// counted.
    Migrated = 4,
    /// The enqueue's snapshot was not found (its slot was taken).
    Unknown = 5,
}

/// Slots of the pass-over dimension.
pub const NR_PASSES: usize = 8;
pub const PASSES: [Pass; 6] = [
    Pass::Zero,
    Pass::One,
    Pass::Two,
    Pass::ThreePlus,
    Pass::Migrated,
    Pass::Unknown,
];

impl Pass {
    /// Its name in text, JSON and the exposition's label values.
    pub const fn name(self) -> &'static str {
        match self {
            Pass::Zero => "0",
            Pass::One => "1",
            Pass::Two => "2",
            Pass::ThreePlus => "3+",
            Pass::Migrated => "migrated",
            Pass::Unknown => "unknown",
        }
    }

    pub fn from_index(i: u64) -> Option<Pass> {
        PASSES.iter().copied().find(|&p| p as u64 == i)
    }

    /// The class of `n` pass-overs counted.
    pub const fn of(n: u64) -> Pass {
        match n {
            0 => Pass::Zero,
            1 => Pass::One,
            2 => Pass::Two,
            _ => Pass::ThreePlus,
        }
    }
}

/// How the task that held the CPU left it at the switch that ended a wait
/// (sched_switch's prev).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderLeft {
    /// It slept or blocked.
    Blocked = 0,
    /// Switched out still runnable, and not by its own sched_yield().
    Preempted = 1,
    /// Switched out runnable with its slice just renewed: the tick (or an
    /// enqueue's update_curr()) found its slice used up. EEVDF only; on
    /// CFS these are `Preempted`.
    SliceEnded = 2,
    /// Its final switch (TASK_DEAD).
    Exited = 3,
    /// Switched out runnable by its own sched_yield(): this switch is the
    /// first on its CPU since it called it with others runnable there.
    /// Told apart from `Preempted` only where the system call's tracepoint
    /// could be attached (docs/decision.md); elsewhere counted there.
    Yielded = 4,
    /// The CPU's idle task (PF_IDLE): the wait ended on an idle CPU. The
    /// idle task leaves with state 0 and no preempt, which would otherwise
    /// read as a runnable holder.
    Idle = 5,
}

/// Slots of the holder dimension.
pub const NR_HOLDERS: usize = 8;
pub const HOLDERS: [HolderLeft; 6] = [
    HolderLeft::Blocked,
    HolderLeft::Preempted,
    HolderLeft::SliceEnded,
    HolderLeft::Exited,
    HolderLeft::Yielded,
    HolderLeft::Idle,
];

impl HolderLeft {
    /// Its name in text, JSON and the exposition's label values.
    pub const fn name(self) -> &'static str {
        match self {
            HolderLeft::Blocked => "blocked",
            HolderLeft::Preempted => "preempted",
            HolderLeft::SliceEnded => "slice_ended",
            HolderLeft::Exited => "exited",
            HolderLeft::Yielded => "yielded",
            HolderLeft::Idle => "idle",
        }
    }

    pub fn from_index(i: u64) -> Option<HolderLeft> {
        HOLDERS.iter().copied().find(|&h| h as u64 == i)
    }
}

/// What became of a wait, one class per wait, each with a fine histogram
/// (so that "waits over 1 ms" can be split by it): the wakeup asked for
/// the CPU and got it at the next switch, promptly; it asked and no other
/// task ran first, but the holder kept the CPU until its slice ended
/// (late); it did not ask, and the task ran at the next switch; others
/// ran first (passed over, whatever the decision); an idle CPU took it;
/// anything else (a pending bit, not a wakeup, migrated, not known).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The wakeup asked, and the task ran at the next switch, which did
    /// not find the holder's slice renewed since the wakeup: the switch
    /// answered the request.
    Granted = 0,
    Declined = 1,
    PassedOver = 2,
    IdleCpu = 3,
    Other = 4,
    /// The wakeup asked, no other task ran first, but the holder kept the
    /// CPU until a tick made the switch: a request (`Decision::Requested`:
    /// a fair wakee, the holder's slice neither renewed nor used up then,
    /// [`Decided::SPENT`]) whose holder left with its slice renewed after
    /// the wakeup (`HolderLeft::SliceEnded`: a schedule() picked it again, no
    /// switch, the flag cleared, and the tick that ended its slice made
    /// the switch); or a lazy request (`Decision::Lazy`) whose holder was
    /// preempted inside the kernel ([`Decided::IN_KERNEL_PREEMPT`]): a lazy request
    /// is served at the holder's return to user space, so in the kernel
    /// only the tick (or the high-resolution tick at the end of the
    /// holder's slice) turning it into a full one made the switch. Last in
    /// the index so that the other classes keep theirs.
    Late = 5,
}

pub const NR_OUTCOMES: usize = 6;
/// Every class, in the order reports show them.
pub const OUTCOMES: [Outcome; NR_OUTCOMES] = [
    Outcome::Granted,
    Outcome::Late,
    Outcome::Declined,
    Outcome::PassedOver,
    Outcome::IdleCpu,
    Outcome::Other,
];

impl Outcome {
    /// Its name in text, JSON and the exposition's label values.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::Late => "late",
            Outcome::Declined => "declined",
            Outcome::PassedOver => "passed_over",
            Outcome::IdleCpu => "idle_cpu",
            Outcome::Other => "other",
        }
    }

    /// `spent`: the wakeup found the holder's slice already used up (not
    /// yet accounted), or the wakee outside the fair class: a renewal at
    /// the switch is then no sign of a late switch ([`Decided::SPENT`]).
    /// `preempted`: the switch preempted the holder inside the kernel
    /// ([`Decided::IN_KERNEL_PREEMPT`]).
    pub const fn of(
        decision: Decision,
        pass: Pass,
        holder: HolderLeft,
        (spent, preempted): (bool, bool),
    ) -> Outcome {
        match pass {
            Pass::One | Pass::Two | Pass::ThreePlus => Outcome::PassedOver,
            Pass::Migrated | Pass::Unknown => Outcome::Other,
            Pass::Zero
                if matches!(decision, Decision::Requested)
                    && matches!(holder, HolderLeft::SliceEnded)
                    && !spent =>
            {
                Outcome::Late
            }
            Pass::Zero if matches!(decision, Decision::Lazy) && preempted => Outcome::Late,
            Pass::Zero if decision.asked() => Outcome::Granted,
            Pass::Zero if decision.declined() => Outcome::Declined,
            Pass::Zero if matches!(decision, Decision::Idle) => Outcome::IdleCpu,
            Pass::Zero => Outcome::Other,
        }
    }

    pub fn from_index(i: u64) -> Option<Outcome> {
        OUTCOMES.iter().copied().find(|&o| o as u64 == i)
    }

    /// `of` on a decision, a pass-over and a holder index and the spent
    /// and preempted bits (0 or 1), without a branch (for the kernel side:
    /// crate::flat): with no pass-over, the nibble of the decision in
    /// `OUTCOME_AT_ZERO`, or `Late` for a request whose holder left with
    /// its slice renewed or a lazy one whose holder was preempted.
    #[inline(always)]
    pub fn of_indices(
        decision: u64,
        pass: u64,
        holder: u64,
        (spent, preempted): (u64, u64),
    ) -> u64 {
        const PASSED_OVER: u64 = Outcome::PassedOver as u64;
        const OTHER: u64 = Outcome::Other as u64;
        const LATE: u64 = Outcome::Late as u64;
        let at_zero = (OUTCOME_AT_ZERO >> ((decision & 15) * 4)) & 0xf;
        // Shifts of opaque bits, not comparisons: LLVM makes a sign test
        // a branch, and every branch here doubles the verifier's states.
        let requested = opaque(1 << Decision::Requested as u64) >> (decision & 15);
        let renewed = opaque(1 << HolderLeft::SliceEnded as u64) >> (holder & 7);
        let lazy = opaque(1 << Decision::Lazy as u64) >> (decision & 15);
        let late = (requested & renewed & (1 ^ (spent & 1))) | (lazy & preempted);
        let late = late & 1;
        let at_zero = select(late, LATE, at_zero);
        let passed = nonzero(pass) & (1 ^ above(pass, Pass::ThreePlus as u64));
        let after = select(passed, PASSED_OVER, OTHER);
        select(equal(pass, Pass::Zero as u64), at_zero, after)
    }
}

/// Nibble d: the outcome of decision d with no pass-over (asked 0, the
/// rules 1 (8..=14 and `Ext`, 7), idle 3, the rest other 4), before the
/// holder makes a request `Late`.
const OUTCOME_AT_ZERO: u64 = 0x4111_1111_1443_0400;

/// Cells of the decision x pass-over table: `decision * NR_PASSES + pass`.
pub const NR_CELLS: usize = NR_DECISIONS * NR_PASSES;

/// The cell of a decision and a pass-over class.
pub const fn cell(decision: Decision, pass: Pass) -> usize {
    decision as usize * NR_PASSES + pass as usize
}

/// The per-CPU totals, cumulative since load (a `PERCPU_ARRAY` value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionStats {
    /// Waits and their sum per cell (`cell()`).
    pub count: [u64; NR_CELLS],
    pub sum_ns: [u64; NR_CELLS],
    /// Waits and their sum by how the holder left (`HolderLeft` index).
    pub holder_count: [u64; NR_HOLDERS],
    pub holder_sum_ns: [u64; NR_HOLDERS],
    /// Fine histograms of the outcomes (`Outcome` index).
    pub outcome_buckets: [[u64; NR_BUCKETS]; NR_OUTCOMES],
    /// The outcomes' waits summed (`Outcome` index; their counts are the
    /// histograms'): granted and late split one cell of the table.
    pub outcome_sum_ns: [u64; NR_OUTCOME_SLOTS],
    /// Pass-overs summed over the waits with a counted class (0..3+).
    pub passes: u64,
    /// Declined waits whose rule predicted a wait, the predictions' sum,
    /// the actual waits' sum, and those that waited longer than predicted
    /// plus `DecisionOffsets::tick_ns`.
    pub predicted_waits: u64,
    pub predicted_ns: u64,
    pub predicted_actual_ns: u64,
    pub beyond_prediction: u64,
    /// Declined waits with the wakee's fair share at the queue the rule
    /// compared at, and the shares' sum in per mille.
    pub share_waits: u64,
    pub share_permille: u64,
}

impl DecisionStats {
    pub const ZERO: DecisionStats = DecisionStats {
        count: [0; NR_CELLS],
        sum_ns: [0; NR_CELLS],
        holder_count: [0; NR_HOLDERS],
        holder_sum_ns: [0; NR_HOLDERS],
        outcome_buckets: [[0; NR_BUCKETS]; NR_OUTCOMES],
        outcome_sum_ns: [0; NR_OUTCOME_SLOTS],
        passes: 0,
        predicted_waits: 0,
        predicted_ns: 0,
        predicted_actual_ns: 0,
        beyond_prediction: 0,
        share_waits: 0,
        share_permille: 0,
    };
}

/// Waits this long or longer are a key's slow waits ([`KeyDecision::
/// outcome_slow`]): the tail the whole system's outcome histograms split
/// at the same bound.
pub const KEY_SLOW_NS: u64 = 1_000_000;

/// Slots of a key's outcome counts (a power of two over [`NR_OUTCOMES`]:
/// indexed masked, without a bounds check).
pub const NR_OUTCOME_SLOTS: usize = 8;

/// One breakdown key's decision split, cumulative since the key's first
/// wait (a hash map of its own beside the key's histogram, keyed alike):
/// each dimension apart, not their table, and the outcomes' slow waits
/// rather than their histograms, so that a key costs 712 bytes, not the
/// 16.5 KiB of a CPU's [`DecisionStats`]. Every CPU adds to it at once:
/// atomic adds.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDecision {
    /// Waits and their sum by decision (`Decision` index).
    pub decision_count: [u64; NR_DECISIONS],
    pub decision_sum_ns: [u64; NR_DECISIONS],
    /// By pass-over class (`Pass` index).
    pub pass_count: [u64; NR_PASSES],
    pub pass_sum_ns: [u64; NR_PASSES],
    /// By how the holder left (`HolderLeft` index).
    pub holder_count: [u64; NR_HOLDERS],
    pub holder_sum_ns: [u64; NR_HOLDERS],
    /// By outcome (`Outcome` index): waits, their sum, and those of at
    /// least [`KEY_SLOW_NS`].
    pub outcome_count: [u64; NR_OUTCOME_SLOTS],
    pub outcome_sum_ns: [u64; NR_OUTCOME_SLOTS],
    pub outcome_slow: [u64; NR_OUTCOME_SLOTS],
    /// Pass-overs summed over the waits with a counted class (0..3+).
    pub passes: u64,
}

impl KeyDecision {
    pub const ZERO: KeyDecision = KeyDecision {
        decision_count: [0; NR_DECISIONS],
        decision_sum_ns: [0; NR_DECISIONS],
        pass_count: [0; NR_PASSES],
        pass_sum_ns: [0; NR_PASSES],
        holder_count: [0; NR_HOLDERS],
        holder_sum_ns: [0; NR_HOLDERS],
        outcome_count: [0; NR_OUTCOME_SLOTS],
        outcome_sum_ns: [0; NR_OUTCOME_SLOTS],
        outcome_slow: [0; NR_OUTCOME_SLOTS],
        passes: 0,
    };
}

/// The enqueue word's decision nibble for `Decision::Requested` when the
/// wakeup found the holder's slice already used up or the wakee outside
/// the fair class ([`Decided::SPENT`]); never counted as a class: the
/// switch-in reads it as `Requested` with the bit.
pub const REQUESTED_SPENT: u64 = 15;

/// 1 when a decision nibble (0..=15) is `REQUESTED_SPENT`: arithmetic, not
/// a comparison (LLVM makes a sign test of one a branch: crate::flat).
#[inline(always)]
fn spent_of(nibble: u64) -> u64 {
    (nibble + 1) >> 4
}

/// A decision nibble with `REQUESTED_SPENT` read as `Requested` (0).
#[inline(always)]
fn unspent(nibble: u64) -> u64 {
    nibble & opaque(spent_of(nibble).wrapping_sub(1))
}

/// The state an enqueue leaves for its switch-in, packed in one u64:
/// the decision (bits 0-3), the wakee's fair share in per mille plus one
/// (4-13, 0 for none), the rule's predicted wait in microseconds (14-31,
/// saturating) and the queue's switch count then (32-63, its low bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnqueueWord(pub u64);

const PREDICTED_MAX_US: u64 = (1 << 18) - 1;
const SHARE_MAX: u64 = 1001;

impl EnqueueWord {
    /// No snapshot: what a lookup that missed returns (no packed word has
    /// every bit set: its decision nibble is 15 only for `REQUESTED_SPENT`,
    /// which has no share).
    pub const NOT_FOUND: u64 = u64::MAX;

    /// `share` is the share in per mille plus one (0: not computed, which
    /// a rule other than EEVDF's leaves), `predicted_ns` below 2^63.
    #[inline(always)]
    pub fn pack(decision: u64, (share, predicted_ns): (u64, u64), switches: u64) -> u64 {
        let us = min(predicted_ns / 1000, PREDICTED_MAX_US);
        let share = min(share, SHARE_MAX);
        (decision & 15) | (share << 4) | (us << 14) | (switches << 32)
    }

    /// As `pack`, without a share or a prediction.
    #[inline(always)]
    pub fn plain(decision: u64, switches: u64) -> u64 {
        (decision & 15) | (switches << 32)
    }

    /// The decision index, `REQUESTED_SPENT` read as `Requested`.
    #[inline(always)]
    pub fn decision(self) -> u64 {
        unspent(self.0 & 15)
    }

    /// 1 when the nibble is `REQUESTED_SPENT`.
    #[inline(always)]
    pub fn spent(self) -> u64 {
        spent_of(self.0 & 15)
    }

    /// The share in per mille plus one (0: none).
    #[inline(always)]
    pub fn share(self) -> u64 {
        (self.0 >> 4) & 0x3ff
    }

    #[inline(always)]
    pub fn predicted_us(self) -> u64 {
        (self.0 >> 14) & PREDICTED_MAX_US
    }

    /// Switches of the queue's CPU between the enqueue and the switch-in
    /// that ended the wait (`now_switches`, which already counts it), to
    /// other tasks: the pass-overs. The kernel's count wraps past the 32
    /// bits kept.
    #[inline(always)]
    pub fn passes(self, now_switches: u64) -> u64 {
        now_switches.wrapping_sub(self.0 >> 32).wrapping_sub(1) & 0xffff_ffff
    }
}

/// One wait's decision as the switch-in hands it back (to the breakdown
/// key, a slow event, a victims row): the decision (bits 0-3), the
/// pass-over class (4-6), spent (7, [`Decided::SPENT`]), the holder
/// (8-10), preempted in the kernel (11, [`Decided::IN_KERNEL_PREEMPT`]),
/// measured (15: 0 means the split did not see this wait), the share in
/// per mille plus one (16-25),
/// the predicted wait in microseconds (26-43) and the pass-overs counted
/// (44-63, saturating).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decided(pub u64);

const PASSES_MAX: u64 = (1 << 20) - 1;

impl Decided {
    pub const MEASURED: u64 = 1 << 15;
    /// The wakeup asked, but found the holder's slice already used up
    /// (its queue had not accounted it yet: the holder in another task
    /// group than the wakee, whose enqueue updates only the wakee's
    /// queues) or the wakee outside the fair class (its enqueue updates no
    /// fair queue): the holder's next update renews its slice whenever the
    /// switch comes, so a renewed holder says nothing of a late switch.
    pub const SPENT: u64 = 1 << 7;
    /// The switch preempted the holder inside the kernel (sched_switch's
    /// `preempt`: an interrupt's return to the kernel or a preempt_enable()
    /// found the full need-resched bit), not at its return to user space
    /// nor because it blocked or yielded. Or-ed onto a `pack`ed word.
    pub const IN_KERNEL_PREEMPT: u64 = 1 << 11;

    /// `decision` is the enqueue word's (`REQUESTED_SPENT` included:
    /// packed as `Requested` with the spent bit).
    #[inline(always)]
    pub fn pack(
        (decision, pass, holder): (u64, u64, u64),
        share: u64,
        predicted_us: u64,
        passes: u64,
    ) -> u64 {
        let passes = min(passes & 0xffff_ffff, PASSES_MAX);
        let spent = spent_of(decision & 15);
        let decision = unspent(decision & 15);
        (decision & 15)
            | (spent << 7)
            | ((pass & 7) << 4)
            | ((holder & 7) << 8)
            | Decided::MEASURED
            | ((share & 0x3ff) << 16)
            | ((predicted_us & PREDICTED_MAX_US) << 26)
            | (passes << 44)
    }

    #[inline(always)]
    pub fn measured(self) -> bool {
        self.0 & Decided::MEASURED != 0
    }

    #[inline(always)]
    pub fn decision_index(self) -> u64 {
        self.0 & 15
    }

    #[inline(always)]
    pub fn pass_index(self) -> u64 {
        (self.0 >> 4) & 7
    }

    #[inline(always)]
    pub fn holder_index(self) -> u64 {
        (self.0 >> 8) & 7
    }

    /// 1 with [`Decided::SPENT`].
    #[inline(always)]
    pub fn spent(self) -> u64 {
        (self.0 >> 7) & 1
    }

    /// 1 with [`Decided::IN_KERNEL_PREEMPT`].
    #[inline(always)]
    pub fn in_kernel_preempt(self) -> u64 {
        (self.0 >> 11) & 1
    }

    /// The outcome index (`Outcome`).
    #[inline(always)]
    pub fn outcome_index(self) -> u64 {
        Outcome::of_indices(
            self.decision_index(),
            self.pass_index(),
            self.holder_index(),
            (self.spent(), self.in_kernel_preempt()),
        )
    }

    pub fn outcome(self) -> Option<Outcome> {
        self.measured()
            .then(|| Outcome::from_index(self.outcome_index()))
            .flatten()
    }

    /// The share in per mille plus one (0: none).
    #[inline(always)]
    pub fn share(self) -> u64 {
        (self.0 >> 16) & 0x3ff
    }

    #[inline(always)]
    pub fn predicted_us(self) -> u64 {
        (self.0 >> 26) & PREDICTED_MAX_US
    }

    #[inline(always)]
    pub fn passes(self) -> u64 {
        self.0 >> 44
    }

    pub fn decision(self) -> Option<Decision> {
        self.measured()
            .then(|| Decision::from_index(self.decision_index()))
            .flatten()
    }

    pub fn pass(self) -> Option<Pass> {
        self.measured()
            .then(|| Pass::from_index(self.pass_index()))
            .flatten()
    }

    pub fn holder(self) -> Option<HolderLeft> {
        self.measured()
            .then(|| HolderLeft::from_index(self.holder_index()))
            .flatten()
    }

    /// The share as a fraction (None: not computed).
    pub fn share_fraction(self) -> Option<f64> {
        let s = self.share();
        (self.measured() && s != 0).then(|| (s - 1) as f64 / 1000.0)
    }
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
/// sets the deadline one slice ahead; little has run since. Without a
/// branch (crate::flat); `slice` below 2^63.
#[inline(always)]
pub fn slice_renewed(left: i64, weight: u64, slice: u64) -> bool {
    let ns = virtual_to_ns(left, weight);
    (nonzero(slice) & (1 ^ above(slice - slice / 16, ns))) != 0
}

/// Whether a running entity with `left` virtual ns to its deadline at its
/// queue's last update, which has run `ran` ns since (not yet accounted),
/// has used up its slice by now: `ran` as virtual time at `weight`
/// (calc_delta_fair()) reaches `left`. update_deadline() renews a slice
/// once vruntime reaches the deadline. Without a branch; a negative `ran`
/// (a clock read before the update) counts as none.
#[inline(always)]
pub fn slice_spent(left: i64, ran: i64, weight: u64) -> bool {
    // ran * 1024 / weight >= left, as ran * 1024 >= left * weight: no
    // division (a variable divisor brings a panic path the verifier
    // refuses), each side capped to fit 64 bits.
    let ran = select((ran as u64) >> 63, 0, ran as u64);
    let ran = min(ran, MAX_VIRTUAL) * 1024;
    let weight = select(
        nonzero(weight),
        min(weight & (u64::MAX >> 1), MAX_WEIGHT),
        1024,
    );
    let raw = left as u64;
    // Already behind its deadline (not renewed yet), or run past it.
    let behind = raw >> 63;
    let left = min(raw & (u64::MAX >> 1), MAX_VIRTUAL) * weight;
    (behind | (1 ^ above(left, ran))) != 0
}

/// Virtual nanoseconds `dv` of an entity of weight `weight` (scaled down,
/// NICE_0 = 1024) as the CPU time it takes to run them (0 for dv <= 0):
/// vruntime grows by delta_exec * 1024 / weight (calc_delta_fair()).
/// Without a branch (crate::flat).
#[inline(always)]
pub fn virtual_to_ns(dv: i64, weight: u64) -> u64 {
    let raw = dv as u64;
    let positive = nonzero(raw) & (1 ^ (raw >> 63));
    // Capped so that the product fits 64 bits (weights are under 2^17):
    // 2^40 ns is 18 minutes, and BPF has no 128-bit multiply.
    let dv = select(positive, min(raw & (u64::MAX >> 1), MAX_VIRTUAL), 0);
    dv * min(weight & (u64::MAX >> 1), MAX_WEIGHT) / 1024
}

const MAX_VIRTUAL: u64 = 1 << 40;
const MAX_WEIGHT: u64 = 1 << 20;

/// A wakee's fair share of the queue the rule compared at, in per mille:
/// its weight against the queue's (the running entity included).
#[inline(always)]
pub fn share_permille(weight: u64, load: u64) -> u64 {
    if load == 0 {
        return 0;
    }
    let weight = if weight > load { load } else { weight };
    // weight <= load < 2^40 in practice: no overflow in 1000x.
    weight * 1000 / load
}

#[cfg(feature = "user")]
// SAFETY: repr(C), u64 arrays and fields only, no padding (checked below).
unsafe impl aya::Pod for DecisionStats {}

#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for KeyDecision {}

#[cfg(feature = "user")]
// SAFETY: repr(C); a u32 array of even length then u64s: no padding.
#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(
            size_of::<DecisionStats>(),
            8 * (2 * NR_CELLS + 2 * NR_HOLDERS + NR_OUTCOMES * NR_BUCKETS + NR_OUTCOME_SLOTS + 7)
        );
        // A per-CPU map value may not exceed 32 KiB (PCPU_MIN_UNIT_SIZE).
        assert!(size_of::<DecisionStats>() <= 32 * 1024);
        // The size KeyDecision's comment gives (16.5 KiB).
        assert_eq!(size_of::<DecisionStats>(), 16_888);
        assert_eq!(
            size_of::<KeyDecision>(),
            8 * (2 * NR_DECISIONS + 2 * NR_PASSES + 2 * NR_HOLDERS + 3 * NR_OUTCOME_SLOTS + 1)
        );
        // The size its comment gives.
        assert_eq!(size_of::<KeyDecision>(), 712);
        const {
            assert!(NR_DECISIONS.is_power_of_two());
            assert!(NR_PASSES.is_power_of_two());
            assert!(NR_HOLDERS.is_power_of_two());
            assert!(NR_OUTCOME_SLOTS.is_power_of_two());
            assert!(NR_OUTCOMES <= NR_OUTCOME_SLOTS);
        }
        assert!((Decision::RuleUnknown as usize) < NR_DECISIONS);
        // unspent() reads REQUESTED_SPENT as 0.
        assert_eq!(Decision::Requested as u64, 0);
        assert_eq!(REQUESTED_SPENT as usize, NR_DECISIONS - 1);
        assert!((Pass::Unknown as usize) < NR_PASSES);
        assert!((HolderLeft::Idle as usize) < NR_HOLDERS);
        // Decided keeps the holder in 3 bits.
        assert!((HolderLeft::Idle as usize) < 8);
    }

    #[test]
    fn enqueue_words_round_trip() {
        let w = EnqueueWord(EnqueueWord::pack(
            Decision::Protected as u64,
            (251, 1_234_567),
            0x1_2345_6789,
        ));
        assert_eq!(w.decision(), Decision::Protected as u64);
        assert_eq!(w.share(), 251);
        assert_eq!(w.predicted_us(), 1234);
        // The switch that ends the wait is counted already: not a pass-over.
        assert_eq!(w.passes(0x2345_678a), 0);
        assert_eq!(w.passes(0x2345_678d), 3);
        // The kernel's count wraps past the 32 bits kept.
        let w = EnqueueWord(EnqueueWord::plain(0, 0xffff_fffe));
        assert_eq!(w.passes(0x1_0000_0001), 2);
        assert_eq!(w.share(), 0);
        let w = EnqueueWord(EnqueueWord::pack(0, (5000, u64::MAX / 2), 0));
        assert_eq!(w.predicted_us(), PREDICTED_MAX_US);
        assert_eq!(w.share(), SHARE_MAX);
        assert_ne!(w.0, EnqueueWord::NOT_FOUND);
        // A rule that computed no share packs none: not a share of 0.
        let w = EnqueueWord(EnqueueWord::pack(Decision::OtherClass as u64, (0, 0), 3));
        assert_eq!(w.share(), 0);
        // A real share of 0 per mille (a nice-19 wakee among heavy loads)
        // stays one.
        let w = EnqueueWord(EnqueueWord::pack(Decision::NotEligible as u64, (1, 0), 3));
        assert_eq!(w.share(), 1);
    }

    #[test]
    fn decided_words_round_trip() {
        let d = Decided(Decided::pack(
            (
                Decision::NotEligible as u64,
                Pass::ThreePlus as u64,
                HolderLeft::SliceEnded as u64,
            ),
            251,
            2100,
            7,
        ));
        assert_eq!(d.decision(), Some(Decision::NotEligible));
        assert_eq!(d.pass(), Some(Pass::ThreePlus));
        assert_eq!(d.holder(), Some(HolderLeft::SliceEnded));
        assert_eq!(d.share_fraction(), Some(0.25));
        assert_eq!(d.predicted_us(), 2100);
        assert_eq!(d.passes(), 7);
        assert_eq!(Decided(0).decision(), None);
        assert_eq!(
            Decided(Decided::pack((0, 0, 0), 0, 0, 1 << 31)).passes(),
            PASSES_MAX
        );
    }

    #[test]
    fn outcomes_partition_the_table() {
        use Decision as D;
        use HolderLeft as H;
        for h in HOLDERS {
            // A prompt switch (the holder not renewed since the wakeup).
            if h != H::SliceEnded {
                assert_eq!(
                    Outcome::of(D::Requested, Pass::Zero, h, (false, false)),
                    Outcome::Granted
                );
            }
            // Spent at the wakeup: the holder's renewal is no sign.
            assert_eq!(
                Outcome::of(D::Requested, Pass::Zero, h, (true, false)),
                Outcome::Granted
            );
            // A slice that the wakeup's own enqueue renewed: its switch
            // reads the holder renewed too, and answered the request.
            assert_eq!(
                Outcome::of(D::SliceEnded, Pass::Zero, h, (false, false)),
                Outcome::Granted
            );
            // A lazy request served at the holder's return to user space
            // (or as it blocked), and one only a preemption inside the
            // kernel served.
            assert_eq!(
                Outcome::of(D::Lazy, Pass::Zero, h, (false, false)),
                Outcome::Granted
            );
            assert_eq!(
                Outcome::of(D::Lazy, Pass::Zero, h, (false, true)),
                Outcome::Late
            );
            // A request served by a preemption in the kernel is the prompt
            // grant of a full request.
            if h != H::SliceEnded {
                assert_eq!(
                    Outcome::of(D::Requested, Pass::Zero, h, (false, true)),
                    Outcome::Granted
                );
            }
            assert_eq!(
                Outcome::of(D::Protected, Pass::Zero, h, (false, false)),
                Outcome::Declined
            );
            assert_eq!(
                Outcome::of(D::Idle, Pass::Zero, h, (false, false)),
                Outcome::IdleCpu
            );
            assert_eq!(
                Outcome::of(D::Pending, Pass::Zero, h, (false, false)),
                Outcome::Other
            );
            assert_eq!(
                Outcome::of(D::NotWakeup, Pass::Zero, h, (false, false)),
                Outcome::Other
            );
        }
        for d in DECISIONS {
            for h in HOLDERS {
                for p in [Pass::One, Pass::Two, Pass::ThreePlus] {
                    assert_eq!(Outcome::of(d, p, h, (false, false)), Outcome::PassedOver);
                }
                assert_eq!(
                    Outcome::of(d, Pass::Migrated, h, (false, false)),
                    Outcome::Other
                );
                assert_eq!(
                    Outcome::of(d, Pass::Unknown, h, (false, false)),
                    Outcome::Other
                );
            }
        }
        for d in DECISIONS {
            for p in PASSES {
                for h in HOLDERS {
                    for (spent, preempted) in
                        [(false, false), (true, false), (false, true), (true, true)]
                    {
                        assert_eq!(
                            Outcome::of_indices(
                                d as u64,
                                p as u64,
                                h as u64,
                                (spent as u64, preempted as u64)
                            ),
                            Outcome::of(d, p, h, (spent, preempted)) as u64,
                            "{d:?} {p:?} {h:?} {spent} {preempted}"
                        );
                    }
                }
            }
        }
        // Each class has an index of its own, below the key's slots.
        for (i, o) in OUTCOMES.iter().enumerate() {
            assert_eq!(Outcome::from_index(*o as u64), Some(*o));
            assert!((*o as usize) < NR_OUTCOMES);
            assert!(OUTCOMES[..i].iter().all(|p| p != o));
        }
        assert!(DECLINED.iter().all(|d| d.declined()));
        assert_eq!(
            DECISIONS.iter().filter(|d| d.declined()).count(),
            DECLINED.len()
        );
    }

    /// The fields the kernel records for a wait (sched_wakeup's need-resched
    /// and slice test, the switch-in's pass-over count and holder), as the
    /// switch-in packs them, and the class each gets.
    #[test]
    fn recorded_waits_get_their_class() {
        let class = |decision: Decision, passes: u64, holder: HolderLeft| {
            let d = Decided(Decided::pack(
                (decision as u64, Pass::of(passes) as u64, holder as u64),
                0,
                0,
                passes,
            ));
            d.outcome().unwrap()
        };
        // The seed case's slow wait: need-resched set at the wakeup, no
        // switch until the tick, the loop left with its deadline renewed.
        assert_eq!(
            class(Decision::Requested, 0, HolderLeft::SliceEnded),
            Outcome::Late
        );
        // The prompt answer: the loop switched out mid-slice.
        assert_eq!(
            class(Decision::Requested, 0, HolderLeft::Preempted),
            Outcome::Granted
        );
        // The wakeup's own enqueue renewed the slice: the switch finds it
        // renewed, and it was the request's.
        assert_eq!(
            class(Decision::SliceEnded, 0, HolderLeft::SliceEnded),
            Outcome::Granted
        );
        // A holder that blocked or yielded after the wakeup.
        assert_eq!(
            class(Decision::Requested, 0, HolderLeft::Blocked),
            Outcome::Granted
        );
        // Pending and lazy bits keep their classes whatever the holder.
        assert_eq!(
            class(Decision::Pending, 0, HolderLeft::SliceEnded),
            Outcome::Other
        );
        assert_eq!(
            class(Decision::Lazy, 0, HolderLeft::SliceEnded),
            Outcome::Granted
        );
        // Others ran first: passed over, however the last holder left.
        assert_eq!(
            class(Decision::Requested, 1, HolderLeft::SliceEnded),
            Outcome::PassedOver
        );
        assert_eq!(
            class(Decision::Protected, 0, HolderLeft::SliceEnded),
            Outcome::Declined
        );
        // The wakeup found the holder's slice used up but not accounted
        // (another task group), or woke a real-time task: the switch's
        // update renews the slice however soon it comes.
        let spent = Decided(Decided::pack(
            (
                REQUESTED_SPENT,
                Pass::Zero as u64,
                HolderLeft::SliceEnded as u64,
            ),
            0,
            0,
            0,
        ));
        assert_eq!(spent.decision(), Some(Decision::Requested));
        assert_eq!(spent.spent(), 1);
        assert_eq!(spent.outcome(), Some(Outcome::Granted));
        let w = EnqueueWord(EnqueueWord::plain(REQUESTED_SPENT, 7));
        assert_eq!((w.decision(), w.spent()), (Decision::Requested as u64, 1));
        assert_eq!((w.share(), w.predicted_us()), (0, 0));
        let w = EnqueueWord(EnqueueWord::plain(Decision::Requested as u64, 7));
        assert_eq!(w.spent(), 0);
    }

    #[test]
    fn pass_classes_cap_at_three() {
        assert_eq!(Pass::of(0), Pass::Zero);
        assert_eq!(Pass::of(2), Pass::Two);
        assert_eq!(Pass::of(3), Pass::ThreePlus);
        assert_eq!(Pass::of(400), Pass::ThreePlus);
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
        assert!(!slice_renewed(1, 1024, 0));
    }

    #[test]
    fn a_slice_is_spent_once_the_unaccounted_run_reaches_the_deadline() {
        // 300 us of virtual time left at the last update, nice 0.
        assert!(!slice_spent(300_000, 0, 1024));
        assert!(!slice_spent(300_000, 299_000, 1024));
        assert!(slice_spent(300_000, 300_000, 1024));
        assert!(slice_spent(300_000, 2_600_000, 1024));
        // Nice -5 (3121): 300 virtual us take about 914 us.
        assert!(!slice_spent(300_000, 900_000, 3121));
        assert!(slice_spent(300_000, 920_000, 3121));
        // Behind its deadline, not renewed yet.
        assert!(slice_spent(-5, 0, 1024));
        // A clock read before the update: nothing run since.
        assert!(!slice_spent(300_000, -10, 1024));
        assert!(!slice_spent(300_000, 1, 0));
    }

    #[test]
    fn virtual_time_converts_by_weight() {
        // A nice-0 task runs 1 ms for 1 ms of vruntime; a weight-3121
        // (nice -5) task runs 3x longer per virtual ns.
        assert_eq!(virtual_to_ns(1_000_000, 1024), 1_000_000);
        assert_eq!(virtual_to_ns(1_000_000, 3121), 3_047_851);
        assert_eq!(virtual_to_ns(-5, 1024), 0);
        assert_eq!(virtual_to_ns(0, 1024), 0);
        assert_eq!(virtual_to_ns(i64::MIN, 1024), 0);
        assert_eq!(virtual_to_ns(i64::MAX, 1024), MAX_VIRTUAL);
        assert_eq!(virtual_to_ns(1024, u64::MAX), MAX_WEIGHT);
    }

    #[test]
    fn shares_are_weight_over_the_queue() {
        // The worker beside three loops, all nice 0: a quarter.
        assert_eq!(share_permille(1024, 4096), 250);
        // Reniced to -8 (weight 6100) beside three nice-0 loops.
        assert_eq!(share_permille(6100, 6100 + 3 * 1024), 665);
        assert_eq!(share_permille(1024, 0), 0);
        assert_eq!(share_permille(5000, 1024), 1000);
    }
}
