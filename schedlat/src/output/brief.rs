//! The default report under runqlat's table: at most six sentences a
//! runqlat user reads without the docs, each with its unit (README.md,
//! "What each line means"): what the waits were like, their shape, the
//! main cause, what the scheduler decided, the design bound, the verdict.
//! `-v` adds the full split tables (text.rs); `--json` is unchanged.

use std::fmt::Write as _;

use schedlat_common::decision::Outcome;

use super::{Report, verdict::Design};
use crate::{
    analysis::{
        causes::{Causes, DEPTH_LABELS, share},
        fmt_ns,
        shape::{MIN_WAITS, Shape, Verdict, slow_waits},
    },
    histogram::Waits,
    sys::sched_context::SchedContext,
};

/// Every term the lines below use that a runqlat user may not know;
/// README.md's "What each line means" defines each (a test holds the two
/// together).
#[cfg(test)]
pub(crate) const TERMS: [&str; 17] = [
    "base slice",
    "tick",
    "passed over",
    "protected slice",
    "design bound",
    "preempted",
    "next switch",
    "EEVDF",
    "RUN_TO_PARITY",
    "deadline",
    "eligible",
    "fair share",
    "fair sharing",
    "pid_max",
    "steal",
    "quota",
    "sched_ext",
];

/// The sentences, one a line.
pub(crate) fn text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", waits_line(report));
    if report.waits.count() == 0 {
        return out;
    }
    let _ = writeln!(out, "{}", shape_line(&report.shape));
    if let Some(causes) = super::causes::of(report.waits)
        && let Some(line) = cause_line(&causes)
    {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = scheduler_line(report.waits) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(kernel) = report.kernel {
        let (bound, verdict) = bound_lines(kernel, report.waits);
        let _ = writeln!(out, "{bound}");
        if let Some(v) = verdict {
            let _ = writeln!(out, "{v}");
        }
    }
    out
}

/// `Waits: 4789 in 5.0 s, mean 9.81 ms; half under 2.21 ms, 99% under
/// 44.9 ms, the longest 76.1 ms.`
fn waits_line(report: &Report) -> String {
    let w = report.waits;
    let secs = report.interval.as_secs_f64();
    let mut line = format!("Waits: {} in {secs:.1} s", w.count());
    match (w.mean_ns(), &report.percentiles) {
        (Some(mean), Some(p)) => {
            let _ = write!(
                line,
                ", mean {}; half were under {}, 99% under {}",
                fmt_ns(mean as u64),
                fmt_ns(p.p50_ns),
                fmt_ns(p.p99_ns)
            );
            if let Some(max) = p.max_ns {
                let _ = write!(line, ", the longest {}", fmt_ns(max));
            }
        }
        _ => line.push_str(": no task waited for a CPU"),
    }
    let lost = w.untracked_tid + w.discarded_negative;
    if lost > 0 {
        let _ = write!(
            line,
            " ({lost} more not counted: a thread ID over pid_max, or clock skew between CPUs)"
        );
    }
    line.push('.');
    line
}

/// The shape in words (docs/shape.md has the rules).
fn shape_line(shape: &Shape) -> String {
    let e = &shape.evidence;
    let half = fmt_ns(e.slice_ns / 2);
    let p50 = e.p50_ns.map_or("-".into(), fmt_ns);
    let tail = e.tail_ns.map_or("-".into(), fmt_ns);
    let (in_n, tail_pct) = if e.tail_label == "p99.9" {
        ("1 in 1000", "99.9%")
    } else {
        ("1 in 100", "99%")
    };
    let slow_pct = e.slow_share * 100.0;
    match shape.verdict {
        Verdict::InsufficientData => format!(
            "Shape: too few waits to judge ({}; it takes {MIN_WAITS}).",
            e.count
        ),
        Verdict::Healthy if e.tail_ns.is_some_and(|t| t < e.slice_ns / 2) => format!(
            "Shape: healthy: {tail_pct} of the waits were under {tail}, less than half a base slice ({half})."
        ),
        Verdict::Healthy => format!(
            "Shape: healthy but for {} isolated waits of half a base slice ({half}) or more, the longest {}.",
            e.slow_count,
            e.max_ns.map_or("-".into(), fmt_ns)
        ),
        Verdict::LongTail => format!(
            "Shape: long tail: half the waits were under {p50}, but {in_n} took {tail} or more; {slow_pct:.1}% lasted half a base slice ({half}) or more."
        ),
        Verdict::ShiftedMean => format!(
            "Shape: slow throughout: half the waits took {p50} or more, over a quarter of a base slice ({}), so the typical wait is slow, not only the tail.",
            fmt_ns(e.slice_ns / 4)
        ),
        Verdict::Bimodal => match e.modes_ns {
            Some((fast, slow)) => format!(
                "Shape: two groups: waits around {} and around {}, few between; {slow_pct:.1}% in the slow group.",
                fmt_ns(fast),
                fmt_ns(slow)
            ),
            None => format!("Shape: two groups of waits; {slow_pct:.1}% in the slow group."),
        },
    }
}

