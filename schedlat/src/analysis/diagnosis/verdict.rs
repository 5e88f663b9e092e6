//! The verdict: steps 1 and 5 of the method, put together from the
//! modules that each judge one part.

use super::{
    capacity, causes, decision,
    named::Diagnosis,
    priority::{self, Attribution},
    traced::Traced,
    waiting::{self, EbpfWaiting, Waiting},
};
use crate::{
    analysis::causes::Causes,
    sys::{cgroup_of::TaskCgroups, findings::Findings, kernel_facts::Release},
};

/// The diagnoses `named` can give, as the report lists them when none
/// matched (those of the split: causes::KNOWN).
pub(crate) const KNOWN: &[&str] = &[
    "quota throttling",
    "CPU saturation",
    "pinning",
    "class or priority",
];

/// The answer: whether the scope waited, and the diagnoses that explain
/// it, strongest first.
pub(crate) struct Verdict {
    pub waiting: Waiting,
    pub diagnoses: Vec<Diagnosis>,
}

/// Steps 1 and 5 of the method: whether the scope waited, and which known
/// mechanisms explain it, from the kernel's accounting, and with eBPF from
/// its victims tables and its split of the waits. Causes are only looked
/// for when the waiting matters (Waiting::wants_a_cause).
pub(crate) fn diagnose(
    findings: &Findings,
    traced: Option<&Traced>,
    cgroups: &TaskCgroups,
) -> Verdict {
    // How much the scope waited by eBPF: read once, for both questions.
    let ebpf = traced.map(|t| t.waiting(findings));
    let waiting = waiting::waiting(findings, ebpf, traced.map(|t| &t.shape));
    // Step 1 answered no (negligible, or short waits): nothing to explain.
    if !waiting.wants_a_cause() {
        return Verdict {
            waiting,
            diagnoses: Vec::new(),
        };
    }
    let attribution = traced.and_then(|t| t.victims.as_ref().ok());
    let mut diagnoses = named(findings, attribution, ebpf);
    if let (Some(counts), Some(ebpf)) = (traced.and_then(|t| t.waits.causes.as_ref()), ebpf) {
        let evidence = causes::Evidence {
            split: &Causes::of(counts),
            attribution,
            ebpf,
            cgroups,
        };
        causes::add(&mut diagnoses, findings, &evidence);
    }
    // What the scheduler decided, where the decision split measured it.
    if let Some(t) = traced {
        let release = t.kernel.as_ref().and_then(|k| Release::parse(&k.release));
        let kernel = decision::KernelFacts {
            release: release.unwrap_or(Release(0, 0)),
        };
        // After the named mechanisms, whatever its strength: it says how
        // the scheduler made the task wait within them (a lower-nice
        // culprit's victim is not eligible, a quota's is passed over).
        // Another class that held the CPU is the class or priority cause
        // already named, with its culprit.
        if let Some(d) = t.waits.decision.as_ref() {
            let named = |n: &str| diagnoses.iter().any(|x| x.name == n);
            let said = named(priority::CLASS_OR_PRIORITY);
            diagnoses.extend(
                decision::decision(d, findings, kernel)
                    .filter(|x| !(said && x.name == decision::ANOTHER_CLASS))
                    .map(|mut x| {
                        // What lets the fair task run beside it, on this kernel.
                        if let (decision::ANOTHER_CLASS, Some(k)) = (x.name, &t.kernel) {
                            x.evidence =
                                format!("{}; {}", x.evidence, k.mechanisms.behind_another_class());
                        }
                        x
                    }),
            );
        }
    }
    Verdict { waiting, diagnoses }
}

