//! The argument groups several commands flatten (how to reach the kernel,
//! which waits to measure, runqlat's histogram options) and the parsers
//! they share.

use std::path::PathBuf;

use super::values::HookArg;
use crate::{
    commands::run::HistogramOptions,
    histogram::Unit,
    kernel::{
        filter::FilterSpec,
        loader::{KernelAccess, KernelSources},
    },
};

/// The default mode: runqlat's interface.
#[derive(Debug, clap::Args)]
pub(crate) struct HistogramArgs {
    /// Print a histogram every INTERVAL seconds (default: once, at Ctrl-C)
    #[arg(value_parser = interval_secs)]
    pub interval: Option<u64>,

    /// Stop after COUNT intervals (default: until Ctrl-C)
    #[arg(value_parser = positive_u64, requires = "interval")]
    pub count: Option<u64>,

    /// Include a timestamp (HH:MM:SS) before each histogram
    #[arg(short = 'T', long)]
    pub timestamp: bool,

    /// Histogram in milliseconds instead of microseconds
    #[arg(short = 'm', long)]
    pub milliseconds: bool,

    /// One JSON object per interval on stdout (JSON Lines; schema in docs/json.md)
    #[arg(long)]
    pub json: bool,

    /// Under the short report, the full tables: the cause split, the
    /// scheduler's decision split with the verdict's reasons, and the
    /// kernel's context (docs/guide.md, "Reading the output"). --json
    /// always has everything
    #[arg(short = 'v', long, conflicts_with = "json")]
    pub verbose: bool,
}

/// How schedlat reaches the kernel; flattened into every command that
/// measures (not `compare`, which reads files). Not `global`: a global option
/// would show in the help of commands that ignore it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Kernel access")]
pub(crate) struct KernelArgs {
    /// How to hook the scheduler: tp_btf (`btf`), classic tracepoints (`tp`),
    /// or `auto` (tp_btf when the kernel has BTF, else tracepoints)
    #[arg(long, value_enum, default_value_t = HookArg::Auto)]
    pub hook: HookArg,

    /// Kernel BTF to resolve task_struct offsets from [default:
    /// /sys/kernel/btf/vmlinux]. Given explicitly, it must exist.
    #[arg(long, env = "SCHEDLAT_BTF", value_name = "PATH")]
    pub btf: Option<PathBuf>,

    /// tracefs mount holding the sched tracepoint formats (default: found
    /// under /sys/kernel/tracing or /sys/kernel/debug/tracing)
    #[arg(long, env = "SCHEDLAT_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,

    /// Allow --max-keys or --max-tasks values whose maps take more than 256
    /// MiB of kernel memory (the cost is printed when it is 16 MiB or more)
    #[arg(long)]
    pub force_memory: bool,

    /// Do not split waits by cause (how each began, where it ended, who
    /// held the CPU, queue depth, steal/IRQ/throttled time; docs/causes.md)
    #[arg(long)]
    pub no_causes: bool,

    /// Also time the wakeup path before the queue, sched_waking to
    /// sched_wakeup (the cause split's `waking` stage; hooks every wakeup)
    #[arg(long, conflicts_with = "no_causes")]
    pub waking: bool,

    /// Do not split waits by the scheduler's decision (whether the wakeup
    /// asked for the CPU, how often the task was passed over, how the
    /// holder left, the fair-class rule; docs/decision.md). The split rides
    /// on the cause split: --no-causes turns it off too
    #[arg(long)]
    pub no_decision: bool,
}

/// Which waits to measure; flattened into every command that measures but
/// `diagnose` (whose scope is `ScopeArgs`). Applied in the kernel, to
/// the task that waited (never to the waker, or to the task it replaced);
/// combined, all must hold. All but --cpu need the tp_btf hook mode.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Filters (in the kernel, on the task that waited; combinable)")]
pub(crate) struct FilterArgs {
    /// Only waits of this process (all its threads)
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pid: Option<u32>,

    /// Only waits of this thread
    #[arg(short = 't', long = "tid", value_name = "TID")]
    pub tid: Option<u32>,

    /// Only tasks in this cgroup and below: a v2 or v1 directory, or relative to v2
    #[arg(short = 'c', long = "cgroup", value_name = "PATH")]
    pub cgroup: Option<PathBuf>,

    /// Only tasks with this name (the kernel's comm, as `ps -o comm` shows it)
    #[arg(long, value_name = "NAME", value_parser = crate::kernel::filter::comm_arg)]
    pub comm: Option<String>,

    /// Only waits that end on these CPUs (where the task ran next), e.g. `0-3,8`
    #[arg(long, value_name = "LIST", value_parser = crate::kernel::filter::cpu_list_arg)]
    pub cpu: Option<String>,
}

impl KernelArgs {
    pub(crate) fn access(&self) -> KernelAccess {
        KernelAccess {
            hook: self.hook.into(),
            sources: KernelSources {
                btf: self.btf.clone(),
                tracefs: self.tracefs.clone(),
                force_memory: self.force_memory,
                no_causes: self.no_causes,
                waking: self.waking,
                no_decision: self.no_decision,
            },
        }
    }
}

impl FilterArgs {
    pub(crate) fn spec(&self) -> FilterSpec {
        FilterSpec {
            pid: self.pid,
            tid: self.tid,
            cgroup: self.cgroup.clone(),
            comm: self.comm.clone(),
            cpu: self.cpu.clone(),
        }
    }
}

impl HistogramArgs {
    pub(crate) fn options(&self) -> HistogramOptions {
        HistogramOptions {
            interval: self.interval,
            count: self.count,
            timestamp: self.timestamp,
            unit: unit(self.milliseconds),
            json: self.json,
            verbose: self.verbose,
        }
    }
}

/// `-m`: milliseconds instead of microseconds.
pub(crate) fn unit(milliseconds: bool) -> Unit {
    if milliseconds {
        Unit::Msecs
    } else {
        Unit::Usecs
    }
}

/// The longest INTERVAL (and `record` DURATION): ten years, so that the end
/// of an interval is a time the clocks can hold.
const MAX_INTERVAL_SECS: u64 = 10 * 365 * 24 * 3600;

/// INTERVAL and DURATION: whole seconds, from 1 to ten years.
pub(super) fn interval_secs(s: &str) -> Result<u64, String> {
    match positive_u64(s)? {
        n if n > MAX_INTERVAL_SECS => Err(format!(
            "must be at most {MAX_INTERVAL_SECS} seconds (ten years)"
        )),
        n => Ok(n),
    }
}

pub(super) fn positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}
