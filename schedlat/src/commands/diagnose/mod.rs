//! `schedlat diagnose`: the method of docs/architecture.md as one
//! command. 1. scope; 2. was it runnable-but-waiting at all (PSI, schedstat:
//! no root needed); 3. with root, the eBPF histogram of the same window and
//! its shape, and who waited and who held the CPU instead (the victims
//! tables); 4. named causes with evidence and a next step; 5. a self-check
//! of the eBPF total against the kernel's own schedstat accounting, saying
//! which part of the waiting that accounting does not see (selfcheck.rs).

mod causes;
mod findings;
mod priority;
mod report;
mod scope;
mod selfcheck;
mod split;
mod waited;

use std::time::{Duration, Instant};

use anyhow::Result;
use findings::{Findings, Snapshot};
use priority::Attribution;
use scope::{Mounts, Scope};

use crate::{
    analysis::{
        causes::Causes,
        percentiles::Percentiles,
        shape,
        slice::Slice,
        victims::{SortKey, rank, throttled_pids},
    },
    collect::{histogram::Waits, interval::Source, tracer::Tracer},
    commands::{session::Signals, stdout},
    kernel::{
        cgroupfs::watch_throttling,
        filter::{Filter, FilterSpec},
        loader::KernelAccess,
        modes::DEFAULT_MAX_TASKS,
        privileges,
    },
    sys::{cgroup_of, procfs},
};

/// What the eBPF side measured over the window (root only).
pub struct Traced {
    pub hook: String,
    pub waits: Waits,
    pub percentiles: Option<Percentiles>,
    pub shape: shape::Shape,
    /// Who waited and who held the CPU instead, or why not measured.
    pub victims: Result<Attribution, String>,
}

impl Traced {
    /// The scope's waiting as measured here: its histogram's sum, and its
    /// most-waiting task from the victims tables.
    fn waiting(&self, findings: &Findings) -> waited::EbpfWaiting {
        let window = Duration::from_nanos(findings.window_ns);
        let most_task = self.victims.as_ref().ok().map(|a| a.max_task_share(window));
        waited::EbpfWaiting::new(self.waits.sum_ns, most_task, findings)
    }
}

/// The causes the findings support, and with eBPF those its victims
/// tables and its split of the waits support, strongest first.
/// `ebpf`: the scope's waiting as `traced` measured it.
fn named_causes(
    scope: &Scope,
    findings: &Findings,
    traced: Option<&Traced>,
    ebpf: Option<waited::EbpfWaiting>,
) -> Vec<causes::Cause> {
    let attribution = traced.and_then(|t| t.victims.as_ref().ok());
    let mut named = causes::causes(findings, attribution, ebpf);
    if let (Some(counts), Some(ebpf)) = (traced.and_then(|t| t.waits.causes.as_ref()), ebpf) {
        // The scope's cgroups, from a thread alive now.
        let scope_cgroup = match scope {
            Scope::System => None,
            Scope::Process { pid, .. } => cgroup_of::of(*pid),
            Scope::Cgroup(c) => c.threads().into_iter().find_map(cgroup_of::of),
        };
        let evidence = split::Evidence {
            split: &Causes::of(counts),
            attribution,
            ebpf,
            scope_cgroup: scope_cgroup.as_deref(),
        };
        split::add(&mut named, findings, &evidence);
    }
    named
}

/// The observation window and how the diagnosis is printed.
pub struct DiagnoseOptions {
    /// Seconds.
    pub duration: u64,
    pub json: bool,
}