/// The diagnoses the accounting and the victims tables support, strongest
/// first. With the eBPF victims tables
/// (`attribution`), each measured wait is explained once: the share
/// charged to culprits that outrank their victims goes to class or
/// priority, the rest to the capacity causes (saturation, pinning), whose
/// strength is scaled by it. `ebpf`: the scope's waiting as eBPF measured
/// it, when it could.
fn named(
    f: &Findings,
    attribution: Option<&Attribution>,
    ebpf: Option<EbpfWaiting>,
) -> Vec<Diagnosis> {
    let peers = attribution.map_or(1.0, |a| 1.0 - a.outranking_share());
    let capacity = [capacity::saturation(f), capacity::pinning(f)]
        .into_iter()
        .flatten()
        .map(|c| Diagnosis {
            strength: c.strength * peers,
            ..c
        });
    let mut named: Vec<Diagnosis> = [
        capacity::throttling(f),
        attribution.and_then(|a| priority::priority(f, a, ebpf)),
    ]
    .into_iter()
    .flatten()
    .chain(capacity)
    .collect();
    named.sort_by(|a, b| b.strength.total_cmp(&a.strength));
    named
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::{
        analysis::{
            diagnosis::fixtures::{findings, waiter},
            shape::tests::waits,
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::slice::Slice,
    };

    /// Culprits charged with `(policy, nice, rt, total_ns)` each, all of
    /// one normal nice-0 victim that waited 1000 ns in all.
    fn attribution(culprits: &[(u32, i32, u32, u64)]) -> Attribution {
        let victim = task(20, 20, "victim", 0, 0, 0);
        let rows: Vec<WaitStats> = culprits
            .iter()
            .enumerate()
            .map(|(i, &(policy, nice, rt, total_ns))| {
                // No cgroups read (TaskCgroups::default): the cgroup check
                // does not apply.
                let tid = 4_100_000 + i as u32;
                WaitStats {
                    task: task(tid, tid, "hog", policy, nice, rt),
                    count: 10,
                    total_ns,
                    max_other: victim,
                    ..Default::default()
                }
            })
            .collect();
        let victims = [WaitStats {
            task: victim,
            count: 30,
            total_ns: 1_000,
            ..Default::default()
        }];
        Attribution::new(
            rank(&victims, &rows, SortKey::Total, 0),
            (0, 0),
            &TaskCgroups::default(),
        )
    }

    #[test]
    fn idle_is_not_a_scheduling_problem() {
        assert!(matches!(
            waiting::waiting(&findings(), None, None),
            Waiting::Negligible { .. }
        ));
        assert!(named(&findings(), None, None).is_empty());
    }

    #[test]
    fn an_rt_culprit_comes_before_the_pinning_it_also_matches() {
        let f = Findings {
            top_waiters: waiter(0.6),
            cpu_busy: vec![0.03, 0.99],
            avg_runnable: 2.0,
            allowed_cpus: Some(vec![1]),
            ..findings()
        };
        let a = attribution(&[(1, 0, 50, 900), (0, 0, 0, 100)]);
        let c = named(&f, Some(&a), None);
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["class or priority", "affinity (pinning) contention"]
        );
        assert!((c[0].strength - 0.54).abs() < 1e-9, "{c:?}");
        // Pinning keeps the waits charged to peers only.
        assert!((c[1].strength - 0.06).abs() < 1e-9, "{c:?}");
        assert!(c[0].evidence.contains("hog 4100000/4100000 (fifo 50)"));
        assert!(c[0].next_step.contains("chrt"));
        // Peers only: no class cause, pinning unscaled.
        let peers = attribution(&[(0, 0, 0, 1000)]);
        let c = named(&f, Some(&peers), None);
        assert_eq!(c.len(), 1);
        assert!((c[0].strength - 0.6).abs() < 1e-9);
    }

    #[test]
    fn a_small_share_of_outranking_wait_is_not_a_cause() {
        let f = Findings {
            top_waiters: waiter(0.6),
            ..findings()
        };
        // A nice -20 kworker with 10% of the wait: below OUTRANKED.
        let a = attribution(&[(0, -20, 0, 100), (0, 0, 0, 900)]);
        assert!(named(&f, Some(&a), None).is_empty());
        let a = attribution(&[(0, -10, 0, 800), (0, 0, 0, 200)]);
        let c = named(&f, Some(&a), None);
        assert_eq!(c[0].name, "class or priority");
        assert!(c[0].next_step.contains("renice"), "{}", c[0].next_step);
    }

    /// Issue 28: a container whose task wakes 2,000 times a second and
    /// waits ~8 us each time, behind busy work on its CPU, waits 1.7% of
    /// the window: over the 1% test, with every CPU busy. Its histogram is
    /// healthy (p99 25 us, a slice 1.5 ms): short waits, no cause named,
    /// where the share alone named CPU saturation. The same share in waits
    /// of a slice is significant and saturation is named.
    #[test]
    fn a_healthy_histogram_gets_no_cause_whatever_its_share() {
        let f = Findings {
            cpu_busy: vec![1.0, 1.0],
            avg_runnable: 12.0,
            psi_system: Some((1.0, 99.0)),
            allowed_cpus: Some(vec![1]),
            ..findings()
        };
        let slice = Slice::fixed(1_500_000, "test");
        let traced = |groups: &[(u64, u64)]| {
            Traced::new(
                "tp_btf".into(),
                waits(groups),
                Err("not loaded".into()),
                &slice,
            )
        };
        // 20,000 waits in 10 s, pinned to one CPU: 166 ms of its 10 s.
        let healthy = traced(&[(7_000, 19_000), (25_000, 900), (100_000, 100)]);
        assert_eq!(
            healthy.shape.verdict,
            crate::analysis::shape::Verdict::Healthy
        );
        let v = diagnose(&f, Some(&healthy), &TaskCgroups::default());
        match &v.waiting {
            Waiting::Short { evidence } => assert!(
                evidence.contains("its CPUs' time") && evidence.contains("shape: healthy: p99.9"),
                "{evidence}"
            ),
            w => panic!("{w:?}"),
        }
        assert!(
            v.diagnoses.is_empty(),
            "{:?}",
            v.diagnoses.first().map(|d| d.name)
        );
        // Waits of a slice: the same machine, now a problem.
        let slow = traced(&[(7_000, 100), (1_500_000, 300)]);
        let v = diagnose(&f, Some(&slow), &TaskCgroups::default());
        assert!(matches!(v.waiting, Waiting::Significant { .. }));
        assert_eq!(v.diagnoses.first().map(|d| d.name), Some("CPU saturation"));
    }
}
