//! Victims and culprits of one interval, ranked: per task that waited, per
//! task that held the CPU when a wait ended, and per culprit process
//! (docs/victims.md says what the attribution means and what it does not).

use std::collections::{BTreeMap, HashSet, btree_map::Entry};

use schedlat_common::victims::{ROW_DECISIONS, ROW_HOLDERS, ROW_OUTCOMES, TaskInfo, WaitStats};

use crate::{collect::victims::VictimsInterval, sys::throttle::ThrottleWatch};

/// What the tables are ranked by (`--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SortKey {
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
    /// The key after this one, for a key that cycles through them all
    /// (`schedlat top`'s `s`): total, max, count, avg, total.
    pub(crate) fn next(self) -> SortKey {
        match self {
            SortKey::Total => SortKey::Max,
            SortKey::Max => SortKey::Count,
            SortKey::Count => SortKey::Avg,
            SortKey::Avg => SortKey::Total,
        }
    }

    /// "longest wait", ...: what a table is ranked by, for titles.
    pub(crate) fn title(self) -> &'static str {
        match self {
            SortKey::Max => "longest wait",
            SortKey::Total => "total wait",
            SortKey::Count => "number of waits",
            SortKey::Avg => "average wait",
        }
    }

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
pub(crate) struct Row {
    pub task: TaskInfo,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// CLOCK_MONOTONIC at the end of the longest wait.
    pub max_at_ns: u64,
    pub max_cpu: u32,
    pub other: TaskInfo,
    /// The waits by how they began: woken, new, preempted (a culprit row:
    /// the waits that ended when it left the CPU); and those that ended on
    /// another CPU than the waiter last ran on (docs/causes.md).
    pub kinds: [u64; 3],
    pub migrated: u64,
    /// The decision split of its waits (docs/decision.md), all 0 when the
    /// load did not split them: by decision (`Decision` index), by outcome
    /// (`Outcome` index), by how the holder left (`Holder` index), and the
    /// pass-overs counted.
    pub decisions: [u64; ROW_DECISIONS],
    pub outcomes: [u64; ROW_OUTCOMES],
    pub holders: [u64; ROW_HOLDERS],
    pub passes: u64,
    /// A culprit row's charge by time: its time on a CPU inside the waits
    /// that ended there (0 in a victim row).
    pub held_ns: u64,
}

/// A row's waits by cause, as shares of its waits (docs/victims.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RowCauses {
    pub woken: f64,
    pub new: f64,
    pub preempted: f64,
    pub migrated: f64,
}

impl Row {
    pub(crate) fn avg_ns(&self) -> u64 {
        avg_ns(self.total_ns, self.count)
    }

    /// The shares of its waits that were woken, new, preempted and
    /// migrated; None when the kernel classified none of them (a load
    /// without the split) or there were none.
    pub(crate) fn causes(&self) -> Option<RowCauses> {
        let classified: u64 = self.kinds.iter().sum();
        if classified == 0 {
            return None;
        }
        let of = |n: u64| n as f64 / classified as f64;
        Some(RowCauses {
            woken: of(self.kinds[0]),
            new: of(self.kinds[1]),
            preempted: of(self.kinds[2]),
            migrated: of(self.migrated),
        })
    }

    /// The waits the decision split saw (0: the load did not split them).
    pub(crate) fn decided(&self) -> u64 {
        self.outcomes.iter().sum()
    }

    fn key(&self, by: SortKey) -> u64 {
        by.value(self.count, self.total_ns, self.max_ns)
    }

