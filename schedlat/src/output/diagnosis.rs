//! `schedlat diagnose`'s report as a person reads it (numbered like the
//! method's steps, docs/architecture.md), or as one JSON object.

use std::fmt::Write as _;

use serde_json::json;

use crate::{
    analysis::{
        diagnosis::{
            causes,
            decision::ANOTHER_CLASS,
            priority::Attribution,
            selfcheck,
            traced::Traced,
            verdict::{self, Verdict},
            waiting::Waiting,
        },
        fmt_ns,
        holder::NamedHolder,
        hottest::Window,
        task,
        task::{IdleWait, TaskJson},
        victims::Row,
    },
    output,
    output::{causes::line as causes_line, escape, hottest, text},
    sys::{findings::Findings, scope::Scope},
};

/// Rows of the victims and culprits tables the report shows.
const TOP: usize = 5;

/// Everything the report shows.
pub(crate) struct DiagnoseReport<'a> {
    pub scope: &'a Scope,
    pub findings: &'a Findings,
    pub verdict: &'a Verdict,
    pub traced: Option<&'a Traced>,
    /// Why there is no eBPF part (no privileges).
    pub why_not_traced: Option<&'a str>,
}

pub(crate) fn text(d: &DiagnoseReport) -> String {
    let (f, traced, why_not_traced) = (d.findings, d.traced, d.why_not_traced);
    let Verdict {
        waiting,
        diagnoses: causes,
    } = d.verdict;
    let scope = d.scope;
    let mut out = format!(
        "schedlat diagnose: {}, {} window\n\n",
        escape::printable(&scope.describe()),
        fmt_ns(f.window_ns)
    );
    out.push_str("1. Was it runnable but waiting for a CPU?\n");
    // The evidence names tasks by the comm their owners chose: escaped here,
    // once, whatever the answer.
    let (evidence, answer) = match waiting {
        Waiting::Negligible { evidence } => (
            evidence.as_str(),
            Some(
                "-> no: waiting is negligible. This is not a scheduling problem: look at I/O wait, lock contention, or the work itself.",
            ),
        ),
        Waiting::Significant { evidence } => (
            evidence.as_str(),
            Some("-> yes: runnable-but-waiting time is significant."),
        ),
        Waiting::Short { evidence } => (
            evidence.as_str(),
            Some(
                "-> no: the waits add up to more than 1% of the window, but each is short (the histogram is healthy: its tail is under half a slice), so no task of the scope waits long enough to feel it. This is not a scheduling problem, and no cause is named.",
            ),
        ),
        Waiting::Unknown { reason } => (reason.as_str(), None),
    };
    match answer {
        Some(answer) => {
            let _ = writeln!(out, "   {}\n   {answer}", escape::printable(evidence));
        }
        None => {
            let _ = writeln!(out, "   unknown: {}", escape::printable(evidence));
        }
    }
    out.push_str("\n2. Run-queue latency over the window (eBPF)\n");
    match (traced, why_not_traced) {
        (Some(t), _) => {
            let _ = writeln!(out, "   {} waits, hook {}", t.waits.count(), t.hook);
            if let Some(p) = &t.percentiles {
                let _ = writeln!(
                    out,
                    "   {}, max {}",
                    text::quantiles(p),
                    p.max_ns.map_or("-".into(), fmt_ns)
                );
            }
            let _ = writeln!(out, "   shape: {}", t.shape.summary);
            let _ = writeln!(out, "   {}", causes_line::line(&t.waits));
            let decision = output::decision::text(&t.waits);
            // The verdict in words (design or not, and late or protected)
            // under the split it comes from; what lets a fair task run
            // behind another class once, in the finding when there is one.
            let class_said = causes.iter().any(|c| c.name == ANOTHER_CLASS);
            let (verdict, kernel) = t.kernel.as_ref().map_or_else(Default::default, |k| {
                (
                    output::decision::verdict_text(k, &t.waits, class_said),
                    output::kernel_context::text(k, &t.waits),
                )
            });
            for line in decision
                .lines()
                .chain(verdict.lines())
                .chain(kernel.lines())
            {
                let _ = writeln!(out, "   {line}");
            }
            let stacks = t.stacks.as_ref().and_then(|s| s.as_ref().ok());
            match &t.victims {
                Ok(a) => victims_text(&mut out, a, stacks),
                Err(why) => {
                    let _ = writeln!(out, "   victims and culprits: not measured: {why}");
                }
            }
            if let Some(s) = &t.stacks {
                let _ = writeln!(out, "   {}", hottest::summary(s));
            }
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "   {why}");
        }
        (None, None) => out.push_str("   not measured\n"),
    }
    out.push_str("\n3. Causes, strongest first\n");
    if causes.is_empty() {
        if matches!(waiting, Waiting::Significant { .. }) {
            let _ = writeln!(
                out,
                "   none of the known causes ({}, and from the split: {}) matched: look at which tasks ran instead",
                verdict::KNOWN.join(", "),
                causes::KNOWN.join(", ")
            );
        } else {
            out.push_str("   none\n");
        }
    }
    let stacks = traced.and_then(|t| t.stacks.as_ref()?.as_ref().ok());
    for c in causes {
        let _ = writeln!(out, "   - {}: {}", c.name, escape::printable(&c.evidence));
        // What each holder it names was running.
        for line in
            (stacks.iter()).flat_map(|w| c.holders.iter().filter_map(|h| hottest::line(w, h)))
        {
            let _ = writeln!(out, "     {line}");
        }
        let _ = writeln!(out, "     next: {}", escape::printable(&c.next_step));
    }
    out.push_str("\n4. Self-check: eBPF against the kernel's schedstat run_delay\n");
    match traced.map(|t| selfcheck::check(t, f)) {
        Some(Some(check)) => {
            for line in &check.summary {
                let _ = writeln!(out, "   {line}");
            }
        }
        Some(None) => {
            out.push_str("   schedstat reads zero on this kernel: nothing to compare with\n")
        }
        None => out.push_str("   needs the eBPF measurement (root)\n"),
    }
    out
}

