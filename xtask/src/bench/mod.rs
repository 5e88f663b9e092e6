//! `cargo xtask bench`: schedlat against libbpf-tools runqlat on a
//! context-switch load (`perf bench sched pipe`).
//!
//! One invocation runs R rounds; each round runs the load once per mode
//! (`modes::ALL`: no tracer, runqlat, and schedlat each way its users run
//! it: the default histogram, --no-causes, --waking, -p, a filter that
//! leaves nothing, victims, serve plain and per cgroup and per process, the
//! flight recorder) in an order rotated every round, so slow drift of the
//! machine (thermal, page cache, the neighbours on the other CPU) is spread
//! over all modes instead of landing on one. Per mode we report the median
//! over rounds:
//!
//! - ops/s of the load and its drop against the baseline (overhead);
//! - BPF ns per context switch, from the kernel's per-program run-time stats;
//! - the cost to other processes: ns per system call of `perf bench
//!   syscall basic` on the same CPU while the tracer is attached, against
//!   no tracer (a syscall tracepoint taxes every call of every process);
//! - ready time: tracer exec to the line saying it is attached;
//! - the tracer's CPU time (`wait4`'s rusage) and peak RSS (its VmHWM,
//!   see tracer.rs for why not rusage's).
//!
//! Then, with no load, the steady-state RSS of `runqlat 1`, `schedlat 1`
//! and `schedlat serve` running side by side (`steady`), and last the
//! application row (`app`): what nginx answering wrk loses under runqlat,
//! the default and the DaemonSet's configuration.
//!
//! The README's and docs' cost tables are generated from `--json`'s output
//! (`docs`, `cargo xtask bench-docs`), never typed.
//!
//! Benchmarks report, tests assert: missed targets exit 0 unless `--strict`.

mod app;
mod daemonset;
pub(crate) mod docs;
pub(crate) mod floor;
mod json;
mod modes;
mod options;
mod otlp_push;
mod own_cgroups;
mod pid_max;
mod progs;
mod recorder;
pub(crate) mod reference;
mod report;
mod sample;
mod scrape;
mod seed;
mod serve_client;
pub(crate) mod sleepers;
mod soak;
mod steady;
mod tracer;
mod workload;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use modes::{Mode, Runs};
pub(crate) use options::Options;
use options::schedlat_binary;
use sample::{SYSCALL_RUNS, Sample, TracerSample};
use tracer::{TRACER_TIMEOUT, Tools, Tracer};
use workload::Load;

use crate::util::require_root;

/// libbpf-tools' runqlat, as installed by Debian's libbpf-tools package.
const RUNQLAT: &str = "/usr/sbin/runqlat";

pub(crate) fn run(opts: &Options) -> Result<()> {
    require_root("the benchmark loads eBPF programs and reads their kernel run-time stats")?;
    if let Some(scrapes) = opts.scrape {
        return scrape::run(opts, scrapes);
    }
    if let Some(secs) = opts.soak {
        return match soak::run(opts, secs) {
            Err(e) if !opts.strict && e.to_string().starts_with("grew:") => Ok(()),
            other => other,
        };
    }
    if let Some(seconds) = opts.seed {
        let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        let cpu = if opts.cpu == 0 { last } else { opts.cpu };
        return seed::run(&schedlat_binary(opts)?, seconds, cpu);
    }
    if let Some(seconds) = opts.recorder {
        return recorder::run(&schedlat_binary(opts)?, seconds, opts.cpu);
    }
    let schedlat = schedlat_binary(opts)?;
    // Events filtered out must cost less than recorded ones. An empty
    // cgroup filters out everything, through the cgroup walk.
    let empty = EmptyCgroup::create()?;
    let tools = Tools {
        runqlat: RUNQLAT.into(),
        schedlat,
        empty_cgroup: empty.path(),
    };
    // Each found now: a missing binary fails before any round runs.
    for mode in modes::ALL {
        mode.tool(&tools.runqlat, &tools.schedlat, 1, &tools.empty_cgroup)?;
    }
    if opts.app_only {
        let app = app::measure(opts, &tools)?;
        print!("{}", app.render());
        if let Some(path) = &opts.json {
            write_json(path, &json::render_application(&app))?;
        }
        return strict(opts, app.missed_targets());
    }
    // The reference programs' objects (`noop`, `timer`, `timer-decision`),
    // built now, once: no build runs beside a measurement, and each
    // reference run only loads its object (`bench-noop --prebuilt`).
    reference::object::build()?;
    let (all, mut missed) = compare(opts, &tools)?;
    let steady = steady_rss(opts, &tools.schedlat)?;
    print!("{}", steady.render());
    missed.extend(steady.missed_targets());
    let floor = floor::measure(5)?;
    println!(
        "\nparsing all of the kernel BTF in a process that does only that (what unpatched \
         aya 0.14's EbpfLoader::new() does first): {:.1} ms, peak RSS {:.1} MiB",
        floor.ms, floor.rss_mib
    );
    let app = match opts.app_rounds {
        0 => None,
        _ => Some(app::measure(opts, &tools)?),
    };
    if let Some(app) = &app {
        print!("{}", app.render());
        missed.extend(app.missed_targets());
    }
    if let Some(path) = &opts.json {
        write_json(path, &json::render_all(&all, &steady, app.as_ref()))?;
    }
    strict(opts, missed)
}

/// One `--sleepers` value and the comparison's results with it.
type Level = (usize, report::Results);

