//! Who waited in the scope and who held the CPU instead (the victims
//! tables of the window, docs/victims.md), and which of those culprits won
//! by rule rather than by turn: a higher scheduling class (deadline over RT
//! over the fair classes), a higher RT priority, or more weight among fair
//! tasks (a lower nice; any fair task over SCHED_IDLE). Waits charged to
//! such culprits are explained by class or priority; the rest by too
//! little CPU for peers (saturation, pinning).

use schedlat_common::victims::TaskInfo;

use super::{
    named::Diagnosis,
    waiting::{EbpfWaiting, NEGLIGIBLE, scope_waited},
    whose::{self, Whose},
};
use crate::{
    analysis::{
        fmt_ns,
        holder::NamedHolder,
        task,
        victims::{Row, Tables},
    },
    sys::{cgroup_of::TaskCgroups, findings::Findings},
};

/// The diagnosis' name, which others refer to.
pub(crate) const CLASS_OR_PRIORITY: &str = "class or priority";

/// Class or priority is named when culprits that outrank their victims
/// are charged with at least this share of the scope's measured wait.
/// Kernel threads that outrank everyone (migration/N at FIFO 99, nice -20
/// kworkers, RCU and IRQ threads) take a few percent on a busy machine;
/// a quarter is far above that, and means a structural part of the
/// waiting was decided by rule, not by turn.
pub(crate) const OUTRANKED: f64 = 0.25;

/// Victims and culprits of the window, ranked by total wait.
pub(crate) struct Attribution {
    pub tables: Tables,
    /// Waits the full kernel tables could not hold: victims, culprits.
    pub overflow: (u64, u64),
    /// The culprits that outrank the victim they made wait longest, most
    /// charged first.
    pub outranking: Vec<Outranking>,
    /// Processes whose cgroup was throttled in the window: their waits that
    /// ended on an idle CPU were throttling (task::IdleWait).
    pub throttled: std::collections::HashSet<u32>,
    /// Culprit processes that are kernel threads, the scope's own, the
    /// root cgroup's own or exited (whose.rs), as the report names them.
    pub whose: std::collections::HashMap<u32, Whose>,
    /// The other cgroups the scope's waits were charged to by time (the
    /// neighbour pairs: each holder's time on the CPU inside the waits),
    /// most first; None without the pair table.
    pub neighbours: Option<Vec<Charged>>,
    /// Where the scope's wakeups lost at a queue above their own group:
    /// the cgroups inside the group that lost that ran just before those
    /// waits (the pairs' second role: they had used the group's share),
    /// most first; empty without the pair table.
    pub share_users: Vec<ShareCharged>,
}

/// A cgroup that had used the share of `group` (a cgroup the waiters are
/// in) before waits the fair class decided at a queue above the waiters'
/// own, and the time charged to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareCharged {
    pub path: String,
    pub group: String,
    pub charged_ns: u64,
}

/// A cgroup (its path in the hierarchy the pair table reads) and the wait
/// time charged to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Charged {
    pub path: String,
    pub charged_ns: u64,
}

/// A culprit that won by rule, and the wait charged to it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outranking {
    pub culprit: TaskInfo,
    pub victim: TaskInfo,
    pub edge: Edge,
    pub charged_ns: u64,
    pub waits: u64,
}

/// Why a culprit won over its victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Edge {
    /// Deadline over RT or fair, RT over fair (or sched_ext): the higher
    /// class always runs first (kernel/sched/core.c pick_next_task() walks
    /// the classes in order).
    Class,
    /// Both RT, the culprit at a higher rt_priority.
    RtPriority,
    /// Both fair, the culprit with more weight: lower nice, or any fair
    /// task over a SCHED_IDLE one (kernel/sched/core.c sched_prio_to_weight).
    Weight,
}

impl Attribution {
    /// The largest share of `window` one task spent waiting, by eBPF.
    pub(crate) fn max_task_share(&self, window: std::time::Duration) -> f64 {
        let most = self.tables.victims.iter().map(|v| v.total_ns).max();
        most.unwrap_or(0) as f64 / window.as_nanos().max(1) as f64
    }

    /// From the window's ranked tables (all rows: `rank(.., 0)`) and the
    /// cgroups of their tasks.
    pub(crate) fn new(tables: Tables, overflow: (u64, u64), cgroups: &TaskCgroups) -> Attribution {
        let mut outranking: Vec<Outranking> = tables
            .culprits
            .iter()
            .filter_map(outranking)
            .filter(|o| o.edge != Edge::Weight || !in_other_groups(&o.culprit, &o.victim, cgroups))
            .collect();
        outranking.sort_by_key(|o| std::cmp::Reverse(o.charged_ns));
        let whose = whose::of(&tables, cgroups);
        Attribution {
            tables,
            overflow,
            outranking,
            throttled: std::collections::HashSet::new(),
            whose,
            neighbours: None,
            share_users: Vec::new(),
        }
    }

