//! One interval of the victims mode, for people (three tables, perf sched
//! latency style) or as one JSON object (docs/json.md,
//! `schedlat.victims.v1`); with `--stacks`, under each culprit row the
//! hottest stack behind its task (output/hottest.rs).

use std::{
    collections::{HashMap, HashSet},
    fmt::Write as _,
    time::Duration,
};

use serde::Serialize;

use crate::{
    analysis::{
        fmt_ns,
        holder::NamedHolder,
        hottest::{Hottest, Window},
        pairs::PairTable,
        task::{self, IdleWait, TaskJson},
        victims::{ProcessRow, Row, SortKey, Tables},
    },
    collect::{victims::VictimsInterval, workloads::TaskWorkload},
    kernel::hook::HookMode,
    output::{decision, escape, hottest, pairs, workload},
    sys::{
        clock::{WallClock, local_time_us},
        workload::level::Workload,
    },
};

pub(crate) const SCHEMA: &str = "schedlat.victims.v1";

/// Everything one report shows.
pub(crate) struct Report<'a> {
    /// Processes whose cgroup was throttled in the interval: their waits
    /// that ended on an idle CPU were throttling (task::IdleWait).
    pub throttled: &'a HashSet<u32>,
    pub hook: HookMode,
    pub tables: &'a Tables,
    pub interval: &'a VictimsInterval,
    pub elapsed: Duration,
    pub clock: WallClock,
    pub sort: SortKey,
    pub max_tasks: u32,
    pub last: bool,
    /// The rows' tasks as workloads, by TID (read at the interval's end).
    pub workloads: &'a HashMap<u32, TaskWorkload>,
    /// Who waited behind whom, when `--pairs` asked for it.
    pub pairs: Option<&'a PairTable>,
    /// With `--stacks`: the interval's hottest stacks behind each holder,
    /// or why none were taken (said once on stderr, in every JSON object).
    pub stacks: Option<&'a Result<Window, String>>,
}

const ROW_HEADER: &str = "     TID     PID COMM             SCHED          WAITS      TOTAL        AVG        MAX  MAX AT           CPU PRE% MIG%";

pub(crate) fn text(r: &Report) -> String {
    let mut out = String::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let by = r.sort.title();
    let _ = writeln!(
        out,
        "\n{} victims over {:.2} s (tasks that waited for a CPU), by {by}:",
        &local_time_us(now)[..8],
        r.elapsed.as_secs_f64()
    );
    let decision = decision::row::HEADER;
    let _ = writeln!(
        out,
        "{ROW_HEADER}{decision}  CULPRIT OF MAX{WORKLOAD_HEADER}"
    );
    for row in &r.tables.victims {
        task_row(&mut out, row, r, true);
    }
    more(&mut out, r.tables.totals.0, r.tables.victims.len());
    let culprits_by = format!("time held, then {by}");
    let _ = writeln!(
        out,
        "culprits (tasks on the CPU while others waited), by {culprits_by}:"
    );
    let _ = writeln!(out, "{CULPRIT_RULE}");
    let _ = writeln!(
        out,
        "{}{decision}  VICTIM OF MAX{WORKLOAD_HEADER}",
        culprit_header()
    );
    for row in &r.tables.culprits {
        task_row(&mut out, row, r, false);
        if let Some(line) = stack_line(r, row) {
            let _ = writeln!(out, "{STACK_INDENT}{line}");
        }
    }
    more(&mut out, r.tables.totals.1, r.tables.culprits.len());
    let _ = writeln!(out, "culprit processes, by {culprits_by}:");
    let _ = writeln!(
        out,
        "     PID COMM             THREADS       HELD    WAITS      TOTAL        AVG        MAX"
    );
    for p in &r.tables.processes {
        process_row(&mut out, p);
    }
    more(&mut out, r.tables.totals.2, r.tables.processes.len());
    out.push_str(&summary(r));
    if let Some(s @ Ok(_)) = r.stacks {
        let _ = writeln!(out, "{}", hottest::summary(s));
    }
    if let Some(table) = r.pairs {
        out.push_str(&pairs::render_text(table));
    }
    out
}

