//! `schedlat victims`: per task that waited, how often, how long in total,
//! on average and at worst (when, on which CPU, behind which task), and per
//! task that held the CPU when waits ended (the culprits), computed in the
//! kernel (`perf sched latency`, live, with no trace written).
//!
//! - collect: draining the kernel's per-interval tables;
//! - report: the tables for people, and JSON;
//! - the ranking itself is analysis/victims.rs.

mod report;

use crate::commands::session::{self, Intervals, Signals};
use std::time::Instant;

use anyhow::Result;

use crate::collect::victims::Collector;
use crate::{
    analysis::victims::{SortKey, rank},
    cli::{FilterArgs, KernelArgs, positive_u64},
    collect::histogram::Unit,
    commands::run::Ended,
    commands::stdout,
    kernel::filter::Filter,
    kernel::loader::{HookChoice, LoadError, Tracer},
    kernel::modes::Modes,
    sys::clock::WallClock,
};
use report::Report;
pub use report::sort_name;

/// Tasks each kernel table holds per interval, unless `--max-tasks` says.
pub const DEFAULT_MAX_TASKS: u32 = 10_240;

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
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_tasks: u32,
}

pub async fn run(args: &VictimsArgs, kernel: &KernelArgs, filter: &FilterArgs) -> Result<Ended> {
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
    let mut started = Instant::now();
    if args.json {
        eprint!("{BANNER}");
    } else if stdout::write(BANNER).is_err() {
        return Ok(Ended::StdoutClosed);
    }

    let mut intervals = Intervals::new(args.interval, args.count);
    loop {
        let stop = intervals.next(&mut signals, &filter).await;
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

/// Loads the histogram with the victims tables (Modes::
/// histogram_and_victims: `schedlat top`, `schedlat diagnose`), or, where
/// they cannot load (classic tracepoints, a kernel before 5.12), the
/// histogram alone and why there are no victims. An error is the
/// histogram's own: without it there is nothing to show.
pub fn load_with_histogram(
    kernel: &KernelArgs,
    filter: &Filter,
    max_tasks: u32,
) -> Result<(Tracer, Result<(), String>), LoadError> {
    let (sources, unit) = (kernel.sources(), Unit::Usecs.ns());
    let victims = if kernel.hook == HookChoice::Tp {
        Err(LoadError::NeedsBtf("the victims tables"))
    } else {
        let modes = Modes::histogram_and_victims(max_tasks);
        Tracer::load_modes(kernel.hook, &sources, unit, filter, &modes)
    };
    match victims {
        Ok(tracer) => Ok((tracer, Ok(()))),
        Err(e) => {
            let tracer = Tracer::load(kernel.hook, &sources, unit, filter)?;
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
