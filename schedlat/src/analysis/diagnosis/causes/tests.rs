use schedlat_common::{
    bucket_index,
    causes::{Cause as Class, CauseStats, OVERLAP_STEAL, OVERLAP_THROTTLED},
};

use super::*;
use crate::{
    histogram::{CauseCounts, CauseFacts},
    sys::findings::ThreadWait,
};

const TEN_S: std::time::Duration = std::time::Duration::from_secs(10);

/// A 10 s window on 2 CPUs in which the scope's most-waiting thread waited
/// `waited` of it.
fn findings(waited: f64) -> Findings {
    Findings {
        window_ns: 10_000_000_000,
        cpus: 2,
        threads: 1,
        schedstat_wait_ns: (waited * 1e10) as u64,
        schedstat_switch_ins: 1000,
        schedstat_works: true,
        top_waiters: vec![ThreadWait {
            tid: 7,
            comm: "victim".into(),
            wait_ns: (waited * 1e10) as u64,
            share: waited,
            run_ns: 0,
            nice: Some(0),
        }],
        psi_system: None,
        psi_cgroup: None,
        throttling: None,
        cpu_busy: vec![0.5, 0.5],
        avg_runnable: 1.0,
        allowed_cpus: None,
        system_scope: false,
    }
}

/// The split of 100 waits: `(class, waits, ns each)` counted, the first
/// five classes also histogrammed; every class measurable.
fn split(classes: &[(Class, u64, u64)], overlap: &[(usize, u64)]) -> Causes {
    let mut cpu = CauseStats::ZERO;
    for &(class, n, ns) in classes {
        cpu.count[class as usize] += n;
        cpu.sum_ns[class as usize] += n * ns;
        if let Some(h) = cpu.buckets.get_mut(class as usize) {
            h[bucket_index(ns)] += n;
        }
    }
    for &(i, ns) in overlap {
        cpu.overlap_ns[i] = ns;
    }
    cpu.overlap_waits = 100;
    cpu.overlap_wait_ns = 100_000_000;
    let all = CauseFacts {
        steal: true,
        irq: true,
        throttled: true,
        queue_depth: true,
        held_by: true,
        topology: false,
        waking: false,
    };
    Causes::of(&CauseCounts::from_cpus(all, &[cpu]))
}

/// eBPF's measure of a scope that waited nothing: the findings' schedstat
/// decides.
const NO_EBPF_WAIT: EbpfWaiting = EbpfWaiting {
    most_task: None,
    scope: 0.0,
};

/// No cgroups read: no culprit is named by its cgroup.
static NO_CGROUPS: std::sync::LazyLock<TaskCgroups> =
    std::sync::LazyLock::new(TaskCgroups::default);

fn evidence(split: &Causes) -> Evidence<'_> {
    Evidence {
        split,
        attribution: None,
        ebpf: NO_EBPF_WAIT,
        cgroups: &NO_CGROUPS,
    }
}

fn named(f: &Findings, s: &Causes) -> Vec<Diagnosis> {
    let mut causes = Vec::new();
    add(&mut causes, f, &evidence(s));
    causes
}

/// 100 woken waits of 1 ms each, held by `same` and `other` (of 100).
/// The causes `add` finds in `split` (40% of the window waited), with
/// the attribution `a` and the tasks' `cgroups`.
fn causes_with(split: &Causes, a: &Attribution, cgroups: &TaskCgroups) -> Vec<Diagnosis> {
    let evidence = Evidence {
        split,
        attribution: Some(a),
        ebpf: NO_EBPF_WAIT,
        cgroups,
    };
    let mut causes = Vec::new();
    add(&mut causes, &findings(0.4), &evidence);
    causes
}

fn held(same: u64, other: u64) -> Causes {
    split(
        &[
            (Class::Woken, 100, 1_000_000),
            (Class::HeldBySameCgroup, same, 1_000_000),
            (Class::HeldByOtherCgroup, other, 1_000_000),
            (Class::HeldByIdle, 100 - same - other, 1_000_000),
        ],
        &[],
    )
}