/// The culprits' header: the victims' with HELD after SCHED.
fn culprit_header() -> String {
    ROW_HEADER.replacen("SCHED          WAITS", "SCHED            HELD     WAITS", 1)
}

/// A culprit row's hottest stack starts under its COMM column.
const STACK_INDENT: &str = "                 ";

/// The window of the interval's stacks, when they were taken.
fn window<'a>(r: &Report<'a>) -> Option<&'a Window> {
    r.stacks?.as_ref().ok()
}

/// The hottest stack behind a culprit row's task, when a slow wait with a
/// stack ended behind it in the interval (never the idle task's: its
/// stack says nothing of a holder, and none is folded).
fn hottest_of<'a>(r: &Report<'a>, row: &Row) -> Option<&'a Hottest> {
    window(r)?.behind(&NamedHolder::Task(row.task))
}

/// The line under a culprit row, diagnose's (output/hottest.rs).
fn stack_line(r: &Report, row: &Row) -> Option<String> {
    hottest::line(window(r)?, &NamedHolder::Task(row.task))
}

/// The workload column, last in a task row: the culprit or victim of the
/// longest wait before it is as wide as its task's name.
const WORKLOAD_HEADER: &str = "  WORKLOAD";

/// A row's task as the workload its cgroup is (output/workload.rs); none
/// for the idle tasks, no cgroup's (their label says what their waits were).
fn workload_cell(row: &Row, r: &Report) -> String {
    if row.task.tid == 0 {
        return String::new();
    }
    format!("  {}", workload::cell(r.workloads.get(&row.task.tid)))
}

/// A row's task's workload, when one is known (not for a task that exited).
fn known<'a>(r: &Report<'a>, row: &Row) -> Option<&'a Workload> {
    r.workloads.get(&row.task.tid)?.workload()
}

/// The culprit rule, said where culprits are shown (docs/victims.md).
pub(crate) const CULPRIT_RULE: &str = "  (HELD: its time on the CPU inside the waits, who made them long; WAITS to MAX: the waits it was last on the CPU for, which a brief task ends for others; swapper = the CPU was idle: a throttled cgroup or a wake onto an idle CPU, as labelled)";

/// A victim row names its longest wait's culprit; a culprit row its
/// longest victim, and for the idle task what its waits were.
fn task_row(out: &mut String, row: &Row, r: &Report, victim: bool) {
    let other = if victim {
        escape::culprit(&row.other, row.task.tgid, r.throttled)
    } else {
        escape::short(&row.other)
    };
    let idle = if !victim && row.task.tid == 0 {
        format!("  {}", IdleWait::of(row.other.tgid, r.throttled).label())
    } else {
        String::new()
    };
    // Shares of the row's waits that were preempted and migrated (the
    // rest of the waits woke, or were a new task's first); "-" where the
    // load did not split them.
    let pct = |share: f64| format!("{:.0}%", share * 100.0);
    let (pre, mig) = row.causes().map_or(("-".into(), "-".into()), |c| {
        (pct(c.preempted), pct(c.migrated))
    });
    let held = match victim {
        true => String::new(),
        false => format!(" {:>10}", fmt_ns(row.held_ns)),
    };
    // A culprit that ran inside waits but ended none: no longest wait.
    let (max_at, other, other_sched) = match row.count {
        0 => (format!("{:<15}", "-"), "-".to_string(), String::new()),
        _ => (
            local_time_us(r.clock.unix_ns(row.max_at_ns)),
            other,
            task::sched_label(&row.other),
        ),
    };
    let _ = write!(
        out,
        "{:>8} {:>7} {:<16} {:<10}{held} {:>9} {:>10} {:>10} {:>10}  {} {:>4} {:>4} {:>4}{}  {} {}{idle}",
        row.task.tid,
        row.task.tgid,
        escape::comm(&row.task),
        task::sched_label(&row.task),
        row.count,
        fmt_ns(row.total_ns),
        fmt_ns(row.avg_ns()),
        fmt_ns(row.max_ns),
        max_at,
        row.max_cpu,
        pre,
        mig,
        decision::row::cells(row),
        other,
        other_sched,
    );
    let _ = writeln!(out, "{}", workload_cell(row, r));
}

