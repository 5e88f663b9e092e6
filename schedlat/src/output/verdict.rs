//! The verdict in words (docs/guide.md, docs/decision.md): are these waits
//! what EEVDF's design allows, one base slice plus one tick for a woken
//! task picked next, and which rule made the slow ones; when not, how many
//! exceed it and what to attach to a report. Said by the default's short
//! report, the `decision:` block of `-v` and diagnose.

use schedlat_common::decision::{DECLINED, Decision, Outcome};

use crate::{
    analysis::fmt_ns,
    histogram::{DecisionCounts, Waits},
    sys::sched_context::SchedContext,
};

/// DecisionFacts::fair of an EEVDF kernel (6.6+).
const FAIR_EEVDF: u64 = 1;

/// Waits of 1 ms or more: the slow waits whose rule is named.
const SLOW_NS: u64 = 1_000_000;

/// At most this share of waits (per mille) may be beyond the bound, and
/// not passed over, for the waits as a whole to be called the design: the
/// few beyond it are then named apart, not hidden.
const STRAY_PER_MILLE: u64 = 1;

/// What made the slow waits of a run, in the scheduler's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Every wakeup that asked ran at the next switch.
    Granted,
    /// The wakeup asked, the holder was picked again and kept the CPU
    /// until the tick ended its slice.
    Late,
    /// The same outcome where most requests were lazy (preempt=lazy): the
    /// holder ran in the kernel, where a lazy request waits for the tick
    /// or the end of the holder's slice.
    LateLazy,
    /// A rule declined the wakeup (the most frequent declining rule).
    Declined(Decision),
    /// Other tasks were picked first.
    PassedOver,
}

/// A run's waits against the design bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Design {
    pub bound_ns: u64,
    pub total: u64,
    /// Waits longer than the bound, and of them those passed over for
    /// other tasks first (more runnable tasks than CPU: fair sharing).
    pub beyond: u64,
    pub beyond_passed_over: u64,
    pub rule: Rule,
    /// Slow waits (1 ms or more) that were late, and declined by a
    /// protected slice: the two rules one reproduction shows by turns.
    pub late_slow: u64,
    pub protected_slow: u64,
    /// Waits of 1 ms or more, of any outcome.
    pub slow: u64,
    /// Long waits were declined because another class held the CPU
    /// ([`behind_another_class`]).
    pub behind_another_class: bool,
}

impl Design {
    /// The verdict of `waits` against `bound_ns`, where the decision split
    /// measured them on an EEVDF kernel; None otherwise (no rule to name,
    /// or CFS, whose rules set no slice to bound a wait by).
    pub(crate) fn of(waits: &Waits, bound_ns: u64, beyond: u64) -> Option<Design> {
        let d = waits.decision.as_ref()?;
        if d.facts.fair != FAIR_EEVDF || waits.count() == 0 {
            return None;
        }
        Some(Design {
            bound_ns,
            total: waits.count(),
            beyond,
            beyond_passed_over: if sharing_explains(d, bound_ns) {
                d.outcome_between(Outcome::PassedOver, bound_ns, u64::MAX)
                    .min(beyond)
            } else {
                0
            },
            rule: rule_of(d),
            late_slow: d.outcome_between(Outcome::Late, SLOW_NS, u64::MAX),
            protected_slow: protected_slow(d),
            behind_another_class: behind_another_class(d, bound_ns),
            slow: d.all_between(SLOW_NS, u64::MAX),
        })
    }

    /// Waits beyond the bound that were not passed over: what the design
    /// does not explain.
    pub(crate) fn unexplained(&self) -> u64 {
        self.beyond - self.beyond_passed_over
    }

    /// Whether the waits, as a whole, are the design.
    pub(crate) fn is_design(&self) -> bool {
        self.unexplained() * 1000 <= self.total * STRAY_PER_MILLE
    }

