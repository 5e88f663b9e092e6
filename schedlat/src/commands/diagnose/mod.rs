//! `schedlat diagnose`: the method of docs/architecture.md as one command,
//! its steps in order over one window. 1. the scope; 2. the kernel's own
//! accounting at both ends of the window (PSI, schedstat, cpu.stat: no root
//! needed); 3. with root, the eBPF histogram of the same window, who
//! waited behind whom (the victims tables) and what the scheduler decided
//! (the decision split); 4. the verdict: was it
//! runnable-but-waiting at all, and the named diagnoses with evidence and a
//! next step; 5. the report, with a self-check of the eBPF total against
//! schedstat's run_delay. The judgement is analysis/diagnosis/, what it
//! reads sys/findings.rs and sys/scope.rs, the report output/diagnosis.rs.
//! With root, beside the victims tables, the holders' stacks of the
//! window's slow waits are taken too (analysis/stack_watch.rs), so that the report
//! quotes what each holder it names ran.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{
    analysis::{
        diagnosis::{
            priority::{Attribution, Charged, ShareCharged},
            traced::Traced,
            verdict,
        },
        pairs::{self, PairTable},
        stack_watch::StackWatch,
        victims::{SortKey, rank, throttled_pids},
    },
    collect::{
        pairs::{IDLE, UNAPPORTIONED},
        tracer::Tracer,
        victims::Source,
        workloads::WorkloadNamer,
    },
    commands::{
        UsageError,
        session::{PairsView, Signals},
        stdout,
    },
    histogram::Unit,
    kernel::{
        filter::{self, Filter, FilterSpec},
        loader::KernelAccess,
        modes::DEFAULT_MAX_TASKS,
        privileges,
    },
    output::{diagnosis as report, diagnosis::DiagnoseReport},
    sys::{
        cgroup_of::TaskCgroups,
        findings,
        findings::{Findings, ProcSample},
        mounts::Mounts,
        sched_context::SchedContext,
        scope::Scope,
        slice::Slice,
        throttle::ThrottleWatch,
        workload::level::Level,
    },
};

/// The neighbour pairs diagnose keeps in the kernel beside the victims
/// tables (`--max-pairs`' default): the noisy neighbour is named by the
/// time its tasks held the CPU inside the scope's waits.
const MAX_PAIRS: u32 = 4096;

/// Why `diagnose --decision` has no victims tables.
const NO_VICTIMS_WITH_DECISION: &str = "not loaded with --decision (the decision split's programs alone; run without --decision for the tables and the split)";

/// Why diagnose takes no stacks without the victims tables.
const NO_HOLDER_NAMED: &str = "no holder is named without the victims tables";

/// The observation window and how the diagnosis is printed.
pub(crate) struct DiagnoseOptions {
    /// Seconds.
    pub duration: u64,
    pub json: bool,
    /// Load the decision split's programs alone, without the victims
    /// tables (by default diagnose loads both).
    pub decision: bool,
    /// Take the holder's stacks of the waits at least this long (ns);
    /// None with `--no-stacks`.
    pub stacks_over: Option<u64>,
}