/// The class of wait that took most of the wait time, and the queue.
fn cause_line(c: &Causes) -> Option<String> {
    let (waits, time) = (c.waits(), c.wait_ns());
    if waits == 0 {
        return None;
    }
    let classes = [
        (
            "tasks preempted while still running, waiting for their next turn",
            &c.preempted,
        ),
        ("tasks woken from sleep, waiting for a CPU", &c.woken),
        ("new tasks waiting for their first run", &c.new),
    ];
    let (what, class) = classes.iter().max_by_key(|(_, s)| s.sum_ns)?;
    let mut line = format!(
        "Cause: {} of the wait time was {what} ({} of the waits)",
        pct(share(class.sum_ns, time)),
        pct(share(class.count, waits))
    );
    let depth = c.queue_depth[..6]
        .iter()
        .zip(DEPTH_LABELS)
        .max_by_key(|(d, _)| d.count)
        .filter(|(d, _)| d.count > 0);
    if let Some((d, label)) = depth {
        // "1 other task was", "0 other tasks were", "3-4 other tasks were".
        let (tasks, were) = if label == "1" {
            ("task", "was")
        } else {
            ("tasks", "were")
        };
        let _ = write!(
            line,
            "; most often {label} other {tasks} {were} queued ahead ({} of the waits)",
            pct(share(d.count, waits))
        );
    }
    let o = &c.overlap;
    for (ns, what) in [
        (o.throttled_ns, "CPU quota throttling"),
        (o.steal_ns, "the hypervisor's steal time"),
    ] {
        if let Some(s) = o.share(ns).filter(|&s| s >= 0.05) {
            let _ = write!(line, "; {} of it overlapped {what}", pct(s));
        }
    }
    line.push('.');
    Some(line)
}

/// What the scheduler decided about the slow waits (and how many ran at
/// once), in words.
fn scheduler_line(waits: &Waits) -> Option<String> {
    let d = waits.decision.as_ref()?.marginals();
    let total = d.waits();
    if total == 0 {
        return None;
    }
    let granted = pct(share(d.outcome(Outcome::Granted), total));
    let slow = d.slow();
    if slow == 0 {
        return Some(format!(
            "Scheduler: no wait reached 1 ms; {granted} of the waits asked for the CPU and ran at the next switch."
        ));
    }
    let mut outcomes: Vec<(Outcome, u64)> = schedlat_common::decision::OUTCOMES
        .iter()
        .map(|&o| (o, d.outcome_slow(o)))
        .filter(|&(_, n)| n * 10 >= slow)
        .collect();
    outcomes.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let said: Vec<String> = outcomes
        .iter()
        .take(2)
        .map(|&(o, n)| format!("{} {}", pct(share(n, slow)), outcome_words(o)))
        .collect();
    Some(format!(
        "Scheduler: of the {slow} waits over 1 ms, {}; {granted} of all waits asked for the CPU and ran at the next switch.",
        said.join(" and ")
    ))
}

