//! `schedlat top`: the live histogram in a terminal, with the victims and
//! culprits of `schedlat victims` beside it. One load computes both (the
//! victims mode's programs with the histogram on, Modes::
//! histogram_and_victims); where the victims mode cannot load (classic
//! tracepoints, a kernel before 5.12) the histogram mode's programs run
//! alone and the panel says why. Every exit path (q, Ctrl-C, SIGTERM,
//! SIGINT, an error, a panic) restores the terminal.

use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::{
    analysis::victims::{SortKey, throttled_in},
    collect::{bpf_cost::ProgramCost, tracer::Tracer, victims::Source, workloads::WorkloadNamer},
    commands::session::{PairsView, Signals},
    kernel::{
        filter::{Filter, FilterSpec},
        loader::KernelAccess,
    },
    output::top::{
        self,
        pairs::PairsShown,
        state::{Action, State},
    },
    sys::{slice::Slice, terminal, throttle::ThrottleWatch, workload::level::Level},
};

/// What `schedlat top` shows and how often.
pub(crate) struct TopOptions {
    /// Between refreshes, at first (`+`/`-` change it).
    pub interval: Duration,
    pub sort: SortKey,
    /// Tasks each kernel table of the victims panel holds per interval.
    pub max_tasks: u32,
    /// The neighbour-pair table's size, when `--pairs` asks for it.
    pub pairs: Option<u32>,
    /// What the pairs' cgroups are rolled up to (`--by`).
    pub by: Level,
}

/// Leaves the terminal as it was found, whatever ends the run.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub(crate) async fn run(
    args: &TopOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<()> {
    let mut signals = Signals::install()?;
    if !std::io::stdout().is_terminal() {
        bail!(
            "schedlat top needs a terminal; for a pipe or a file use the histogram mode (`schedlat 1`) or `schedlat --json 1`"
        );
    }
    if let Some(job) = terminal::background(&std::io::stdout()) {
        bail!(
            "schedlat top runs in the background (process group {}; the terminal reads for group {}), where the kernel stops it at its first key read (SIGTTIN): run it in the foreground (`fg`), or under timeout as `timeout --foreground`",
            job.group,
            job.foreground
        );
    }
    let filter = Filter::resolve(filter)?;
    let (mut tracer, victims) =
        Tracer::load_with_victims(kernel, &filter, args.max_tasks, args.pairs)?;
    let slice = Slice::detect();
    let scope = filter.describe().unwrap_or_else(|| "all waits".to_string());
    let mut state = State::new(tracer.mode(), scope, args.interval);
    state.sort = args.sort;

    let with_victims = victims.is_ok().then_some(args.max_tasks);
    if let Err(reason) = victims {
        state.victims = Err(reason);
    }
    // The rows' tasks and the pairs' cgroups named by one namer; the
    // pairs only where the victims' programs (which count them) loaded.
    let mut view = PairsView::new(WorkloadNamer::for_tasks(&tracer), args.by, None);
    let pairs = args.pairs.filter(|_| with_victims.is_some());
    if pairs.is_some() {
        view.interval(&mut tracer)?;
        state.pairs = Some(PairsShown::new(args.by));
    }
    let mut source = Source::start(&mut tracer, with_victims)?;
    let mut throttle = ThrottleWatch::start_mounted();
    let mut costs = tracer.program_costs();
    let mut interval_start = Instant::now();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    loop {
        terminal.draw(|frame| top::draw(frame, &state, &slice))?;
        let due = interval_start + state.interval;
        let wait = due
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        // Raw mode turns Ctrl-C into a key, but kill -INT / -TERM still arrive.
        let key = tokio::select! {
            _ = signals.recv() => return Ok(()),
            key = key_within(wait) => key?,
        };
        if let Some((c, ctrl)) = key
            && state.on_key(c, ctrl) == Action::Quit
        {
            return Ok(());
        }
        if Instant::now() < due {
            continue;
        }
        // Each refresh ends a kernel interval, paused or not, so the exact
        // extremes stay per interval; a paused view just does not take it.
        let (waits, victims) = source.end_interval(&mut tracer)?;
        let pair_table = match pairs {
            Some(_) => Some(view.interval(&mut tracer)?),
            None => None,
        };
        let elapsed = interval_start.elapsed();
        interval_start = Instant::now();
        if !state.paused {
            state.push(waits, elapsed);
            if let Some(victims) = &victims {
                state.push_victims(victims);
                throttle.end_interval();
                state.push_throttled(throttled_in(&throttle, victims));
                state.workloads = view.names().tasks(state.shown_tasks());
            }
            if let (Some(shown), Some(table)) = (state.pairs.as_mut(), pair_table) {
                shown.push(table);
            }
            let now = tracer.program_costs();
            state.bpf_ns_per_run = ns_per_run(&costs, &now);
            costs = now;
        }
    }
}

/// The next key pressed within `wait` (a character, and whether Ctrl was
/// held), read on the runtime's blocking pool so that a signal is seen while
/// waiting for it.
async fn key_within(wait: Duration) -> Result<Option<(char, bool)>> {
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Event>> {
        if event::poll(wait)? {
            event::read().map(Some)
        } else {
            Ok(None)
        }
    });
    let event = read.await.context("reading the terminal")??;
    Ok(match event {
        Some(Event::Key(key)) if key.kind == KeyEventKind::Press => match key.code {
            KeyCode::Char(c) => Some((c, key.modifiers.contains(KeyModifiers::CONTROL))),
            _ => None,
        },
        _ => None,
    })
}

/// BPF run time per program run between two readings; None when the
/// kernel's statistics are off (nothing counted).
fn ns_per_run(before: &[ProgramCost], now: &[ProgramCost]) -> Option<f64> {
    let sum = |v: &[ProgramCost]| {
        v.iter()
            .fold((0u64, 0u64), |(t, r), c| (t + c.run_time_ns, r + c.runs))
    };
    let ((t0, r0), (t1, r1)) = (sum(before), sum(now));
    let (time, runs) = (t1.saturating_sub(t0), r1.saturating_sub(r0));
    (time > 0 && runs > 0).then(|| time as f64 / runs as f64)
}
