//! `schedlat victims`: per task that waited, how often, how long in total,
//! on average and at worst (when, on which CPU, behind which task), and per
//! task that held the CPU when waits ended (the culprits), computed in the
//! kernel (`perf sched latency`, live, with no trace written).
//!
//! - collect: draining the kernel's per-interval tables;
//! - report: the tables for people, and JSON;
//! - the ranking itself is analysis/victims.rs.

pub mod collect;
mod report;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::{
    signal::unix::{SignalKind, signal},
    time::{MissedTickBehavior, interval_at},
};

use crate::{
    analysis::victims::{SortKey, rank},
    cli::{FilterArgs, KernelArgs, positive_u64},
    clock::WallClock,
    filter::Filter,
    histogram::Unit,
    loader::Tracer,
    modes::Modes,
    run::Ended,
    stdout,
};
use collect::Collector;
use report::Report;

const BANNER: &str = "Tracing run queue latency... Hit Ctrl-C to end.\n";

#[derive(Debug, clap::Args)]
pub struct VictimsArgs {
    /// Print the tables every INTERVAL seconds (default: once, at Ctrl-C)
    #[arg(value_parser = positive_u64)]
    pub interval: Option<u64>,

    /// Stop after COUNT intervals (default: until Ctrl-C)
    #[arg(value_parser = positive_u64, requires = "interval")]
    pub count: Option<u64>,

    /// Rank the tables by the longest wait, the total, the number of waits
    /// or the average
    #[arg(long, value_enum, default_value_t = SortKey::Max)]
    pub sort: SortKey,

    /// Rows per table (0 = all); what is cut is counted
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,

    /// One JSON object per interval on stdout (schema in docs/json.md)
    #[arg(long)]
    pub json: bool,

    /// Tasks each kernel table holds per interval (victims, culprits);
    /// waits of tasks beyond it are counted as overflow, never dropped
    /// silently. Memory: 480 bytes per task, plus 16 bytes per possible TID
    /// (pid_max).
    #[arg(long, value_name = "N", default_value_t = 10_240,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_tasks: u32,
}

pub async fn run(args: &VictimsArgs, kernel: &KernelArgs, filter: &FilterArgs) -> Result<Ended> {
    // Signal handlers first, so a Ctrl-C during loading is not fatal.
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;

    let filter = Filter::resolve(filter)?;
    let modes = Modes::victims(args.max_tasks);
    let mut tracer = Tracer::load_modes(
        kernel.hook,
        &kernel.sources(),
        Unit::Usecs.ns(),
        &filter,
        &modes,
    )?;
    for note in &tracer.notes {
        eprintln!("schedlat: {note}");
    }
    eprintln!("schedlat: hook mode {}", tracer.mode());
    if let Some(target) = filter.describe() {
        eprintln!("schedlat: only waits of {target}");
    }
    // The first interval starts before the banner: whatever a reader of
    // the banner starts next is in it.
    let mut collector = Collector::start(&mut tracer, args.max_tasks)?;
    let mut started = Instant::now();
    if args.json {
        eprint!("{BANNER}");
    } else if stdout::write(BANNER).is_err() {
        return Ok(Ended::StdoutClosed);
    }

    let period = Duration::from_secs(args.interval.unwrap_or(u64::MAX / 4));
    let mut ticks = interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut remaining = args.count;
    // With -p, a target that exits ends the run, its waits reported.
    let mut watch = tokio::time::interval(Duration::from_millis(500));

    loop {
        let stop = tokio::select! {
            _ = ticks.tick() => {
                remaining = remaining.map(|n| n - 1);
                remaining == Some(0)
            }
            _ = watch.tick(), if filter.is_active() => {
                if filter.target_alive() {
                    continue;
                }
                eprintln!("schedlat: the target process exited; reporting its waits so far");
                true
            }
            _ = sigint.recv() => true,
            _ = sigterm.recv() => true,
        };
        let interval = collector.end_interval(&mut tracer)?;
        let tables = rank(&interval.victims, &interval.culprits, args.sort, args.top);
        let report = Report {
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
        if stdout::write(&text).is_err() {
            return Ok(Ended::StdoutClosed);
        }
        if stop {
            return Ok(Ended::Done);
        }
        started = Instant::now();
    }
}