/// The tasks that waited most and those charged with it, with their class,
/// and under each culprit its hottest stack where `stacks` has one.
fn victims_text(out: &mut String, a: &Attribution, stacks: Option<&Window>) {
    let t = &a.tables;
    let share = |ns: u64| ns as f64 / t.waited_ns.max(1) as f64 * 100.0;
    let _ = writeln!(
        out,
        "   victims (top {} of {}, by total wait; {} in {} waits):",
        t.victims.len().min(TOP),
        t.totals.0,
        fmt_ns(t.waited_ns),
        t.waits
    );
    for v in t.victims.iter().take(TOP) {
        let _ = writeln!(
            out,
            "     {} ({}): {} waits, total {} ({:.0}%), max {}, longest behind {} ({})",
            escape::short(&v.task),
            task::sched_label(&v.task),
            v.count,
            fmt_ns(v.total_ns),
            share(v.total_ns),
            fmt_ns(v.max_ns),
            escape::culprit(&v.other, v.task.tgid, &a.throttled),
            task::sched_label(&v.other)
        );
    }
    let _ = writeln!(
        out,
        "   culprits (held the CPU when waits ended; top {} of {}):",
        t.culprits.len().min(TOP),
        t.totals.1
    );
    for c in t.culprits.iter().take(TOP) {
        // The idle task: what its waits were (those of its longest victim).
        let name = escape::culprit(&c.task, c.other.tgid, &a.throttled);
        let whose =
            (a.whose.get(&c.task.tgid)).map_or(String::new(), |w| format!("; {}", w.label()));
        let _ = writeln!(
            out,
            "     {} ({}{whose}): charged {} ({:.0}%) in {} waits, max {}",
            name,
            task::sched_label(&c.task),
            fmt_ns(c.total_ns),
            share(c.total_ns),
            c.count,
            fmt_ns(c.max_ns)
        );
        if let Some(line) = stacks.and_then(|w| hottest::line(w, &NamedHolder::Task(c.task))) {
            let _ = writeln!(out, "       {line}");
        }
    }
    if a.overflow != (0, 0) {
        let _ = writeln!(
            out,
            "   (tables full: {} victim and {} culprit waits not in them)",
            a.overflow.0, a.overflow.1
        );
    }
}

