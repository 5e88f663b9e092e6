//! Command line: runqlat's interface (`[INTERVAL] [COUNT]`, -T, -m) plus
//! schedlat's own options.

mod args;
#[cfg(test)]
mod doc_commands;
pub(crate) mod generate;
mod groups;
mod keyed;
mod otlp;
mod values;

use std::path::PathBuf;

pub(crate) use args::{
    BreakdownArgs, DiagnoseArgs, RingArgs, ServeArgs, SlowArgs, TopArgs, VictimsArgs,
};
use clap::Parser;
use groups::interval_secs;
pub(crate) use groups::{FilterArgs, HistogramArgs, KernelArgs, unit};

use crate::{
    commands::{UsageError, replay::ReplayOptions},
    recorder::RecorderOptions,
};

const AFTER_HELP: &str = "\
Examples:
  schedlat              # summarize run queue latency until Ctrl-C
  schedlat 1 10         # print 1-second summaries, 10 times
  schedlat -mT 1        # 1s summaries, milliseconds, and timestamps
  schedlat -v 5 1       # the sentences, then the full cause and decision tables
  schedlat --json 5 1   # one 5-second interval as a JSON object
  schedlat --hook tp    # use classic tracepoints instead of tp_btf

Under the table, at most six sentences say what the waits were like, their
shape, the main cause, what the scheduler decided, the design bound and the
verdict (README.md, \"What each line means\"). The guide walks through
every command and how to read its output: docs/guide.md, installed as
/usr/share/doc/schedlat/docs/guide.md.

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
pub(crate) struct Cli {
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
pub(crate) enum Command {
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
    /// each ended; per culprit task and process, its time on the CPU inside
    /// the waits (HELD, the charge by time) and the waits it ended. Needs
    /// tp_btf. See docs/victims.md.
    ///
    /// HELD is who made the waits long: every task that ran on the CPU
    /// during a wait is charged its time inside it. The last holder,
    /// whoever held the CPU when a wait ended, is not necessarily who
    /// caused it: a brief sleeper ends its CPU-bound neighbours' waits. A
    /// wait that ended on an idle CPU has the idle task (swapper) as
    /// culprit and says what it was: "(throttled: cgroup quota)" when the
    /// task's cgroup was throttled by its CPU quota in the interval, else
    /// "(idle: woken onto an idle CPU)".
    Victims(VictimsArgs),
    /// Every wait over a threshold, as it happens: time, CPU, the task that
    /// waited, how long, the culprit (whoever held the CPU when it ended; an
    /// idle CPU's swapper is labelled throttled or a wake onto an idle CPU),
    /// the run-queue length (runqslower, with context). Needs tp_btf.
    Slow(SlowArgs),
    /// Can this host and this process run schedlat? Kernel, BTF,
    /// capabilities, seccomp, lockdown, memlock, tracefs, cgroups, PID
    /// namespace, PSI: each fact with its fix; then every mode loaded,
    /// attached and detached at once. Exit 1 when a mode of --require
    /// cannot run (an init container's gate). See docs/deploy.md.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The modes that must run for exit status 0, comma-separated
    #[arg(
        long,
        value_name = "MODE,...",
        value_delimiter = ',',
        default_value = "histogram"
    )]
    pub require: Vec<values::ModeArg>,
    /// Print the report as one JSON object (docs/json.md)
    #[arg(long)]
    pub json: bool,
}

