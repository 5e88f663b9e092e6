//! The subcommands' and breakdowns' clap arguments, and what each turns into
//! for its command.

use std::{net::SocketAddr, time::Duration};

use schedlat_common::scope::Breakdown;

use super::{
    groups::{FilterArgs, KernelArgs, interval_secs, positive_u64},
    keyed::{CgroupKeyArgs, PairTableArgs},
    otlp::OtlpArgs,
    values::{CgroupSplitsArg, KeyBucketsArg, KeySortArg, SortArg},
};
use crate::{
    analysis::breakdown::BreakdownOptions,
    commands::{
        UsageError,
        diagnose::DiagnoseOptions,
        serve::{PairSeriesOptions, ServeOptions, listen},
        slow::SlowOptions,
        top::TopOptions,
        victims::VictimsOptions,
    },
    export::{
        keyed_series::Pins,
        workload_labels::{WorkloadLabel, WorkloadLabels},
    },
    kernel::{
        filter::FilterSpec,
        modes::{DEFAULT_MAX_TASKS, Keyed, Stacks},
    },
    recorder::{RecorderOptions, Trigger},
    sys::clock::parse_duration_ns,
};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("rolled").args(["pairs"]).multiple(true)))]
pub(crate) struct TopArgs {
    /// Seconds between refreshes (`+`/`-` change it while running)
    #[arg(short = 'i', long, default_value_t = 1.0, value_parser = positive_secs)]
    pub interval: f64,

    /// What the victims panel is ranked by first (`s` cycles through all)
    #[arg(long, value_enum, default_value_t = SortArg::Total)]
    pub sort: SortArg,

    /// Tasks each kernel table of the victims panel holds per interval;
    /// waits beyond it are counted, never dropped silently
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_tasks: u32,
    #[command(flatten)]
    pub pairs: PairArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

impl TopArgs {
    pub(crate) fn options(&self) -> TopOptions {
        TopOptions {
            interval: Duration::from_secs_f64(self.interval),
            sort: self.sort.into(),
            max_tasks: self.max_tasks,
            pairs: self.pairs.table.max_pairs(),
            by: self.pairs.by.level(),
        }
    }
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.25 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be at least 0.25 seconds".into()),
        Err(_) => Err(format!("`{s}` is not a number of seconds")),
    }
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("rolled").args(["pairs"]).multiple(true)))]
pub(crate) struct VictimsArgs {
    /// Print the tables every INTERVAL seconds (default: once, at Ctrl-C)
    #[arg(value_parser = interval_secs)]
    pub interval: Option<u64>,

    /// Stop after COUNT intervals (default: until Ctrl-C)
    #[arg(value_parser = positive_u64, requires = "interval")]
    pub count: Option<u64>,

    /// Rank the victims by the longest wait, the total, the number of
    /// waits or the average (the culprits rank by their time on the CPU
    /// inside the waits, then by this)
    #[arg(long, value_enum, default_value_t = SortArg::Max)]
    pub sort: SortArg,

    /// Rows per table (0 = all); what is cut is counted
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,

    /// One JSON object per interval on stdout (schema in docs/json.md)
    #[arg(long)]
    pub json: bool,

    /// Tasks each kernel table holds per interval (victims, culprits);
    /// waits of tasks beyond it are counted as overflow, never dropped
    /// silently. Memory: 480 bytes per task, plus 16 bytes per possible TID
    /// (pid_max).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_tasks: u32,

    /// Take the holder's stacks at the end of each wait over --stacks-over,
    /// and quote under each culprit row the stack it ran most while tasks
    /// waited behind it (docs/victims.md, "The holder's stacks")
    #[arg(long, help_heading = "Stacks")]
    pub stacks: bool,

    /// The waits whose holder's stacks `--stacks` takes: at least this
    /// long, a number with a unit, e.g. 1ms, 500us
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration_ns,
          requires = "stacks", help_heading = "Stacks")]
    pub stacks_over: u64,

    #[command(flatten)]
    pub pairs: PairArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