    /// Wait charged to the outranking culprits.
    pub(crate) fn outranking_ns(&self) -> u64 {
        self.outranking.iter().map(|o| o.charged_ns).sum()
    }

    /// Their share of all the wait the scope's victims were measured with.
    pub(crate) fn outranking_share(&self) -> f64 {
        if self.tables.waited_ns == 0 {
            0.0
        } else {
            (self.outranking_ns() as f64 / self.tables.waited_ns as f64).min(1.0)
        }
    }
}

fn outranking(row: &Row) -> Option<Outranking> {
    let edge = outranks(&row.task, &row.other)?;
    Some(Outranking {
        culprit: row.task,
        victim: row.other,
        edge,
        charged_ns: row.total_ns,
        waits: row.count,
    })
}

/// include/uapi/linux/sched.h
const NORMAL: u32 = 0;
const FIFO: u32 = 1;
const RR: u32 = 2;
const BATCH: u32 = 3;
const IDLE: u32 = 5;
const DEADLINE: u32 = 6;
const EXT: u32 = 7;

/// Whether `culprit` wins over `victim` by rule, and by which. Idle tasks
/// (pid 0) never do: a wait that ends on an idle CPU is the wakeup path.
pub(crate) fn outranks(culprit: &TaskInfo, victim: &TaskInfo) -> Option<Edge> {
    if culprit.tid == 0 || victim.tid == 0 {
        return None;
    }
    let rank = |p: u32| match p {
        DEADLINE => Some(3),
        FIFO | RR => Some(2),
        NORMAL | BATCH | IDLE | EXT => Some(1),
        _ => None,
    };
    let (c, v) = (rank(culprit.policy)?, rank(victim.policy)?);
    if c > v {
        return Some(Edge::Class);
    }
    if c < v {
        return None;
    }
    match (culprit.policy, victim.policy) {
        (FIFO | RR, FIFO | RR) if culprit.rt_priority > victim.rt_priority => {
            Some(Edge::RtPriority)
        }
        // sched_ext decides by its own rules: not compared.
        (EXT, _) | (_, EXT) => None,
        (IDLE, _) => None,
        (_, IDLE) => Some(Edge::Weight),
        (NORMAL | BATCH, NORMAL | BATCH) if culprit.static_prio < victim.static_prio => {
            Some(Edge::Weight)
        }
        _ => None,
    }
}

/// Nice orders tasks only within one group: across cpu cgroups (or
/// autogroups) the groups' weights decide (kernel/sched/fair.c, one cfs_rq
/// per task group). True when both tasks were still there and sat in
/// different groups; a task that is gone is given the benefit of the doubt.
fn in_other_groups(a: &TaskInfo, b: &TaskInfo, cgroups: &TaskCgroups) -> bool {
    match (cgroups.cpu_group(a.tid), cgroups.cpu_group(b.tid)) {
        (Some(x), Some(y)) => x != y,
        _ => false,
    }
}