    /// Adds a later interval's row of the same task: counts and totals add
    /// up, the longest wait is the longer one, the identity is the latest.
    fn absorb(&mut self, later: &Row) {
        self.count += later.count;
        self.total_ns += later.total_ns;
        self.held_ns += later.held_ns;
        for (sum, n) in self.kinds.iter_mut().zip(later.kinds) {
            *sum += n;
        }
        self.migrated += later.migrated;
        for (sum, n) in self.decisions.iter_mut().zip(later.decisions) {
            *sum += n;
        }
        for (sum, n) in self.outcomes.iter_mut().zip(later.outcomes) {
            *sum += n;
        }
        for (sum, n) in self.holders.iter_mut().zip(later.holders) {
            *sum += n;
        }
        self.passes += later.passes;
        if later.max_ns > self.max_ns {
            self.max_ns = later.max_ns;
            self.max_at_ns = later.max_at_ns;
            self.max_cpu = later.max_cpu;
            self.other = later.other;
        }
        self.task = later.task;
    }
}

impl From<&WaitStats> for Row {
    fn from(v: &WaitStats) -> Row {
        Row {
            task: v.task,
            count: v.count,
            total_ns: v.total_ns,
            max_ns: v.max_ns,
            max_at_ns: v.max_at_ns,
            max_cpu: v.max_cpu,
            other: v.max_other,
            kinds: v.kinds.map(u64::from),
            migrated: u64::from(v.migrated),
            decisions: v.decisions.map(u64::from),
            outcomes: v.outcomes.map(u64::from),
            holders: v.holders.map(u64::from),
            passes: u64::from(v.passes),
            held_ns: v.held_ns,
        }
    }
}

/// The wait charged to one process's threads (idle tasks: pid 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessRow {
    pub pid: u32,
    /// The comm of its main thread if it was a culprit, else of its
    /// busiest culprit thread until [`name_processes`] gives it the
    /// process's own name (a thread's, such as rustc's `lto cgu.08`, is
    /// not the process's).
    pub comm: TaskInfo,
    pub threads: usize,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Its threads' time on the CPU inside the waits (Row::held_ns).
    pub held_ns: u64,
}

impl ProcessRow {
    pub(crate) fn avg_ns(&self) -> u64 {
        avg_ns(self.total_ns, self.count)
    }

    /// By the waits its threads ended, as a victim row's key (after the
    /// time held: `rank_rows`).
    fn key(&self, by: SortKey) -> u64 {
        by.value(self.count, self.total_ns, self.max_ns)
    }
}

/// The three tables, ranked, each cut to `top` rows, with what was cut.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
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
pub(crate) fn rank(
    victims: &[WaitStats],
    culprits: &[WaitStats],
    by: SortKey,
    top: usize,
) -> Tables {
    rank_rows(
        victims.iter().map(Row::from).collect(),
        culprits.iter().map(Row::from).collect(),
        by,
        top,
    )
}

/// `rank`, for rows already converted (or added up: [`Totals`]).
pub(crate) fn rank_rows(mut v: Vec<Row>, mut c: Vec<Row>, by: SortKey, top: usize) -> Tables {
    let mut p = processes(&c);
    let order = |a: &Row, b: &Row| b.key(by).cmp(&a.key(by)).then(a.task.tid.cmp(&b.task.tid));
    v.sort_by(order);
    // Culprits by their time on the CPU inside the waits, whatever the
    // victims' key: the last holder alone is not who made a wait long
    // (docs/victims.md); then by the waits they ended.
    c.sort_by(|a, b| {
        (b.held_ns.cmp(&a.held_ns))
            .then(b.key(by).cmp(&a.key(by)))
            .then(a.task.tid.cmp(&b.task.tid))
    });
    p.sort_by(|a, b| {
        (b.held_ns.cmp(&a.held_ns))
            .then(b.key(by).cmp(&a.key(by)))
            .then(a.pid.cmp(&b.pid))
    });
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

/// Names the culprit processes whose main thread was no culprit after the
/// process (`name_of(pid)`: its main thread's comm, as /proc/PID/comm
/// gives it, None when it is gone; then the busiest thread's name stays).
pub(crate) fn name_processes(tables: &mut Tables, name_of: impl Fn(u32) -> Option<String>) {
    for p in &mut tables.processes {
        if p.pid == 0 || p.comm.tid == p.pid {
            continue;
        }
        if let Some(name) = name_of(p.pid) {
            let mut comm = [0u8; 16];
            let n = name.len().min(comm.len() - 1);
            comm[..n].copy_from_slice(&name.as_bytes()[..n]);
            p.comm.comm = comm;
            p.comm.tid = p.pid;
        }
    }
}

/// Culprit threads added up per process. The idle tasks (pid 0, one per
/// CPU) make one process, pid 0.
fn processes(culprits: &[Row]) -> Vec<ProcessRow> {
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
            held_ns: 0,
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
        row.held_ns += c.held_ns;
        row.max_ns = row.max_ns.max(c.max_ns);
    }
    by_pid.into_values().collect()
}

