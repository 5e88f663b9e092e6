//! Command line: runqlat's interface (`[INTERVAL] [COUNT]`, -T, -m) plus
//! schedlat's own options.

mod args;
pub mod generate;

use std::path::PathBuf;

pub use args::{BreakdownArgs, DiagnoseArgs, RingArgs, ServeArgs, SlowArgs, TopArgs, VictimsArgs};
use clap::Parser;

use crate::{
    collect::histogram::Unit,
    commands::run::HistogramOptions,
    kernel::{
        filter::FilterSpec,
        hook::HookChoice,
        loader::{KernelAccess, KernelSources},
    },
};

const AFTER_HELP: &str = "\
Examples:
  schedlat              # summarize run queue latency until Ctrl-C
  schedlat 1 10         # print 1-second summaries, 10 times
  schedlat -mT 1        # 1s summaries, milliseconds, and timestamps
  schedlat --json 5 1   # one 5-second interval as a JSON object
  schedlat --hook tp    # use classic tracepoints instead of tp_btf

A wait is the time from the moment a task becomes runnable (woken, or
preempted while still runnable) to the moment it is switched in: time spent
on a run queue, wanting a CPU. If it is small, the latency you are chasing
is not a scheduling problem.

Needs root, or CAP_BPF and CAP_PERFMON. Exit status: 0 success, 1 the
kernel or environment refused (privileges, BTF, tracefs, load or attach),
2 bad command line.";

#[derive(Debug, Parser)]
#[command(
    name = "schedlat",
    version,
    about = "Summarize run queue (scheduler) latency as a histogram, measured in the kernel with eBPF",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub histogram: HistogramArgs,

    #[command(flatten)]
    pub breakdown: BreakdownArgs,

    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

/// Other ways to use the same measurement. Without one, schedlat prints
/// runqlat-style histograms.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Record one run to a file for `compare` (measure, fix, then measure
    /// again and compare). Prints the histogram too. With --ring: the flight
    /// recorder, always on, dumping its window on SIGHUP or a trigger
    /// (docs/recorder.md).
    Record(RecordArgs),
    /// From "it is janky" to a named cause: PSI and schedstat (no root),
    /// the eBPF histogram (root), quota throttling, saturation, pinning.
    Diagnose(DiagnoseArgs),
    /// The live histogram in a terminal: percentiles, verdict, p99 history,
    /// and who waited behind whom (victims and culprits).
    ///
    /// Culprits are whoever held the CPU when a wait ended; an idle CPU's
    /// swapper is labelled "throttled" (cgroup quota) or "idle wake".
    ///
    /// Keys: q or Ctrl-C quit, space pause, c last interval / cumulative, s
    /// cycle the victims' sort (total, longest, number, average wait), `+`
    /// and `-` slower / faster refresh, ? help. The victims panel needs the
    /// tp_btf hook mode and kernel 5.12+; without them it says why and the
    /// rest of the view works.
    Top(TopArgs),
    /// Compare two recordings (or `--json` outputs): histograms side by side,
    /// percentile and verdict changes, and whether the change is beyond noise.
    Compare(CompareArgs),
    /// Read a flight-recorder dump (`record --ring`), without root: per
    /// interval the percentiles and verdict, then any sub-window merged
    /// (--from/--to) with its longest slow waits. See docs/recorder.md.
    Replay(ReplayArgs),
    /// Serve cumulative run-queue latency histograms on an HTTP /metrics
    /// endpoint for Prometheus (OpenMetrics, the classic text format, or
    /// protobuf with native histograms, as the scraper asks).
    Serve(ServeArgs),
    /// Who waited and behind whom: per task, its waits (count, total,
    /// average, longest, when and where) and the task that held the CPU when
    /// each ended (the culprit); per culprit task and process, the wait it
    /// caused. Needs tp_btf. See docs/victims.md.
    ///
    /// The culprit is whoever held the CPU when the wait ended, not
    /// necessarily who caused it. A wait that ended on an idle CPU has the
    /// idle task (swapper) as culprit and says what it was: "(throttled:
    /// cgroup quota)" when the task's cgroup was throttled by its CPU quota
    /// in the interval, else "(idle: woken onto an idle CPU)".
    Victims(VictimsArgs),
    /// Every wait over a threshold, as it happens: time, CPU, the task that
    /// waited, how long, the culprit (whoever held the CPU when it ended; an
    /// idle CPU's swapper is labelled throttled or a wake onto an idle CPU),
    /// the run-queue length (runqslower, with context). Needs tp_btf.
    Slow(SlowArgs),
}

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// File to write (JSON Lines, the `--json` schema; docs/json.md)
    #[arg(
        short = 'o',
        long,
        value_name = "FILE",
        required_unless_present = "ring",
        conflicts_with = "ring"
    )]
    pub output: Option<PathBuf>,

    /// Seconds to record
    #[arg(value_parser = interval_secs, required_unless_present = "ring", conflicts_with = "ring")]
    pub duration: Option<u64>,

    /// Histogram in milliseconds instead of microseconds
    #[arg(short = 'm', long)]
    pub milliseconds: bool,

    /// Replace FILE if it exists (only once the new recording is complete)
    #[arg(long, conflicts_with = "ring")]
    pub force: bool,

    #[command(flatten)]
    pub ring: RingArgs,
    #[command(flatten)]
    pub ring_cgroups: args::RingCgroupArgs,

    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// A dump of `schedlat record --ring` (its directory or dump.jsonl)
    pub dump: PathBuf,
    /// Start of the sub-window: seconds from the dump's start (30, 30s, 2m)
    /// or a local time of day (14:05:00)
    #[arg(long, value_name = "WHEN")]
    pub from: Option<String>,
    /// End of the sub-window, the same way
    #[arg(long, value_name = "WHEN")]
    pub to: Option<String>,
    /// The series shown: `total` or a cgroup's (as the dump names it)
    #[arg(long, default_value = "total")]
    pub series: String,
    /// Longest slow waits listed
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub slow: usize,
    /// One JSON object per interval, then one for the sub-window
    #[arg(long)]
    pub json: bool,
}