pub async fn run(args: &DiagnoseOptions, kernel: &KernelAccess, filter: &FilterSpec) -> Result<()> {
    let mounts = Mounts::read();
    if filter.tid.is_some() || filter.comm.is_some() || filter.cpu.is_some() {
        return Err(super::UsageError(
            "diagnose scopes are the whole system, a process (-p) or a cgroup (-c); -t, --comm and --cpu are for the histogram modes".into(),
        )
        .into());
    }
    let scope = match (filter.pid, &filter.cgroup) {
        (Some(_), Some(_)) => {
            return Err(super::UsageError("give either -p PID or -c PATH, not both".into()).into());
        }
        (Some(pid), None) => Scope::for_process(pid, &mounts)?,
        (None, Some(path)) => Scope::for_cgroup(path, &mounts)?,
        (None, None) => Scope::System,
    };
    let window = Duration::from_secs(args.duration);
    let mut signals = Signals::install()?;

    // eBPF over the same window when allowed; the rest never needs root.
    let mut tracer = None;
    let mut why_not_traced = None;
    if privileges::can_trace() {
        // The same scope, in the kernel: the process, or the cgroup and below.
        let tracer_filter = Filter::resolve(filter)?;
        let (loaded, victims) =
            Tracer::load_with_victims(kernel, &tracer_filter, DEFAULT_MAX_TASKS)?;
        tracer = Some((loaded, victims));
    } else {
        why_not_traced = Some(format!(
            "not measured: {}. Root adds the run-queue latency histogram of the window, its percentiles and shape, the victims and culprits, and the eBPF/schedstat self-check",
            privileges::NEED_PRIVILEGES
        ));
    }
    if !args.json {
        say!(
            "schedlat diagnose: watching {} for {}s...",
            scope.describe(),
            args.duration
        );
    }
    // The first interval starts here: the collector drops what came before.
    let mut traced_source = match tracer {
        Some((mut t, victims)) => {
            let max_tasks = victims.is_ok().then_some(DEFAULT_MAX_TASKS);
            let source = Source::start(&mut t, max_tasks)?;
            Some((t, source, victims.err()))
        }
        None => None,
    };
    let start = Snapshot::take(&scope);
    let mut throttle = watch_throttling();
    let started = Instant::now();
    let mut runnable = Vec::new();
    while started.elapsed() < window {
        if let Some(times) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| procfs::parse_proc_stat(&t).ok())
        {
            // procs_running counts this sampler too.
            runnable.push(times.procs_running.saturating_sub(1));
        }
        tokio::select! {
            _ = signals.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    let end = Snapshot::take(&scope);
    let elapsed = started.elapsed();
    let traced = match traced_source.as_mut() {
        Some((t, source, why_no_victims)) => {
            let (waits, interval) = source.end_interval(t)?;
            let victims = match (interval, why_no_victims.take()) {
                (Some(interval), _) => {
                    let tables = rank(&interval.victims, &interval.culprits, SortKey::Total, 0);
                    let c = &interval.counters;
                    throttle.end_interval();
                    let throttled = throttled_pids(&throttle, &tables);
                    let mut a = Attribution::new(tables, (c.victims_overflow, c.culprits_overflow));
                    a.throttled = throttled;
                    Ok(a)
                }
                (None, why) => Err(why.unwrap_or_default()),
            };
            let slice = Slice::detect();
            if let Some(why) = &slice.not_live {
                say!("schedlat: {why}");
            }
            Some(Traced {
                hook: t.mode().to_string(),
                percentiles: Percentiles::of(&waits),
                shape: shape::classify(&waits, &slice),
                waits,
                victims,
            })
        }
        None => None,
    };
    let findings = Findings::between(&scope, &start, &end, elapsed, &runnable);
    // How much the scope waited by eBPF: read once, for both questions.
    let ebpf = traced.as_ref().map(|t| t.waiting(&findings));
    let diagnosis = report::Diagnosis {
        waiting: causes::waiting(&findings, ebpf),
        causes: named_causes(&scope, &findings, traced.as_ref(), ebpf),
        scope: &scope,
        findings: &findings,
        traced: traced.as_ref(),
        why_not_traced: why_not_traced.as_deref(),
    };
    let text = if args.json {
        report::json(&diagnosis)
    } else {
        report::text(&diagnosis)
    };
    // A closed stdout (`| head`) is no error; a failed write is.
    stdout::write(&text)?;
    Ok(())
}