impl VictimsArgs {
    pub(crate) fn options(&self) -> VictimsOptions {
        VictimsOptions {
            interval: self.interval,
            count: self.count,
            sort: self.sort.into(),
            top: self.top,
            json: self.json,
            max_tasks: self.max_tasks,
            pairs: self.pairs.table.max_pairs(),
            by: self.pairs.by.level(),
            stacks_over: self.stacks.then_some(self.stacks_over),
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("flame_files").multiple(true).args(["folded", "flamegraph"])))]
pub(crate) struct SlowArgs {
    /// Report waits at least this long, as runqslower's `min_us`: a bare
    /// number is microseconds (`slow 1000` = `--threshold 1ms`)
    #[arg(value_name = "MIN_US", value_parser = parse_min_us, conflicts_with = "threshold")]
    pub min_us: Option<u64>,

    /// Report waits at least this long: a number with a unit, e.g. 1ms,
    /// 500us, 2.5ms (runqslower's default is 10ms)
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_duration_ns)]
    pub threshold: u64,

    /// One JSON object per event on stdout (schema in docs/json.md)
    #[arg(long)]
    pub json: bool,

    /// Take the holder's kernel and user stacks at the end of each slow
    /// wait, and the waker's kernel stack at the wakeup that began it, and
    /// show their top frames (every frame with --json); `--stacks=holder`
    /// takes the holder's only (docs/stacks.md: the waker's costs every
    /// wakeup of a traced task a stack walk, the holder's only the slow
    /// waits)
    #[arg(long, value_name = "WHICH", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_enum, help_heading = "Stacks")]
    pub stacks: Option<StacksArg>,

    /// At the end, write the holders' stacks folded to PATH (comm;frame;
    /// ...;frame WEIGHT, the weight the microseconds waited behind that
    /// stack), for any flame graph tool; implies --stacks
    #[arg(short = 'f', long, value_name = "PATH", help_heading = "Stacks")]
    pub folded: Option<std::path::PathBuf>,

    /// At the end, write the same as an SVG flame graph to PATH; implies
    /// --stacks
    #[arg(long, value_name = "PATH", help_heading = "Stacks")]
    pub flamegraph: Option<std::path::PathBuf>,

    /// Fold each holder's stacks under its workload (its container, pod,
    /// systemd unit or cgroup, docs/containers.md), above its comm: the
    /// flame graph's widest frames are then the workloads the waiting
    /// went to
    #[arg(
        long,
        value_enum,
        value_name = "LEVEL",
        help_heading = "Stacks",
        requires = "flame_files"
    )]
    pub by: Option<ByLevel>,

    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

impl SlowArgs {
    pub(crate) fn options(&self) -> SlowOptions {
        SlowOptions {
            threshold: self.min_us.unwrap_or(self.threshold),
            json: self.json,
            stacks: match (
                self.stacks,
                self.folded.is_some() || self.flamegraph.is_some(),
            ) {
                (Some(which), _) => Some(which.stacks()),
                (None, true) => Some(StacksArg::All.stacks()),
                (None, false) => None,
            },
            folded: self.folded.clone(),
            flamegraph: self.flamegraph.clone(),
            by: self.by.map(ByLevel::level),
        }
    }
}

/// `--stacks[=WHICH]`: which stacks each slow wait keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StacksArg {
    /// The holder's and the waker's
    All,
    /// The holder's only
    Holder,
}

impl StacksArg {
    pub(crate) fn stacks(self) -> Stacks {
        match self {
            StacksArg::All => Stacks::HolderAndWaker,
            StacksArg::Holder => Stacks::Holder,
        }
    }
}

/// runqslower's positional minimum: a bare number is microseconds, as there;
/// a number with a unit is read as `--threshold` reads it. Nanoseconds out.
fn parse_min_us(s: &str) -> Result<u64, String> {
    if !s.trim().bytes().all(|b| b.is_ascii_digit()) {
        return parse_duration_ns(s);
    }
    let us: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of microseconds"))?;
    parse_duration_ns(&format!("{us}us"))
}

