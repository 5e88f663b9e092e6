//! `schedlat victims`: per task that waited, how often, how long in total,
//! on average and at worst (when, on which CPU, behind which task), and per
//! task that held the CPU when waits ended (the culprits), computed in the
//! kernel (`perf sched latency`, live, with no trace written).
//!
//! The kernel's per-interval tables are drained by collect/victims.rs,
//! ranked by analysis/victims.rs and shown by output/victims.rs (tables for
//! people, and JSON); this module runs the intervals. With `--stacks`,
//! analysis/stack_watch.rs takes the holders' stacks beside them, so that
//! each culprit row quotes what its task ran.

use std::time::Instant;

use anyhow::Result;
use tokio::time::MissedTickBehavior;

use crate::{
    analysis::{
        stack_watch::{DRAIN_EVERY, StackWatch},
        victims::{SortKey, name_processes, rank, throttled_pids},
    },
    collect::{victims::Collector, workloads::WorkloadNamer},
    commands::{
        session::{self, Ended, Intervals, PairsView, Signals},
        stdout,
    },
    histogram::Unit,
    kernel::{filter::FilterSpec, loader::KernelAccess, modes::Modes},
    output::{self, victims::Report},
    sys::{clock::WallClock, process_name, throttle::ThrottleWatch, workload::level::Level},
};

/// What `schedlat victims` reports, how often and how.
pub(crate) struct VictimsOptions {
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
    /// The neighbour-pair table's size, when `--pairs` asks for it.
    pub pairs: Option<u32>,
    /// What the pairs' cgroups are rolled up to (`--by`).
    pub by: Level,
    /// With `--stacks`: take the holder's stacks of the waits at least
    /// this long (ns).
    pub stacks_over: Option<u64>,
}

pub(crate) async fn run(
    args: &VictimsOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let mut modes = Modes::victims(args.max_tasks);
    if let Some(max) = args.pairs {
        modes = modes.with_pairs(max);
    }
    let (mut tracer, filter) = session::attach(kernel, filter, Unit::Usecs.ns(), &modes)?;
    // After the tables' tracer, which a refusal leaves as it is: the tables
    // are still worth having, and why there are no stacks is said once.
    let mut stacks = (args.stacks_over).map(|ns| StackWatch::load(kernel, &filter, ns));
    // One namer for the rows' tasks and the pairs' cgroups: one hierarchy,
    // one cache of the runtimes' names.
    let names = WorkloadNamer::for_tasks(&tracer);
    let top = (args.top > 0).then_some(args.top as u32);
    let mut view = PairsView::new(names, args.by, top);
    // The first interval starts before the banner: whatever a reader of
    // the banner starts next is in it. The pairs are read right before the
    // tables here and right after them at each interval's end: their
    // interval holds the tables' (commands/run.rs says why).
    if args.pairs.is_some() {
        view.interval(&mut tracer)?;
    }
    let mut collector = Collector::start(&mut tracer, args.max_tasks)?;
    // The stacks' interval starts with the tables'.
    if let Some(Ok(s)) = stacks.as_mut()
        && let Err(why) = s.start()
    {
        stacks = Some(Err(why));
    }
    if let Some(Err(why)) = &stacks {
        say!("schedlat: no holder stacks: {why}");
    }
    let mut drain = tokio::time::interval(DRAIN_EVERY);
    drain.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut throttle = ThrottleWatch::start_mounted();
    let mut started = Instant::now();
    if !session::announce_start(args.json, "")? {
        return Ok(Ended::StdoutClosed);
    }

    let mut intervals = Intervals::new(args.interval, args.count);
    loop {
        // The stacks are named as they come, between the intervals' ends,
        // which keep their clock: `next` is cancel-safe (ticks, signals).
        let stop = loop {
            tokio::select! {
                stop = intervals.next(&mut signals, &filter) => break stop,
                _ = drain.tick(), if matches!(stacks, Some(Ok(_))) => {
                    if let Some(Ok(s)) = stacks.as_mut() {
                        s.drain();
                    }
                }
            }
        };
        let interval = collector.end_interval(&mut tracer)?;
        let pairs = match args.pairs {
            Some(_) => Some(view.interval(&mut tracer)?),
            None => None,
        };
        let window = match stacks.as_mut() {
            Some(Ok(s)) => Some(Ok(s.interval().map_err(anyhow::Error::msg)?)),
            Some(Err(why)) => Some(Err(why.clone())),
            None => None,
        };
        let mut tables = rank(&interval.victims, &interval.culprits, args.sort, args.top);
        name_processes(&mut tables, process_name::of);
        throttle.end_interval();
        let throttled = throttled_pids(&throttle, &tables);
        let rows = tables.victims.iter().chain(&tables.culprits);
        let workloads = view.names().tasks(rows.map(|r| (r.task.tid, r.task.tgid)));
        let report = Report {
            workloads: &workloads,
            pairs: pairs.as_ref(),
            throttled: &throttled,
            hook: tracer.mode(),
            tables: &tables,
            interval: &interval,
            elapsed: started.elapsed(),
            clock: WallClock::now(),
            sort: args.sort,
            max_tasks: args.max_tasks,
            last: stop,
            stacks: window.as_ref(),
        };
        let text = if args.json {
            output::victims::json(&report)
        } else {
            output::victims::text(&report)
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