#[test]
fn a_dominant_other_cgroup_is_the_noisy_neighbour() {
    let c = named(&findings(0.4), &held(10, 80));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].name, "noisy neighbour (other cgroups)");
    assert!((c[0].strength - 0.32).abs() < 1e-9, "{c:?}");
    assert!(
        c[0].evidence
            .starts_with("80% of the measured wait time (80.0 ms of 100 ms, 80 waits)"),
        "{}",
        c[0].evidence
    );
    // Without the victims tables the neighbour is not named, and that is said.
    assert!(
        c[0].evidence.contains("could not be read"),
        "{}",
        c[0].evidence
    );
    assert!(
        c[0].evidence.contains("0% began as preemptions"),
        "{}",
        c[0].evidence
    );
}

/// With the victims tables and their tasks' cgroups, the neighbour is
/// named: the culprits' cgroup where it is not their victim's, charged with
/// its share; kernel threads and idle tasks are no neighbour, and a victim
/// gone by the end of the window stands in the scope's cgroup.
#[test]
fn the_noisy_neighbour_is_named_by_its_cgroup() {
    use schedlat_common::victims::WaitStats;

    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::procfs::parse_proc_cgroup,
    };
    let victim = task(40, 40, "victim", 0, 0, 0);
    let gone = task(41, 41, "child", 0, 0, 0);
    let culprit = |t, other, total_ns| WaitStats {
        task: t,
        count: 10,
        total_ns,
        max_other: other,
        ..Default::default()
    };
    let rows = [
        culprit(task(50, 50, "hog", 0, 0, 0), victim, 600),
        culprit(task(51, 51, "hog2", 0, 0, 0), gone, 200),
        culprit(task(52, 52, "kworker/0:1", 0, 0, 0), victim, 150),
        culprit(task(53, 53, "peer", 0, 0, 0), victim, 50),
    ];
    let victims = [WaitStats {
        task: victim,
        count: 40,
        total_ns: 1_000,
        ..Default::default()
    }];
    let lines = |path: &str| Some(parse_proc_cgroup(&format!("0::{path}\n")).unwrap());
    let cgroups = TaskCgroups {
        scope: lines("/app"),
        by_pid: [
            (40, lines("/app")),
            (41, None),
            (50, lines("/batch")),
            (51, lines("/batch")),
            (52, lines("/")),
            (53, lines("/app")),
        ]
        .into_iter()
        .collect(),
        kernel_threads: [52].into_iter().collect(),
        v2_cpu: ["/batch".to_string(), "/app".to_string()]
            .into_iter()
            .collect(),
        ..TaskCgroups::default()
    };
    let a = Attribution::new(rank(&victims, &rows, SortKey::Total, 0), (0, 0), &cgroups);
    let split = held(10, 80);
    let mut causes = Vec::new();
    let evidence = Evidence {
        split: &split,
        attribution: Some(&a),
        ebpf: NO_EBPF_WAIT,
        cgroups: &cgroups,
    };
    add(&mut causes, &findings(0.4), &evidence);
    assert_eq!(causes[0].name, "noisy neighbour (other cgroups)");
    assert!(
        causes[0].evidence.contains(
            "the other cgroups charged with most: /batch (hog, hog2: 800 ns, 80% of the scope's measured wait)"
        ),
        "{}",
        causes[0].evidence
    );
    assert!(
        causes[0].next_step.contains("than /batch"),
        "{}",
        causes[0].next_step
    );
    // A neighbour that is a container is named as its owner knows it,
    // its path said once, where the next step acts on it.
    let mut named = TaskCgroups {
        scope: cgroups.scope.clone(),
        by_pid: cgroups.by_pid.clone(),
        kernel_threads: cgroups.kernel_threads.clone(),
        v2_cpu: cgroups.v2_cpu.clone(),
        ..TaskCgroups::default()
    };
    named
        .owners
        .insert("/batch".into(), "container jobs/batch-7/cruncher".into());
    let evidence = Evidence {
        cgroups: &named,
        ..evidence
    };
    let mut causes = Vec::new();
    add(&mut causes, &findings(0.4), &evidence);
    assert!(
        causes[0]
            .evidence
            .contains("most: container jobs/batch-7/cruncher (hog, hog2: 800 ns"),
        "{}",
        causes[0].evidence
    );
    let step = &causes[0].next_step;
    assert!(
        step.contains("than container jobs/batch-7/cruncher, cap it")
            && step.matches("/batch").count() == 2,
        "{step}"
    );
}