/// The comparison at each `--sleepers` level, with BPF run-time stats on
/// (they time every program run, so nothing after it runs with them); the
/// results and the targets they missed.
fn compare(opts: &Options, tools: &Tools) -> Result<(Vec<Level>, Vec<String>)> {
    // The kernel counts BPF run time only while some fd like this is open.
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("enabling BPF run-time stats (BPF_ENABLE_STATS, kernel >= 5.8)")?;

    let mut missed = Vec::new();
    let mut all = Vec::new();
    for &n in &opts.sleepers {
        // The sleepers live on another CPU than the load, when there is one.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let other = if cpus > 1 {
            (opts.cpu + 1) % cpus
        } else {
            opts.cpu
        };
        eprintln!("bench: starting {n} sleeping/waking threads on CPU {other}");
        let sleepers = sleepers::SleeperProcess::spawn(n, other, opts.sleeping())?;
        let results = compare_once(opts, tools)?;
        drop(sleepers);
        println!("\n=== with {n} sleeping/waking threads on CPU {other} ===");
        print!("{}", results.render());
        missed.extend(
            results
                .missed_targets()
                .into_iter()
                .map(|m| format!("{m} ({n} threads)")),
        );
        all.push((n, results));
    }
    Ok((all, missed))
}

fn write_json(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("bench: JSON results in {}", path.display());
    Ok(())
}

/// With `--strict`, an error naming the targets missed.
fn strict(opts: &Options, missed: Vec<String>) -> Result<()> {
    if opts.strict && !missed.is_empty() {
        bail!("targets missed (--strict): {}", missed.join(", "));
    }
    Ok(())
}

/// Steady-state RSS of runqlat and of schedlat's two long-running forms.
fn steady_rss(opts: &Options, schedlat: &std::path::Path) -> Result<steady::Steady> {
    let subjects = [
        steady::subject("runqlat 1", RUNQLAT.as_ref(), &["1"]),
        steady::subject("schedlat 1", schedlat, &["1"]),
        steady::subject(
            "schedlat serve",
            schedlat,
            &["serve", "--listen", "127.0.0.1:0"],
        ),
    ];
    let rss = steady::measure(&subjects, opts.rounds)?;
    Ok(steady::Steady::new(&subjects, rss, opts.rounds))
}

/// A cgroup with no task, under the cgroup v2 mount; removed when dropped.
struct EmptyCgroup(PathBuf);

impl EmptyCgroup {
    fn create() -> Result<EmptyCgroup> {
        let v2 = own_cgroups::v2_mount()?;
        let dir = v2.join(format!("schedlat-bench-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(EmptyCgroup(dir))
    }

    fn path(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for EmptyCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// All rounds of all modes, under whatever else runs on the machine.
fn compare_once(opts: &Options, tools: &Tools) -> Result<report::Results> {
    let mut samples = Vec::new();
    for round in 1..=opts.rounds {
        for mode in modes::order(round) {
            if !mode.selected(&opts.modes) {
                continue;
            }
            eprintln!("bench: round {round}/{}: {}", opts.rounds, mode.command());
            let sample = match mode.runs {
                Runs::Nothing => baseline(round, opts)?,
                Runs::Runqlat | Runs::Schedlat | Runs::Noop => traced(round, mode, tools, opts)?,
            };
            samples.push(sample);
        }
    }
    report::Results::new(opts, samples)
}

fn baseline(round: u32, opts: &Options) -> Result<Sample> {
    let syscall_ns = workload::syscall_ns(opts.cpu, opts.syscall_loops, SYSCALL_RUNS)?;
    Ok(Sample {
        round,
        mode: modes::BASELINE,
        ops_per_sec: workload::run(opts.cpu, opts.loops)?,
        syscall_ns,
        tracer: None,
    })
}

/// Starts the load stopped, the tracer, runs the load under it, stops the
/// tracer. The tracer is killed on any error (the guard in `Tracer`), so
/// none is ever left attached.
fn traced(round: u32, mode: Mode, tools: &Tools, opts: &Options) -> Result<Sample> {
    let load = Load::start(opts.cpu, opts.loops)?;
    let tool = mode
        .tool(
            &tools.runqlat,
            &tools.schedlat,
            load.pid(),
            &tools.empty_cgroup,
        )?
        .context("a traced mode has a tracer")?;
    // Programs loaded before the spawn cannot be the tracer's.
    let before = progs::loaded_ids()?;
    let mut tracer = Tracer::spawn(&tool)?;
    let ready = tracer.wait_ready(TRACER_TIMEOUT)?;
    let ids = progs::tracer_programs(&before, tracer.pid())
        .with_context(|| format!("finding {}'s BPF programs", tool.name))?;
    // Before the switch counters start: its few switches stay out of them.
    let syscall_ns = workload::syscall_ns(opts.cpu, opts.syscall_loops, SYSCALL_RUNS)?;

    let start = progs::counters(&ids)?;
    let ops_per_sec = load.finish()?;
    // Read at once: with -p, the tracer ends by itself soon after its
    // target (it checks every 500 ms), and its programs with it.
    let end = progs::counters(&ids)?;
    let max_rss_kib = tracer.peak_rss_kib()?;

    let exit = tracer.stop(TRACER_TIMEOUT, max_rss_kib)?;
    let programs = progs::deltas(&start, &end);
    let ns_per_switch = progs::ns_per_switch(&programs).with_context(|| {
        format!(
            "{}: no program named *switch* ran during the load",
            tool.name
        )
    })?;
    Ok(Sample {
        round,
        mode,
        ops_per_sec,
        syscall_ns,
        tracer: Some(TracerSample {
            ready,
            programs,
            ns_per_switch,
            cpu_secs: exit.cpu_secs,
            max_rss_kib: exit.max_rss_kib,
        }),
    })
}