    /// The verdict as one sentence, without a label.
    pub(crate) fn sentence(&self) -> String {
        let bound = fmt_ns(self.bound_ns);
        let unexplained = self.unexplained();
        if self.slow == 0 && self.beyond == 0 {
            // No rule kept anyone out for long: naming one would read as a
            // cause (an idle machine's few microseconds are "passed over"
            // by the waker's own run, not by a deadline).
            return format!(
                "no wait reached 1 ms: every wait is within the design bound of one base slice plus one tick ({bound} here), nothing the scheduler has to answer for"
            );
        }
        if self.is_design() {
            let within = if self.beyond == 0 {
                "every wait is".to_string()
            } else {
                format!("all but {} of {} waits are", self.beyond, self.total)
            };
            let mut s = format!(
                "these waits are EEVDF's design ({}), not a scheduler bug: {within} within the design bound of one base slice plus one tick ({bound} here)",
                rule_words(self.rule)
            );
            let (one, many) = (" longer one was", " longer ones were");
            if self.beyond_passed_over > 0 {
                let n = self.beyond_passed_over;
                s.push_str(&format!(
                    "; {n}{} passed over for other tasks first (fair sharing)",
                    if n == 1 { one } else { many }
                ));
            }
            if unexplained > 0 {
                s.push_str(&format!(
                    "; {unexplained}{} not, and worth a look: `schedlat slow --threshold {}` names {}",
                    if unexplained == 1 { one } else { many },
                    threshold_arg(self.bound_ns),
                    if unexplained == 1 { "it" } else { "them" }
                ));
            }
            return s;
        }
        let mut s = format!(
            "{unexplained} waits exceed what the design allows (one base slice plus one tick, {bound} here, and not passed over for other tasks): that is worth reporting"
        );
        s.push_str(&format!(
            "; attach this run's `--json` (the kernel's context and the decision split), `schedlat slow --threshold {} --json` (each such wait with its holder) and `schedlat check --json`",
            threshold_arg(self.bound_ns)
        ));
        if self.beyond_passed_over > 0 {
            s.push_str(&format!(
                "; {} more beyond it were passed over for other tasks (fair sharing, not a bug)",
                self.beyond_passed_over
            ));
        }
        s
    }

    /// When another class declined long waits (the rule of most slow
    /// waits or not: a FIFO hog's sleeper had 2 such among its others):
    /// what lets a fair task run beside it on this kernel, and how long
    /// that makes such a wait.
    pub(crate) fn behind_another_class(&self, kernel: &SchedContext) -> Option<String> {
        (self.rule == Rule::Declined(Decision::OtherClass) || self.behind_another_class).then(
            || {
                format!(
                    "a real-time or deadline task held the CPU, and {}",
                    kernel.mechanisms.behind_another_class()
                )
            },
        )
    }

    /// Why one reproduction names `late` in one run and `protected` in the
    /// next, and the remedy of each; None unless the slow waits had one of
    /// the two.
    pub(crate) fn late_or_protected(&self) -> Option<String> {
        if self.late_slow == 0 && self.protected_slow == 0 {
            return None;
        }
        Some(format!(
            "late ({} slow waits) or protected ({}): both are the design, and a run of the same load may show either: a wakeup that lands while the running task is eligible and inside its protected slice is declined (protected, RUN_TO_PARITY); one that asks, just after a tick switched the holder in, can see the holder picked again until the next tick (late), which was seen more often with the other CPUs busy. Remedies: for protected, a shorter custom slice for the waiter (sched_setattr sched_runtime, 6.12+) or NO_RUN_TO_PARITY; for late, SCHED_FIFO/RR for the waiter (`chrt -f -p 1 PID`)",
            self.late_slow, self.protected_slow
        ))
    }
}

/// When a sched_ext scheduler decided the waits (6.12+): EEVDF's rules and
/// its design bound say nothing of them, so no EEVDF verdict is given; the
/// sentence says who decided instead. A scheduler that manages every task
/// but the real-time ones (`switch_all`) decided every fair wait, those
/// that woke onto an idle CPU its `select_cpu` chose included; one that
/// manages only the tasks that chose SCHED_EXT leaves the others' waits
/// EEVDF's, so then only the split's `ext` waits say so. None otherwise.
pub(crate) fn decided_by_ext(kernel: &SchedContext, waits: &Waits) -> Option<String> {
    let ext = kernel.mechanisms.sched_ext.as_ref();
    let attached = ext.and_then(|e| e.running());
    let name = attached.map_or("a sched_ext scheduler".to_string(), |n| {
        format!("the sched_ext scheduler {n}")
    });
    let decided = waits.decision.as_ref().map(|d| d.decided(Decision::Ext));
    if let Some(n) = decided.filter(|&n| n > 0) {
        return Some(format!(
            "{n} of {} waits were decided by {name} (its dispatch queues, not EEVDF's rules): EEVDF's design bound does not apply to them; the scheduler's own events and statistics say why they waited",
            waits.count()
        ));
    }
    attached?;
    if ext.and_then(|e| e.switch_all) == Some(true) {
        return Some(format!(
            "the waits were decided by {name}, which manages every task but the real-time and deadline ones (switch_all): EEVDF's design bound does not apply to them"
        ));
    }
    decided.is_none().then(|| {
        format!(
            "{name} is attached: the waits of the tasks it manages were decided by it, not by EEVDF (the decision split, off in this run, tells them apart)"
        )
    })
}