/// With the neighbour pairs, the other cgroups are named by the time their
/// tasks held the CPU inside the scope's waits, not by the waits their
/// tasks ended: a brief sleeper's cgroup that ended most of the waits is
/// charged its few nanoseconds, and the cgroup that held the CPU leads.
#[test]
fn the_noisy_neighbour_is_named_by_its_time_on_the_cpu_where_the_pairs_say() {
    use schedlat_common::victims::WaitStats;

    use super::super::priority::{Charged, ShareCharged};
    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::procfs::parse_proc_cgroup,
    };
    let victim = task(40, 40, "loop", 0, 0, 0);
    let culprit = |t, total_ns| WaitStats {
        task: t,
        count: 10,
        total_ns,
        max_other: victim,
        ..Default::default()
    };
    // The last holders: the sleeper ended 900 ns of the waits, the root's
    // build 100 ns.
    let rows = [
        culprit(task(50, 50, "sleeper", 0, 0, 0), 900),
        culprit(task(51, 51, "rustc", 0, 0, 0), 100),
    ];
    let victims = [WaitStats {
        task: victim,
        count: 40,
        total_ns: 1_000,
        ..Default::default()
    }];
    let lines = |path: &str| Some(parse_proc_cgroup(&format!("0::{path}\n")).unwrap());
    let cgroups = TaskCgroups {
        scope: lines("/batch"),
        by_pid: [(40, lines("/batch")), (50, lines("/web")), (51, lines("/"))]
            .into_iter()
            .collect(),
        ..TaskCgroups::default()
    };
    let mut a = Attribution::new(rank(&victims, &rows, SortKey::Total, 0), (0, 0), &cgroups);
    let charged = |path: &str, charged_ns| Charged {
        path: path.into(),
        charged_ns,
    };
    a.neighbours = Some(vec![charged("/", 850), charged("/web", 20)]);
    let split = held(10, 80);
    let causes = causes_with(&split, &a, &cgroups);
    assert_eq!(causes[0].name, "noisy neighbour (other cgroups)");
    assert!(
        causes[0].evidence.contains(
            "the other cgroups charged with most, by their tasks' time on the CPU inside the waits: the root cgroup's own tasks, which no service manager placed in a group (rustc: 850 ns, 85%), /web (sleeper: 20.0 ns, 2% of the scope's measured wait)"
        ),
        "{}",
        causes[0].evidence
    );
    // The root's own tasks are the main holder: never a cap on `/`.
    assert!(
        !causes[0].next_step.contains("cap /") && !causes[0].next_step.contains("than /,"),
        "{}",
        causes[0].next_step
    );

    // The scope's wakeups lost at the root, where their group's entity
    // had used its share: the cgroup inside it that used it is named
    // beside the holder, and the next step acts on it first.
    let share = |path: &str, charged_ns| ShareCharged {
        path: path.into(),
        group: "/kubepods".into(),
        charged_ns,
    };
    a.share_users = vec![share("/kubepods/pod-b", 600), share("/kubepods/pod-c", 1)];
    let causes = causes_with(&split, &a, &cgroups);
    assert!(
        causes[0].evidence.contains(
            "the scope's wakeups lost above their own group: /kubepods/pod-b had used /kubepods's share of the CPU (600 ns of the time just before those waits, 60% of the scope's measured wait), so the root cgroup's own tasks held it"
        ),
        "{}",
        causes[0].evidence
    );
    assert!(
        causes[0].next_step.starts_with(
            "keep /kubepods/pod-b off the scope's CPUs (cpuset of cgroup /kubepods/pod-b, or its tasks' affinity): its runs used /kubepods's share of the CPU"
        ),
        "{}",
        causes[0].next_step
    );
    // And then what to do about the holder, the root's own tasks.
    assert!(
        causes[0].next_step.contains(ROOT_STEP),
        "{}",
        causes[0].next_step
    );
    assert!(
        !causes[0].next_step.contains("cap /,"),
        "{}",
        causes[0].next_step
    );
    // The step moves to the share's user from a tenth of the scope's
    // measured wait on; below it the user is only named.
    for (charged, first) in [(100, true), (99, false)] {
        a.share_users = vec![share("/kubepods/pod-b", charged)];
        let causes = causes_with(&split, &a, &cgroups);
        let step = &causes[0].next_step;
        assert_eq!(
            step.starts_with("keep /kubepods/pod-b off"),
            first,
            "{charged}: {step}"
        );
        assert!(
            causes[0].evidence.contains("/kubepods/pod-b had used"),
            "{charged}"
        );
    }
}

