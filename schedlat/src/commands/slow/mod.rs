//! `schedlat slow --threshold 1ms`: every wait of at least the threshold,
//! as it happens, with the task that waited, the task that held the CPU
//! until it ended (the culprit) and the run-queue length (runqslower, with
//! context). The kernel sends only those waits, through a ring buffer
//! (schedlat-ebpf/src/slow.rs), and counts the ones the buffer had no room
//! for; they are reported in the stream, where they were lost. With
//! `--stacks` each event carries the holder's stacks (stacks.rs).

mod stacks;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use crate::{
    analysis::task::IdleWait,
    collect::{
        slow::{SlowEvents, SlowRecord},
        workloads::WorkloadNamer,
    },
    commands::{
        session::{self, Ended, Signals},
        stdout,
    },
    histogram::Unit,
    kernel::{
        filter::FilterSpec,
        loader::KernelAccess,
        modes::{Modes, Stacks},
    },
    output::{self, slow::EventWorkloads},
    sys::{clock::WallClock, throttle::ThrottleWatch, workload::level::Level},
};

/// What `schedlat slow` reports and how.
pub(crate) struct SlowOptions {
    /// Waits at least this long, in nanoseconds.
    pub threshold: u64,
    pub json: bool,
    /// The stacks in each event (docs/stacks.md).
    pub stacks: Option<Stacks>,
    /// Where to write the holders' folded stacks and their flame graph.
    pub folded: Option<PathBuf>,
    pub flamegraph: Option<PathBuf>,
    /// The holders' workloads the stacks are folded under (`--by`).
    pub by: Option<Level>,
}

pub(crate) async fn run(
    args: &SlowOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let stacks = match args.stacks {
        Some(_) => Some(stacks::Stacks::new(
            &args.folded,
            &args.flamegraph,
            args.by,
        )?),
        None => None,
    };
    let (mut tracer, filter) = session::attach(
        kernel,
        filter,
        Unit::Usecs.ns(),
        &Modes::slow(args.threshold).with_stacks(args.stacks),
    )?;
    let mut ring = SlowEvents::take(&mut tracer)?;

    // Counted from before the banner, like the events: a reader of the
    // banner sees every event and loss from then on.
    let mut out = Output {
        json: args.json,
        clock: WallClock::now(),
        events: 0,
        lost: 0,
        lost_base: tracer.mode_counters()?.slow_lost,
        throttle: ThrottleWatch::start_mounted(),
        scanned: Instant::now(),
        names: WorkloadNamer::for_tasks(&tracer),
        stacks,
    };
    if !session::announce_start(args.json, &format!("{}\n", output::slow::HEADER))? {
        return Ok(Ended::StdoutClosed);
    }

    // Losses are counted in the kernel; they are checked (and the clock's
    // offset refreshed) once a second, as is a reader that went away.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // With -p, a target that exits ends the run.
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    // A run that ends, whatever ends it (a reader gone too), writes the
    // stacks' files.
    let ended = 'run: loop {
        let stop = tokio::select! {
            events = ring.next() => {
                let events = events.context("waiting for slow events")?;
                if !out.print(&events)? {
                    break 'run Ended::StdoutClosed;
                }
                false
            }
            _ = tick.tick() => {
                if stdout::reader_gone() {
                    break 'run Ended::StdoutClosed;
                }
                out.clock = WallClock::now();
                out.scan();
                false
            }
            _ = watch.tick(), if filter.is_active() => {
                if filter.target_alive() {
                    continue;
                }
                say!("schedlat: the target process exited");
                true
            }
            _ = signals.recv() => true,
        };
        // Whatever ends the run, what is in the buffer is shown first.
        let lost = tracer.mode_counters()?.slow_lost;
        let lost = lost.saturating_sub(out.lost_base);
        if !(out.print(&ring.drain())? && out.lost_now(lost)?) {
            break 'run Ended::StdoutClosed;
        }
        if stop {
            let end = if args.json {
                output::slow::end_json(out.events, out.lost, args.threshold)
            } else {
                output::slow::summary(out.events, out.lost, args.threshold)
            };
            break 'run if stdout::write(&end)? {
                Ended::Done
            } else {
                Ended::StdoutClosed
            };
        }
    };
    if let Some(stacks) = out.stacks.take() {
        stacks.finish()?;
    }
    Ok(ended)
}

/// What has been printed so far.
struct Output {
    json: bool,
    clock: WallClock,
    events: u64,
    /// Losses reported so far, and the kernel's count at the start.
    lost: u64,
    lost_base: u64,
    /// Tells a wait that ended on an idle CPU as throttled or a wake onto
    /// an idle CPU; the cgroup tree is scanned once a second, and before
    /// such an event if the last scan is older than RESCAN.
    throttle: ThrottleWatch,
    scanned: Instant,
    /// Names the events' tasks as workloads, from the cgroups they are in
    /// when a batch is read (the runtimes' names from a cache that never
    /// waits).
    names: WorkloadNamer,
    /// With `--stacks`: names them, and keeps the run's folded stacks.
    stacks: Option<stacks::Stacks>,
}

const RESCAN: Duration = Duration::from_millis(100);

impl Output {
    /// Prints the events; false when stdout is closed.
    fn print(&mut self, records: &[SlowRecord]) -> Result<bool> {
        // One /proc read per task of the batch, however many events it has.
        let tasks = records.iter().map(|r| &r.event).flat_map(|e| {
            [
                (e.victim.tid, e.victim.tgid),
                (e.culprit.tid, e.culprit.tgid),
            ]
        });
        let workloads = self.names.tasks(tasks);
        let mut text = String::new();
        let holders = match self.stacks.as_mut() {
            Some(s) => s.name(records, |culprit, level| {
                let workload = workloads.get(&culprit.tid).and_then(|w| w.workload());
                workload.map_or_else(|| "(unknown)".into(), |w| w.name_at(level))
            }),
            None => vec![None; records.len()],
        };
        for (record, holder) in records.iter().zip(holders) {
            let event = &record.event;
            self.events += 1;
            let idle = (event.culprit.tid == 0).then(|| {
                if self.scanned.elapsed() >= RESCAN {
                    self.scan();
                }
                if self.throttle.throttled_recently(event.victim.tgid) {
                    IdleWait::Throttled
                } else {
                    IdleWait::WokenOntoIdleCpu
                }
            });
            let named = EventWorkloads {
                victim: workloads.get(&event.victim.tid),
                culprit: workloads.get(&event.culprit.tid),
            };
            text.push_str(&if self.json {
                output::slow::json(event, idle, self.clock, named, holder.as_ref())
            } else {
                output::slow::line(event, idle, self.clock, named)
            });
            if let (false, Some(h)) = (self.json, &holder) {
                text.push_str(&output::stacks::stacks_lines(h));
            }
        }
        if text.is_empty() {
            return Ok(true);
        }
        stdout::write(&text)
    }

    fn scan(&mut self) {
        self.throttle.end_interval();
        self.scanned = Instant::now();
    }

    /// Reports losses since the last report, in the stream.
    fn lost_now(&mut self, total: u64) -> Result<bool> {
        if total <= self.lost {
            return Ok(true);
        }
        let new = total - self.lost;
        self.lost = total;
        stdout::write(&if self.json {
            output::slow::lost_json(new)
        } else {
            output::slow::lost_line(new)
        })
    }
}
