//! `schedlat victims`: per task that waited, how often, how long in total,
//! on average and at worst (when, on which CPU, behind which task), and per
//! task that held the CPU when waits ended (the culprits), computed in the
//! kernel (`perf sched latency`, live, with no trace written).
//!
//! - collect: draining the kernel's per-interval tables;
//! - report: the tables for people, and JSON;
//! - the ranking itself is analysis/victims.rs.

mod report;

use std::{collections::HashSet, time::Instant};

use anyhow::Result;
use report::Report;
pub use report::sort_name;

use crate::{
    analysis::victims::{Row, SortKey, Tables, rank},
    collect::{
        tracer::Tracer,
        victims::{Collector, Interval},
    },
    commands::{
        run::Ended,
        session::{self, Intervals, Signals},
        stdout,
    },
    histogram::Unit,
    kernel::{
        cgroupfs::Mounts,
        error::LoadError,
        filter::{Filter, FilterSpec},
        hook::HookChoice,
        loader::KernelAccess,
        modes::Modes,
    },
    sys::{clock::WallClock, throttle::ThrottleWatch},
};

/// Tasks each kernel table holds per interval, unless `--max-tasks` says.
pub const DEFAULT_MAX_TASKS: u32 = 10_240;

/// What `schedlat victims` reports, how often and how.
pub struct VictimsOptions {
    /// Seconds per interval (None: one interval, until a signal).
    pub interval: Option<u64>,
    /// Intervals to report (None: until a signal).
    pub count: Option<u64>,
    pub sort: SortKey,
    /// Rows per table (0 = all).
    pub top: usize,
    pub json: bool,
    /// Tasks each kernel table holds per interval.
    pub max_tasks: u32,
}

pub async fn run(
    args: &VictimsOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let (mut tracer, filter) = session::attach(
        kernel,
        filter,
        Unit::Usecs.ns(),
        &Modes::victims(args.max_tasks),
    )?;
    // The first interval starts before the banner: whatever a reader of
    // the banner starts next is in it.
    let mut collector = Collector::start(&mut tracer, args.max_tasks)?;
    let mut throttle = watch_throttling();
    let mut started = Instant::now();
    if !session::announce_start(args.json, "")? {
        return Ok(Ended::StdoutClosed);
    }

    let mut intervals = Intervals::new(args.interval, args.count);
    loop {
        let stop = intervals.next(&mut signals, &filter).await;
        let interval = collector.end_interval(&mut tracer)?;
        let tables = rank(&interval.victims, &interval.culprits, args.sort, args.top);
        throttle.end_interval();
        let throttled = throttled_pids(&throttle, &tables);
        let report = Report {
            throttled: &throttled,
            hook: tracer.mode(),
            tables: &tables,
            interval: &interval,
            elapsed: started.elapsed(),
            clock: WallClock::now(),
            sort: args.sort,
            max_tasks: args.max_tasks,
            last: stop,
        };
        let text = if args.json {
            report::json(&report)
        } else {
            report::text(&report)
        };
        if !stdout::write(&text)? {
            return Ok(Ended::StdoutClosed);
        }
        if stop {
            return Ok(Ended::Done);
        }
        started = Instant::now();
    }
}

/// Starts telling throttled waits from wakes onto an idle CPU (both end on
/// an idle CPU, culprit swapper), in the cpu controller's hierarchies.
pub fn watch_throttling() -> ThrottleWatch {
    let mounts = Mounts::read();
    ThrottleWatch::start(mounts.v2.as_deref(), mounts.v1_cpu.as_deref())
}

/// The processes of the rows' idle-ended waits whose cgroup was throttled
/// in the interval `watch` last ended: victims whose longest wait's culprit
/// was idle, and the longest victims of the idle culprits.
pub fn throttled_pids(watch: &ThrottleWatch, tables: &Tables) -> HashSet<u32> {
    let victims = tables
        .victims
        .iter()
        .filter(|r| r.other.tid == 0)
        .map(|r| r.task.tgid);
    let of_idle = tables
        .culprits
        .iter()
        .filter(|r| r.task.tid == 0)
        .map(|r: &Row| r.other.tgid);
    victims
        .chain(of_idle)
        .filter(|&pid| pid != 0 && watch.throttled(pid))
        .collect()
}

/// `throttled_pids`, over an interval's rows before any ranking (`top`).
pub fn throttled_in(watch: &ThrottleWatch, interval: &Interval) -> HashSet<u32> {
    let victims = interval
        .victims
        .iter()
        .filter(|v| v.max_other.tid == 0)
        .map(|v| v.task.tgid);
    let of_idle = interval
        .culprits
        .iter()
        .filter(|c| c.task.tid == 0)
        .map(|c| c.max_other.tgid);
    victims
        .chain(of_idle)
        .filter(|&pid| pid != 0 && watch.throttled(pid))
        .collect()
}

/// Loads the histogram with the victims tables (Modes::
/// histogram_and_victims: `schedlat top`, `schedlat diagnose`), or, where
/// they cannot load (classic tracepoints, a kernel before 5.12), the
/// histogram alone and why there are no victims. An error is the
/// histogram's own: without it there is nothing to show.
pub fn load_with_histogram(
    kernel: &KernelAccess,
    filter: &Filter,
    max_tasks: u32,
) -> Result<(Tracer, Result<(), String>), LoadError> {
    let (sources, unit) = (&kernel.sources, Unit::Usecs.ns());
    let victims = if kernel.hook == HookChoice::Tp {
        Err(LoadError::NeedsBtf("the victims tables"))
    } else {
        let modes = Modes::histogram_and_victims(max_tasks);
        Tracer::load_modes(kernel.hook, sources, unit, filter, &modes)
    };
    match victims {
        Ok(tracer) => Ok((tracer, Ok(()))),
        Err(e) => {
            let tracer = Tracer::load(kernel.hook, sources, unit, filter)?;
            Ok((tracer, Err(why_no_victims(&e))))
        }
    }
}

/// A load error of the victims tables: one line (a verifier log is long),
/// cut.
fn why_no_victims(e: &LoadError) -> String {
    let text = match e {
        LoadError::NeedsBtf(_) => {
            "they need the tp_btf hook mode (classic tracepoints do not pass task pointers): drop --hook tp".to_string()
        }
        e => format!(
            "{} (they need tp_btf and kernel 5.12+)",
            e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
        ),
    };
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}