/// The inverse case: the loops' waits end when a brief sleeper of
/// another cgroup leaves the CPU (held_by says other cgroup), but by time
/// other cgroups held the CPU for a tenth of them: no noisy neighbour.
#[test]
fn waits_merely_ended_by_another_cgroup_name_no_noisy_neighbour() {
    use schedlat_common::victims::WaitStats;

    use super::super::priority::Charged;
    use crate::analysis::{
        task::tests::task,
        victims::{SortKey, rank},
    };
    let victim = task(40, 40, "loop", 0, 0, 0);
    let victims = [WaitStats {
        task: victim,
        count: 40,
        total_ns: 1_000,
        ..Default::default()
    }];
    let cgroups = TaskCgroups::default();
    let mut a = Attribution::new(rank(&victims, &[], SortKey::Total, 0), (0, 0), &cgroups);
    let charged = |path: &str, charged_ns| Charged {
        path: path.into(),
        charged_ns,
    };
    a.neighbours = Some(vec![charged("/", 80), charged("/web", 20)]);
    let split = held(10, 80);
    let causes = causes_with(&split, &a, &cgroups);
    assert!(
        causes
            .iter()
            .all(|c| c.name != "noisy neighbour (other cgroups)"),
        "{causes:?}"
    );
    // Without the pairs, the waits they ended name it, as before.
    a.neighbours = None;
    let causes = causes_with(&split, &a, &cgroups);
    assert_eq!(causes[0].name, "noisy neighbour (other cgroups)");
}

#[test]
fn a_dominant_own_cgroup_is_contention_inside_it() {
    let c = named(&findings(0.4), &held(80, 10));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].name, "contention inside the cgroup");
    assert!(c[0].evidence.starts_with("80% of the measured"), "{c:?}");
}

/// Issue 28: contention inside the cgroup names the cgroup; for the root
/// cgroup it says so, and "a smaller worker pool" is not the advice for
/// `/` (tasks nobody placed).
#[test]
fn contention_inside_the_cgroup_names_it_and_the_root_gets_its_own_advice() {
    use crate::sys::procfs::parse_proc_cgroup;
    let in_group = |path: &str| TaskCgroups {
        scope: Some(parse_proc_cgroup(&format!("0::{path}\n")).unwrap()),
        ..TaskCgroups::default()
    };
    let split = held(80, 10);
    let named_in = |cgroups: &TaskCgroups| {
        let mut causes = Vec::new();
        let e = Evidence {
            cgroups,
            ..evidence(&split)
        };
        add(&mut causes, &findings(0.4), &e);
        causes.remove(0)
    };
    let app = named_in(&in_group("/app"));
    assert!(
        app.evidence
            .contains("ended when a task of the waiter's own cgroup (/app) left the CPU"),
        "{}",
        app.evidence
    );
    assert!(
        app.next_step.contains("a smaller worker pool"),
        "{}",
        app.next_step
    );
    let root = named_in(&in_group("/"));
    assert!(
        root.evidence
            .contains("ended when a task of the root cgroup (/, "),
        "{}",
        root.evidence
    );
    assert!(
        !root.next_step.contains("worker pool") && root.next_step.contains("cgroups of its own"),
        "{}",
        root.next_step
    );
}

#[test]
fn no_relation_over_half_names_none_nor_does_negligible_waiting() {
    assert!(named(&findings(0.4), &held(50, 50)).is_empty());
    assert!(named(&findings(0.4), &held(40, 40)).is_empty());
    assert!(named(&findings(0.001), &held(0, 100)).is_empty());
    // Too few waits to say anything.
    let few = split(
        &[
            (Class::Woken, 10, 1_000_000),
            (Class::HeldByOtherCgroup, 10, 1_000_000),
        ],
        &[],
    );
    assert!(named(&findings(0.4), &few).is_empty());
}

