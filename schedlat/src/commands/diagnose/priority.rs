//! Who waited in the scope and who held the CPU instead (the victims
//! tables of the window, docs/victims.md), and which of those culprits won
//! by rule rather than by turn: a higher scheduling class (deadline over RT
//! over the fair classes), a higher RT priority, or more weight among fair
//! tasks (a lower nice; any fair task over SCHED_IDLE). Waits charged to
//! such culprits are explained by class or priority; the rest by too
//! little CPU for peers (saturation, pinning).

use std::fs;

use schedlat_common::victims::TaskInfo;

use crate::analysis::victims::{Row, Tables};

/// Victims and culprits of the window, ranked by total wait.
pub struct Attribution {
    pub tables: Tables,
    /// Waits the full kernel tables could not hold: victims, culprits.
    pub overflow: (u64, u64),
    /// The culprits that outrank the victim they made wait longest, most
    /// charged first.
    pub outranking: Vec<Outranking>,
    /// Processes whose cgroup was throttled in the window: their waits that
    /// ended on an idle CPU were throttling (task::IdleWait).
    pub throttled: std::collections::HashSet<u32>,
}

/// A culprit that won by rule, and the wait charged to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outranking {
    pub culprit: TaskInfo,
    pub victim: TaskInfo,
    pub edge: Edge,
    pub charged_ns: u64,
    pub waits: u64,
}

/// Why a culprit won over its victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edge {
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
    pub fn max_task_share(&self, window: std::time::Duration) -> f64 {
        let most = self.tables.victims.iter().map(|v| v.total_ns).max();
        most.unwrap_or(0) as f64 / window.as_nanos().max(1) as f64
    }

    /// From the window's ranked tables (all rows: `rank(.., 0)`).
    pub fn new(tables: Tables, overflow: (u64, u64)) -> Attribution {
        let mut outranking: Vec<Outranking> = tables
            .culprits
            .iter()
            .filter_map(outranking)
            .filter(|o| o.edge != Edge::Weight || !in_other_groups(&o.culprit, &o.victim))
            .collect();
        outranking.sort_by_key(|o| std::cmp::Reverse(o.charged_ns));
        Attribution {
            tables,
            overflow,
            outranking,
            throttled: std::collections::HashSet::new(),
        }
    }

    /// Wait charged to the outranking culprits.
    pub fn outranking_ns(&self) -> u64 {
        self.outranking.iter().map(|o| o.charged_ns).sum()
    }

    /// Their share of all the wait the scope's victims were measured with.
    pub fn outranking_share(&self) -> f64 {
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
pub fn outranks(culprit: &TaskInfo, victim: &TaskInfo) -> Option<Edge> {
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
/// per task group). True when both tasks are still there and sit in
/// different groups; a task that is gone is given the benefit of the doubt.
fn in_other_groups(a: &TaskInfo, b: &TaskInfo) -> bool {
    match (cpu_group(a.tid), cpu_group(b.tid)) {
        (Some(x), Some(y)) => x != y,
        _ => false,
    }
}

/// The cpu controller's group of a thread: the v1 `cpu` line of
/// /proc/TID/cgroup if there is one, else the v2 path when the v2 root
/// delegates the cpu controller, plus its autogroup when autogroups are on.
fn cpu_group(tid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
    let lines = crate::sys::procfs::parse_proc_cgroup(&text).ok()?;
    let v1 = lines
        .iter()
        .find(|l| l.controllers.iter().any(|c| c == "cpu"));
    let v2_cpu = super::scope::Mounts::read().v2.is_some_and(|m| {
        fs::read_to_string(m.join("cgroup.subtree_control"))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"))
    });
    let group = match v1 {
        Some(l) => l.path.clone(),
        None if v2_cpu => lines.iter().find(|l| l.hierarchy == 0)?.path.clone(),
        None => "/".to_string(),
    };
    let autogroups = fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .is_ok_and(|t| t.trim() == "1");
    // Autogroups only apply to tasks of the root group.
    let auto = if autogroups && group == "/" {
        fs::read_to_string(format!("/proc/{tid}/autogroup"))
            .ok()
            .and_then(|t| t.split_whitespace().next().map(str::to_string))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Some(format!("{group} {auto}"))
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
        // TIDs no process has: no cgroup check applies.
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
        let a = Attribution::new(rank(&victims, &rows, SortKey::Total, 0), (0, 0));
        assert_eq!(a.outranking.len(), 1);
        assert_eq!(a.outranking[0].edge, Edge::Class);
        assert_eq!(a.outranking_ns(), 600);
        assert!((a.outranking_share() - 0.6).abs() < 1e-9);
    }
}