/// RT or lower-nice culprits preempting the scope's tasks: named when
/// they are charged with at least OUTRANKED of the scope's measured wait
/// and the scope waited at all.
pub(crate) fn priority(
    f: &Findings,
    a: &Attribution,
    ebpf: Option<EbpfWaiting>,
) -> Option<Diagnosis> {
    let share = a.outranking_share();
    let waited = scope_waited(f, ebpf);
    if share < OUTRANKED || waited < NEGLIGIBLE {
        return None;
    }
    // The culprits that matter: a migration/N thread (FIFO 99) that took
    // a few microseconds is not evidence.
    let named: Vec<&Outranking> = a
        .outranking
        .iter()
        .filter(|o| o.charged_ns as f64 >= a.tables.waited_ns as f64 * 0.01)
        .take(3)
        .collect();
    let top: Vec<String> = (named.iter())
        .map(|o| {
            format!(
                "{} ({}) over {} ({}): {} in {} waits, {:.0}% of the measured wait",
                task::short(&o.culprit),
                task::sched_label(&o.culprit),
                task::short(&o.victim),
                task::sched_label(&o.victim),
                fmt_ns(o.charged_ns),
                o.waits,
                o.charged_ns as f64 / a.tables.waited_ns.max(1) as f64 * 100.0
            )
        })
        .collect();
    let more = a.outranking.len().saturating_sub(top.len());
    let more = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    let rt = a.outranking.iter().any(|o| o.edge != Edge::Weight);
    let weight = a.outranking.iter().any(|o| o.edge == Edge::Weight);
    let mut steps = Vec::new();
    if rt {
        steps.push("move the RT/deadline task off the victim's CPUs (taskset, cpuset) or lower its priority (chrt); or, with care, make the victim SCHED_FIFO (chrt -f): an RT task that spins starves everything below it");
    }
    if weight {
        steps.push("renice the culprit (renice -n 0 -p PID) or give the victim a lower nice (renice, CAP_SYS_NICE); to separate services, give them cgroups with their own cpu.weight");
    }
    Some(Diagnosis {
        name: CLASS_OR_PRIORITY,
        strength: waited * share,
        evidence: format!(
            "{:.0}% of the scope's measured wait ({} of {}) is charged to culprits that outrank the task they made wait (higher class, higher RT priority or lower nice): {}{more}",
            share * 100.0,
            fmt_ns(a.outranking_ns()),
            fmt_ns(a.tables.waited_ns),
            top.join("; ")
        ),
        next_step: steps.join("; "),
        holders: named.iter().map(|o| NamedHolder::Task(o.culprit)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::analysis::{
        task::tests::task,
        victims::{SortKey, rank},
    };

    #[test]
    fn classes_rt_priorities_and_weights_order_tasks() {
        let normal = |nice| task(10, 10, "n", NORMAL, nice, 0);
        let fifo = |p| task(11, 11, "f", FIFO, 0, p);
        let dl = task(12, 12, "d", DEADLINE, 0, 0);
        let idle_policy = task(13, 13, "i", IDLE, 0, 0);
        let batch = task(14, 14, "b", BATCH, 0, 0);
        let swapper = task(0, 0, "swapper/1", NORMAL, 0, 0);
        assert_eq!(outranks(&fifo(50), &normal(0)), Some(Edge::Class));
        assert_eq!(outranks(&dl, &fifo(99)), Some(Edge::Class));
        assert_eq!(outranks(&normal(-20), &fifo(1)), None);
        assert_eq!(outranks(&fifo(50), &fifo(49)), Some(Edge::RtPriority));
        assert_eq!(outranks(&fifo(50), &fifo(50)), None);
        assert_eq!(outranks(&normal(-10), &normal(0)), Some(Edge::Weight));
        assert_eq!(outranks(&normal(0), &normal(0)), None);
        assert_eq!(outranks(&normal(5), &normal(0)), None);
        assert_eq!(outranks(&normal(0), &idle_policy), Some(Edge::Weight));
        assert_eq!(outranks(&idle_policy, &normal(19)), None);
        assert_eq!(outranks(&batch, &normal(0)), None);
        assert_eq!(outranks(&swapper, &normal(0)), None);
        assert_eq!(outranks(&task(15, 15, "x", 4, 0, 0), &normal(0)), None);
    }

    #[test]
    fn the_share_is_of_the_wait_charged_to_outranking_culprits() {
        let victim = task(20, 20, "victim", NORMAL, 0, 0);
        let culprit = |t: TaskInfo, total_ns| WaitStats {
            task: t,
            count: 10,
            total_ns,
            max_ns: total_ns / 10,
            max_other: victim,
            ..Default::default()
        };
        // No cgroups read: no cgroup check applies.
        let rows = [
            culprit(task(4_000_001, 4_000_001, "rt-hog", FIFO, 0, 50), 600),
            culprit(task(4_000_002, 4_000_002, "peer", NORMAL, 0, 0), 300),
            culprit(task(0, 0, "swapper/1", NORMAL, 0, 0), 100),
        ];
        let victims = [schedlat_common::victims::WaitStats {
            task: victim,
            count: 30,
            total_ns: 1_000,
            max_ns: 60,
            ..Default::default()
        }];
        let a = Attribution::new(
            rank(&victims, &rows, SortKey::Total, 0),
            (0, 0),
            &TaskCgroups::default(),
        );
        assert_eq!(a.outranking.len(), 1);
        assert_eq!(a.outranking[0].edge, Edge::Class);
        assert_eq!(a.outranking_ns(), 600);
        assert!((a.outranking_share() - 0.6).abs() < 1e-9);
    }

    /// Nice decides only inside one cpu group: a lower-nice culprit in
    /// another group (or autogroup) won by the groups' weights, not by its
    /// nice; a class edge holds across groups.
    #[test]
    fn weight_outranks_only_inside_one_cpu_group() {
        let victim = task(30, 30, "victim", NORMAL, 0, 0);
        let culprit = |t: TaskInfo| WaitStats {
            task: t,
            count: 10,
            total_ns: 500,
            max_other: victim,
            ..Default::default()
        };
        let rows = [
            culprit(task(31, 31, "reniced", NORMAL, -10, 0)),
            culprit(task(32, 32, "rt-hog", FIFO, 0, 50)),
        ];
        let attribute = |groups: &[(u32, &str)]| {
            let cgroups = TaskCgroups {
                cpu_groups: groups
                    .iter()
                    .map(|&(tid, g)| (tid, Some(g.to_string())))
                    .collect(),
                ..TaskCgroups::default()
            };
            let a = Attribution::new(rank(&[], &rows, SortKey::Total, 0), (0, 0), &cgroups);
            a.outranking.iter().map(|o| o.edge).collect::<Vec<_>>()
        };
        let same = attribute(&[(30, "/app "), (31, "/app "), (32, "/batch ")]);
        assert_eq!(same, [Edge::Weight, Edge::Class]);
        let apart = attribute(&[(30, "/app "), (31, "/batch "), (32, "/batch ")]);
        assert_eq!(apart, [Edge::Class]);
    }
}
