//! The run skeleton every command that traces shares: stop on Ctrl-C or
//! SIGTERM (one mechanism, tokio's, for all of them), load and attach
//! announcing how on stderr, the banner, and intervals that end on a clock,
//! after COUNT of them, or when a `-p` target exits.

use std::time::Duration;

use anyhow::{Context, Result};
use schedlat_common::scope::Breakdown;
use tokio::{
    signal::unix::{Signal, SignalKind, signal},
    time::{Instant, Interval, MissedTickBehavior, interval_at},
};

use crate::{
    analysis::pairs::{self, LevelRow, PairTable, ShareRow, Side, WorkloadPair},
    collect::{
        pairs::{Holder, IDLE, Pair, PairCounts, PairIntervals, PairsRead, UNAPPORTIONED},
        tracer::Tracer,
        workloads::WorkloadNamer,
    },
    commands::stdout,
    kernel::{
        filter::{Filter, FilterSpec},
        loader::KernelAccess,
        modes::Modes,
    },
    sys::{mounts::Mounts, notice, workload::level::Level},
};

/// How a run ended, for the exit status.
pub(crate) enum Ended {
    /// COUNT reached, or a signal asked us to stop.
    Done,
    /// stdout was closed (e.g. `| head`): stop quietly.
    StdoutClosed,
}

/// What the streaming commands print first (stdout, or stderr with
/// `--json`), as runqlat does.
pub(crate) const BANNER: &str = "Tracing run queue latency... Hit Ctrl-C to end.\n";

/// Prints the banner and then `header` (a column header, or nothing): on
/// stdout, or on stderr when stdout carries JSON (`json`; the header is for
/// people only then). False when stdout is closed.
pub(crate) fn announce_start(json: bool, header: &str) -> Result<bool> {
    if json {
        say!("{}", BANNER.trim_end());
        return Ok(true);
    }
    stdout::write(&format!("{BANNER}{header}"))
}

/// The signals that end a run. Install them before loading, so a Ctrl-C
/// during loading is not fatal.
pub(crate) struct Signals {
    sigint: Signal,
    sigterm: Signal,
}

impl Signals {
    pub(crate) fn install() -> Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt()).context("installing SIGINT handler")?,
            sigterm: signal(SignalKind::terminate()).context("installing SIGTERM handler")?,
        })
    }

    /// Resolves when either signal arrives.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.sigint.recv() => {}
            _ = self.sigterm.recv() => {}
        }
    }
}

/// Resolves the filter, loads and attaches in `modes`, and announces it.
pub(crate) fn attach(
    kernel: &KernelAccess,
    filter: &FilterSpec,
    unit_ns: u64,
    modes: &Modes,
) -> Result<(Tracer, Filter)> {
    let filter = Filter::resolve(filter)?;
    let tracer = attach_resolved(kernel, &filter, unit_ns, modes)?;
    Ok((tracer, filter))
}

/// Loads and attaches in `modes`, and says on stderr which hook mode is in
/// use, any fallback, and the filter's target.
pub(crate) fn attach_resolved(
    kernel: &KernelAccess,
    filter: &Filter,
    unit_ns: u64,
    modes: &Modes,
) -> Result<Tracer> {
    let tracer = Tracer::load_modes(kernel.hook, &kernel.sources, unit_ns, filter, modes)?;
    for note in &tracer.notes {
        say!("schedlat: {note}");
    }
    say!("schedlat: hook mode {}", tracer.mode());
    if let Some(target) = filter.describe() {
        say!("schedlat: only {target}");
    }
    // On a hybrid host per-cgroup keys are the groups of the cpu
    // controller's v1 hierarchy, not the cgroup v2 ones a user may have in
    // mind: said by every mode that keys by cgroup, once per boot and mode
    // (sys/notice.rs), not at every run.
    let by_cgroup = modes.keyed.is_some_and(|k| k.by == Breakdown::Cgroup);
    if let Some(h) = tracer.cgroup_hierarchy.as_ref().filter(|_| by_cgroup)
        && let Some(other) = h.other_groups(&Mounts::read())
    {
        let notice = format!(
            "schedlat: per-cgroup keys are the groups of {}; {other} (said once per boot and mode)",
            h.describe()
        );
        if notice::first_time(&notice::this_mode(), &notice) {
            say!("{notice}");
        }
    }
    Ok(tracer)
}

/// When intervals end: every INTERVAL seconds (or never), COUNT times (or
/// forever), or early on a signal or when the only target exits.
pub(crate) struct Intervals {
    ticks: Interval,
    remaining: Option<u64>,
    watch: Interval,
}