pub(crate) async fn run(
    args: &DiagnoseOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<()> {
    let scope = scope_of(filter)?;
    let window = Duration::from_secs(args.duration);
    let mut signals = Signals::install()?;

    // eBPF over the same window when allowed; the rest never needs root.
    let loaded = if privileges::can_trace() {
        // The same scope, in the kernel: the process, or the cgroup and below.
        let in_kernel = Filter::resolve(filter)?;
        let loaded = if args.decision {
            // The split's programs alone: no tables, one load.
            let tracer = Tracer::load(kernel.hook, &kernel.sources, Unit::Usecs.ns(), &in_kernel)?;
            (tracer, Err(NO_VICTIMS_WITH_DECISION.to_string()), None)
        } else {
            let (tracer, victims) =
                Tracer::load_with_victims(kernel, &in_kernel, DEFAULT_MAX_TASKS, Some(MAX_PAIRS))?;
            // Where the victims programs do not split by the decision, the
            // histogram mode's programs do, over the same window, beside
            // them (a second set attached for the window only); without
            // them (--no-decision, the classic hook) the verdict names no
            // rule.
            let split = (tracer.decision.is_none() && !kernel.sources.no_decision)
                .then(|| Tracer::load(kernel.hook, &kernel.sources, Unit::Usecs.ns(), &in_kernel))
                .and_then(Result::ok)
                .filter(|t| t.decision.is_some());
            (tracer, victims, split)
        };
        // After the window's own tracers, which a refusal leaves as they
        // are: the report says why there are no stacks.
        let stacks = stacks_to_take(args.stacks_over, &loaded.1)
            .map(|over| over.and_then(|ns| StackWatch::load(kernel, &in_kernel, ns)));
        Some((loaded, stacks))
    } else {
        None
    };
    let why_not_traced = loaded.is_none().then(|| {
        format!(
            "not measured: {}. Root adds the run-queue latency histogram of the window, its percentiles and shape, the victims and culprits, and the eBPF/schedstat self-check",
            privileges::NEED_PRIVILEGES
        )
    });
    if !args.json {
        say!(
            "schedlat diagnose: watching {} for {}s...",
            scope.describe(),
            args.duration
        );
    }
    // The window starts here: the collector drops what came before.
    let mut tracing = loaded
        .map(|(loaded, stacks)| Tracing::start(loaded, stacks))
        .transpose()?;
    let start = ProcSample::take(&scope);
    let mut throttle = ThrottleWatch::start_mounted();
    let started = Instant::now();
    let drain = || {
        if let Some(t) = tracing.as_mut() {
            t.drain_stacks();
        }
    };
    let runnable = runnable_until(started + window, &mut signals, drain).await;
    let end = ProcSample::take(&scope);
    let elapsed = started.elapsed();

    let (traced, cgroups) = match tracing.as_mut() {
        Some(t) => {
            let (traced, cgroups) = t.end(&mut throttle, &scope)?;
            (Some(traced), cgroups)
        }
        None => (None, TaskCgroups::default()),
    };
    let findings = Findings::between(&scope, &start, &end, elapsed, &runnable);
    let verdict = verdict::diagnose(&findings, traced.as_ref(), &cgroups);
    let report = DiagnoseReport {
        scope: &scope,
        findings: &findings,
        verdict: &verdict,
        traced: traced.as_ref(),
        why_not_traced: why_not_traced.as_deref(),
    };
    let text = if args.json {
        report::json(&report)
    } else {
        report::text(&report)
    };
    // A closed stdout (`| head`) is no error; a failed write is.
    stdout::write(&text)?;
    Ok(())
}

/// The threshold of the holders' stacks to load (None: not asked for,
/// `--no-stacks`), or why none are taken: every holder the report names
/// comes from the victims tables (their culprits, and the causes' holders
/// read from them and their pairs), so without them (`--decision`, or a
/// kernel that refused them) the slow mode's programs would cost the
/// window for nothing.
fn stacks_to_take(
    stacks_over: Option<u64>,
    victims: &Result<(), String>,
) -> Option<Result<u64, String>> {
    let ns = stacks_over?;
    Some(match victims {
        Ok(()) => Ok(ns),
        Err(_) => Err(NO_HOLDER_NAMED.to_string()),
    })
}

/// Step 1: the scope, from `-p` or `-c`, or the whole system.
fn scope_of(filter: &FilterSpec) -> Result<Scope> {
    if filter.tid.is_some() || filter.comm.is_some() || filter.cpu.is_some() {
        return Err(UsageError(
            "diagnose scopes are the whole system, a process (-p) or a cgroup (-c); -t, --comm and --cpu are for the histogram modes".into(),
        )
        .into());
    }
    let mounts = Mounts::read();
    Ok(match (filter.pid, &filter.cgroup) {
        (Some(_), Some(_)) => {
            return Err(UsageError("give either -p PID or -c PATH, not both".into()).into());
        }
        (Some(pid), None) => Scope::for_process(pid, &mounts)?,
        (None, Some(arg)) => {
            // The resolver every `-c` uses: a path, a container ID or
            // prefix, a pod UID (either spelling), a unit or slice.
            let target = filter::cgroup_target(arg).map_err(anyhow::Error::msg)?;
            Scope::for_cgroup(&arg.display().to_string(), &target.dir, &mounts)?
        }
        (None, None) => Scope::System,
    })
}

/// The runnable tasks every 100 ms until `end` or a signal: their average
/// is the saturation test's queue. `tick` runs after each 100 ms.
async fn runnable_until(end: Instant, signals: &mut Signals, mut tick: impl FnMut()) -> Vec<u64> {
    let mut runnable = Vec::new();
    while Instant::now() < end {
        runnable.extend(findings::runnable_now());
        tokio::select! {
            _ = signals.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        tick();
    }
    runnable
}

/// A tracer just loaded, why it has no victims tables (when it has none),
/// and the decision split's own tracer when it does not carry the split.
type Loaded = (Tracer, Result<(), String>, Option<Tracer>);

/// eBPF's part of the window: the attached tracer and its interval, why
/// there are no victims tables where they could not load, and the
/// decision split's tracer and interval beside it.
struct Tracing {
    tracer: Tracer,
    source: Source,
    victims: Result<(), String>,
    split: Option<(Tracer, Source)>,
    /// The neighbour pairs, with the victims tables.
    pairs: Option<PairsView>,
    /// The holders' stacks, or why none are taken (no victims tables, or
    /// the kernel refused them); None with `--no-stacks`.
    stacks: Option<Result<StackWatch, String>>,
}

impl Tracing {
    /// Starts the window's interval on the tracers just loaded.
    fn start(
        (mut tracer, victims, split): Loaded,
        stacks: Option<Result<StackWatch, String>>,
    ) -> Result<Tracing> {
        let max_tasks = victims.is_ok().then_some(DEFAULT_MAX_TASKS);
        // The pairs since load are read and dropped: the window's are next.
        // Right before the tables, and right after them at the window's
        // end: the pairs' window holds the tables' (commands/run.rs).
        let pairs = match victims.is_ok() {
            true => {
                let mut view =
                    PairsView::new(WorkloadNamer::for_tasks(&tracer), Level::Cgroup, None);
                view.interval(&mut tracer)?;
                Some(view)
            }
            false => None,
        };
        let source = Source::start(&mut tracer, max_tasks)?;
        let split = match split {
            Some(mut t) => {
                let source = Source::start(&mut t, None)?;
                Some((t, source))
            }
            None => None,
        };
        // Last: the stacks' window starts with the others'.
        let stacks = stacks.map(|s| {
            s.and_then(|mut watch| {
                watch.start()?;
                Ok(watch)
            })
        });
        Ok(Tracing {
            tracer,
            source,
            victims,
            split,
            pairs,
            stacks,
        })
    }

    /// Names and folds the holders' stacks read so far.
    fn drain_stacks(&mut self) {
        if let Some(Ok(watch)) = self.stacks.as_mut() {
            watch.drain();
        }
    }

    /// Step 3: ends the window: its histogram, and its victims tables
    /// ranked and attributed, with the cgroups of their culprits and of the
    /// scope read for the diagnosis.
    fn end(
        &mut self,
        throttle: &mut ThrottleWatch,
        scope: &Scope,
    ) -> Result<(Traced, TaskCgroups)> {
        let (mut waits, interval) = self.source.end_interval(&mut self.tracer)?;
        let pair_table = match (&interval, &mut self.pairs) {
            (Some(_), Some(view)) => Some(view.interval(&mut self.tracer)?),
            _ => None,
        };
        if let Some((tracer, source)) = &mut self.split {
            waits.decision = source.end_interval(tracer)?.0.decision;
        }
        let stacks = (self.stacks.take()).map(|s| s.and_then(StackWatch::end));
        let mut cgroups = TaskCgroups::default();
        let victims = match (interval, &self.victims) {
            (Some(interval), _) => {
                let tables = rank(&interval.victims, &interval.culprits, SortKey::Total, 0);
                throttle.end_interval();
                let throttled = throttled_pids(throttle, &tables);
                let tasks = tables.culprits.iter().flat_map(|r| [&r.task, &r.other]);
                // The holders of the slow waits too, for their cgroups' stacks.
                let holders = stacks.iter().flatten().flat_map(|(f, _)| f.holders());
                cgroups = TaskCgroups::read(scope.cgroup_lines(), tasks.chain(holders));
                cgroups.scope_pid = scope.pid();
                cgroups.scope_subtree = matches!(scope, Scope::Cgroup(_));
                let c = &interval.counters;
                let overflow = (c.victims_overflow, c.culprits_overflow);
                let mut a = Attribution::new(tables, overflow, &cgroups);
                a.throttled = throttled;
                a.neighbours = pair_table.as_ref().map(neighbours);
                a.share_users = pair_table.as_ref().map(share_users).unwrap_or_default();
                Ok(a)
            }
            (None, why) => Err(why.clone().err().unwrap_or_default()),
        };
        let slice = Slice::detect();
        if let Some(why) = &slice.not_live {
            say!("schedlat: {why}");
        }
        let hook = self.tracer.mode().to_string();
        let mut traced = Traced::new(hook, waits, victims, &slice);
        traced.kernel = Some(SchedContext::detect(&slice));
        traced.stacks = stacks.map(|s| s.map(|(folding, lost)| folding.end(lost, &cgroups)));
        Ok((traced, cgroups))
    }
}

/// The other cgroups of the window's pairs (holder not the waiter's own,
/// not the idle CPU, not the unapportioned time), each with the time
/// charged to it, most first.
fn neighbours(table: &PairTable) -> Vec<Charged> {
    let charges = (table.rows.iter())
        .filter(|row| {
            let holder = row.holder.identity.as_str();
            holder != IDLE && holder != UNAPPORTIONED && holder != row.victim.identity
        })
        .map(|row| (row.holder.identity.as_str(), row.counts.sum_ns));
    (most_first(charges).into_iter())
        .map(|(path, charged_ns)| Charged {
            path: path.to_string(),
            charged_ns,
        })
        .collect()
}

/// The cgroups that had used the share of a group the waiters are in
/// (the pairs' second role), by cgroup and group, most charged first.
fn share_users(table: &PairTable) -> Vec<ShareCharged> {
    let charges = (table.shares.iter()).map(|row| {
        (
            (row.user.identity.as_str(), row.group.as_str()),
            row.counts.sum_ns,
        )
    });
    (most_first(charges).into_iter())
        .map(|((path, group), charged_ns)| ShareCharged {
            path: path.to_string(),
            group: group.to_string(),
            charged_ns,
        })
        .collect()
}

/// `charges` added up by key, most first (ties in key order).
fn most_first<K: Ord>(charges: impl Iterator<Item = (K, u64)>) -> Vec<(K, u64)> {
    pairs::most_first(charges, |sum, ns| *sum += ns, |&ns| ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_taken_only_where_a_holder_can_be_named() {
        assert_eq!(
            stacks_to_take(Some(1_000_000), &Ok(())),
            Some(Ok(1_000_000))
        );
        // --no-stacks: nothing to say.
        assert_eq!(stacks_to_take(None, &Ok(())), None);
        assert_eq!(stacks_to_take(None, &Err("refused".into())), None);
        // --decision, or tables the kernel refused: said in the report.
        let without = Err(NO_VICTIMS_WITH_DECISION.to_string());
        assert_eq!(
            stacks_to_take(Some(1_000_000), &without),
            Some(Err(NO_HOLDER_NAMED.to_string()))
        );
    }
}
