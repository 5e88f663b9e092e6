//! Victims and culprits of one interval, ranked: per task that waited, per
//! task that held the CPU when a wait ended, and per culprit process
//! (docs/victims.md says what the attribution means and what it does not).

use std::collections::BTreeMap;

use schedlat_common::victims::{CulpritStats, TaskInfo, VictimStats};

/// What the tables are ranked by (`--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// Longest single wait
    Max,
    /// Sum of the waits
    Total,
    /// Number of waits
    Count,
    /// Mean wait
    Avg,
}

impl SortKey {
    /// The value a row is ranked by, from its count, total and max.
    fn value(self, count: u64, total_ns: u64, max_ns: u64) -> u64 {
        match self {
            SortKey::Max => max_ns,
            SortKey::Total => total_ns,
            SortKey::Count => count,
            SortKey::Avg => avg_ns(total_ns, count),
        }
    }
}

fn avg_ns(total_ns: u64, count: u64) -> u64 {
    total_ns.checked_div(count).unwrap_or(0)
}

/// One task's waits: as a victim (waited) or as a culprit (was switched out
/// when they ended). `other` is the task on the other side of the longest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub task: TaskInfo,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// CLOCK_MONOTONIC at the end of the longest wait.
    pub max_at_ns: u64,
    pub max_cpu: u32,
    pub other: TaskInfo,
}

impl Row {
    pub fn avg_ns(&self) -> u64 {
        avg_ns(self.total_ns, self.count)
    }

    fn key(&self, by: SortKey) -> u64 {
        by.value(self.count, self.total_ns, self.max_ns)
    }
}

impl From<&VictimStats> for Row {
    fn from(v: &VictimStats) -> Row {
        Row {
            task: v.task,
            count: v.count,
            total_ns: v.total_ns,
            max_ns: v.max_ns,
            max_at_ns: v.max_at_ns,
            max_cpu: v.max_cpu,
            other: v.max_culprit,
        }
    }
}

impl From<&CulpritStats> for Row {
    fn from(c: &CulpritStats) -> Row {
        Row {
            task: c.task,
            count: c.count,
            total_ns: c.total_ns,
            max_ns: c.max_ns,
            max_at_ns: c.max_at_ns,
            max_cpu: c.max_cpu,
            other: c.max_victim,
        }
    }
}

/// The wait charged to one process's threads (idle tasks: pid 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    pub pid: u32,
    /// The comm of its main thread if it was a culprit, else of its
    /// busiest culprit thread.
    pub comm: TaskInfo,
    pub threads: usize,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl ProcessRow {
    pub fn avg_ns(&self) -> u64 {
        avg_ns(self.total_ns, self.count)
    }

    fn key(&self, by: SortKey) -> u64 {
        by.value(self.count, self.total_ns, self.max_ns)
    }
}

/// The three tables, ranked, each cut to `top` rows, with what was cut.
#[derive(Debug, Clone)]
pub struct Tables {
    pub victims: Vec<Row>,
    pub culprits: Vec<Row>,
    pub processes: Vec<ProcessRow>,
    /// Rows before the cut: victims, culprits, culprit processes.
    pub totals: (usize, usize, usize),
    /// All waits in the victims table, and their sum.
    pub waits: u64,
    pub waited_ns: u64,
}

/// Ranks an interval's rows by `by` (descending; ties by TID) and keeps the
/// first `top` of each table (0 = all).
pub fn rank(victims: &[VictimStats], culprits: &[CulpritStats], by: SortKey, top: usize) -> Tables {
    let mut v: Vec<Row> = victims.iter().map(Row::from).collect();
    let mut c: Vec<Row> = culprits.iter().map(Row::from).collect();
    let mut p = processes(culprits);
    let order = |a: &Row, b: &Row| b.key(by).cmp(&a.key(by)).then(a.task.tid.cmp(&b.task.tid));
    v.sort_by(order);
    c.sort_by(order);
    p.sort_by(|a, b| b.key(by).cmp(&a.key(by)).then(a.pid.cmp(&b.pid)));
    let totals = (v.len(), c.len(), p.len());
    let waits = v.iter().map(|r| r.count).sum();
    let waited_ns = v.iter().map(|r| r.total_ns).sum();
    if top > 0 {
        v.truncate(top);
        c.truncate(top);
        p.truncate(top);
    }
    Tables {
        victims: v,
        culprits: c,
        processes: p,
        totals,
        waits,
        waited_ns,
    }
}

