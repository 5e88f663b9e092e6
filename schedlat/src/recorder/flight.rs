//! The recorder's state between seconds, for any command that keeps a
//! ring on a tracer it attached: `record --ring` and `serve --ring`. The
//! caller owns the tracer and the slow-event buffer, and calls `second`
//! once a second and `dump` when asked.

use std::path::PathBuf;

use anyhow::Result;

use super::{
    ring::{self, Ring},
    trigger::Trigger,
    writer::{DumpKind, Job, Refused, Writer},
};
use crate::{
    analysis::{
        breakdown::{self, KeySort, Shown},
        recording::{CompactWaits, Meta, Second, SlowWait, Window},
        stacks::StackNamer,
    },
    collect::{
        interval::HistogramInterval, key_intervals::KeyIntervals, slow::SlowRecord, tracer::Tracer,
    },
    histogram::Unit,
    kernel::modes::{Keyed, Modes, Stacks},
    sys::{
        clock::{WallClock, monotonic_ns},
        host::hostname,
        slice::Slice,
        workload::level::Level,
    },
};

/// What the recorder keeps and when it dumps.
#[derive(Debug, Clone)]
pub(crate) struct RecorderOptions {
    /// Seconds of history kept.
    pub window_s: u64,
    pub dir: PathBuf,
    /// Dumps kept in `dir`; older ones are removed.
    pub keep: usize,
    /// Slow waits kept: at least this long (ns), at most `max_slow` of them.
    pub slow_ns: u64,
    pub max_slow: usize,
    /// The stacks each slow wait keeps (`record --ring --stacks`), and
    /// how many of the newest slow waits keep theirs.
    pub stacks: Option<Stacks>,
    pub max_stacks: usize,
    /// With per-cgroup series besides the total: the kernel's cgroup keys
    /// (`--cgroups`, `--max-keys`).
    pub cgroups: Option<Keyed>,
    /// Per-cgroup series kept a second at most, the largest total wait
    /// first.
    pub max_series: u32,
    pub triggers: Vec<Trigger>,
    /// Seconds a quantile trigger merges.
    pub trigger_window_s: u64,
    /// After a trigger's dump, seconds before a trigger may dump again.
    pub cooldown_s: u64,
    pub unit: Unit,
}

pub(crate) struct Flight {
    opts: RecorderOptions,
    ring: Ring,
    meta: Meta,
    writer: Writer,
    histogram: HistogramInterval,
    /// With `--cgroups`: the cgroups' intervals.
    cgroups: Option<(KeyIntervals, Keyed)>,
    slice: Slice,
    lost_before: u64,
    /// The current second's start, on CLOCK_MONOTONIC (Second's clock).
    started: u64,
    newest_slow: Vec<u64>,
    cooldown_until: Option<std::time::Instant>,
    /// With `--stacks`: names each wait's stacks as it is read.
    namer: Option<StackNamer>,
}

impl Flight {
    /// The kernel modes `record --ring` needs.
    pub(crate) fn modes(opts: &RecorderOptions) -> Modes {
        Flight::with_slow(opts, Modes::histogram(opts.cgroups))
    }

    /// `modes` with the slow waits the ring keeps (serve's own modes).
    pub(crate) fn with_slow(opts: &RecorderOptions, modes: Modes) -> Modes {
        Modes {
            slow_ns: Some(opts.slow_ns.max(1)),
            ..modes
        }
        .with_stacks(opts.stacks)
    }

    /// Opens and checks the dump directory: before anything is loaded, so
    /// that a directory refused is refused with nothing attached.
    pub(crate) fn open_dumps(opts: &RecorderOptions) -> Result<Writer> {
        Writer::start(opts.dir.clone(), opts.keep)
    }