/// serve's per-process series by default (`--pids`): a process's series
/// is its histogram alone, ~40 lines.
pub(crate) const DEFAULT_PROCESS_SERIES: u32 = 250;
/// serve's per-cgroup series by default (`--cgroups`): a node's 30-110
/// pods' containers that waited most in a scrape interval, at ~65 lines
/// a series (histogram and the alerting splits) about 1 MB of text with
/// 30-character paths.
pub(crate) const DEFAULT_CGROUP_SERIES: u32 = 100;

/// Options of `schedlat serve`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("max_keys", |a| a.requires("keyed")))]
pub(crate) struct ServeArgs {
    /// Address for the /metrics endpoint. Loopback by default; another
    /// machine's Prometheus needs an explicit address such as 0.0.0.0:9415,
    /// and a --web.config.file that authenticates (or
    /// --web.allow-unauthenticated). Port 0 picks a free port.
    #[arg(long, value_name = "IP:PORT", default_value = listen::DEFAULT, value_parser = listen::parse)]
    pub listen: SocketAddr,

    #[command(flatten, next_help_heading = "Per-key series (pick one)")]
    pub cgroup_keys: CgroupKeyArgs,

    /// Also one histogram per process that waited, labels pid and comm
    #[arg(
        short = 'P',
        long,
        group = "keyed",
        help_heading = "Per-key series (pick one)"
    )]
    pub pids: bool,

    /// At most N per-key series per scrape, the keys that waited most since
    /// the previous scrape first, besides pinned ones; the others' waits
    /// summed into one series labelled "__overflow__". 250 with --pids; 100
    /// with --cgroups, a busy node's containers in about 1 MB of text (a
    /// cgroup's series has about 65 lines: docs/architecture.md)
    #[arg(
        long,
        value_name = "N",
        requires = "keyed",
        value_parser = clap::value_parser!(u32).range(1..),
        help_heading = "Per-key series (pick one)"
    )]
    pub max_series: Option<u32>,

    /// How much of the cause and decision splits each per-cgroup series
    /// carries: alerting (the seconds the mixin's alerts and rules read:
    /// the cause split's held_by, the overlaps, the decision split's
    /// outcome and decision) or full (every split, counts and seconds, as
    /// the total, which always has them all)
    #[arg(
        long,
        value_name = "SPLITS",
        default_value = "alerting",
        requires = "cgroups",
        help_heading = "Per-key series (pick one)"
    )]
    pub cgroup_splits: CgroupSplitsArg,

    /// Keys that always get a series: a PID or comm with --pids, a cgroup
    /// path (as in the cgroup label) with --cgroups; repeat or comma-separate
    #[arg(
        long,
        value_name = "KEY",
        value_delimiter = ',',
        requires = "keyed",
        help_heading = "Per-key series (pick one)"
    )]
    pub pin: Vec<String>,

    /// Workload labels of the per-cgroup series besides `cgroup` (the
    /// path): any of namespace, pod, container (from the container
    /// runtimes' files), unit, slice, pod_uid, container_id, runtime, qos
    /// (from the path), comma-separated; `none` for the path alone.
    /// Labels never add series (docs/containers.md)
    #[arg(
        long,
        value_name = "LABELS",
        value_delimiter = ',',
        value_parser = cgroup_label_parser,
        requires = "cgroups",
        help_heading = "Per-key series (pick one)"
    )]
    pub cgroup_labels: Option<Vec<Option<WorkloadLabel>>>,

    /// Buckets of the per-key families: slo (one per power of two and a
    /// narrow one at 0.5, 1, 2, 5, 10 and 50 ms: a percentile at those
    /// within 8%, elsewhere within 2x), log2 (one per power of two, within
    /// 2x) or fine (as the total, within 25%, at three times the samples)
    #[arg(
        long,
        value_name = "LAYOUT",
        default_value = "slo",
        requires = "keyed",
        help_heading = "Per-key series (pick one)"
    )]
    pub key_buckets: KeyBucketsArg,

    #[command(flatten, next_help_heading = "Who waited behind whom")]
    pub pairs: PairTableArgs,

    /// At most N neighbour-pair series per scrape, the pairs that waited
    /// most first; the others' waits summed into one pair labelled
    /// "__overflow__"
    #[arg(long, value_name = "N", default_value_t = 100, requires = "pairs",
          value_parser = clap::value_parser!(u32).range(1..),
          help_heading = "Who waited behind whom")]
    pub max_pair_series: u32,

    /// Exemplars on the latency histograms: each bucket that counted a
    /// wait of at least MIN (1ms if not given) names the task of the
    /// latest such wait (pid, tid, comm; on the total also its cgroup),
    /// stamped with when it ended, as client libraries keep a bucket's
    /// exemplar. In OpenMetrics and protobuf, not the classic text format;
    /// Prometheus stores them with --enable-feature=exemplar-storage. Loads
    /// the slow waits' ring buffer (as --ring does): a compare per wait in
    /// the kernel, an event per wait of at least MIN
    #[arg(long, value_name = "MIN", num_args = 0..=1, default_missing_value = "1ms",
          require_equals = true, value_parser = parse_duration_ns)]
    pub exemplars: Option<u64>,

    // The flight recorder: `--ring DURATION` keeps the last DURATION,
    // dumped on SIGHUP or a trigger (and on `POST /snapshot` if enabled).
    #[command(flatten)]
    pub ring: RingArgs,

    /// Let `POST /snapshot` dump the flight recorder's window (--ring).
    /// Off by default: whoever can reach the port could otherwise force
    /// dumps. At most one per 10 s (429 otherwise), kept apart from the
    /// SIGHUP and trigger dumps' rotation (--keep)
    #[arg(long = "web.enable-snapshot", requires = "ring")]
    pub web_enable_snapshot: bool,

    /// Answer beyond loopback without authentication. A --listen address
    /// other machines can reach is refused without it unless the
    /// --web.config.file authenticates: /metrics carries PIDs, process
    /// names and cgroup paths, so say that the network restricts who
    /// connects (a firewall, a Kubernetes NetworkPolicy)
    #[arg(long = "web.allow-unauthenticated")]
    pub web_allow_unauthenticated: bool,

    /// TLS and basic authentication, from a YAML file in the format of the
    /// Prometheus exporters' --web.config.file: tls_server_config
    /// (cert_file, key_file, client_auth_type, client_ca_file,
    /// min_version, max_version) and basic_auth_users (user: bcrypt hash,
    /// from `htpasswd -nBC 10 USER`). Every path but / (for probes) then
    /// asks for a user, POST /snapshot too. The file and its certificates
    /// are read again when they change, and on SIGHUP; a file that does not
    /// load keeps the previous configuration (docs/security.md)
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<std::path::PathBuf>,

    // Boxed: the largest group, and clap's subcommand enum holds the
    // arguments by value.
    #[command(flatten)]
    pub otlp: Box<OtlpArgs>,

    #[command(flatten)]
    pub kernel: KernelArgs,

    #[command(flatten)]
    pub filter: FilterArgs,
}