/// Tasks each of [`Totals`]' tables holds; the waits of tasks beyond it are
/// counted, not added (a day of short-lived processes must not grow the
/// view without bound).
pub(crate) const TOTALS_MAX_TASKS: usize = 65_536;

/// Victims and culprits added up over intervals (`schedlat top`'s
/// cumulative view): one row per task, as one long interval would have it.
/// A task is its TID and process (a reused TID in another process is
/// another task); the idle tasks, all TID 0, are one per CPU.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    victims: BTreeMap<(u32, u32, u32), Row>,
    culprits: BTreeMap<(u32, u32, u32), Row>,
    /// Waits not added because a table was full: victims, culprits.
    pub overflow: (u64, u64),
}

impl Totals {
    pub(crate) fn add(&mut self, victims: &[WaitStats], culprits: &[WaitStats]) {
        let full = add_rows(&mut self.victims, victims.iter().map(Row::from));
        self.overflow.0 += full;
        let full = add_rows(&mut self.culprits, culprits.iter().map(Row::from));
        self.overflow.1 += full;
    }

    pub(crate) fn rank(&self, by: SortKey, top: usize) -> Tables {
        rank_rows(
            self.victims.values().copied().collect(),
            self.culprits.values().copied().collect(),
            by,
            top,
        )
    }
}

/// Adds rows to a table; returns the waits of rows that found it full.
fn add_rows(table: &mut BTreeMap<(u32, u32, u32), Row>, rows: impl Iterator<Item = Row>) -> u64 {
    let mut lost = 0;
    for row in rows {
        let idle_cpu = if row.task.tid == 0 { row.max_cpu } else { 0 };
        let key = (row.task.tid, row.task.tgid, idle_cpu);
        let room = table.len() < TOTALS_MAX_TASKS;
        match table.entry(key) {
            Entry::Occupied(mut total) => total.get_mut().absorb(&row),
            Entry::Vacant(slot) if room => {
                slot.insert(row);
            }
            Entry::Vacant(_) => lost += row.count,
        }
    }
    lost
}

/// The processes of the rows' idle-ended waits whose cgroup was throttled
/// in the interval `watch` last ended: victims whose longest wait's culprit
/// was idle, and the longest victims of the idle culprits.
pub(crate) fn throttled_pids(watch: &ThrottleWatch, tables: &Tables) -> HashSet<u32> {
    let pairs = |rows: &[Row]| -> Vec<(TaskInfo, TaskInfo)> {
        rows.iter().map(|r| (r.task, r.other)).collect()
    };
    throttled(watch, &pairs(&tables.victims), &pairs(&tables.culprits))
}

/// `throttled_pids`, over an interval's rows before any ranking (`top`).
pub(crate) fn throttled_in(watch: &ThrottleWatch, interval: &VictimsInterval) -> HashSet<u32> {
    let pairs = |rows: &[WaitStats]| -> Vec<(TaskInfo, TaskInfo)> {
        rows.iter().map(|r| (r.task, r.max_other)).collect()
    };
    throttled(watch, &pairs(&interval.victims), &pairs(&interval.culprits))
}