/// Whether fair sharing explains the passed-over waits: each pass-over is
/// another task's turn, at most one bound long, so the passed-over waits
/// together last no longer than one bound per pass-over plus one per wait.
/// A SCHED_FIFO hog until RT bandwidth throttled it left a sleeper waiting
/// 950 ms with two fair tasks ahead, which this refuses; six loops and
/// other builds on the CPU (260 ms waits behind 50 pass-overs) pass it.
fn sharing_explains(d: &DecisionCounts, bound_ns: u64) -> bool {
    let waits = d.outcome_between(Outcome::PassedOver, 0, u64::MAX);
    let time = d.outcome_sum_ns[Outcome::PassedOver as usize];
    time <= (d.passes + waits).saturating_mul(bound_ns)
}

/// `5400us`, as `slow --threshold` takes it.
fn threshold_arg(ns: u64) -> String {
    format!("{}us", ns / 1000)
}

/// Slow waits declined by a protected slice: the declined outcome's slow
/// waits, in proportion of the declines that were `protected`.
fn protected_slow(d: &DecisionCounts) -> u64 {
    let declined: u64 = DECLINED.iter().map(|&c| d.decided(c)).sum();
    if declined == 0 {
        return 0;
    }
    let slow = d.outcome_between(Outcome::Declined, SLOW_NS, u64::MAX);
    slow * d.decided(Decision::Protected) / declined
}

/// Whether waits declined because another class held the CPU were long:
/// at least one bound of them in all, 1 ms each on average (a real-time
/// kernel thread's brief turns are microseconds; a FIFO hog's victim
/// waited 950 ms twice among thousands of short waits).
fn behind_another_class(d: &DecisionCounts, bound_ns: u64) -> bool {
    let (n, ns) = (
        d.decided(Decision::OtherClass),
        d.decided_ns(Decision::OtherClass),
    );
    n > 0 && ns >= bound_ns && ns / n >= SLOW_NS
}

/// The outcome of most slow waits (of all waits when none was slow), the
/// declines by their most frequent rule.
fn rule_of(d: &DecisionCounts) -> Rule {
    let slow = |o| d.outcome_between(o, SLOW_NS, u64::MAX);
    let any_slow = d.all_between(SLOW_NS, u64::MAX) > 0;
    let weight = |o| {
        if any_slow {
            slow(o)
        } else {
            d.outcome_between(o, 0, u64::MAX)
        }
    };
    let candidates = [
        (Rule::Late, weight(Outcome::Late)),
        (Rule::PassedOver, weight(Outcome::PassedOver)),
        (
            Rule::Declined(Decision::Protected),
            weight(Outcome::Declined),
        ),
        (Rule::Granted, weight(Outcome::Granted)),
    ];
    let (rule, n) = candidates
        .iter()
        .copied()
        .max_by_key(|&(_, n)| n)
        .unwrap_or((Rule::Granted, 0));
    if n == 0 {
        return Rule::Granted;
    }
    match rule {
        Rule::Late if d.mostly_lazy() => Rule::LateLazy,
        Rule::Declined(_) => {
            let top = DECLINED
                .iter()
                .copied()
                .max_by_key(|&c| d.decided(c))
                .unwrap_or(Decision::Protected);
            Rule::Declined(top)
        }
        other => other,
    }
}