impl ServeArgs {
    /// The options; an error where the OpenTelemetry variables do not
    /// parse (clap checks the flags).
    pub(crate) fn options(&self) -> Result<ServeOptions, UsageError> {
        let otlp = (self.otlp)
            .options(|var| std::env::var(var).ok())
            .map_err(UsageError)?;
        Ok(ServeOptions {
            otlp,
            ring: self.ring.options(crate::histogram::Unit::Usecs, None, 0)?,
            listen: self.listen,
            exemplars_ns: self.exemplars.map(|ns| ns.max(1)),
            snapshot_enabled: self.web_enable_snapshot,
            allow_unauthenticated: self.web_allow_unauthenticated,
            web_config: self.web_config_file.clone(),
            keyed: self.keyed(),
            max_series: self.max_series.unwrap_or(if self.pids {
                DEFAULT_PROCESS_SERIES
            } else {
                DEFAULT_CGROUP_SERIES
            }),
            cgroup_splits: self.cgroup_splits.into(),
            key_buckets: self.key_buckets.into(),
            pins: Pins {
                values: self.pin.clone(),
            },
            pairs: self.pairs.max_pairs().map(|max_pairs| PairSeriesOptions {
                max_pairs,
                max_series: self.max_pair_series,
            }),
            workload_labels: match &self.cgroup_labels {
                Some(kept) => {
                    WorkloadLabels::only(&kept.iter().flatten().copied().collect::<Vec<_>>())
                }
                None => WorkloadLabels::default(),
            },
        })
    }