fn process_row(out: &mut String, p: &ProcessRow) {
    let name = if p.pid == 0 {
        "(idle)".to_string()
    } else {
        escape::comm(&p.comm)
    };
    let _ = writeln!(
        out,
        "{:>8} {:<16} {:>7} {:>10} {:>8} {:>10} {:>10} {:>10}",
        p.pid,
        name,
        p.threads,
        fmt_ns(p.held_ns),
        p.count,
        fmt_ns(p.total_ns),
        fmt_ns(p.avg_ns()),
        fmt_ns(p.max_ns)
    );
}

fn more(out: &mut String, total: usize, shown: usize) {
    if total > shown {
        let _ = writeln!(out, "  ... {} more (--top)", total - shown);
    }
}

/// e.g. `total 2000 waits of 3 tasks, 80.1 ms waited (1.20 ms of it
/// charged to no culprit); not in the tables (full at --max-tasks 10240): 0
/// waits, 0 culprit charges; dropped 0 (TID > pid_max), discarded 0
/// (negative delta)`
fn summary(r: &Report) -> String {
    let c = &r.interval.counters;
    format!(
        "total {} waits of {} tasks, {} waited ({} of it charged to no culprit); not in the tables (full at --max-tasks {}): {} waits, {} culprit charges; dropped {} (TID > pid_max), discarded {} (negative delta)\n",
        r.tables.waits,
        r.tables.totals.0,
        fmt_ns(r.tables.waited_ns),
        fmt_ns(c.culprits_unapportioned_ns),
        r.max_tasks,
        c.victims_overflow,
        c.culprits_overflow,
        r.interval.untracked_tid,
        r.interval.discarded_negative,
    )
}

#[derive(Serialize)]
struct Json {
    schema: &'static str,
    hook: HookMode,
    time_unix_ns: u128,
    interval_ns: u128,
    last: bool,
    sort: SortKey,
    count: u64,
    sum_ns: u64,
    tasks: usize,
    overflow: Overflow,
    dropped: Dropped,
    discarded: Discarded,
    victims: Vec<RowJson>,
    culprits: Vec<RowJson>,
    culprit_processes: Vec<ProcessJson>,
    /// Rows before --top: victims, culprits, culprit processes.
    rows: RowCounts,
    /// Who waited behind whom (`--pairs`), as the histogram's `pairs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pairs: Option<serde_json::Value>,
    /// `--stacks`: what the interval's holder stacks cover (the culprit
    /// rows carry theirs), or why none were taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    stacks: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stacks_unavailable: Option<String>,
}

#[derive(Serialize)]
struct Overflow {
    max_tasks: u32,
    victim_waits: u64,
    culprit_waits: u64,
    /// Wait time the culprits' charge by time gave to no row.
    culprit_unapportioned_ns: u64,
}

#[derive(Serialize)]
struct Dropped {
    untracked_tid: u64,
}

#[derive(Serialize)]
struct Discarded {
    negative_delta: u64,
}

#[derive(Serialize)]
struct RowCounts {
    victims: usize,
    culprits: usize,
    culprit_processes: usize,
}

#[derive(Serialize)]
struct RowJson {
    #[serde(flatten)]
    task: TaskJson,
    count: u64,
    total_ns: u64,
    avg_ns: u64,
    max_ns: u64,
    /// Culprits: the time on the CPU inside the waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_ns: Option<u64>,
    /// Null for a culprit that ended no wait (it only ran inside them).
    max_time_unix_ns: Option<u64>,
    max_cpu: u32,
    /// Victims: the culprit of the longest wait; culprits: its victim.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_culprit: Option<TaskJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_victim: Option<TaskJson>,
    /// When the culprit is an idle task (victims: of the longest wait;
    /// culprits: the row's own task): what the wait was, "throttled" or
    /// "woken-onto-idle-cpu".
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_wait: Option<IdleWait>,
    /// The row's waits by how they began and where they ended; null when
    /// the load did not split them.
    causes: Option<RowCausesJson>,
    /// The row's waits by the scheduler's decision (output/decision/row.rs);
    /// null when the load did not split them.
    decision: Option<serde_json::Value>,
    /// The cgroup the task is in (its path), and that cgroup as a
    /// workload; null for a task gone by the interval's end.
    cgroup: Option<String>,
    workload: Option<serde_json::Value>,
    /// Culprits, with `--stacks`: the stack the task ran most while tasks
    /// waited behind it over the threshold, as diagnose's `stacks.holders`.
    #[serde(skip_serializing_if = "Option::is_none")]
    hottest_stack: Option<serde_json::Value>,
}

