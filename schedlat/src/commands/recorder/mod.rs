//! `schedlat record --ring DURATION`: the flight recorder. Always on, it
//! keeps the last DURATION of per-second fine histograms (the total, and per
//! cgroup with `--cgroups`, up to `--max-series`) and of slow waits with
//! their context, in memory whose bound is stated at start and never
//! exceeded, and writes the whole window to a dump on SIGHUP or when a
//! `--trigger` fires (docs/recorder.md). Dumps are written on a thread of
//! their own: collection never waits for a disk.

mod ring;
mod trigger;
mod writer;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use schedlat_common::scope::Breakdown;
use tokio::signal::unix::{SignalKind, signal};
pub use trigger::Trigger;

use self::{
    ring::Ring,
    writer::{Job, Writer},
};
use crate::{
    analysis::{
        recording::{CompactWaits, Meta, Second, Window},
        slice::Slice,
    },
    collect::{histogram::Unit, interval::HistogramInterval, slow::SlowEvents},
    commands::{
        breakdown::{BreakdownOptions, KeySort, KeyedView},
        run::Ended,
        session::{self, Signals},
    },
    kernel::{
        filter::FilterSpec,
        loader::KernelAccess,
        modes::{Keyed, Modes},
    },
    sys::clock::WallClock,
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

/// Kernel keys for the per-cgroup histograms (1.4 KiB each).
const CGROUP_KEYS: u32 = 1024;

pub async fn run(
    opts: &RecorderOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    std::fs::create_dir_all(&opts.dir)
        .with_context(|| format!("cannot create the dump directory {}", opts.dir.display()))?;
    let mut signals = Signals::install()?;
    let mut sighup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    let keyed = opts.cgroups.map(|_| Keyed {
        by: Breakdown::Cgroup,
        max_keys: CGROUP_KEYS,
    });
    let modes = Modes {
        slow_ns: Some(opts.slow_ns.max(1)),
        ..Modes::histogram(keyed)
    };
    let (mut tracer, _filter) = session::attach(kernel, filter, opts.unit.ns(), &modes)?;
    let mut ring_buffer = SlowEvents::take(&mut tracer)?;
    let mut keyed_view = keyed.map(|k| {
        let view = BreakdownOptions {
            keyed: Some(k),
            sort: KeySort::Total,
            top: opts.cgroups,
        };
        KeyedView::new(&view, k, &tracer)
    });
    let slice = Slice::detect();
    let mut histogram = HistogramInterval::start(&mut tracer)?;
    if let Some(view) = keyed_view.as_mut() {
        view.interval(&mut tracer, 0, &slice)?;
    }
    let mut lost_before = tracer.mode_counters()?.slow_lost;

    let max_seconds = opts.window_s as usize;
    let series = opts.cgroups.unwrap_or(0) as usize;
    let mut ring = Ring::new(max_seconds, opts.max_slow);
    let bound = Ring::bound_bytes(max_seconds, series, opts.max_slow);
    say!(
        "schedlat: recording the last {} s ({} series, slow waits of at least {}, at most {}) in at most {:.1} MiB; dumps go to {} (SIGHUP dumps now)",
        opts.window_s,
        1 + series,
        crate::analysis::fmt_ns(opts.slow_ns),
        opts.max_slow,
        bound as f64 / f64::from(1 << 20),
        opts.dir.display()
    );
    let writer = Writer::start(opts.dir.clone(), opts.keep)?;
    let meta = Meta {
        host: hostname(),
        hook: tracer.mode().to_string(),
        unit: opts.unit.label().to_string(),
        window_s: opts.window_s,
        slow_threshold_ns: opts.slow_ns,
        slice_ns: slice.ns,
        slice_source: slice.source.clone(),
        ..Meta::default()
    };

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut started = unix_now();
    let mut newest_slow: Vec<u64> = Vec::new();
    let mut cooldown_until = 0u64;
    loop {
        tokio::select! {
            events = ring_buffer.next() => {
                let events = events.context("waiting for slow events")?;
                newest_slow.extend(events.iter().map(|e| e.wait_ns));
                ring.push_slow(events);
            }
            _ = tick.tick() => {
                ring.push_slow(ring_buffer.drain());
                let waits = histogram.end(&mut tracer)?;
                let end = unix_now();
                let mut second = Second {
                    start_unix_ns: started,
                    end_unix_ns: end,
                    series: vec![("total".to_string(), CompactWaits::of(&waits))],
                    series_dropped: 0,
                    slow_lost: 0,
                };
                started = end;
                if let Some(view) = keyed_view.as_mut() {
                    let keys = view.interval(&mut tracer, waits.unkeyed, &slice)?;
                    second.series_dropped = (keys.keys_with_waits - keys.rows.len()) as u32;
                    for row in keys.rows {
                        second.series.push((ring::label(row.label), CompactWaits::of(&row.waits)));
                    }
                }
                let lost = tracer.mode_counters()?.slow_lost;
                second.slow_lost = lost.saturating_sub(lost_before);
                lost_before = lost;
                ring.push_second(second);
                let now_s = end / 1_000_000_000;
                if now_s >= cooldown_until {
                    let window = ring.last(opts.trigger_window_s as usize);
                    let fired = opts.triggers.iter().find_map(|t| t.check(&window, &newest_slow));
                    if let Some(why) = fired {
                        say!("schedlat: trigger: {why}: dumping the window");
                        writer.request(job(&ring, &meta, format!("trigger: {why}"), "trigger"));
                        cooldown_until = now_s + opts.cooldown_s;
                    }
                }
                newest_slow.clear();
            }
            _ = sighup.recv() => {
                writer.request(job(&ring, &meta, "SIGHUP".to_string(), "sighup"));
            }
            _ = signals.recv() => break,
        }
    }
    writer.finish();
    Ok(Ended::Done)
}

fn job(ring: &Ring, meta: &Meta, reason: String, kind: &'static str) -> Job {
    let (seconds, slow) = ring.snapshot();
    let clock = WallClock::now();
    Job {
        window: Window {
            meta: Meta {
                reason,
                dumped_unix_ns: unix_now(),
                slow_evicted: ring.slow_evicted,
                ..meta.clone()
            },
            seconds,
            slow,
            mono_to_unix_ns: i128::from(clock.unix_ns(0)),
        },
        kind,
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