    fn keyed(&self) -> Option<Keyed> {
        (self.cgroup_keys).keyed(self.pids.then_some(Breakdown::Process))
    }
}

/// The scope is `-p PID` (a process) or `-c PATH` (a cgroup); diagnose takes
/// no other filter, so its help lists none.
#[derive(Debug, clap::Args)]
pub(crate) struct DiagnoseArgs {
    /// Length of the observation window, in seconds
    #[arg(short = 'd', long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration: u64,
    /// One JSON object instead of the text report
    #[arg(long)]
    pub json: bool,
    /// Load only the decision split's programs, without the victims and
    /// culprits tables: one set of programs for the window instead of
    /// two. By default diagnose loads both and names the scheduler's
    /// decision with its remedy (docs/decision.md)
    #[arg(long, conflicts_with = "no_decision")]
    pub decision: bool,

    /// Take the holder's stacks at the end of each wait at least this
    /// long, and quote the hottest behind each holder the report names
    /// (docs/stacks.md): a number with a unit, e.g. 1ms, 500us
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration_ns,
          help_heading = "Stacks")]
    pub stacks_over: u64,

    /// Take no stacks: the slow waits' own programs are not loaded
    #[arg(long, conflicts_with = "stacks_over", help_heading = "Stacks")]
    pub no_stacks: bool,

    #[command(flatten)]
    pub scope: ScopeArgs,

    #[command(flatten)]
    pub kernel: KernelArgs,
}

/// What `diagnose` looks at: the whole system (neither), a process or a
/// cgroup and below.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Scope (default: the whole system)")]
pub(crate) struct ScopeArgs {
    /// A process (all its threads): its PSI, quota and waits
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PID",
        conflicts_with = "cgroup"
    )]
    pub pid: Option<u32>,

    /// A cgroup and below: a v2 or v1 directory, or relative to v2; or a
    /// container ID (or unique prefix), pod UID or systemd unit, whose
    /// cgroup is found by its path
    #[arg(short = 'c', long = "cgroup", value_name = "PATH")]
    pub cgroup: Option<std::path::PathBuf>,
}

impl ScopeArgs {
    pub(crate) fn spec(&self) -> FilterSpec {
        FilterSpec {
            pid: self.pid,
            cgroup: self.cgroup.clone(),
            ..FilterSpec::default()
        }
    }
}

impl DiagnoseArgs {
    pub(crate) fn options(&self) -> DiagnoseOptions {
        DiagnoseOptions {
            duration: self.duration,
            json: self.json,
            decision: self.decision,
            stacks_over: (!self.no_stacks).then_some(self.stacks_over),
        }
    }
}

