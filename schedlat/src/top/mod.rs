//! `schedlat top`: the live histogram in a terminal. Same kernel side and
//! collection as histogram mode (no extra per-event cost); every exit path
//! (q, Ctrl-C, SIGTERM, SIGINT, an error, a panic) restores the terminal.

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
    analysis::slice::Slice,
    bpf_cost::OwnPrograms,
    cli::{FilterArgs, KernelArgs},
    filter::Filter,
    histogram::{Unit, Waits},
    loader::Tracer,
};
use state::{Action, State};

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Seconds between refreshes (`+`/`-` change it while running)
    #[arg(short = 'i', long, default_value_t = 1.0, value_parser = positive_secs)]
    pub interval: f64,
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
    let mut tracer = Tracer::load(kernel.hook, &kernel.sources(), Unit::Usecs.ns(), &filter)?;
    let programs = OwnPrograms::find().ok();
    let slice = Slice::detect();
    let scope = filter.describe().unwrap_or_else(|| "all tasks".to_string());
    let mut state = State::new(tracer.mode(), scope, Duration::from_secs_f64(args.interval));

    // Raw mode turns Ctrl-C into a key, but kill -INT / -TERM still arrive.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }

    let mut previous = Waits::from_cpus(&tracer.end_interval()?.0);
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
        let (cpus, extremes) = tracer.end_interval()?;
        let current = Waits::from_cpus(&cpus);
        let elapsed = interval_start.elapsed();
        interval_start = Instant::now();
        if !state.paused {
            state.push(current.since(&previous).with_extremes(&extremes), elapsed);
            if let (Some(programs), Some(before)) = (&programs, &costs) {
                let now = programs.costs();
                state.bpf_ns_per_run = ns_per_run(before, &now);
                costs = Some(now);
            }
        }
        previous = current;
    }
}

/// BPF run time per program run between two readings; None when the
/// kernel's statistics are off (nothing counted).
fn ns_per_run(
    before: &[crate::bpf_cost::ProgramCost],
    now: &[crate::bpf_cost::ProgramCost],
) -> Option<f64> {
    let sum = |v: &[crate::bpf_cost::ProgramCost]| {
        v.iter()
            .fold((0u64, 0u64), |(t, r), c| (t + c.run_time_ns, r + c.runs))
    };
    let ((t0, r0), (t1, r1)) = (sum(before), sum(now));
    let (time, runs) = (t1.saturating_sub(t0), r1.saturating_sub(r0));
    (time > 0 && runs > 0).then(|| time as f64 / runs as f64)
}