/// An interval too long to end on this clock (the command line bounds
/// INTERVAL far below it) never ends by itself.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Intervals {
    pub(crate) fn new(interval: Option<u64>, count: Option<u64>) -> Intervals {
        let period = interval.map_or(FOREVER, Duration::from_secs);
        let now = Instant::now();
        let first = now
            .checked_add(period)
            .or_else(|| now.checked_add(FOREVER))
            .unwrap_or(now);
        let mut ticks = interval_at(first, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Intervals {
            ticks,
            remaining: count,
            watch: tokio::time::interval(Duration::from_millis(500)),
        }
    }

    /// Waits for the end of the current interval; true when it is the last.
    pub(crate) async fn next(&mut self, signals: &mut Signals, filter: &Filter) -> bool {
        loop {
            tokio::select! {
                _ = self.ticks.tick() => {
                    self.remaining = self.remaining.map(|n| n.saturating_sub(1));
                    return self.remaining == Some(0);
                }
                _ = self.watch.tick(), if filter.is_active() => {
                    let Some(gone) = filter.gone() else {
                        continue;
                    };
                    say!("schedlat: {gone}; reporting its waits so far");
                    return true;
                }
                _ = signals.recv() => return true,
            }
        }
    }
}

/// The neighbour-pair table's intervals, named and ranked (`--pairs`).
pub(crate) struct PairsView {
    intervals: PairIntervals,
    names: WorkloadNamer,
    level: Level,
    top: Option<usize>,
}

impl PairsView {
    /// Pairs named by `names`, rolled up at `level`, the first `top` rows
    /// kept (all when None).
    pub(crate) fn new(names: WorkloadNamer, level: Level, top: Option<u32>) -> PairsView {
        PairsView {
            intervals: PairIntervals::default(),
            names,
            level,
            top: top.map(|n| n as usize),
        }
    }

    /// The table of the interval since the previous call.
    pub(crate) fn interval(&mut self, tracer: &mut Tracer) -> Result<PairTable> {
        let read = self.read(tracer)?;
        self.table(tracer, read)
    }

    /// The kernel's tables as they are now, for [`PairsView::table`] once
    /// the other maps of the interval are read too.
    pub(crate) fn read(&mut self, tracer: &Tracer) -> Result<PairsRead> {
        Ok(self.intervals.read(tracer)?)
    }

    /// The table of `read`'s interval, named and ranked.
    pub(crate) fn table(&mut self, tracer: &mut Tracer, read: PairsRead) -> Result<PairTable> {
        let names = &mut self.names;
        let interval = self.intervals.settle(tracer, read, |id| names.exists(id))?;
        let level = self.level;
        let mut side = |id| Side::of(id, names.workload(id).as_ref(), level);
        let rows: Vec<WorkloadPair> = (interval.pairs.iter())
            .map(|(pair, counts)| WorkloadPair {
                victim: side(pair.victim),
                holder: match pair.holder {
                    Holder::Idle => Side::plain(IDLE),
                    // Waited is the second role's table's only.
                    Holder::Unapportioned | Holder::Waited => Side::plain(UNAPPORTIONED),
                    Holder::Cgroup(id) => side(id),
                },
                counts: *counts,
            })
            .collect();
        let table = (interval.overflow, interval.capacity);
        let mut table = pairs::rank(rows, self.level, self.top, table);
        table.shares = self.share_rows(&interval.shares);
        table.shares_overflow = interval.shares_overflow;
        table.levels = self.level_rows(&interval.levels);
        Ok(table)
    }

    /// Where the victims' waits were decided when above their own queue:
    /// per victim and group (a group that could not be named is left out).
    fn level_rows(&mut self, decided: &[(Pair, PairCounts)]) -> Vec<LevelRow> {
        let (names, level) = (&mut self.names, self.level);
        let rows: Vec<LevelRow> = (decided.iter())
            .filter_map(|&(pair, counts)| {
                let group = names.path(pair.parent?)?;
                Some(LevelRow {
                    victim: Side::of(pair.victim, names.workload(pair.victim).as_ref(), level),
                    group,
                    counts,
                })
            })
            .collect();
        pairs::rank_levels(rows, self.top)
    }

    /// The second role's rows: of the tasks that ran before a wait
    /// declined above the victim's own queue, those inside the group whose
    /// share it lost (by the groups' paths; a group or holder that could
    /// not be named is left out, never guessed).
    fn share_rows(&mut self, charged: &[(Pair, PairCounts)]) -> Vec<ShareRow> {
        let (names, level) = (&mut self.names, self.level);
        let rows: Vec<ShareRow> = (charged.iter())
            .filter_map(|&(pair, counts)| {
                let (Holder::Cgroup(user), Some(group)) = (pair.holder, pair.parent) else {
                    return None;
                };
                let group = names.path(group)?;
                let user = names.workload(user)?;
                pairs::inside(&group, &user.path).then(|| ShareRow {
                    victim: Side::of(pair.victim, names.workload(pair.victim).as_ref(), level),
                    user: Side::of(0, Some(&user), level),
                    group,
                    counts,
                })
            })
            .collect();
        pairs::rank_shares(rows, self.top)
    }

    /// The namer of the pairs' cgroups (victims names its rows' tasks
    /// with it too).
    pub(crate) fn names(&mut self) -> &mut WorkloadNamer {
        &mut self.names
    }
}