/// `-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus` and how their keys are shown.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Breakdowns (one histogram per key; pick one)")]
#[command(group(clap::ArgGroup::new("rolled").args(["cgroups", "pairs"]).multiple(true)))]
pub(crate) struct BreakdownArgs {
    /// One histogram per process (`pid = PID comm`), as runqlat -P
    #[arg(short = 'P', long = "pids", group = "keyed")]
    pub pids: bool,
    /// One histogram per thread (`tid = TID comm`), as runqlat -L
    #[arg(short = 'L', long = "tids", group = "keyed")]
    pub tids: bool,
    /// One histogram per PID namespace (`pidns = INODE`), as runqlat --pidnss
    #[arg(long, group = "keyed")]
    pub pidnss: bool,
    #[command(flatten)]
    pub cgroup_keys: CgroupKeyArgs,
    /// One histogram per CPU, the one each wait ended on
    #[arg(long, group = "keyed")]
    pub cpus: bool,
    /// Order of the per-key histograms, most relevant first
    #[arg(long, value_enum, default_value_t = KeySortArg::Total, requires = "keyed")]
    pub sort: KeySortArg,
    /// Print only the first N keys of each interval (0 = all); what is cut is
    /// counted
    #[arg(long, value_name = "N", requires = "keyed")]
    pub top: Option<u32>,
    #[command(flatten)]
    pub pairs: PairArgs,
}

/// `--pairs` and how its table is named and sized.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Who waited behind whom")]
pub(crate) struct PairArgs {
    #[command(flatten)]
    pub table: PairTableArgs,
    /// Name and roll up cgroups by their container, pod or systemd unit
    /// (docs/containers.md): the pairs' sides, and --cgroups' histograms
    /// (one per workload, its cgroups' waits added up); a cgroup outside
    /// any stays itself
    #[arg(long, value_enum, default_value_t = ByLevel::Cgroup, requires = "rolled")]
    pub by: ByLevel,
}

/// What `--by` rolls cgroups up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ByLevel {
    /// Each cgroup by its path
    #[default]
    Cgroup,
    /// Its container (namespace/pod/container, or runtime and ID)
    Container,
    /// Its Kubernetes pod (namespace/pod, or its UID)
    Pod,
    /// Its systemd unit
    Unit,
}

impl ByLevel {
    fn level(self) -> crate::sys::workload::level::Level {
        use crate::sys::workload::level::Level;
        match self {
            ByLevel::Cgroup => Level::Cgroup,
            ByLevel::Container => Level::Container,
            ByLevel::Pod => Level::Pod,
            ByLevel::Unit => Level::Unit,
        }
    }
}

/// One `--cgroup-labels` value: a workload label, or `none` (None).
fn cgroup_label_parser(value: &str) -> Result<Option<WorkloadLabel>, String> {
    if value == "none" {
        return Ok(None);
    }
    WorkloadLabel::parse(value).map(Some).ok_or_else(|| {
        let names: Vec<_> = WorkloadLabel::ALL.iter().map(|l| l.name()).collect();
        format!(
            "no label `{value}`: choose among {}, or none",
            names.join(", ")
        )
    })
}

impl BreakdownArgs {
    pub(crate) fn options(&self) -> BreakdownOptions {
        BreakdownOptions {
            keyed: self.keyed(),
            sort: self.sort.into(),
            // 0 = all, as `victims --top 0`: one meaning everywhere.
            top: self.top.filter(|&n| n > 0),
            pairs: self.pairs.table.max_pairs(),
            by: self.pairs.by.level(),
        }
    }