/// A row of the victims or culprits table in JSON; `idle_wait` when the
/// culprit (of the longest wait, or the row's own task) is an idle task.
fn row_json(row: &Row, a: &Attribution, other: &str) -> serde_json::Value {
    let (culprit, victim_pid) = if other == "max_culprit" {
        (&row.other, row.task.tgid)
    } else {
        (&row.task, row.other.tgid)
    };
    let mut v = json!({
        "task": TaskJson::from(&row.task),
        "count": row.count,
        "total_ns": row.total_ns,
        "share": row.total_ns as f64 / a.tables.waited_ns.max(1) as f64,
        "max_ns": row.max_ns,
        other: TaskJson::from(&row.other),
    });
    if culprit.tid == 0 {
        v["idle_wait"] = json!(IdleWait::of(victim_pid, &a.throttled));
    }
    if other == "max_victim"
        && let Some(whose) = a.whose.get(&row.task.tgid)
    {
        v["whose"] = json!(whose);
    }
    v
}

fn victims_json(a: &Attribution) -> serde_json::Value {
    let t = &a.tables;
    json!({
        "count": t.waits,
        "sum_ns": t.waited_ns,
        "victims": t.victims.iter().take(TOP)
            .map(|r| row_json(r, a, "max_culprit")).collect::<Vec<_>>(),
        "culprits": t.culprits.iter().take(TOP)
            .map(|r| row_json(r, a, "max_victim")).collect::<Vec<_>>(),
        "rows": {"victims": t.totals.0, "culprits": t.totals.1},
        "outranking": a.outranking.iter().map(|o| json!({
            "culprit": TaskJson::from(&o.culprit),
            "victim": TaskJson::from(&o.victim),
            "edge": o.edge,
            "charged_ns": o.charged_ns,
            "count": o.waits,
        })).collect::<Vec<_>>(),
        "outranking_share": a.outranking_share(),
        "overflow": {"victim_waits": a.overflow.0, "culprit_waits": a.overflow.1},
    })
}

/// The holders the report names, each once: the culprits it lists, then
/// those its causes name.
fn named_holders(t: &Traced, verdict: &Verdict) -> Vec<NamedHolder> {
    let culprits = (t.victims.iter())
        .flat_map(|a| a.tables.culprits.iter().take(TOP))
        .filter(|c| c.task.tid != 0)
        .map(|c| NamedHolder::Task(c.task));
    let causes = (verdict.diagnoses.iter()).flat_map(|c| c.holders.iter().cloned());
    let mut named: Vec<NamedHolder> = Vec::new();
    for holder in culprits.chain(causes) {
        if !named.iter().any(|h| h.same(&holder)) {
            named.push(holder);
        }
    }
    named
}