    /// Starts the first second now, says what is kept and where dumps go
    /// (`writer`, from `open_dumps`).
    pub(crate) fn start(
        opts: &RecorderOptions,
        writer: Writer,
        tracer: &mut Tracer,
        how: &str,
    ) -> Result<Flight> {
        // A dump keeps no cause split: the cgroups' intervals need none.
        let mut cgroups = (opts.cgroups).map(|k| (KeyIntervals::new(k.by, tracer, false), k));
        let slice = Slice::detect();
        let histogram = HistogramInterval::start(tracer)?;
        if let Some((keys, _)) = cgroups.as_mut() {
            keys.interval(tracer, |_| ())?;
        }
        let lost_before = tracer.mode_counters()?.slow_lost;
        let max_seconds = opts.window_s as usize;
        let series = opts.cgroups.map_or(0, |_| opts.max_series as usize);
        let max_stacks = opts.stacks.map_or(0, |_| opts.max_stacks);
        let bound = Ring::bound_bytes(max_seconds, series, opts.max_slow, max_stacks);
        let stacks = match opts.stacks {
            Some(Stacks::HolderAndWaker) => {
                format!(", the newest {max_stacks} with their holder's and waker's stacks")
            }
            Some(Stacks::Holder) => format!(", the newest {max_stacks} with their holder's stacks"),
            None => String::new(),
        };
        say!(
            "schedlat: recording the last {} s ({} series, slow waits of at least {}, at most {}{stacks}) in at most {:.1} MiB; dumps go to {} ({how})",
            opts.window_s,
            1 + series,
            crate::analysis::fmt_ns(opts.slow_ns),
            opts.max_slow,
            bound as f64 / f64::from(1 << 20),
            writer.path().display()
        );
        // Which groups the per-cgroup series are, said now and kept in the
        // dump's header (on a hybrid host the attach said which it leaves
        // out: commands/session.rs).
        let hierarchy = opts.cgroups.and(tracer.cgroup_hierarchy.as_ref());
        if let Some(h) = hierarchy {
            say!(
                "schedlat: per-cgroup series: the groups of {}",
                h.describe()
            );
        }
        let meta = Meta {
            host: hostname(),
            hook: tracer.mode().to_string(),
            unit: opts.unit.label().to_string(),
            window_s: opts.window_s,
            slow_threshold_ns: opts.slow_ns,
            slice_ns: slice.ns,
            slice_source: slice.source.clone(),
            cgroup_hierarchy: hierarchy.map(|h| h.describe()),
            stacks: opts.stacks.is_some(),
            wakers: opts.stacks.is_some_and(Stacks::wakers),
            ..Meta::default()
        };
        Ok(Flight {
            opts: opts.clone(),
            ring: Ring::new(max_seconds, opts.max_slow, max_stacks),
            meta,
            writer,
            histogram,
            cgroups,
            slice,
            lost_before,
            started: monotonic_ns(),
            newest_slow: Vec::new(),
            cooldown_until: None,
            namer: opts.stacks.map(|_| StackNamer::new()),
        })
    }

    /// Slow waits as they come; with `--stacks`, their stacks named now,
    /// while the processes whose addresses they hold live.
    pub(crate) fn push_slow(&mut self, records: Vec<SlowRecord>) {
        self.newest_slow
            .extend(records.iter().map(|r| r.event.wait_ns));
        let named = match &self.namer {
            Some(namer) => namer.name(&records),
            None => vec![None; records.len()],
        };
        let waits = records.into_iter().zip(named).map(|(r, stacks)| SlowWait {
            event: r.event,
            stacks: stacks.map(|s| std::sync::Arc::new(s.bounded())),
        });
        self.ring.push_slow(waits);
    }