/// Waits of one class, and their share of the row's waits.
#[derive(Serialize)]
struct KindJson {
    count: u64,
    share: f64,
}

#[derive(Serialize)]
struct RowCausesJson {
    woken: KindJson,
    new: KindJson,
    preempted: KindJson,
    migrated: KindJson,
}

fn row_causes(row: &Row) -> Option<RowCausesJson> {
    let c = row.causes()?;
    let kind = |count, share| KindJson { count, share };
    Some(RowCausesJson {
        woken: kind(row.kinds[0], c.woken),
        new: kind(row.kinds[1], c.new),
        preempted: kind(row.kinds[2], c.preempted),
        migrated: kind(row.migrated, c.migrated),
    })
}

#[derive(Serialize)]
struct ProcessJson {
    pid: u32,
    comm: String,
    threads: usize,
    held_ns: u64,
    count: u64,
    total_ns: u64,
    avg_ns: u64,
    max_ns: u64,
}

fn row_json(row: &Row, r: &Report, victim: bool) -> RowJson {
    let other = TaskJson::from(&row.other);
    // A culprit that ran inside waits but ended none has no longest wait.
    let ended = row.count > 0;
    let (culprit, victim_pid) = if victim {
        (&row.other, row.task.tgid)
    } else {
        (&row.task, row.other.tgid)
    };
    RowJson {
        task: TaskJson::from(&row.task),
        count: row.count,
        total_ns: row.total_ns,
        avg_ns: row.avg_ns(),
        max_ns: row.max_ns,
        held_ns: (!victim).then_some(row.held_ns),
        max_time_unix_ns: ended.then(|| r.clock.unix_ns(row.max_at_ns)),
        max_cpu: row.max_cpu,
        max_culprit: victim.then(|| other.clone()),
        max_victim: (!victim && ended).then_some(other),
        idle_wait: (culprit.tid == 0).then(|| IdleWait::of(victim_pid, r.throttled)),
        causes: row_causes(row),
        decision: decision::row::json(row),
        cgroup: known(r, row).map(|w| w.path.clone()),
        workload: known(r, row).map(workload::workload_json),
        hottest_stack: (!victim)
            .then(|| hottest_of(r, row))
            .flatten()
            .map(|h| hottest::holder_json(&NamedHolder::Task(row.task), h)),
    }
}