pub(crate) fn json(d: &DiagnoseReport) -> String {
    let (f, traced) = (d.findings, d.traced);
    let ebpf = traced.map(|t| {
        let mut v = json!({
            "hook": t.hook, "count": t.waits.count(), "sum_ns": t.waits.sum_ns,
            "percentiles": t.percentiles, "shape": t.shape,
            // The split of the window's waits, as in schedlat.histogram.v2.
            "causes": output::causes::of(&t.waits).as_ref().map(output::causes::json),
            "decision": output::decision::json(&t.waits),
            "kernel_context": t.kernel.as_ref().map(|k| output::kernel_context::json(k, &t.waits)),
            "schedstat_ratio": (f.schedstat_wait_ns > 0)
                .then(|| t.waits.sum_ns as f64 / f.schedstat_wait_ns as f64),
            "self_check": selfcheck::check(t, f),
            "victims": t.victims.as_ref().ok().map(victims_json),
            "victims_unavailable": t.victims.as_ref().err(),
        });
        // Only where asked for: `--no-stacks` leaves both out.
        match &t.stacks {
            Some(Ok(w)) => v["stacks"] = hottest::json(w, &named_holders(t, d.verdict)),
            Some(Err(why)) => v["stacks_unavailable"] = json!(why),
            None => {}
        }
        v
    });
    let object = json!({
        "schema": "schedlat.diagnose.v1",
        "scope": d.scope.describe(),
        "findings": f,
        "waiting": d.verdict.waiting,
        "causes": d.verdict.diagnoses,
        "ebpf": ebpf,
        "ebpf_unavailable": d.why_not_traced,
    });
    format!("{object}\n")
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::cgroup_of::TaskCgroups,
    };

    /// Issue 19: diagnose's tables say what an idle culprit's waits were,
    /// in the text and the JSON, like the other views.
    #[test]
    fn idle_culprits_say_throttled() {
        let idle = task(0, 0, "swapper/0", 0, 0, 0);
        let boxed = task(500, 500, "boxed", 0, 0, 0);
        let victims = [WaitStats {
            task: boxed,
            count: 10,
            total_ns: 50_000_000,
            max_ns: 9_000_000,
            max_other: idle,
            ..Default::default()
        }];
        let culprits = [WaitStats {
            task: idle,
            count: 10,
            total_ns: 50_000_000,
            max_ns: 9_000_000,
            max_other: boxed,
            ..Default::default()
        }];
        let mut a = Attribution::new(
            rank(&victims, &culprits, SortKey::Total, 0),
            (0, 0),
            &TaskCgroups::default(),
        );
        a.throttled.insert(500);
        let mut out = String::new();
        victims_text(&mut out, &a, None);
        assert!(
            out.contains("longest behind swapper/0 (throttled: cgroup quota)"),
            "{out}"
        );
        assert!(
            out.contains("     swapper/0 (throttled: cgroup quota) ("),
            "{out}"
        );
        let v = victims_json(&a);
        assert_eq!(v["victims"][0]["idle_wait"], "throttled");
        assert_eq!(v["culprits"][0]["idle_wait"], "throttled");
        a.throttled.clear();
        assert_eq!(
            victims_json(&a)["victims"][0]["idle_wait"],
            "woken-onto-idle-cpu"
        );
    }

    /// The whole-system report of `verdict` on the fixture's findings,
    /// without a trace.
    fn untraced_text(verdict: &Verdict) -> String {
        text(&DiagnoseReport {
            scope: &Scope::System,
            findings: &crate::analysis::diagnosis::fixtures::findings(),
            verdict,
            traced: None,
            why_not_traced: None,
        })
    }

    /// The report lists every diagnosis it knows when none matched, from
    /// the lists the analysis keeps.
    #[test]
    fn no_match_lists_the_known_diagnoses() {
        let verdict = Verdict {
            waiting: Waiting::Significant {
                evidence: "e".into(),
            },
            diagnoses: Vec::new(),
        };
        let text = untraced_text(&verdict);
        let line = text
            .lines()
            .find(|l| l.starts_with("   none of the known causes ("))
            .unwrap_or_else(|| panic!("{text}"));
        for name in verdict::KNOWN.iter().chain(causes::KNOWN) {
            assert!(line.contains(name), "{name}: {line}");
        }
        assert!(line.ends_with(") matched: look at which tasks ran instead"));
    }

    /// Issue 29 item 7: step 1's evidence names the most-waiting thread by
    /// its comm, which its owner chooses: whatever the answer, a newline or
    /// an ESC in it reaches the terminal as `?` (the "short" answer once
    /// printed it raw: a forged line, found by tests/names.rs in CI).
    #[test]
    fn step_one_escapes_its_evidence_whatever_the_answer() {
        let hostile = "most: thread 7 (x\nFAKE 1 waits \x1b[2J)";
        let answers = [
            Waiting::Negligible {
                evidence: hostile.into(),
            },
            Waiting::Significant {
                evidence: hostile.into(),
            },
            Waiting::Short {
                evidence: hostile.into(),
            },
            Waiting::Unknown {
                reason: hostile.into(),
            },
        ];
        for waiting in answers {
            let text = untraced_text(&Verdict {
                waiting,
                diagnoses: Vec::new(),
            });
            assert!(
                !text.contains('\x1b') && !text.lines().any(|l| l.starts_with("FAKE")),
                "{text}"
            );
            assert!(text.contains("(x?FAKE 1 waits ?[2J)"), "{text}");
        }
    }
}