/// Of (task, the other side of its longest wait) rows: the victims whose
/// culprit was idle and the idle culprits' victims, when throttled.
fn throttled(
    watch: &ThrottleWatch,
    victims: &[(TaskInfo, TaskInfo)],
    culprits: &[(TaskInfo, TaskInfo)],
) -> HashSet<u32> {
    let victims = victims
        .iter()
        .filter(|(_, culprit)| culprit.tid == 0)
        .map(|(victim, _)| victim.tgid);
    let of_idle = culprits
        .iter()
        .filter(|(culprit, _)| culprit.tid == 0)
        .map(|(_, victim)| victim.tgid);
    victims
        .chain(of_idle)
        .filter(|&pid| pid != 0 && watch.throttled(pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::task::{comm, tests::task};

    fn victim(tid: u32, count: u64, total_ns: u64, max_ns: u64, culprit: TaskInfo) -> WaitStats {
        WaitStats {
            task: task(tid, tid, "v", 0, 0, 0),
            count,
            total_ns,
            max_ns,
            max_other: culprit,
            ..Default::default()
        }
    }

    fn culprit(t: TaskInfo, cpu: u32, count: u64, total_ns: u64, max_ns: u64) -> WaitStats {
        WaitStats {
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

    /// A brief sleeper that ended most of a loop's waits (the last
    /// holder) held the CPU for little of them: the culprits and their
    /// processes rank by the time held whatever the victims' key; rows
    /// that held nothing, by that key.
    #[test]
    fn culprits_rank_by_time_held() {
        let held = |mut row: WaitStats, ns| {
            row.held_ns = ns;
            row
        };
        let sleeper = task(10, 10, "sleeper", 0, 0, 0);
        let loop_a = task(20, 20, "loop", 0, 0, 0);
        let loop_b = task(21, 20, "loop", 0, 0, 0);
        let rows = [
            held(culprit(sleeper, 1, 900, 9_000_000, 20_000), 50_000),
            held(culprit(loop_a, 1, 100, 1_000_000, 30_000), 4_000_000),
            held(culprit(loop_b, 1, 50, 500_000, 40_000), 3_000_000),
        ];
        let tids = |by| -> Vec<u32> {
            let t = rank(&[], &rows, by, 0);
            t.culprits.iter().map(|r| r.task.tid).collect()
        };
        for by in [SortKey::Total, SortKey::Count, SortKey::Max, SortKey::Avg] {
            assert_eq!(tids(by), [20, 21, 10], "{by:?}");
        }
        let none = [culprit(loop_a, 1, 1, 10, 10), culprit(sleeper, 1, 5, 5, 1)];
        let t = rank(&[], &none, SortKey::Count, 0);
        assert_eq!(t.culprits[0].task.tid, 10);
        let t = rank(&[], &rows, SortKey::Total, 0);
        let pids: Vec<(u32, u64)> = t.processes.iter().map(|p| (p.pid, p.held_ns)).collect();
        assert_eq!(pids, [(20, 7_000_000), (10, 50_000)]);
        // Over intervals, the time held adds up too.
        let mut totals = Totals::default();
        totals.add(&[], &rows);
        totals.add(&[], &rows[..1]);
        let t = totals.rank(SortKey::Total, 0);
        assert_eq!(t.culprits[2].held_ns, 100_000);
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

    /// Issue 28: rustc's process row was called after its busiest thread
    /// (`lto cgu.08`), its main thread being no culprit; it gets the
    /// process's name, and keeps the thread's when the process is gone.
    #[test]
    fn a_process_is_named_after_itself_not_its_busiest_thread() {
        let lto = task(601, 600, "lto cgu.08", 0, 0, 0);
        let gone = task(701, 700, "worker", 0, 0, 0);
        let rows = [
            culprit(lto, 0, 5, 5_000, 3_000),
            culprit(gone, 0, 1, 100, 100),
        ];
        let mut t = rank(&[], &rows, SortKey::Total, 0);
        assert_eq!(comm(&t.processes[0].comm), "lto cgu.08");
        name_processes(&mut t, |pid| (pid == 600).then(|| "rustc".to_string()));
        assert_eq!(comm(&t.processes[0].comm), "rustc");
        assert_eq!(comm(&t.processes[1].comm), "worker");
    }

    #[test]
    fn sort_keys_cycle_through_all_four() {
        let mut k = SortKey::Total;
        let mut seen = vec![k];
        for _ in 0..3 {
            k = k.next();
            seen.push(k);
        }
        assert_eq!(
            seen,
            [SortKey::Total, SortKey::Max, SortKey::Count, SortKey::Avg]
        );
        assert_eq!(k.next(), SortKey::Total);
    }

    #[test]
    fn totals_add_up_intervals_per_task() {
        let hog = task(917, 917, "cal.sh", 0, 0, 0);
        let other = task(918, 918, "cal.sh", 0, 0, 0);
        let mut totals = Totals::default();
        totals.add(&[victim(1, 10, 1_000, 900, hog)], &[]);
        let mut later = victim(1, 5, 2_000, 1_500, other);
        later.max_cpu = 1;
        totals.add(&[later, victim(2, 1, 10, 10, hog)], &[]);
        let t = totals.rank(SortKey::Total, 0);
        assert_eq!(t.victims.len(), 2);
        let r = &t.victims[0];
        assert_eq!((r.task.tid, r.count, r.total_ns), (1, 15, 3_000));
        // The longest wait and its culprit come from the interval that had it.
        assert_eq!((r.max_ns, r.max_cpu, r.other.tid), (1_500, 1, 918));
        // The causes add up like the counts (neither row set them here).
        assert_eq!(r.causes(), None);
        assert_eq!((t.waits, t.waited_ns), (16, 3_010));
    }

    #[test]
    fn totals_keep_idle_tasks_per_cpu_and_count_what_does_not_fit() {
        let mut totals = Totals::default();
        let idle = |cpu| culprit(task(0, 0, "swapper", 0, 0, 0), cpu, 2, 20, 15);
        totals.add(&[], &[idle(0), idle(1)]);
        totals.add(&[], &[idle(1)]);
        let t = totals.rank(SortKey::Count, 0);
        assert_eq!(t.culprits.len(), 2);
        assert_eq!(t.culprits[0].count, 4);

        let mut table = BTreeMap::new();
        let rows = (0..TOTALS_MAX_TASKS as u32 + 2)
            .map(|tid| Row::from(&victim(tid + 1, 3, 3, 1, task(9, 9, "x", 0, 0, 0))));
        assert_eq!(add_rows(&mut table, rows), 6);
        assert_eq!(table.len(), TOTALS_MAX_TASKS);
    }

    #[test]
    fn causes_are_shares_of_the_classified_waits_summed_over_intervals() {
        let hog = task(917, 917, "cal.sh", 0, 0, 0);
        let mut first = victim(1, 10, 1_000, 900, hog);
        first.kinds = [8, 0, 2];
        first.migrated = 1;
        let mut later = victim(1, 10, 1_000, 900, hog);
        later.kinds = [2, 0, 8];
        later.migrated = 3;
        let mut totals = Totals::default();
        totals.add(&[first], &[]);
        totals.add(&[later], &[]);
        let r = totals.rank(SortKey::Total, 0).victims[0];
        assert_eq!((r.kinds, r.migrated), ([10, 0, 10], 4));
        let c = r.causes().unwrap();
        assert_eq!(
            (c.woken, c.new, c.preempted, c.migrated),
            (0.5, 0.0, 0.5, 0.2)
        );
    }

    #[test]
    fn average_of_nothing_is_zero() {
        let r = Row::from(&WaitStats::default());
        assert_eq!(r.avg_ns(), 0);
    }
}