impl CheckArgs {
    /// The modes `--require` names.
    pub(crate) fn modes(&self) -> Vec<crate::kernel::preflight::trial::Mode> {
        self.require.iter().map(|&m| m.into()).collect()
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct RecordArgs {
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
    pub ring_cgroups: keyed::RingCgroupArgs,

    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

impl RecordArgs {
    /// The flight recorder's options; None without `--ring`, an error
    /// for a recorder option without it (RingArgs::options).
    pub(crate) fn ring_options(&self) -> Result<Option<RecorderOptions>, UsageError> {
        let (cgroups, max_series) = (&self.ring_cgroups.keys, &self.ring_cgroups.max_series);
        self.ring.options(
            unit(self.milliseconds),
            cgroups.keyed(None),
            max_series.max_series,
        )
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// A dump of `schedlat record --ring` (its directory or dump.jsonl)
    pub dump: PathBuf,
    /// Start of the sub-window: seconds from the dump's start (30, 30s, 2m)
    /// or a local time of day (14:05:00)
    #[arg(long, value_name = "WHEN")]
    pub from: Option<String>,
    /// End of the sub-window, the same way
    #[arg(long, value_name = "WHEN")]
    pub to: Option<String>,
    /// The series shown: `total`, a cgroup's (as the dump names it), or
    /// what -c takes: a cgroup path (its subtree), a container ID or a
    /// unique prefix, a pod UID, a unit or slice (also spelled
    /// `container = ID`, `pod = UID`, `unit = NAME`); the series of a
    /// workload's cgroups are added up
    #[arg(long, default_value = "total")]
    pub series: String,
    /// Longest slow waits listed
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub slow: usize,
    /// One JSON object per interval, then one for the sub-window
    #[arg(long)]
    pub json: bool,
    /// Write the stacks of the sub-window's slow waits (a dump of `record
    /// --ring --stacks`) folded to PATH, each holder's stack weighted by
    /// the microseconds waited behind it, for any flame graph tool
    #[arg(short = 'f', long, value_name = "PATH")]
    pub folded: Option<PathBuf>,
    /// Draw the same as an SVG flame graph at PATH
    #[arg(long, value_name = "PATH")]
    pub flamegraph: Option<PathBuf>,
}

/// Reads two files; no kernel access and no filters (a recording's scope is
/// the one it was recorded with).
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The recording before the change
    pub before: PathBuf,
    /// The recording after the change
    pub after: PathBuf,
    /// Print the comparison as one JSON object
    #[arg(long)]
    pub json: bool,
}

impl ReplayArgs {
    pub(crate) fn options(&self) -> ReplayOptions {
        ReplayOptions {
            from: self.from.clone(),
            to: self.to.clone(),
            series: self.series.clone(),
            slow: self.slow,
            json: self.json,
            folded: self.folded.clone(),
            flamegraph: self.flamegraph.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        values::{HookArg, SortArg},
        *,
    };

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("schedlat").chain(args.iter().copied()))
    }

    #[test]
    fn runqlat_style_arguments() {
        let c = parse(&["-mT", "5", "3"]).unwrap();
        let h = &c.histogram;
        assert_eq!((h.interval, h.count), (Some(5), Some(3)));
        assert!(h.milliseconds && h.timestamp && !h.json);
        assert_eq!(c.kernel.hook, HookArg::Auto);
    }

    #[test]
    fn hook_modes() {
        assert_eq!(parse(&["--hook", "tp"]).unwrap().kernel.hook, HookArg::Tp);
        assert_eq!(parse(&["--hook", "btf"]).unwrap().kernel.hook, HookArg::Btf);
        assert!(parse(&["--hook", "kprobe"]).is_err());
    }

    #[test]
    fn top_takes_a_sort_and_table_size() {
        let c = parse(&["top", "--sort", "max", "--max-tasks", "64", "-p", "1"]).unwrap();
        let Some(Command::Top(top)) = c.command else {
            panic!("not top")
        };
        assert_eq!(top.sort, SortArg::Max);
        assert_eq!((top.max_tasks, top.filter.pid), (64, Some(1)));
        let Some(Command::Top(top)) = parse(&["top"]).unwrap().command else {
            panic!("not top")
        };
        assert_eq!(top.sort, SortArg::Total);
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

    /// `--stacks` takes the holder's and the waker's, `--stacks=holder`
    /// the holder's only, in `slow` and the flight recorder; a bare
    /// number after it is still slow's threshold.
    #[test]
    fn stacks_say_which() {
        use crate::kernel::modes::Stacks;
        let slow = |args: &[&str]| match parse(args).unwrap().command {
            Some(Command::Slow(slow)) => slow.options(),
            other => panic!("not slow: {other:?}"),
        };
        assert_eq!(slow(&["slow"]).stacks, None);
        assert_eq!(
            slow(&["slow", "--stacks"]).stacks,
            Some(Stacks::HolderAndWaker)
        );
        let o = slow(&["slow", "--stacks", "250"]);
        assert_eq!(
            (o.stacks, o.threshold),
            (Some(Stacks::HolderAndWaker), 250_000)
        );
        assert_eq!(
            slow(&["slow", "--stacks=holder"]).stacks,
            Some(Stacks::Holder)
        );
        assert_eq!(
            slow(&["slow", "-f", "x.folded"]).stacks,
            Some(Stacks::HolderAndWaker)
        );
        assert!(parse(&["slow", "--stacks=waker"]).is_err());
        // `--by` folds the files' stacks under the workloads: it needs one.
        assert_eq!(
            slow(&["slow", "-f", "x.folded", "--by", "pod"]).by,
            Some(crate::sys::workload::level::Level::Pod)
        );
        assert_eq!(slow(&["slow", "--flamegraph", "x.svg"]).by, None);
        assert!(parse(&["slow", "--stacks", "--by", "pod"]).is_err());
        let ring = |args: &[&str]| match parse(args).unwrap().command {
            Some(Command::Record(record)) => record.ring_options().unwrap().unwrap(),
            other => panic!("not record: {other:?}"),
        };
        let o = ring(&["record", "--ring", "60", "--stacks=holder"]);
        assert_eq!((o.stacks, o.max_stacks), (Some(Stacks::Holder), 1000));
        let o = ring(&["record", "--ring", "60", "--stacks", "--max-stacks", "9"]);
        assert_eq!((o.stacks, o.max_stacks), (Some(Stacks::HolderAndWaker), 9));
        assert_eq!(ring(&["record", "--ring", "60"]).stacks, None);
        let Some(Command::Record(plain)) = parse(&["record", "-o", "x", "1", "--stacks"])
            .unwrap()
            .command
        else {
            panic!("not record")
        };
        let refused = plain.ring_options().unwrap_err().to_string();
        assert!(refused.contains("needs --ring"), "{refused}");
        assert!(parse(&["record", "--ring", "60", "--max-stacks", "9"]).is_err());
    }

    /// `--cgroups`, `--max-keys` and `--max-series` are one definition in
    /// three commands, each resolved into the same `Keyed`.
    #[test]
    fn the_per_key_options_are_shared_and_resolved_once() {
        use schedlat_common::scope::Breakdown;

        use crate::kernel::modes::Keyed;
        let cgroups = |max_keys| Keyed {
            by: Breakdown::Cgroup,
            max_keys,
        };
        let c = parse(&["--cgroups", "--max-keys", "7"]).unwrap();
        assert_eq!(c.breakdown.options().keyed, Some(cgroups(7)));
        let c = parse(&["-P"]).unwrap();
        let keyed = c.breakdown.options().keyed.unwrap();
        assert_eq!((keyed.by, keyed.max_keys), (Breakdown::Process, 4096));
        let Some(Command::Serve(serve)) = parse(&["serve", "--cgroups", "--max-keys", "9"])
            .unwrap()
            .command
        else {
            panic!("not serve")
        };
        let o = serve.options().unwrap();
        // Per cgroup fewer series by default than per process: each has
        // the splits besides its histogram.
        assert_eq!((o.keyed, o.max_series), (Some(cgroups(9)), 100));
        let serve_options = |args: &[&str]| match parse(args).unwrap().command {
            Some(Command::Serve(serve)) => serve.options().unwrap(),
            other => panic!("not serve: {other:?}"),
        };
        assert_eq!(serve_options(&["serve", "-P"]).max_series, 250);
        assert_eq!(
            serve_options(&["serve", "--cgroups", "--max-series", "300"]).max_series,
            300
        );
        let Some(Command::Record(record)) = parse(&["record", "--ring", "60", "--ring-cgroups"])
            .unwrap()
            .command
        else {
            panic!("not record")
        };
        let (keys, series) = (&record.ring_cgroups.keys, &record.ring_cgroups.max_series);
        assert_eq!(
            (keys.keyed(None), series.max_series),
            (Some(cgroups(4096)), 16)
        );
        // Each command still says what it needs.
        assert!(parse(&["record", "--ring-cgroups"]).is_err());
        assert!(parse(&["serve", "--max-keys", "9"]).is_err());
        assert!(parse(&["serve", "--max-series", "9"]).is_err());
        assert!(
            parse(&[
                "record",
                "--ring",
                "60",
                "--ring-cgroups",
                "--max-series",
                "2000"
            ])
            .is_err()
        );
    }

    /// Issue 28: runqslower's positional minimum is microseconds.
    #[test]
    fn slow_takes_runqslowers_min_us() {
        let threshold = |args: &[&str]| match parse(args).unwrap().command {
            Some(Command::Slow(slow)) => slow.options().threshold,
            other => panic!("not slow: {other:?}"),
        };
        assert_eq!(threshold(&["slow", "1000"]), 1_000_000);
        assert_eq!(threshold(&["slow", "2ms"]), 2_000_000);
        assert_eq!(threshold(&["slow", "--threshold", "500us"]), 500_000);
        assert_eq!(threshold(&["slow"]), 10_000_000);
        let e = parse(&["slow", "1000", "--threshold", "1ms"]).unwrap_err();
        assert!(e.to_string().contains("cannot be used with"), "{e}");
        let e = parse(&["slow", "0"]).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
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
