//! What every streaming mode (histogram, victims, slow) does around its own
//! work: stop on Ctrl-C/SIGTERM, load and attach announcing how on stderr,
//! and end intervals on a clock, after COUNT of them, or when a `-p` target
//! exits.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::{
    signal::unix::{Signal, SignalKind, signal},
    time::{Interval, MissedTickBehavior, interval_at},
};

use crate::{
    collect::tracer::Tracer,
    kernel::filter::Filter,
    kernel::modes::Modes,
    kernel::{filter::FilterSpec, loader::KernelAccess},
};

/// The signals that end a run. Install them before loading, so a Ctrl-C
/// during loading is not fatal.
pub struct Signals {
    sigint: Signal,
    sigterm: Signal,
}

impl Signals {
    pub fn install() -> Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt()).context("installing SIGINT handler")?,
            sigterm: signal(SignalKind::terminate()).context("installing SIGTERM handler")?,
        })
    }

    /// Resolves when either signal arrives.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.sigint.recv() => {}
            _ = self.sigterm.recv() => {}
        }
    }
}

/// Resolves the filter, loads and attaches in `modes`, and says on stderr
/// which hook mode is in use, any fallback, and the filter's target.
pub fn attach(
    kernel: &KernelAccess,
    filter: &FilterSpec,
    unit_ns: u64,
    modes: &Modes,
) -> Result<(Tracer, Filter)> {
    let filter = Filter::resolve(filter)?;
    let tracer = Tracer::load_modes(kernel.hook, &kernel.sources, unit_ns, &filter, modes)?;
    for note in &tracer.notes {
        eprintln!("schedlat: {note}");
    }
    eprintln!("schedlat: hook mode {}", tracer.mode());
    if let Some(target) = filter.describe() {
        eprintln!("schedlat: only waits of {target}");
    }
    Ok((tracer, filter))
}

/// When intervals end: every INTERVAL seconds (or never), COUNT times (or
/// forever), or early on a signal or when the only target exits.
pub struct Intervals {
    ticks: Interval,
    remaining: Option<u64>,
    watch: Interval,
}

impl Intervals {
    pub fn new(interval: Option<u64>, count: Option<u64>) -> Intervals {
        let period = Duration::from_secs(interval.unwrap_or(u64::MAX / 4));
        let mut ticks = interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Intervals {
            ticks,
            remaining: count,
            watch: tokio::time::interval(Duration::from_millis(500)),
        }
    }

    /// Waits for the end of the current interval; true when it is the last.
    pub async fn next(&mut self, signals: &mut Signals, filter: &Filter) -> bool {
        loop {
            tokio::select! {
                _ = self.ticks.tick() => {
                    self.remaining = self.remaining.map(|n| n - 1);
                    return self.remaining == Some(0);
                }
                _ = self.watch.tick(), if filter.is_active() => {
                    let Some(gone) = filter.gone() else {
                        continue;
                    };
                    eprintln!("schedlat: {gone}; reporting its waits so far");
                    return true;
                }
                _ = signals.recv() => return true,
            }
        }
    }
}