/// Reads two files; no kernel access and no filters (a recording's scope is
/// the one it was recorded with).
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The recording before the change
    pub before: PathBuf,
    /// The recording after the change
    pub after: PathBuf,
    /// Print the comparison as one JSON object
    #[arg(long)]
    pub json: bool,
}

/// The default mode: runqlat's interface.
#[derive(Debug, clap::Args)]
pub struct HistogramArgs {
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
}

/// How schedlat reaches the kernel; flattened into every command that
/// measures (not `compare`, which reads files). Not `global`: a global option
/// would show in the help of commands that ignore it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Kernel access")]
pub struct KernelArgs {
    /// How to hook the scheduler: tp_btf (`btf`), classic tracepoints (`tp`),
    /// or `auto` (tp_btf when the kernel has BTF, else tracepoints)
    #[arg(long, value_enum, default_value_t = HookChoice::Auto)]
    pub hook: HookChoice,

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
    /// asked for the CPU, pass-overs, how the holder left, the fair-class
    /// rule; docs/decision.md). Off with --no-causes too
    #[arg(long)]
    pub no_decision: bool,
}

/// Which waits to measure; flattened into every command that measures but
/// `diagnose` (whose scope is `ScopeArgs`). Applied in the kernel, to
/// the task that waited (never to the waker, or to the task it replaced);
/// combined, all must hold. All but --cpu need the tp_btf hook mode.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Filters (in the kernel, on the task that waited; combinable)")]
pub struct FilterArgs {
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
    pub fn access(&self) -> KernelAccess {
        KernelAccess {
            hook: self.hook,
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
    pub fn spec(&self) -> FilterSpec {
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
    pub fn options(&self) -> HistogramOptions {
        HistogramOptions {
            interval: self.interval,
            count: self.count,
            timestamp: self.timestamp,
            unit: unit(self.milliseconds),
            json: self.json,
        }
    }
}

/// `-m`: milliseconds instead of microseconds.
pub fn unit(milliseconds: bool) -> Unit {
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
pub fn interval_secs(s: &str) -> Result<u64, String> {
    match positive_u64(s)? {
        n if n > MAX_INTERVAL_SECS => Err(format!(
            "must be at most {MAX_INTERVAL_SECS} seconds (ten years)"
        )),
        n => Ok(n),
    }
}

pub fn positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("schedlat").chain(args.iter().copied()))
    }

    #[test]
    fn runqlat_style_arguments() {
        let c = parse(&["-mT", "5", "3"]).unwrap();
        let h = &c.histogram;
        assert_eq!((h.interval, h.count), (Some(5), Some(3)));
        assert!(h.milliseconds && h.timestamp && !h.json);
        assert_eq!(c.kernel.hook, HookChoice::Auto);
    }

    #[test]
    fn hook_modes() {
        assert_eq!(
            parse(&["--hook", "tp"]).unwrap().kernel.hook,
            HookChoice::Tp
        );
        assert_eq!(
            parse(&["--hook", "btf"]).unwrap().kernel.hook,
            HookChoice::Btf
        );
        assert!(parse(&["--hook", "kprobe"]).is_err());
    }

    #[test]
    fn top_takes_a_sort_and_table_size() {
        let c = parse(&["top", "--sort", "max", "--max-tasks", "64", "-p", "1"]).unwrap();
        let Some(Command::Top(top)) = c.command else {
            panic!("not top")
        };
        assert_eq!(top.sort, crate::analysis::victims::SortKey::Max);
        assert_eq!((top.max_tasks, top.filter.pid), (64, Some(1)));
        let Some(Command::Top(top)) = parse(&["top"]).unwrap().command else {
            panic!("not top")
        };
        assert_eq!(top.sort, crate::analysis::victims::SortKey::Total);
        assert!(parse(&["top", "--max-tasks", "0"]).is_err());
    }

    /// Issue 19: `--top 0` is "all", as `victims --top 0`.
    #[test]
    fn breakdown_top_zero_is_all() {
        let c = parse(&["-P", "--top", "0"]).unwrap();
        assert_eq!(c.breakdown.options().top, None);
        let c = parse(&["-P", "--top", "3"]).unwrap();
        assert_eq!(c.breakdown.options().top, Some(3));
    }

    #[test]
    fn rejects_bad_numbers_with_a_reason() {
        let e = parse(&["0"]).unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
        let e = parse(&["1", "x"]).unwrap_err().to_string();
        assert!(e.contains("not a whole number"), "{e}");
        assert!(parse(&["--bogus"]).is_err());
    }
}