/// 80 same-CPU waits of 10 us, `migrated` of `ns` each.
fn placed(migrated: u64, ns: u64) -> Causes {
    split(
        &[
            (Class::Woken, 80 + migrated, 10_000),
            (Class::SameCpu, 80, 10_000),
            (Class::Migrated, migrated, ns),
        ],
        &[],
    )
}

#[test]
fn migrated_waits_much_slower_are_placement() {
    let c = named(&findings(0.2), &placed(20, 100_000));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].name, "placement (migrated waits slower)");
    let e = &c[0].evidence;
    assert!(
        e.starts_with("migrated waits 10.4x slower at p99 (106 us against 10.2 us"),
        "{e}"
    );
    assert!(
        e.contains(", 10.0x by the mean): 20 waits, 20% of the waits and 71% of the wait time"),
        "{e}"
    );
    // Not twice slower, too few, or too little of the time: not named.
    assert!(named(&findings(0.2), &placed(20, 15_000)).is_empty());
    assert!(named(&findings(0.2), &placed(19, 100_000)).is_empty());
    let rare = split(
        &[
            (Class::SameCpu, 10_000, 10_000),
            (Class::Migrated, 20, 30_000),
            (Class::Woken, 10_020, 10_000),
        ],
        &[],
    );
    assert!(named(&findings(0.2), &rare).is_empty());
}

#[test]
fn steal_is_named_when_it_covers_a_quarter_and_never_when_unavailable() {
    let base = [(Class::Woken, 100, 1_000_000)];
    let c = named(
        &findings(0.3),
        &split(&base, &[(OVERLAP_STEAL, 60_000_000)]),
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].name, "hypervisor steal");
    assert!(
        c[0].evidence
            .starts_with("steal time covers 60% of the measured wait (60.0 ms of 100 ms"),
        "{}",
        c[0].evidence
    );
    assert!(
        named(
            &findings(0.3),
            &split(&base, &[(OVERLAP_STEAL, 20_000_000)])
        )
        .is_empty()
    );
    let mut unavailable = split(&base, &[(OVERLAP_STEAL, 60_000_000)]);
    unavailable.overlap.steal_ns = None;
    assert!(named(&findings(0.3), &unavailable).is_empty());
}

#[test]
fn throttling_in_the_split_joins_or_names_quota_throttling() {
    let s = split(
        &[(Class::Woken, 100, 1_000_000)],
        &[(OVERLAP_THROTTLED, 90_000_000)],
    );
    let c = named(&findings(0.5), &s);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].name, "quota throttling");
    assert!(
        c[0].evidence
            .contains("throttled during 90% of the measured wait"),
        "{c:?}"
    );
    // Already named from cpu.stat: the split's numbers join its evidence.
    let mut causes = vec![Diagnosis {
        name: "quota throttling",
        strength: 0.2,
        evidence: "85 of 100 periods".into(),
        next_step: "raise the quota".into(),
        holders: Vec::new(),
    }];
    add(&mut causes, &findings(0.5), &evidence(&s));
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert!(
        causes[0].evidence.starts_with("85 of 100 periods; eBPF: "),
        "{causes:?}"
    );
    assert!((causes[0].strength - 0.45).abs() < 1e-9, "{causes:?}");
}

/// A scope whose waiting is in short-lived children: schedstat (threads
/// alive at both ends of the window) sees almost none of it, the eBPF
/// victims tables see it all; the split's causes go by the larger.
#[test]
fn waiting_seen_only_by_ebpf_still_names_the_split_causes() {
    use schedlat_common::victims::WaitStats;

    use crate::analysis::{
        task::tests::task,
        victims::{SortKey, rank},
    };
    let child = WaitStats {
        task: task(4_100_001, 4_100_001, "sleep", 0, 0, 0),
        count: 3,
        total_ns: 3_000_000_000,
        ..Default::default()
    };
    let a = Attribution::new(rank(&[child], &[], SortKey::Total, 0), (0, 0), &NO_CGROUPS);
    let split = held(0, 90);
    let mut causes = Vec::new();
    let evidence = Evidence {
        split: &split,
        attribution: Some(&a),
        ebpf: EbpfWaiting::new(
            3_000_000_000,
            Some(a.max_task_share(TEN_S)),
            &findings(0.005),
        ),
        cgroups: &NO_CGROUPS,
    };
    add(&mut causes, &findings(0.005), &evidence);
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].name, "noisy neighbour (other cgroups)");
    // 30% of the 10 s window, times 90% of the wait.
    assert!((causes[0].strength - 0.27).abs() < 1e-9, "{causes:?}");
    assert!(named(&findings(0.005), &split).is_empty());
}

