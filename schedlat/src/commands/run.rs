//! Histogram mode: attach, then print one report per interval (or one at the
//! end), never losing the last interval's waits to Ctrl-C, SIGTERM or a closed
//! stdout. `record` is the same to a file, and `record --ring` the flight
//! recorder (recorder/) on the same measurement.

use std::{
    fs::File,
    io::Write,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use schedlat_common::scope::Breakdown;
use tokio::signal::unix::{SignalKind, signal};

use crate::{
    analysis::breakdown::{self, BreakdownOptions, Shown},
    collect::{
        interval::HistogramInterval,
        key_intervals::KeyIntervals,
        slow::SlowEvents,
        workloads::{self, WorkloadNamer},
    },
    commands::{
        UsageError, session,
        session::{Ended, Intervals, PairsView, Signals},
        stdout,
    },
    histogram::Unit,
    kernel::{filter::FilterSpec, loader::KernelAccess, modes::Modes},
    output::{
        self, Report,
        breakdown::key_noun,
        recording::{Pending, RecordedScope},
    },
    recorder::{DumpKind, Flight, RecorderOptions},
    sys::{clock, sched_context::SchedContext, slice::Slice},
};

/// The histogram mode's options: runqlat's `[INTERVAL] [COUNT]`, -T, -m,
/// and `--json`.
pub(crate) struct HistogramOptions {
    pub interval: Option<u64>,
    pub count: Option<u64>,
    pub timestamp: bool,
    pub unit: Unit,
    pub json: bool,
    /// `-v`: the full split tables under the short report.
    pub verbose: bool,
}

/// `schedlat record -o FILE DURATION`: one interval of DURATION seconds,
/// printed as usual and also written to FILE as a JSON object. An existing
/// FILE is replaced only with `force`, and only once the run succeeded.
pub(crate) async fn record(
    output: &Path,
    force: bool,
    duration: u64,
    unit: Unit,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    // Written aside and renamed on success: a run that fails (a mistyped
    // -p, a refused load) leaves an earlier recording of that name intact.
    let pending = Pending::create(output, force).map_err(UsageError)?;
    let file = pending
        .file
        .try_clone()
        .context("duplicating the recording's descriptor")?;
    let histogram = HistogramOptions {
        interval: Some(duration),
        count: Some(1),
        timestamp: false,
        unit,
        json: false,
        verbose: false,
    };
    let ended = run(
        &histogram,
        &BreakdownOptions::default(),
        kernel,
        filter,
        Some(file),
    )
    .await?;
    pending
        .commit()
        .with_context(|| format!("cannot put the recording in place at {}", output.display()))?;
    say!("schedlat: recorded to {}", output.display());
    Ok(ended)
}

pub(crate) async fn histogram(
    cli: &HistogramOptions,
    breakdown: &BreakdownOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    run(cli, breakdown, kernel, filter, None).await
}

/// The measurement loop; each report also goes to `record_to` as JSON.
async fn run(
    cli: &HistogramOptions,
    breakdown: &BreakdownOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
    mut record_to: Option<File>,
) -> Result<Ended> {
    let unit = cli.unit;
    let mut signals = Signals::install()?;
    let keyed = breakdown.keyed;
    let mut modes = Modes::histogram(keyed);
    if let Some(max) = breakdown.pairs {
        modes = modes.with_pairs(max);
    }
    let (mut tracer, filter) = session::attach(kernel, filter, unit.ns(), &modes)?;
    let mut keys = keyed.map(|k| {
        let mut keys = KeyIntervals::new(k.by, &tracer, true);
        // Cgroups named by the container, pod or unit they are.
        if k.by == Breakdown::Cgroup {
            keys.name_containers();
        }
        (keys, k)
    });
    let mut pairs_view = breakdown.pairs.map(|_| {
        PairsView::new(
            WorkloadNamer::new(&tracer, breakdown.by),
            breakdown.by,
            breakdown.top,
        )
    });
    let owner = filter.cgroup.as_ref().and_then(workloads::owner_of_target);
    let scope = RecordedScope::of(&filter, keyed.map(|k| key_noun(k.by)), owner);

    // Measuring starts from this snapshot, taken before the banner so that
    // whatever a user (or a test) starts on seeing it is counted. The pair
    // table is read first here and last at each interval's end, right
    // before and after the total: its interval then holds the total's, and
    // a wait that ends between two reads is never in the total and missing
    // from the pairs. Read the other way round at the start (with the keys
    // between, as before), the pairs were short of the total by the waits
    // that ended meanwhile, which on a loaded CPU are the long ones that
    // got it while schedlat waited (7.2 under emulation: 44 ms of 362).
    // The pairs are made of their reading only after the keys are read:
    // naming a pair's cgroups can walk the hierarchy, and every wait that
    // ends meanwhile would be in the keys' interval and not the pairs'.
    let pairs_read = (pairs_view.as_mut())
        .map(|view| view.read(&tracer))
        .transpose()?;
    let mut histogram = HistogramInterval::start(&mut tracer)?;
    if let Some((keys, _)) = keys.as_mut() {
        keys.interval(&mut tracer, |_| ())?;
    }
    if let (Some(view), Some(read)) = (pairs_view.as_mut(), pairs_read) {
        view.table(&mut tracer, read)?;
    }
    let mut started = Instant::now();

    if !session::announce_start(cli.json, "")? {
        return Ok(Ended::StdoutClosed);
    }
    // The kernel's context (the base slice, the scheduler features, HZ,
    // the preemption model) is read after the banner: no report is due
    // before the first interval ends, and the reads (debugfs, procfs, the
    // gzipped kernel configuration) took 1-2 ms of the time to the banner.
    let slice = Slice::detect();
    if let Some(why) = &slice.not_live {
        say!("schedlat: {why}");
    }
    let mut context = SchedContext::detect(&slice);

    let mut intervals = Intervals::new(cli.interval, cli.count);
    loop {
        let stop = intervals.next(&mut signals, &filter).await;
        // The total, the pair table and the keys are read back to back,
        // before anything is computed of them: a wait that ends between two
        // reads is in one and not yet in the other (vm-test, 6.1-rt under
        // emulation: 63 waits were in the pairs and not in the total when
        // the pairs were read after the report, the keys and their report).
        let waits = histogram.end(&mut tracer)?;
        let pairs_read = (pairs_view.as_mut())
            .map(|view| view.read(&tracer))
            .transpose()?;
        let unkeyed = waits.unkeyed;
        let shown = Shown {
            sort: breakdown.sort,
            top: breakdown.top,
            by: breakdown.by,
        };
        let keys = match keys.as_mut() {
            Some((keys, keyed)) => Some(keys.interval(&mut tracer, |reading| {
                breakdown::report(reading, *keyed, shown, unkeyed, &slice)
            })?),
            None => None,
        };
        let pairs = match (pairs_view.as_mut(), pairs_read) {
            (Some(view), Some(read)) => Some(view.table(&mut tracer, read)?),
            _ => None,
        };
        context.mechanisms.refresh_sched_ext();
        let mut report = Report::new(tracer.mode(), unit, &waits, &slice, started.elapsed(), stop);
        report.kernel = Some(&context);
        report.breakdown = keys.as_ref().map(output::breakdown::json);
        report.pairs = pairs.as_ref().map(output::pairs::to_json);
        report.scope = Some(scope.clone());
        let ts = cli.timestamp.then(clock::local_hms);
        let mut text = match (&keys, cli.json) {
            (_, true) => output::json::render(&report),
            // runqlat -P/-L/--pidnss print the per-key histograms only.
            (Some(keys), false) => {
                let ts = ts.map(|t| format!("\n{t:<8}")).unwrap_or_default();
                format!("{ts}{}", output::breakdown::text(keys, unit))
            }
            (None, false) => output::text::render(&report, ts.as_deref(), cli.verbose),
        };
        if let (Some(pairs), false) = (&pairs, cli.json) {
            text.push_str(&output::pairs::render_text(pairs));
        }
        if let Some(file) = record_to.as_mut() {
            file.write_all(output::json::render(&report).as_bytes())
                .context("writing the recording")?;
        }
        if !stdout::write(&text)? {
            return Ok(Ended::StdoutClosed);
        }
        if stop {
            return Ok(Ended::Done);
        }
        started = Instant::now();
    }
}

/// `schedlat record --ring DURATION`: the flight recorder until a signal,
/// dumping on SIGHUP and when a trigger fires.
pub(crate) async fn ring(
    opts: &RecorderOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let mut sighup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    let writer = Flight::open_dumps(opts)?;
    let (mut tracer, _filter) =
        session::attach(kernel, filter, opts.unit.ns(), &Flight::modes(opts))?;
    let mut ring_buffer = SlowEvents::take(&mut tracer)?;
    let mut flight = Flight::start(opts, writer, &mut tracer, "SIGHUP dumps now")?;

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            events = ring_buffer.next() => {
                flight.push_slow(events.context("waiting for slow events")?);
            }
            _ = tick.tick() => flight.second(&mut tracer, ring_buffer.drain())?,
            _ = sighup.recv() => flight.dump("SIGHUP", DumpKind::Sighup),
            _ = signals.recv() => break,
        }
    }
    flight.finish();
    Ok(Ended::Done)
}
