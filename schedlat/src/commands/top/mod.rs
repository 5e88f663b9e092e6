//! `schedlat top`: the live histogram in a terminal, with the victims and
//! culprits of `schedlat victims` beside it. One load computes both (the
//! victims mode's programs with the histogram on, Modes::
//! histogram_and_victims); where the victims mode cannot load (classic
//! tracepoints, a kernel before 5.12) the histogram mode's programs run
//! alone and the panel says why. Every exit path (q, Ctrl-C, SIGTERM,
//! SIGINT, an error, a panic) restores the terminal.

mod panel;
mod state;
mod view;

use std::{
    io::IsTerminal,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::{
    analysis::{slice::Slice, victims::SortKey},
    cli::{FilterArgs, KernelArgs},
    collect::bpf_cost::OwnPrograms,
    collect::histogram::Waits,
    collect::victims::{Collector, Interval},
    commands::victims::{self, DEFAULT_MAX_TASKS},
    kernel::filter::Filter,
    kernel::loader::{LoadError, Tracer},
};
use state::{Action, State};

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Seconds between refreshes (`+`/`-` change it while running)
    #[arg(short = 'i', long, default_value_t = 1.0, value_parser = positive_secs)]
    pub interval: f64,

    /// What the victims panel is ranked by first (`s` cycles through all)
    #[arg(long, value_enum, default_value_t = SortKey::Total)]
    pub sort: SortKey,

    /// Tasks each kernel table of the victims panel holds per interval;
    /// waits beyond it are counted, never dropped silently
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_tasks: u32,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.25 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be at least 0.25 seconds".into()),
        Err(_) => Err(format!("`{s}` is not a number of seconds")),
    }
}

/// Leaves the terminal as it was found, whatever ends the run.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub fn run(args: &TopArgs, kernel: &KernelArgs, filter: &FilterArgs) -> Result<()> {
    if !std::io::stdout().is_terminal() {
        bail!(
            "schedlat top needs a terminal; for a pipe or a file use the histogram mode (`schedlat 1`) or `schedlat --json 1`"
        );
    }
    let filter = Filter::resolve(filter)?;
    let (mut tracer, victims) = victims::load_with_histogram(kernel, &filter, args.max_tasks)?;
    let programs = OwnPrograms::find().ok();
    let slice = Slice::detect();
    let scope = filter.describe().unwrap_or_else(|| "all tasks".to_string());
    let mut state = State::new(tracer.mode(), scope, Duration::from_secs_f64(args.interval));
    state.sort = args.sort;

    // Raw mode turns Ctrl-C into a key, but kill -INT / -TERM still arrive.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }

    let mut source = match victims {
        Ok(()) => Source::WithVictims(Collector::start(&mut tracer, args.max_tasks)?),
        Err(reason) => {
            state.victims = Err(reason);
            Source::Histogram {
                previous: Waits::from_cpus(&tracer.end_interval()?.0),
            }
        }
    };
    let mut costs = programs.as_ref().map(OwnPrograms::costs);
    let mut interval_start = Instant::now();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    loop {
        terminal.draw(|frame| view::draw(frame, &state, &slice))?;
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let due = interval_start + state.interval;
        let wait = due
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        if event::poll(wait)?
            && let Event::Key(key) = event::read()?
            && key.kind == KeyEventKind::Press
            && let KeyCode::Char(c) = key.code
            && state.on_key(c, key.modifiers.contains(KeyModifiers::CONTROL)) == Action::Quit
        {
            return Ok(());
        }
        if Instant::now() < due {
            continue;
        }
        // Each refresh ends a kernel interval, paused or not, so the exact
        // extremes stay per interval; a paused view just does not take it.
        let (waits, victims) = source.end_interval(&mut tracer)?;
        let elapsed = interval_start.elapsed();
        interval_start = Instant::now();
        if !state.paused {
            state.push(waits, elapsed);
            if let Some(victims) = &victims {
                state.push_victims(victims);
            }
            if let (Some(programs), Some(before)) = (&programs, &costs) {
                let now = programs.costs();
                state.bpf_ns_per_run = ns_per_run(before, &now);
                costs = Some(now);
            }
        }
    }
}

/// Where each refresh's numbers come from.
enum Source {
    /// The histogram mode's programs alone; the last cumulative reading.
    Histogram { previous: Waits },
    /// The histogram and the victims tables from one load.
    WithVictims(Collector),
}

impl Source {
    /// Ends the kernel's interval: its waits, and its victims if loaded.
    fn end_interval(
        &mut self,
        tracer: &mut Tracer,
    ) -> Result<(Waits, Option<Interval>), LoadError> {
        match self {
            Source::Histogram { previous } => {
                let (cpus, extremes) = tracer.end_interval()?;
                let current = Waits::from_cpus(&cpus);
                let waits = current.since(previous).with_extremes(&extremes);
                *previous = current;
                Ok((waits, None))
            }
            Source::WithVictims(collector) => {
                let mut interval = collector.end_interval(tracer)?;
                Ok((std::mem::take(&mut interval.waits), Some(interval)))
            }
        }
    }
}

/// BPF run time per program run between two readings; None when the
/// kernel's statistics are off (nothing counted).
fn ns_per_run(
    before: &[crate::collect::bpf_cost::ProgramCost],
    now: &[crate::collect::bpf_cost::ProgramCost],
) -> Option<f64> {
    let sum = |v: &[crate::collect::bpf_cost::ProgramCost]| {
        v.iter()
            .fold((0u64, 0u64), |(t, r), c| (t + c.run_time_ns, r + c.runs))
    };
    let ((t0, r0), (t1, r1)) = (sum(before), sum(now));
    let (time, runs) = (t1.saturating_sub(t0), r1.saturating_sub(r0));
    (time > 0 && runs > 0).then(|| time as f64 / runs as f64)
}