/// A shell loop in cgroup A whose `sleep` children each wait a few
/// milliseconds behind hogs of cgroup B, on the one CPU A may use: no task
/// waits 1% of the window, but the scope's waits cover a quarter of its
/// CPU's time, and the neighbour is named with that strength.
#[test]
fn waiting_spread_over_short_lived_children_still_names_the_split_causes() {
    let f = Findings {
        allowed_cpus: Some(vec![1]),
        ..findings(0.001)
    };
    let spread = EbpfWaiting::new(2_500_000_000, Some(0.003), &f);
    assert!((spread.scope - 0.25).abs() < 1e-9, "{spread:?}");
    let split = held(0, 80);
    let mut causes = Vec::new();
    let evidence = Evidence {
        split: &split,
        attribution: None,
        ebpf: spread,
        cgroups: &NO_CGROUPS,
    };
    add(&mut causes, &f, &evidence);
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].name, "noisy neighbour (other cgroups)");
    // 25% of the CPU's time, times 80% of the wait.
    assert!((causes[0].strength - 0.2).abs() < 1e-9, "{causes:?}");
    // Without that measure, the most-waiting task alone is negligible.
    let alone = EbpfWaiting {
        scope: 0.0,
        ..spread
    };
    causes.clear();
    add(
        &mut causes,
        &f,
        &Evidence {
            ebpf: alone,
            ..evidence
        },
    );
    assert!(causes.is_empty(), "{causes:?}");
    // Overlapping waits of many tasks count once per CPU at most.
    assert_eq!(EbpfWaiting::new(u64::MAX, None, &f).scope, 1.0);
}

/// A nice -10 hog and a nice 0 victim in one cgroup: the waits are behind
/// a peer of the same cgroup and also by weight; class or priority
/// explains them, so contention inside the cgroup keeps only the peers'
/// share of its strength.
#[test]
fn outranking_peers_leave_contention_inside_the_cgroup_weak() {
    use schedlat_common::victims::WaitStats;

    use crate::analysis::{
        task::tests::task,
        victims::{SortKey, rank},
    };
    let victim = task(4_100_001, 4_100_001, "victim", 0, 0, 0);
    let hog = WaitStats {
        task: task(4_100_002, 4_100_002, "hog", 0, -10, 0),
        count: 10,
        total_ns: 900,
        max_other: victim,
        ..Default::default()
    };
    let victims = [WaitStats {
        task: victim,
        count: 10,
        total_ns: 1_000,
        ..Default::default()
    }];
    let a = Attribution::new(
        rank(&victims, &[hog], SortKey::Total, 0),
        (0, 0),
        &NO_CGROUPS,
    );
    let split = held(100, 0);
    let mut causes = Vec::new();
    let evidence = Evidence {
        split: &split,
        attribution: Some(&a),
        ebpf: NO_EBPF_WAIT,
        cgroups: &NO_CGROUPS,
    };
    add(&mut causes, &findings(0.5), &evidence);
    assert_eq!(causes[0].name, "contention inside the cgroup");
    // 50% waited, all of it behind the own cgroup, 10% charged to peers.
    assert!((causes[0].strength - 0.05).abs() < 1e-9, "{causes:?}");
}