    fn keyed(&self) -> Option<Keyed> {
        let other = [
            (self.pids, Breakdown::Process),
            (self.tids, Breakdown::Thread),
            (self.pidnss, Breakdown::PidNamespace),
            (self.cpus, Breakdown::Cpu),
        ]
        .into_iter()
        .find_map(|(on, by)| on.then_some(by));
        self.cgroup_keys.keyed(other)
    }
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Flight recorder (--ring)")]
pub(crate) struct RingArgs {
    /// Keep the last DURATION (e.g. 300s, 10m) always on, and dump it on
    /// SIGHUP or a trigger (with serve, also on POST /snapshot)
    #[arg(long, value_name = "DURATION", value_parser = ring_secs)]
    pub ring: Option<u64>,
    /// Directory the dumps go to
    #[arg(long, value_name = "DIR", default_value = ".", requires = "ring")]
    pub dump_dir: std::path::PathBuf,
    /// Dumps kept in DIR of each kind (SIGHUP, trigger, HTTP); the oldest
    /// of that kind are removed
    #[arg(long, value_name = "N", default_value_t = 10, requires = "ring",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub keep: u32,
    /// Slow waits kept with their context: at least this long
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = parse_duration_ns, requires = "ring")]
    pub slow_threshold: u64,
    /// Slow waits kept at most (the oldest are dropped, and counted)
    #[arg(long, value_name = "N", default_value_t = 20_000, requires = "ring",
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_slow: u32,
    /// Dump when this holds: p50, p90, p99, p999 or max over the trigger
    /// window above a duration (`p99>5ms`), or one wait at least that long
    /// (`slow>20ms`). Repeatable.
    #[arg(long, value_name = "EXPR", value_parser = Trigger::parse, requires = "ring")]
    pub trigger: Vec<Trigger>,
    /// Seconds a percentile trigger judges, the newest last
    #[arg(long, value_name = "SECONDS", default_value_t = 5, requires = "ring", value_parser = positive_u64)]
    pub trigger_window: u64,
    /// After a trigger's dump, seconds before a trigger dumps again
    #[arg(long, value_name = "SECONDS", default_value_t = 60, requires = "ring")]
    pub cooldown: u64,
    /// Keep each slow wait's stacks: the holder's kernel and user stacks
    /// at the switch that ended it, who ran during it, and the waker's
    /// kernel stack at the wakeup that began it, named as they are read;
    /// dumps, replay and the Perfetto trace show them. `--stacks=holder`
    /// keeps all but the waker's (docs/stacks.md: the waker's costs every
    /// wakeup of a traced task a stack walk)
    #[arg(long, value_name = "WHICH", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_enum, requires = "ring")]
    pub stacks: Option<StacksArg>,
    /// With --stacks, the newest N slow waits keep their stacks (each
    /// stack its innermost 64 frames); older ones are kept without, and
    /// counted
    #[arg(long, value_name = "N", default_value_t = 1000, requires = "stacks",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_stacks: u32,
}

impl RingArgs {
    /// The recorder's options, None without `--ring`; `cgroups`: the
    /// per-cgroup series' keys (`record --ring --ring-cgroups`; serve's
    /// ring keeps the total), at most `max_series` a second. `--stacks`
    /// without `--ring` is refused here: clap does not hold an option with
    /// a value it may fill in itself (`--stacks` alone is `--stacks=all`)
    /// to its `requires`.
    pub(crate) fn options(
        &self,
        unit: crate::histogram::Unit,
        cgroups: Option<Keyed>,
        max_series: u32,
    ) -> Result<Option<RecorderOptions>, UsageError> {
        let Some(window_s) = self.ring else {
            return match self.stacks {
                Some(_) => Err(UsageError(
                    "--stacks keeps the flight recorder's stacks: it needs --ring (`schedlat slow --stacks` shows them live)".into(),
                )),
                None => Ok(None),
            };
        };
        Ok(Some(RecorderOptions {
            window_s,
            dir: self.dump_dir.clone(),
            keep: self.keep as usize,
            slow_ns: self.slow_threshold,
            max_slow: self.max_slow as usize,
            stacks: self.stacks.map(StacksArg::stacks),
            max_stacks: self.max_stacks as usize,
            cgroups,
            max_series,
            triggers: self.trigger.clone(),
            trigger_window_s: self.trigger_window,
            cooldown_s: self.cooldown,
            unit,
        }))
    }
}

/// `--ring`: 300, 300s, 10m or 1h, in seconds (at most a day).
fn ring_secs(s: &str) -> Result<u64, String> {
    let (n, scale) = match s.trim().chars().last() {
        Some('s') => (&s[..s.len() - 1], 1),
        Some('m') => (&s[..s.len() - 1], 60),
        Some('h') => (&s[..s.len() - 1], 3600),
        _ => (s, 1),
    };
    let n: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 300s or 10m"))?;
    match n * scale {
        0 => Err("must be at least 1s".to_string()),
        secs if secs > 86_400 => Err(format!("`{s}`: at most a day (24h)")),
        secs => Ok(secs),
    }
}