    /// Ends the current second (with the slow waits still buffered) and
    /// dumps if a trigger fires.
    pub(crate) fn second(&mut self, tracer: &mut Tracer, buffered: Vec<SlowRecord>) -> Result<()> {
        self.push_slow(buffered);
        let waits = self.histogram.end(tracer)?;
        let end = monotonic_ns();
        let mut second = Second {
            start_mono_ns: self.started,
            end_mono_ns: end,
            series: vec![("total".to_string(), CompactWaits::of(&waits))],
            series_dropped: 0,
            slow_lost: 0,
        };
        self.started = end;
        if let Some((keys, keyed)) = self.cgroups.as_mut() {
            let top = Some(self.opts.max_series);
            let (keyed, unkeyed, slice) = (*keyed, waits.unkeyed, &self.slice);
            let keys = keys.interval(tracer, |reading| {
                let shown = Shown {
                    sort: KeySort::Total,
                    top,
                    by: Level::Cgroup,
                };
                breakdown::report(reading, keyed, shown, unkeyed, slice)
            })?;
            second.series_dropped = (keys.keys_with_waits - keys.rows.len()) as u32;
            for row in keys.rows {
                // A dump's series are named by their cgroup's path, as
                // replay --series takes them, also where the breakdown
                // names the container or unit first (whose names have no
                // `, `: the first one ends the name).
                let label = match row.label.split_once(", cgroup = ") {
                    Some((_, path)) if !row.label.starts_with("cgroup = ") => {
                        format!("cgroup = {path}")
                    }
                    _ => row.label,
                };
                second
                    .series
                    .push((ring::label(label), CompactWaits::of(&row.waits)));
            }
        }
        let lost = tracer.mode_counters()?.slow_lost;
        second.slow_lost = lost.saturating_sub(self.lost_before);
        self.lost_before = lost;
        self.ring.push_second(second);
        // On the monotonic clock: a wall clock stepped back 10 minutes kept
        // triggers off for 10 minutes.
        let now = std::time::Instant::now();
        if self.cooldown_until.is_none_or(|until| now >= until) {
            // The ring holds at most its own window: a longer trigger
            // window judges what the ring holds, once full.
            let full = self.opts.trigger_window_s.min(self.opts.window_s) as usize;
            let window = self.ring.last(full);
            let fired = self
                .opts
                .triggers
                .iter()
                .find_map(|t| t.check(&window, full, &self.newest_slow));
            if let Some(why) = fired {
                say!("schedlat: trigger: {why}: dumping the window");
                self.writer
                    .request(self.job(format!("trigger: {why}"), DumpKind::Trigger));
                self.cooldown_until =
                    Some(now + std::time::Duration::from_secs(self.opts.cooldown_s));
            }
        }
        self.newest_slow.clear();
        Ok(())
    }

    /// Dumps the window now (SIGHUP): queued behind one being written.
    pub(crate) fn dump(&self, reason: &str, kind: DumpKind) {
        self.writer.request(self.job(reason.to_string(), kind));
    }

    /// Dumps the window unless a dump is being written; the path the dump
    /// will have once whole.
    pub(crate) fn dump_now(&self, reason: &str, kind: DumpKind) -> Result<PathBuf, Refused> {
        self.writer.request_now(self.job(reason.to_string(), kind))
    }

    /// Lets the dumps asked for finish (at exit).
    pub(crate) fn finish(self) {
        self.writer.finish();
    }

    /// The window as a dump: its seconds and slow waits are on the
    /// monotonic clock, put on the wall clock with one reading of the
    /// offset, now (a wall clock stepped back since they were recorded
    /// moves them all alike: in order, none after the dump).
    fn job(&self, reason: String, kind: DumpKind) -> Job {
        let (seconds, slow) = self.ring.snapshot();
        let clock = WallClock::now();
        Job {
            window: Window {
                meta: Meta {
                    reason,
                    dumped_unix_ns: clock.unix_ns(monotonic_ns()),
                    slow_evicted: self.ring.slow_evicted,
                    stacks_evicted: self.ring.stacks_evicted,
                    ..self.meta.clone()
                },
                seconds,
                slow,
                mono_to_unix_ns: i128::from(clock.unix_ns(0)),
            },
            kind,
        }
    }
}