pub(crate) fn json(r: &Report) -> String {
    let t = r.tables;
    let c = &r.interval.counters;
    let doc = Json {
        schema: SCHEMA,
        hook: r.hook,
        time_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        interval_ns: r.elapsed.as_nanos(),
        last: r.last,
        sort: r.sort,
        count: t.waits,
        sum_ns: t.waited_ns,
        tasks: t.totals.0,
        overflow: Overflow {
            max_tasks: r.max_tasks,
            victim_waits: c.victims_overflow,
            culprit_waits: c.culprits_overflow,
            culprit_unapportioned_ns: c.culprits_unapportioned_ns,
        },
        dropped: Dropped {
            untracked_tid: r.interval.untracked_tid,
        },
        discarded: Discarded {
            negative_delta: r.interval.discarded_negative,
        },
        victims: t.victims.iter().map(|v| row_json(v, r, true)).collect(),
        culprits: t.culprits.iter().map(|c| row_json(c, r, false)).collect(),
        culprit_processes: t
            .processes
            .iter()
            .map(|p| ProcessJson {
                pid: p.pid,
                comm: if p.pid == 0 {
                    "(idle)".to_string()
                } else {
                    task::comm(&p.comm)
                },
                threads: p.threads,
                held_ns: p.held_ns,
                count: p.count,
                total_ns: p.total_ns,
                avg_ns: p.avg_ns(),
                max_ns: p.max_ns,
            })
            .collect(),
        rows: RowCounts {
            victims: t.totals.0,
            culprits: t.totals.1,
            culprit_processes: t.totals.2,
        },
        pairs: r.pairs.map(pairs::to_json),
        stacks: window(r).map(hottest::counts_json),
        stacks_unavailable: r.stacks.and_then(|s| s.as_ref().err().cloned()),
    };
    serde_json::to_string(&doc).expect("JSON values serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::analysis::{task::tests::task, victims::rank};

    fn report_of(interval: &VictimsInterval, tables: &Tables, f: fn(&Report) -> String) -> String {
        report_throttled(interval, tables, &HashSet::new(), f)
    }

    fn report_throttled(
        interval: &VictimsInterval,
        tables: &Tables,
        throttled: &HashSet<u32>,
        f: fn(&Report) -> String,
    ) -> String {
        report_with(interval, tables, (throttled, None), f)
    }

    /// The report of `interval`'s `tables`, with the tasks `throttled`
    /// and the interval's hottest stacks (`--stacks`), shown by `f`.
    fn report_with(
        interval: &VictimsInterval,
        tables: &Tables,
        (throttled, stacks): (&HashSet<u32>, Option<&Result<Window, String>>),
        f: fn(&Report) -> String,
    ) -> String {
        let r = Report {
            throttled,
            hook: HookMode::Btf,
            tables,
            interval,
            elapsed: Duration::from_secs(1),
            clock: WallClock::now(),
            sort: SortKey::Max,
            max_tasks: 10_240,
            last: true,
            workloads: &HashMap::new(),
            pairs: None,
            stacks,
        };
        f(&r)
    }

    fn scenario() -> VictimsInterval {
        let hog = task(917, 917, "cal.sh", 0, 0, 0);
        let victim = task(943, 943, "cyclictest", 0, 0, 0);
        VictimsInterval {
            victims: vec![WaitStats {
                task: victim,
                count: 2000,
                total_ns: 80_000_000,
                max_ns: 3_120_000,
                max_other: hog,
                max_cpu: 3,
                kinds: [1500, 0, 500],
                migrated: 100,
                // Granted 1500, passed over 500 (Outcome indices 0 and 2).
                outcomes: [1500, 0, 500, 0, 0, 0, 0, 0],
                // Behind a holder whose slice ended 1200 times, an idle
                // CPU 800 (Holder indices 2 and 5).
                holders: [0, 0, 1200, 0, 0, 800, 0, 0],
                ..Default::default()
            }],
            culprits: vec![WaitStats {
                task: hog,
                count: 300,
                total_ns: 40_000_000,
                max_ns: 3_120_000,
                max_other: victim,
                held_ns: 75_000_000,
                ..Default::default()
            }],
            counters: schedlat_common::victims::ModeCounters {
                culprits_unapportioned_ns: 5_000_000,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn rows_name_their_tasks_workload_and_the_pairs_follow() {
        use crate::{
            analysis::pairs::{Side, WorkloadPair},
            collect::pairs::PairCounts,
            sys::workload::level::{Level, tests::workload},
        };
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let workloads = HashMap::from([(
            943,
            TaskWorkload::In(Box::new(workload("/system.slice/rt.service", None))),
        )]);
        let pairs = PairTable {
            rows: vec![WorkloadPair {
                victim: Side::plain("rt.service"),
                holder: Side::plain("/"),
                counts: PairCounts {
                    count: 3,
                    sum_ns: 9_000,
                    max_ns: 4_000,
                },
            }],
            by: Level::Unit,
            ..PairTable::default()
        };
        let r = Report {
            throttled: &HashSet::new(),
            hook: HookMode::Btf,
            tables: &t,
            interval: &i,
            elapsed: Duration::from_secs(1),
            clock: WallClock::now(),
            sort: SortKey::Max,
            max_tasks: 10_240,
            last: true,
            workloads: &workloads,
            pairs: Some(&pairs),
            stacks: None,
        };
        let out = text(&r);
        let row = |tid: &str| {
            let mut rows = out.lines().filter(|l| l.trim_start().starts_with(tid));
            rows.next().unwrap().to_string()
        };
        assert!(row("943 ").ends_with("  unit rt.service"), "{out}");
        // A task gone by the end of the interval: no cgroup to name.
        assert!(row("917 ").ends_with("  -"), "{out}");
        assert!(out.contains("rt.service <- /"), "{out}");
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["victims"][0]["cgroup"], "/system.slice/rt.service");
        assert_eq!(v["victims"][0]["workload"]["unit"], "rt.service");
        assert_eq!(v["culprits"][0]["workload"], serde_json::Value::Null);
        assert_eq!(v["pairs"]["by"], "unit");
        assert_eq!(v["pairs"]["rows"][0]["count"], 3);
    }

    #[test]
    fn text_names_victim_worst_wait_and_culprit() {
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let out = report_of(&i, &t, text);
        let line = out.lines().find(|l| l.contains("cyclictest")).unwrap();
        assert!(
            line.contains("3.12 ms") && line.contains("cal.sh 917/917 normal 0"),
            "{out}"
        );
        assert!(out.contains("culprit processes"), "{out}");
        assert!(out.contains("total 2000 waits of 1 tasks"), "{out}");
        // 500 of 2000 preempted, 100 migrated; the culprit's row unsplit.
        // Its waits granted 75%, declined none, passed over 25%; the
        // holder's slice ended at 60% of them.
        assert!(
            line.contains("    3  25%   5%   75%    0%   25% slice_ended 60%   cal.sh"),
            "{out}"
        );
        assert!(
            out.contains(" CPU PRE% MIG% GRNT% DECL% PASS% HOLDER LEFT       CULPRIT OF MAX"),
            "{out}"
        );
        let hog = out.lines().find(|l| l.starts_with("     917")).unwrap();
        assert!(
            hog.contains("    -    -     -     -     - -                 cyclictest"),
            "{out}"
        );
        // The culprit's time held, under its own column, before the waits
        // it ended; its process's too; and what no row was charged with.
        let header = out.lines().find(|l| l.contains("VICTIM OF MAX")).unwrap();
        let column = header.find("HELD").unwrap();
        assert_eq!(&hog[column - 3..column + 4], "75.0 ms", "{out}");
        assert!(header.contains("SCHED            HELD     WAITS"), "{out}");
        assert!(
            hog.contains("normal 0      75.0 ms       300    40.0 ms"),
            "{out}"
        );
        assert!(
            out.contains(
                "culprits (tasks on the CPU while others waited), by time held, then longest wait:"
            ),
            "{out}"
        );
        assert!(
            out.contains("     917 cal.sh                 1    75.0 ms      300    40.0 ms"),
            "{out}"
        );
        assert!(
            out.contains("80.0 ms waited (5.00 ms of it charged to no culprit)"),
            "{out}"
        );
        // The victims' header has no HELD.
        let victims = out.lines().find(|l| l.contains("CULPRIT OF MAX")).unwrap();
        assert!(!victims.contains("HELD"), "{out}");
    }

    /// A culprit that ran inside waits and ended none: its time held, and
    /// no longest wait (not one at boot, behind the idle task).
    #[test]
    fn a_culprit_that_ended_no_wait_has_no_longest() {
        let mut i = scenario();
        i.culprits.push(WaitStats {
            task: task(950, 950, "kworker/1:2", 0, 0, 0),
            held_ns: 1_500_000,
            ..Default::default()
        });
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let out = report_of(&i, &t, text);
        let row = out.lines().find(|l| l.starts_with("     950")).unwrap();
        assert!(
            row.contains("1.50 ms         0    0.00 ns    0.00 ns    0.00 ns  -               "),
            "{out}"
        );
        // No victim of a longest wait (then no workload known: "-").
        assert!(row.ends_with(" - -                 -   -"), "{row}");
        let v: serde_json::Value = serde_json::from_str(&report_of(&i, &t, json)).unwrap();
        let c = &v["culprits"][1];
        assert_eq!(
            (c["tid"].as_u64(), c["held_ns"].as_u64()),
            (Some(950), Some(1_500_000))
        );
        assert!(c["max_time_unix_ns"].is_null(), "{c}");
        assert!(c.get("max_victim").is_none(), "{c}");
        assert!(v["culprits"][0]["max_time_unix_ns"].is_u64());
    }

    #[test]
    fn json_carries_the_culprit_of_the_worst_wait() {
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let v: serde_json::Value = serde_json::from_str(&report_of(&i, &t, json)).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["victims"][0]["comm"], "cyclictest");
        assert_eq!(v["victims"][0]["max_culprit"]["comm"], "cal.sh");
        assert!(v["victims"][0].get("max_victim").is_none());
        assert_eq!(v["culprits"][0]["max_victim"]["pid"], 943);
        assert_eq!(v["culprits"][0]["held_ns"], 75_000_000);
        assert!(v["victims"][0].get("held_ns").is_none());
        assert_eq!(v["culprit_processes"][0]["held_ns"], 75_000_000);
        assert_eq!(v["overflow"]["culprit_unapportioned_ns"], 5_000_000);
        assert_eq!(v["culprit_processes"][0]["threads"], 1);
        assert_eq!(v["overflow"]["victim_waits"], 0);
        assert_eq!(v["sort"], "max");
        let causes = &v["victims"][0]["causes"];
        assert_eq!(causes["woken"]["count"], 1500);
        assert_eq!(causes["preempted"]["share"], 0.25);
        assert_eq!(causes["migrated"]["share"], 0.05);
        assert_eq!(causes["new"]["count"], 0);
        assert!(v["culprits"][0]["causes"].is_null());
        let decision = &v["victims"][0]["decision"];
        assert_eq!(decision["waits"], 2000);
        assert_eq!(decision["outcomes"]["passed_over"], 500);
        assert_eq!(decision["holders"]["slice_ended"], 1200);
        assert_eq!(decision["holders"]["idle"], 800);
        assert!(v["culprits"][0]["decision"].is_null());
    }

    /// A window of slow waits behind these holders, each with a user
    /// stack of these frames (outermost first).
    fn stacks_behind(waits: &[(schedlat_common::victims::TaskInfo, u64, &[&str])]) -> Window {
        use schedlat_common::victims::SlowEvent;

        use crate::{analysis::hottest::Folding, sys::cgroup_of::TaskCgroups};
        let mut f = Folding::new(1_000_000);
        for (holder, wait_ns, frames) in waits {
            let stacks = crate::analysis::stacks::fixtures::user_stacks(frames);
            let event = SlowEvent {
                wait_ns: *wait_ns,
                culprit: *holder,
                ..SlowEvent::default()
            };
            f.add(&event, Some(stacks));
        }
        f.next_window(2, &TaskCgroups::default())
    }

    fn report_stacks(
        interval: &VictimsInterval,
        tables: &Tables,
        stacks: &Result<Window, String>,
        f: fn(&Report) -> String,
    ) -> String {
        report_with(interval, tables, (&HashSet::new(), Some(stacks)), f)
    }

    /// `--stacks`: each culprit row quotes the hottest stack behind its
    /// task, as diagnose does, in the text and the JSON; a victim row
    /// none, even when its task held others out too.
    #[test]
    fn culprit_rows_quote_the_hottest_stack_behind_their_task() {
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let (hog, victim) = (i.culprits[0].task, i.victims[0].task);
        let w = Ok(stacks_behind(&[
            (hog, 3_000_000, &["main", "spin"]),
            (hog, 1_000_000, &["main", "read"]),
            (victim, 5_000_000, &["main", "tick"]),
        ]));
        let out = report_stacks(&i, &t, &w, text);
        let lines: Vec<&str> = out.lines().collect();
        let at = (lines.iter())
            .position(|l| l.starts_with("     917"))
            .expect("the culprit row");
        assert_eq!(
            lines[at + 1],
            format!(
                "{STACK_INDENT}hottest stack behind cal.sh 917/917 (75% of 4.00 ms of waits over 1.00 ms, 2 waits): main;spin"
            ),
            "{out}"
        );
        assert_eq!(
            out.matches("hottest stack behind").count(),
            1,
            "only under the culprit row: {out}"
        );
        assert!(
            out.contains("holder stacks: 3 waits over 1.00 ms read, 2 lost"),
            "{out}"
        );
        let v: serde_json::Value = serde_json::from_str(&report_stacks(&i, &t, &w, json)).unwrap();
        let hottest = &v["culprits"][0]["hottest_stack"];
        assert_eq!(hottest["folded"], "cal.sh;main;spin");
        assert_eq!(hottest["stack_ns"], 3_000_000);
        assert_eq!(hottest["waits"], 2);
        assert_eq!(hottest["task"]["tid"], 917);
        assert!(v["victims"][0].get("hottest_stack").is_none());
        assert_eq!(v["stacks"]["events"], 3);
        assert_eq!(v["stacks"]["lost"], 2);
        assert_eq!(v["stacks"]["threshold_ns"], 1_000_000);
        assert!(v.get("stacks_unavailable").is_none());
        // No stack behind a culprit this interval: no line, no object.
        let w = Ok(stacks_behind(&[(victim, 5_000_000, &["main", "tick"])]));
        let out = report_stacks(&i, &t, &w, text);
        assert!(!out.contains("hottest stack behind"), "{out}");
        let v: serde_json::Value = serde_json::from_str(&report_stacks(&i, &t, &w, json)).unwrap();
        assert!(v["culprits"][0].get("hottest_stack").is_none());
    }

    /// A kernel that refused the stacks: the tables as they are, the
    /// reason in JSON (stderr said it once), none in the text.
    #[test]
    fn refused_stacks_leave_the_tables_and_say_why_in_json() {
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let refused = Err("the holder's stacks need kernel 5.11 or newer".to_string());
        let out = report_stacks(&i, &t, &refused, text);
        assert!(
            !out.contains("hottest stack") && !out.contains("holder stacks"),
            "{out}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&report_stacks(&i, &t, &refused, json)).unwrap();
        assert_eq!(
            v["stacks_unavailable"],
            "the holder's stacks need kernel 5.11 or newer"
        );
        assert!(v.get("stacks").is_none());
        // Without --stacks, neither.
        let v: serde_json::Value = serde_json::from_str(&report_of(&i, &t, json)).unwrap();
        assert!(v.get("stacks").is_none() && v.get("stacks_unavailable").is_none());
    }

    /// Issue 19: waits that ended on an idle CPU say what they were, in
    /// the text and the JSON, and the culprit rule is stated.
    #[test]
    fn idle_culprits_say_throttled_or_woken() {
        let idle = task(0, 0, "swapper/1", 0, 0, 0);
        let boxed = task(500, 500, "worker", 0, 0, 0);
        let sleeper = task(600, 600, "sleeper", 0, 0, 0);
        let victim = |t, n| WaitStats {
            task: t,
            count: n,
            total_ns: n * 1_000_000,
            max_ns: 2_000_000,
            max_other: idle,
            max_cpu: 1,
            ..Default::default()
        };
        let i = VictimsInterval {
            victims: vec![victim(boxed, 50), victim(sleeper, 10)],
            culprits: vec![WaitStats {
                task: idle,
                count: 60,
                total_ns: 60_000_000,
                max_ns: 2_000_000,
                max_other: boxed,
                max_cpu: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = rank(&i.victims, &i.culprits, SortKey::Total, 20);
        let throttled = HashSet::from([500]);
        let out = report_throttled(&i, &t, &throttled, text);
        let line = |name: &str| out.lines().find(|l| l.contains(name)).unwrap().to_string();
        assert!(
            line(" worker ").contains("swapper/1 (throttled: cgroup quota)"),
            "{out}"
        );
        assert!(
            line(" sleeper ").contains("swapper/1 (idle: woken onto an idle CPU)"),
            "{out}"
        );
        let idle_row = out
            .lines()
            .find(|l| l.trim_start().starts_with("0 "))
            .unwrap();
        assert!(idle_row.ends_with("(throttled: cgroup quota)"), "{out}");
        assert!(
            out.contains("HELD: its time on the CPU inside the waits"),
            "{out}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&report_throttled(&i, &t, &throttled, json)).unwrap();
        assert_eq!(v["victims"][0]["idle_wait"], "throttled");
        assert_eq!(v["victims"][1]["idle_wait"], "woken-onto-idle-cpu");
        assert_eq!(v["culprits"][0]["idle_wait"], "throttled");
        // A busy culprit has no idle_wait.
        let i = scenario();
        let t = rank(&i.victims, &i.culprits, SortKey::Max, 20);
        let v: serde_json::Value = serde_json::from_str(&report_of(&i, &t, json)).unwrap();
        assert!(v["victims"][0].get("idle_wait").is_none());
    }
}