/// Culprit threads added up per process. The idle tasks (pid 0, one per
/// CPU) make one process, pid 0.
fn processes(culprits: &[CulpritStats]) -> Vec<ProcessRow> {
    let mut by_pid: BTreeMap<u32, ProcessRow> = BTreeMap::new();
    for c in culprits {
        let pid = c.task.tgid;
        let row = by_pid.entry(pid).or_insert_with(|| ProcessRow {
            pid,
            comm: c.task,
            threads: 0,
            count: 0,
            total_ns: 0,
            max_ns: 0,
        });
        let is_main = c.task.tid == pid;
        let row_main = row.comm.tid == pid;
        // Name the process after its main thread; else its busiest thread.
        if is_main || (!row_main && c.total_ns > row.total_ns) {
            row.comm = c.task;
        }
        row.threads += 1;
        row.count += c.count;
        row.total_ns += c.total_ns;
        row.max_ns = row.max_ns.max(c.max_ns);
    }
    by_pid.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{comm, tests::task};

    fn victim(tid: u32, count: u64, total_ns: u64, max_ns: u64, culprit: TaskInfo) -> VictimStats {
        VictimStats {
            task: task(tid, tid, "v", 0, 0, 0),
            count,
            total_ns,
            max_ns,
            max_culprit: culprit,
            ..Default::default()
        }
    }

    fn culprit(t: TaskInfo, cpu: u32, count: u64, total_ns: u64, max_ns: u64) -> CulpritStats {
        CulpritStats {
            task: t,
            count,
            total_ns,
            max_ns,
            max_cpu: cpu,
            ..Default::default()
        }
    }

    #[test]
    fn sorts_by_the_chosen_key_and_cuts_to_top() {
        let hog = task(917, 917, "cal.sh", 0, 0, 0);
        let v = [
            victim(1, 10, 1_000, 900, hog),  // max 900, avg 100
            victim(2, 100, 5_000, 200, hog), // total 5000, count 100
            victim(3, 1, 3_000, 3_000, hog), // avg 3000
        ];
        let tids = |by, top| -> Vec<u32> {
            rank(&v, &[], by, top)
                .victims
                .iter()
                .map(|r| r.task.tid)
                .collect()
        };
        assert_eq!(tids(SortKey::Max, 0), [3, 1, 2]);
        assert_eq!(tids(SortKey::Total, 0), [2, 3, 1]);
        assert_eq!(tids(SortKey::Count, 0), [2, 1, 3]);
        assert_eq!(tids(SortKey::Avg, 0), [3, 1, 2]);
        let t = rank(&v, &[], SortKey::Max, 2);
        assert_eq!(t.victims.len(), 2);
        assert_eq!(t.totals.0, 3);
        // Totals count every row, not only the ones shown.
        assert_eq!((t.waits, t.waited_ns), (111, 9_000));
        assert_eq!(comm(&t.victims[0].other), "cal.sh");
    }

    #[test]
    fn culprit_threads_add_up_per_process_named_after_the_main_thread() {
        let worker = task(501, 500, "worker", 0, 0, 0);
        let main = task(500, 500, "server", 0, 0, 0);
        let idle0 = task(0, 0, "swapper/0", 0, 0, 0);
        let idle1 = task(0, 0, "swapper/1", 0, 0, 0);
        let rows = [
            culprit(worker, 0, 5, 5_000, 3_000),
            culprit(main, 1, 1, 100, 100),
            culprit(idle0, 0, 2, 20, 15),
            culprit(idle1, 1, 3, 30, 12),
        ];
        let t = rank(&[], &rows, SortKey::Total, 0);
        assert_eq!(t.culprits.len(), 4, "idle tasks stay one row per CPU");
        assert_eq!(t.processes.len(), 2);
        let server = &t.processes[0];
        assert_eq!((server.pid, server.threads), (500, 2));
        assert_eq!(
            (server.count, server.total_ns, server.max_ns),
            (6, 5_100, 3_000)
        );
        assert_eq!(comm(&server.comm), "server");
        let idle = &t.processes[1];
        assert_eq!((idle.pid, idle.threads, idle.count), (0, 2, 5));
    }

    #[test]
    fn average_of_nothing_is_zero() {
        let r = Row::from(&VictimStats::default());
        assert_eq!(r.avg_ns(), 0);
    }
}