/// An outcome as the rest of a sentence.
fn outcome_words(o: Outcome) -> &'static str {
    match o.name() {
        "granted" => "asked for the CPU and ran at the next switch",
        "late" => "asked for the CPU but ran only after the tick ended the running task's slice",
        "declined" => "were not let preempt the running task (its protected slice, or a rule)",
        "passed_over" => "were passed over (other tasks were picked first)",
        "idle_cpu" => "woke onto an idle CPU",
        _ => "were preempted tasks waiting for their turn, or not classified",
    }
}

/// The design bound with the waits beyond it, and the verdict.
fn bound_lines(kernel: &SchedContext, waits: &Waits) -> (String, Option<String>) {
    // Asked first: EEVDF's bound, known or not, says nothing of the waits
    // a sched_ext scheduler decided.
    if let Some(ext) = super::verdict::decided_by_ext(kernel, waits) {
        return (
            "Design bound: EEVDF's does not apply to the waits a sched_ext scheduler decided."
                .into(),
            Some(format!("Verdict: {ext}.")),
        );
    }
    let Some(bound) = kernel.design_bound_ns() else {
        let why = kernel
            .base_slice
            .not_live
            .clone()
            .unwrap_or_else(|| "HZ could not be read".into());
        return (
            format!("Design bound: unknown ({why}), so no wait is judged against it."),
            None,
        );
    };
    let total = waits.count();
    let beyond = slow_waits(waits, bound);
    let tick = kernel.tick_ns().unwrap_or(bound - kernel.base_slice.ns);
    let longer = if beyond == 0 {
        "no wait took longer".to_string()
    } else {
        format!(
            "{beyond} of {total} waits ({}) took longer",
            pct(share(beyond, total))
        )
    };
    let line = format!(
        "Design bound: a woken task picked next waits at most one base slice ({}) plus one tick ({}), {} here; {longer}.",
        fmt_ns(kernel.base_slice.ns),
        fmt_ns(tick),
        fmt_ns(bound)
    );
    let verdict = Design::of(waits, bound, beyond).map(|d| {
        let class = d.behind_another_class(kernel).map(|s| format!("; {s}"));
        format!("Verdict: {}{}.", d.sentence(), class.unwrap_or_default())
    });
    (line, verdict)
}

