//! The decision split's class names as the JSON `decision` object spells
//! them (docs/json.md), for the tests that add its counts up.

/// The rules that decline a wakeup (a wait not asked for): the fair
/// class's, and `ext` (a sched_ext scheduler decided). Their counts sum to
/// the `not asked` waits.
pub(crate) const DECLINED_RULES: [&str; 8] = [
    "not_eligible",
    "later_deadline",
    "protected",
    "policy_gate",
    "other_class",
    "wakeup_granularity",
    "rule_unknown",
    "ext",
];

/// How the holder left the CPU: the classes partition the waits.
pub(crate) const HOLDERS: [&str; 6] = [
    "blocked",
    "preempted",
    "slice_ended",
    "exited",
    "yielded",
    "idle",
];
