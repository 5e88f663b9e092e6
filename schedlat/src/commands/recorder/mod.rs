//! `schedlat record --ring DURATION`: the flight recorder. Always on, it
//! keeps the last DURATION of per-second fine histograms (the total, and per
//! cgroup with `--cgroups`, up to `--max-series`) and of slow waits with
//! their context, in memory whose bound is stated at start and never
//! exceeded, and writes the whole window to a dump on SIGHUP or when a
//! `--trigger` fires (docs/recorder.md); `serve --ring` keeps the same
//! ring and dumps on `POST /snapshot`. Dumps are written on a thread of
//! their own: collection never waits for a disk.

mod flight;
mod ring;
mod trigger;
mod writer;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};
pub use trigger::Trigger;

pub use self::{flight::Flight, writer::Refused};
use crate::{
    collect::{histogram::Unit, slow::SlowEvents},
    commands::session::{self, Ended, Signals},
    kernel::{filter::FilterSpec, loader::KernelAccess},
};

/// What the recorder keeps and when it dumps.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Seconds of history kept.
    pub window_s: u64,
    pub dir: PathBuf,
    /// Dumps kept in `dir`; older ones are removed.
    pub keep: usize,
    /// Slow waits kept: at least this long (ns), at most `max_slow` of them.
    pub slow_ns: u64,
    pub max_slow: usize,
    /// Per-cgroup series besides the total, at most this many a second.
    pub cgroups: Option<u32>,
    pub triggers: Vec<Trigger>,
    /// Seconds a quantile trigger merges.
    pub trigger_window_s: u64,
    /// After a trigger's dump, seconds before a trigger may dump again.
    pub cooldown_s: u64,
    pub unit: Unit,
}

pub async fn run(
    opts: &RecorderOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let mut sighup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    let (mut tracer, _filter) =
        session::attach(kernel, filter, opts.unit.ns(), &Flight::modes(opts))?;
    let mut ring_buffer = SlowEvents::take(&mut tracer)?;
    let mut flight = Flight::start(opts, &mut tracer, "SIGHUP dumps now")?;

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            events = ring_buffer.next() => {
                flight.push_slow(events.context("waiting for slow events")?);
            }
            _ = tick.tick() => flight.second(&mut tracer, ring_buffer.drain())?,
            _ = sighup.recv() => flight.dump("SIGHUP", "sighup"),
            _ = signals.recv() => break,
        }
    }
    flight.finish();
    Ok(Ended::Done)
}