/// A share as a percentage: one decimal below 10%, none above.
fn pct(s: f64) -> String {
    let p = s * 100.0;
    if p == 0.0 {
        "0%".into()
    } else if p < 0.1 {
        "<0.1%".into()
    } else if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analysis::shape::tests::waits, sys::slice::Slice};

    /// This project's VM with every feature read (none unknown).
    fn vm() -> SchedContext {
        SchedContext {
            features: vec![],
            features_unknown: None,
            ..SchedContext::this_vm()
        }
    }

    /// README.md's "What each line means", to the next section.
    fn readme_meanings() -> String {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("### What each line means")
            .expect("README has \"What each line means\"");
        let rest = &readme[start..];
        let end = rest[4..].find("\n## ").map_or(rest.len(), |e| e + 4);
        rest[..end].to_lowercase()
    }

    /// Issue 45: no sentence of the default depends on a term README's
    /// "What each line means" does not define: every term of TERMS is
    /// there, and every scheduler term the sentences can print (each
    /// rule and outcome in words included) is one of TERMS.
    #[test]
    fn every_term_the_sentences_use_is_defined_in_the_readme() {
        let meanings = readme_meanings();
        for term in TERMS {
            assert!(
                meanings.contains(&term.to_lowercase()),
                "README's \"What each line means\" does not define `{term}`"
            );
        }
        // What the sentences can say: the fixtures' lines, every rule and
        // every outcome in words.
        let mut said = String::new();
        for groups in [
            &[(10_000, 686), (3_000_000, 500), (8_000_000, 400)][..],
            &[(5_000, 3_000)],
            &[(5_000, 50)],
        ] {
            let w = waits(groups);
            let slice = Slice::fixed(1_400_000, "se.slice in /proc/self/sched");
            let ctx = vm();
            let mut report = Report::new(
                crate::kernel::hook::HookMode::Btf,
                crate::histogram::Unit::Usecs,
                &w,
                &slice,
                std::time::Duration::from_secs(5),
                true,
            );
            report.kernel = Some(&ctx);
            said.push_str(&text(&report));
        }
        for o in schedlat_common::decision::OUTCOMES {
            said.push_str(outcome_words(o));
        }
        for rule in [
            super::super::verdict::Rule::Granted,
            super::super::verdict::Rule::Late,
            super::super::verdict::Rule::LateLazy,
            super::super::verdict::Rule::PassedOver,
        ]
        .into_iter()
        .chain(
            schedlat_common::decision::DECLINED
                .iter()
                .map(|&d| super::super::verdict::Rule::Declined(d)),
        ) {
            said.push_str(super::super::verdict::rule_words(rule));
        }
        let said = said.to_lowercase();
        // The scheduler's vocabulary the sentences could reach for; any
        // of it they use must be defined.
        const JARGON: [&str; 24] = [
            "slice",
            "tick",
            "passed over",
            "protected",
            "bound",
            "preempt",
            "switch",
            "eevdf",
            "run_to_parity",
            "deadline",
            "eligible",
            "fair share",
            "fair sharing",
            "pid_max",
            "steal",
            "quota",
            "lag",
            "vruntime",
            "cfs",
            "need_resched",
            "granted",
            "declined",
            "holder",
            "sched_",
        ];
        for word in JARGON {
            if said.contains(word) {
                assert!(
                    TERMS.iter().any(|t| t.to_lowercase().contains(word))
                        && meanings.contains(word),
                    "the sentences use `{word}`, which README's \"What each line means\" does not define"
                );
            }
        }
    }

    /// Waits a sched_ext scheduler decided: the bound line says EEVDF's
    /// does not apply and the verdict names the scheduler, also where the
    /// bound is unknown (no live slice), which used to silence it.
    #[test]
    fn a_sched_ext_verdict_replaces_the_eevdf_bound_known_or_not() {
        use schedlat_common::decision::{Decision, HolderLeft, Pass};

        use crate::{
            histogram::{DecisionCounts, DecisionFacts, decision_fixtures},
            sys::sched_mechanisms::SchedExt,
        };
        let mut w = waits(&[(9_000_000, 300)]);
        let split = decision_fixtures::stats(&[decision_fixtures::waits(
            300,
            9_000_000,
            Decision::Ext,
            Pass::Zero,
            HolderLeft::Preempted,
        )]);
        w.decision = Some(DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[split]));
        let mut known = vm();
        known.mechanisms.sched_ext = Some(SchedExt::attached("simple"));
        let mut unknown = known.clone();
        unknown.base_slice.not_live = Some("no debugfs".into());
        for kernel in [&known, &unknown] {
            let (bound, verdict) = bound_lines(kernel, &w);
            assert_eq!(
                bound,
                "Design bound: EEVDF's does not apply to the waits a sched_ext scheduler decided."
            );
            let verdict = verdict.expect("a verdict");
            assert!(
                verdict.starts_with(
                    "Verdict: 300 of 300 waits were decided by the sched_ext scheduler simple"
                ),
                "{verdict}"
            );
        }
    }

    #[test]
    fn at_most_six_sentences_each_with_its_unit() {
        let w = waits(&[(10_000, 686), (3_000_000, 500), (8_000_000, 400)]);
        let slice = Slice::fixed(1_400_000, "se.slice in /proc/self/sched");
        let ctx = vm();
        let mut report = Report::new(
            crate::kernel::hook::HookMode::Btf,
            crate::histogram::Unit::Usecs,
            &w,
            &slice,
            std::time::Duration::from_secs(5),
            true,
        );
        report.kernel = Some(&ctx);
        let out = text(&report);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() <= 6, "{out}");
        assert!(lines[0].starts_with("Waits: 1586 in 5.0 s, mean "), "{out}");
        assert!(lines[1].starts_with("Shape: "), "{out}");
        assert!(
            out.contains("Design bound: a woken task picked next waits at most one base slice (1.40 ms) plus one tick (4.00 ms), 5.40 ms here; 400 of 1586 waits (25%) took longer."),
            "{out}"
        );
        for line in &lines {
            assert!(line.ends_with('.'), "not a sentence: {line}");
        }
    }
}