/// The rule in a reader's words.
pub(crate) fn rule_words(rule: Rule) -> &'static str {
    match rule {
        Rule::Granted => "each woken task ran at the next switch",
        Rule::Late => {
            "a re-pick at the tick: the running task was picked again and kept the CPU until the tick ended its slice"
        }
        Rule::LateLazy => {
            "lazy requests the running task kept waiting in the kernel: a lazy request is served at its return to user space, or by the tick or the end of its slice"
        }
        Rule::PassedOver => "tasks with earlier deadlines were picked first",
        Rule::Declined(Decision::Protected) => "the running task's protected slice (RUN_TO_PARITY)",
        Rule::Declined(Decision::LaterDeadline) => {
            "the woken task's deadline was later than the running task's"
        }
        Rule::Declined(Decision::NotEligible) => {
            "the woken task had run ahead of its fair share and was not eligible"
        }
        Rule::Declined(Decision::PolicyGate) => {
            "the woken task's policy (batch or idle) does not preempt"
        }
        Rule::Declined(Decision::OtherClass) => "a real-time task held the CPU",
        Rule::Declined(Decision::Ext) => "the sched_ext scheduler's dispatch queues",
        Rule::Declined(_) => "a fair-class rule kept the running task on the CPU",
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::decision::{HolderLeft, Pass};

    use super::*;
    use crate::histogram::{
        DecisionCounts, DecisionFacts,
        decision_fixtures::{self as fixtures, waits},
    };

    fn run(groups: &[fixtures::Group]) -> Waits {
        let mut s = fixtures::stats(groups);
        // Each group's pass-overs, at its class's least.
        s.passes = groups
            .iter()
            .map(|g| {
                g.n * match g.pass {
                    Pass::One => 1,
                    Pass::Two => 2,
                    Pass::ThreePlus => 3,
                    _ => 0,
                }
            })
            .sum();
        let shape: Vec<(u64, u64)> = groups.iter().map(|g| (g.each_ns, g.n)).collect();
        let mut w = crate::analysis::shape::tests::waits(&shape);
        w.decision = Some(DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[s]));
        w
    }

    /// The seed case with `--comm cyclictest`: prompt grants and slow
    /// protected declines, none beyond 5.4 ms.
    #[test]
    fn the_seed_case_is_the_design_with_its_bound() {
        let w = run(&[
            waits(
                900,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                40,
                3_500_000,
                Decision::Protected,
                Pass::Zero,
                HolderLeft::SliceEnded,
            ),
            waits(
                10,
                3_500_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::SliceEnded,
            ),
        ]);
        let d = Design::of(&w, 5_400_000, 0).unwrap();
        assert!(!d.behind_another_class);
        let s = d.sentence();
        assert!(
            s.starts_with("these waits are EEVDF's design (the running task's protected slice"),
            "{s}"
        );
        assert!(s.contains("not a scheduler bug: every wait is within the design bound of one base slice plus one tick (5.40 ms here)"), "{s}");
        let why = d.late_or_protected().unwrap();
        assert!(
            why.starts_with("late (10 slow waits) or protected (40)"),
            "{why}"
        );
    }

    /// An idle machine: microseconds, passed over by the waker's own run,
    /// none slow. No rule is named as if it had kept anyone out.
    #[test]
    fn short_waits_name_no_rule() {
        let w = run(&[
            waits(180, 16_000, Decision::Idle, Pass::One, HolderLeft::Idle),
            waits(
                20,
                9_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
        ]);
        let s = Design::of(&w, 5_400_000, 0).unwrap().sentence();
        assert_eq!(
            s,
            "no wait reached 1 ms: every wait is within the design bound of one base slice plus one tick (5.40 ms here), nothing the scheduler has to answer for"
        );
    }

    /// Late waits where most requests were lazy name the lazy request's
    /// wait for the tick, not a re-pick.
    #[test]
    fn late_waits_among_lazy_requests_name_the_holder_in_the_kernel() {
        let late = |lazy: u64| {
            let w = run(&[
                waits(
                    5,
                    2_000_000,
                    Decision::Requested,
                    Pass::Zero,
                    HolderLeft::SliceEnded,
                ),
                waits(
                    lazy,
                    20_000,
                    Decision::Lazy,
                    Pass::Zero,
                    HolderLeft::Preempted,
                ),
            ]);
            Design::of(&w, 5_400_000, 0).unwrap().rule
        };
        assert_eq!(late(0), Rule::Late);
        assert_eq!(late(50), Rule::LateLazy);
        assert!(
            rule_words(Rule::LateLazy)
                .contains("lazy requests the running task kept waiting in the kernel")
        );
    }

    /// A real-time hog throttled by RT bandwidth: the woken task waits
    /// most of a second, declined for another class, not passed over.
    #[test]
    fn waits_beyond_the_bound_not_passed_over_are_worth_reporting() {
        let w = run(&[
            waits(
                200,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Blocked,
            ),
            waits(
                5,
                900_000_000,
                Decision::OtherClass,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
        ]);
        let d = Design::of(&w, 5_400_000, 5).unwrap();
        assert!(!d.is_design());
        assert!(d.behind_another_class);
        let s = d.sentence();
        assert!(
            s.starts_with("5 waits exceed what the design allows"),
            "{s}"
        );
        assert!(s.contains("worth reporting"), "{s}");
        assert!(!s.contains("not a scheduler bug"), "{s}");
        assert!(s.contains("--threshold 5400us"), "{s}");
    }

    /// Six loops on one CPU: their waits exceed the bound but each was
    /// passed over: fair sharing, the design.
    #[test]
    fn waits_passed_over_beyond_the_bound_are_fair_sharing() {
        let w = run(&[
            waits(
                300,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Blocked,
            ),
            waits(
                100,
                8_000_000,
                Decision::NotWakeup,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            ),
        ]);
        let d = Design::of(&w, 5_400_000, 100).unwrap();
        assert_eq!(d.beyond_passed_over, 100);
        assert!(d.is_design());
        let s = d.sentence();
        assert!(s.contains("(tasks with earlier deadlines were picked first), not a scheduler bug: all but 100 of 400 waits are within the design bound"), "{s}");
        assert!(
            s.ends_with("; 100 longer ones were passed over for other tasks first (fair sharing)"),
            "{s}"
        );
    }

    /// Passed over, but far longer than the turns of the tasks ahead:
    /// something else held the CPU (the RT-throttled hog's case).
    #[test]
    fn waits_too_long_for_their_pass_overs_are_not_fair_sharing() {
        let w = run(&[
            waits(
                150,
                6_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Blocked,
            ),
            waits(
                4,
                950_000_000,
                Decision::Requested,
                Pass::Two,
                HolderLeft::Blocked,
            ),
        ]);
        let d = Design::of(&w, 5_400_000, 4).unwrap();
        assert_eq!(d.beyond_passed_over, 0);
        assert!(!d.is_design());
        assert!(d.sentence().contains("worth reporting"), "{}", d.sentence());
    }

    #[test]
    fn no_split_or_cfs_gives_no_verdict() {
        assert!(Design::of(&Waits::default(), 5_400_000, 0).is_none());
        let mut w = run(&[waits(
            10,
            6_000,
            Decision::Requested,
            Pass::Zero,
            HolderLeft::Blocked,
        )]);
        if let Some(d) = w.decision.as_mut() {
            d.facts.fair = 2;
        }
        assert!(Design::of(&w, 5_400_000, 0).is_none());
    }

    /// Waits a sched_ext scheduler decided get no EEVDF verdict: the
    /// sentence names the scheduler; without `ext` waits and with no
    /// scheduler attached, there is none (the EEVDF verdict stands).
    #[test]
    fn waits_a_sched_ext_scheduler_decided_name_it_not_eevdf() {
        use crate::sys::sched_mechanisms::SchedExt;
        let w = run(&[
            waits(
                300,
                9_000_000,
                Decision::Ext,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(20, 6_000, Decision::Idle, Pass::Zero, HolderLeft::Idle),
        ]);
        let mut kernel = SchedContext::this_vm();
        kernel.mechanisms.sched_ext = Some(SchedExt::attached("simple"));
        let s = decided_by_ext(&kernel, &w).unwrap();
        assert!(
            s.starts_with("300 of 320 waits were decided by the sched_ext scheduler simple (its dispatch queues, not EEVDF's rules)"),
            "{s}"
        );
        let fair = run(&[waits(
            300,
            9_000_000,
            Decision::Protected,
            Pass::Zero,
            HolderLeft::Preempted,
        )]);
        let detached = SchedContext::this_vm();
        assert_eq!(decided_by_ext(&detached, &fair), None);
        // Attached, but these waits were the fair class's (a scheduler
        // that manages only some tasks).
        assert_eq!(decided_by_ext(&kernel, &fair), None);
        // Split off: the scheduler is named without a count.
        let mut unsplit = fair.clone();
        unsplit.decision = None;
        let s = decided_by_ext(&kernel, &unsplit).unwrap();
        assert!(
            s.starts_with("the sched_ext scheduler simple is attached"),
            "{s}"
        );
        // Managing every fair task: even waits the split could not class
        // `ext` (onto an idle CPU) were its decisions.
        let idle = run(&[waits(
            15,
            200_000,
            Decision::Idle,
            Pass::Zero,
            HolderLeft::Idle,
        )]);
        if let Some(e) = kernel.mechanisms.sched_ext.as_mut() {
            e.switch_all = Some(true);
        }
        let s = decided_by_ext(&kernel, &idle).unwrap();
        assert!(
            s.starts_with(
                "the waits were decided by the sched_ext scheduler simple, which manages every task"
            ),
            "{s}"
        );
    }
}