/// A quota-throttled group: its waits end behind whoever ran in another
/// cgroup when the period turned, but the quota is why it waited; the
/// relation is only named for the part outside throttling.
#[test]
fn throttled_waits_are_not_a_noisy_neighbour() {
    let mut s = held(0, 100);
    s.overlap.throttled_ns = Some(80_000_000);
    let c = named(&findings(0.5), &s);
    let names: Vec<&str> = c.iter().map(|c| c.name).collect();
    assert_eq!(names, ["quota throttling"], "{c:?}");
    // A little throttling: still named, with the part outside it.
    s.overlap.throttled_ns = Some(10_000_000);
    let c = named(&findings(0.5), &s);
    assert_eq!(c[0].name, "noisy neighbour (other cgroups)", "{c:?}");
    assert!(
        c[0].evidence
            .starts_with("100% (90% outside the group's throttling) of the measured"),
        "{}",
        c[0].evidence
    );
    assert!((c[0].strength - 0.45).abs() < 1e-9, "{c:?}");
}

/// Issue 42: a pod (`/pod`) whose container waited behind the pod's own
/// other container has no noisy neighbour: the waits move inside the
/// pod; behind the root cgroup's own tasks the step is never to cap `/`;
/// behind a group without the cpu controller, never a cpu.max on it; a
/// culprit that exited is counted as such.
#[test]
fn own_containers_are_no_neighbour_and_no_step_caps_the_root() {
    use schedlat_common::victims::WaitStats;

    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::procfs::parse_proc_cgroup,
    };
    let victim = task(40, 40, "web", 0, 0, 0);
    let row = |pid, comm, total_ns| WaitStats {
        task: task(pid, pid, comm, 0, 0, 0),
        count: 10,
        total_ns,
        max_other: victim,
        ..Default::default()
    };
    let lines = |path: &str| Some(parse_proc_cgroup(&format!("0::{path}\n")).unwrap());
    let cgroups = |culprit: &str| TaskCgroups {
        scope: lines("/pod"),
        scope_subtree: true,
        by_pid: [(40, lines("/pod/a")), (50, lines(culprit)), (60, None)]
            .into_iter()
            .collect(),
        ..TaskCgroups::default()
    };
    let diagnose = |cgroups: &TaskCgroups, rows: &[WaitStats]| {
        let victims = [WaitStats {
            task: victim,
            count: 100,
            total_ns: 1_000,
            ..Default::default()
        }];
        let a = Attribution::new(rank(&victims, rows, SortKey::Total, 0), (0, 0), cgroups);
        let split = held(10, 80);
        let mut causes = Vec::new();
        let e = Evidence {
            split: &split,
            attribution: Some(&a),
            ebpf: NO_EBPF_WAIT,
            cgroups,
        };
        add(&mut causes, &findings(0.4), &e);
        causes
    };
    // Behind the pod's own sidecar: inside the pod, no neighbour.
    let own = diagnose(&cgroups("/pod/b"), &[row(50, "sidecar", 900)]);
    let names: Vec<&str> = own.iter().map(|c| c.name).collect();
    assert_eq!(names, ["contention inside the cgroup"], "{own:?}");
    assert!(own[0].evidence.contains("sidecar"), "{}", own[0].evidence);
    // Behind the root cgroup's own tasks: named so, and never "cap /".
    let root = diagnose(&cgroups("/"), &[row(50, "loop", 900)]);
    assert_eq!(root[0].name, "noisy neighbour (other cgroups)");
    assert!(
        root[0].evidence.contains("the root cgroup's own tasks"),
        "{}",
        root[0].evidence
    );
    let step = &root[0].next_step;
    assert!(
        !step.contains("cap /") && step.contains("no cpu.max"),
        "{step}"
    );
    // Behind a v2 group whose parent does not enable cpu: no cpu.max on it.
    let plain = diagnose(&cgroups("/other"), &[row(50, "hog", 900)]);
    let step = &plain[0].next_step;
    assert!(
        !step.contains("cap /other") && step.contains("has none of its own"),
        "{step}"
    );
    // Nor a cpu.weight on the pod, whose group here has no cpu controller.
    assert!(
        !step.contains("give the scope's cgroup more cpu.weight")
            && step.contains("the scope's own cgroup has no cpu controller"),
        "{step}"
    );
    // Mostly behind tasks that exited: said, and no 0% cgroup named.
    let gone = diagnose(
        &cgroups("/other"),
        &[row(60, "gone", 900), row(50, "hog", 1)],
    );
    let evidence = &gone[0].evidence;
    assert!(
        evidence.contains("most of it was charged to tasks that have exited")
            && !evidence.contains("/other"),
        "{evidence}"
    );
}
