//! The modes the comparison runs the load under: no tracer, libbpf-tools
//! runqlat, and schedlat the ways its users run it. Each mode is one row of
//! the report, of `--json` and of the cost tables the README and docs quote
//! (`cargo xtask bench-docs`), so a mode a user runs is measured and shown
//! by adding one entry to `ALL`.

use std::path::Path;

use anyhow::Result;

use super::tracer::{Ready, Tool};

/// What runs beside the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runs {
    /// Nothing: the baseline ops/s every overhead is measured against.
    Nothing,
    /// libbpf-tools runqlat, the anchor of every ratio.
    Runqlat,
    /// schedlat with `args`.
    Schedlat,
    /// The reference programs on schedlat's hooks (reference/): the
    /// floors under every ns/switch, not a mode users run.
    Noop,
}

/// One way of running a tracer, as it is measured and reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mode {
    /// Its key in `--json` and in the docs' tables (stable across runs).
    pub name: &'static str,
    pub runs: Runs,
    /// schedlat's arguments. `{pid}` stands for the load's first process
    /// (the one `perf bench` starts as), `{cgroup}` for a cgroup with no
    /// task in it.
    pub args: &'static [&'static str],
    /// The line the tracer prints once attached.
    pub ready: Ready,
    /// A line it prints when it reports at SIGINT (None: it reports nothing).
    pub report: Option<&'static str>,
    /// What the mode is, for the docs' tables.
    pub about: &'static str,
}

/// The banner both tools print on stdout once their programs are attached.
const BANNER: Ready = Ready::Stdout("Tracing run queue latency");
/// serve listens on a free port: its banner names it, on stderr.
const SERVE: Ready = Ready::Stderr("Serving run queue latency");
const HISTOGRAM: Option<&str> = Some("distribution");
const SERVE_LISTEN: &str = "127.0.0.1:0";

const fn schedlat(
    name: &'static str,
    args: &'static [&'static str],
    ready: Ready,
    report: Option<&'static str>,
    about: &'static str,
) -> Mode {
    Mode {
        name,
        runs: Runs::Schedlat,
        args,
        ready,
        report,
        about,
    }
}

pub(super) const BASELINE: Mode = Mode {
    name: "baseline",
    runs: Runs::Nothing,
    args: &[],
    ready: BANNER,
    report: None,
    about: "no tracer",
};
pub(super) const RUNQLAT: Mode = Mode {
    name: "runqlat",
    runs: Runs::Runqlat,
    args: &[],
    ready: BANNER,
    report: HISTOGRAM,
    about: "libbpf-tools runqlat",
};
/// A reference made of this xtask's programs (`bench-noop ARGS`, with the
/// objects the bench built before its rounds), which prints `banner` once
/// attached.
const fn reference(
    name: &'static str,
    args: &'static [&'static str],
    banner: &'static str,
    about: &'static str,
) -> Mode {
    Mode {
        name,
        runs: Runs::Noop,
        args,
        ready: Ready::Stdout(banner),
        report: None,
        about,
    }
}

/// The hooks' floor (`cargo xtask bench-noop`).
pub(super) const NOOP: Mode = reference(
    "noop",
    &["bench-noop", "--prebuilt"],
    super::reference::BANNER,
    "tp_btf programs that return at once: the hooks' floor",
);
/// The least timer (`cargo xtask bench-noop --timer`): what timing a wait
/// costs at all, on the same hooks.
pub(super) const TIMER: Mode = reference(
    "timer",
    &["bench-noop", "--prebuilt", "--timer"],
    super::reference::TIMER_BANNER,
    "tp_btf programs that time each wait into a log2 histogram and do nothing else",
);
/// The least timer with the least decision split (`bench-noop --timer
/// --decision`): what timing a wait and its request and pass-overs cost at
/// all.
pub(super) const TIMER_DECISION: Mode = reference(
    "timer-decision",
    &["bench-noop", "--prebuilt", "--timer", "--decision"],
    super::reference::DECISION_BANNER,
    "the timer, and each enqueue's need-resched bit and switch count, each switch-in's pass-overs",
);
/// The default: the histogram with the cause and decision splits.
pub(super) const SCHEDLAT: Mode =
    schedlat("schedlat", &[], BANNER, HISTOGRAM, "the histogram, default");
pub(super) const VICTIMS: Mode = schedlat(
    "victims",
    &["victims"],
    BANNER,
    Some("culprits ("),
    "victims and culprits, per task",
);
/// Every event filtered out, through the costliest filter (the cgroup walk).
pub(super) const FILTERED: Mode = schedlat(
    "filtered",
    &["-c", "{cgroup}"],
    BANNER,
    Some("total 0 waits"),
    "an empty cgroup: every wait filtered out",
);

/// With no-causes and the floor, it splits the default's cost per switch:
/// histogram, + cause split, + decision split.
pub(super) const NO_DECISION: Mode = schedlat(
    "no-decision",
    &["--no-decision"],
    BANNER,
    HISTOGRAM,
    "the histogram with the cause split, no decision split",
);

/// What the shipped DaemonSet runs: its arguments are read from the
/// manifest (daemonset.rs) where `{daemonset}` stands.
pub(super) const DAEMONSET: Mode = schedlat(
    "daemonset",
    &["{daemonset}"],
    SERVE,
    None,
    "the DaemonSet's serve (deploy/kubernetes), not scraped",
);

/// Every mode, in the order of round 1.
pub(super) const ALL: [Mode; 19] = [
    BASELINE,
    RUNQLAT,
    NOOP,
    TIMER,
    TIMER_DECISION,
    SCHEDLAT,
    NO_DECISION,
    schedlat(
        "no-causes",
        &["--no-causes"],
        BANNER,
        HISTOGRAM,
        "the histogram without the cause split",
    ),
    schedlat(
        "waking",
        &["--waking"],
        BANNER,
        HISTOGRAM,
        "the histogram with the wakeup path timed",
    ),
    schedlat(
        "pid",
        &["-p", "{pid}"],
        BANNER,
        HISTOGRAM,
        "one of the load's two processes",
    ),
    FILTERED,
    VICTIMS,
    schedlat(
        "serve",
        &["serve", "--listen", SERVE_LISTEN],
        SERVE,
        None,
        "Prometheus endpoint, not scraped",
    ),
    schedlat(
        "serve-cgroups",
        &["serve", "--listen", SERVE_LISTEN, "--cgroups"],
        SERVE,
        None,
        "per cgroup, not scraped",
    ),
    schedlat(
        "serve-pids",
        &["serve", "--listen", SERVE_LISTEN, "--pids"],
        SERVE,
        None,
        "per process, not scraped",
    ),
    DAEMONSET,
    schedlat(
        "record-ring",
        &["record", "--ring", "5m"],
        Ready::Stderr("recording the last"),
        None,
        "the flight recorder, 5 minutes",
    ),
    schedlat(
        "record-ring-holder-stacks",
        &["record", "--ring", "5m", "--stacks=holder"],
        Ready::Stderr("recording the last"),
        None,
        "the flight recorder keeping each slow wait's holder stacks",
    ),
    schedlat(
        "record-ring-stacks",
        &["record", "--ring", "5m", "--stacks"],
        Ready::Stderr("recording the last"),
        None,
        "the flight recorder keeping the holder's and the waker's stacks (each wakeup walks the waker's)",
    ),
];

/// The modes every report's ratios are taken from: always run.
/// (noop: the floor every ns/switch is read against.)
const NEEDED: [Mode; 8] = [
    BASELINE,
    RUNQLAT,
    NOOP,
    TIMER,
    TIMER_DECISION,
    SCHEDLAT,
    VICTIMS,
    FILTERED,
];

/// `--modes`' parser: a mode name of `ALL`.
pub(super) fn known_name(name: &str) -> Result<String, String> {
    if ALL.iter().any(|m| m.name == name) {
        Ok(name.to_string())
    } else {
        let names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        Err(format!("no mode `{name}`; the modes: {}", names.join(", ")))
    }
}

impl Mode {
    /// A tracer a user runs (runqlat, schedlat), with a row in the docs'
    /// cost tables: not the baseline, not the noop floor (the bench's
    /// report and `--json` show that).
    pub(super) fn is_users(&self) -> bool {
        matches!(self.runs, Runs::Runqlat | Runs::Schedlat)
    }

    /// Whether a run with `--modes only` runs it (every mode when `only`
    /// is empty).
    pub(super) fn selected(&self, only: &[String]) -> bool {
        only.is_empty() || NEEDED.contains(self) || only.iter().any(|n| n == self.name)
    }

    /// The command line a user types for it: `schedlat --no-causes`,
    /// `schedlat -p PID`, `runqlat`.
    pub(crate) fn command(&self) -> String {
        if self.args == DAEMONSET.args {
            let args = super::daemonset::serve_args(SERVE_LISTEN).unwrap_or_default();
            let shown: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .filter(|a| *a != "--listen" && *a != SERVE_LISTEN)
                .collect();
            return format!("DaemonSet: schedlat {}", shown.join(" "));
        }
        let args = self.args.iter().map(|a| match *a {
            "{pid}" => "PID",
            "{cgroup}" => "EMPTY",
            SERVE_LISTEN => "…",
            other => other,
        });
        let args: Vec<&str> = args.filter(|a| *a != "--listen" && *a != "…").collect();
        match self.runs {
            Runs::Nothing => "(none)".into(),
            Runs::Runqlat => "runqlat".into(),
            Runs::Noop => format!("({} programs)", self.name),
            Runs::Schedlat if args.is_empty() => "schedlat".into(),
            Runs::Schedlat => format!("schedlat {}", args.join(" ")),
        }
    }

    /// The tracer to run for this mode (None for the baseline), with `{pid}`
    /// and `{cgroup}` filled in; the noop programs are this xtask's.
    pub(crate) fn tool(
        &self,
        runqlat: &Path,
        schedlat: &Path,
        pid: u32,
        cgroup: &str,
    ) -> Result<Option<Tool>> {
        let xtask;
        let path = match self.runs {
            Runs::Nothing => return Ok(None),
            Runs::Runqlat => runqlat,
            Runs::Schedlat => schedlat,
            Runs::Noop => {
                xtask = std::env::current_exe()?;
                xtask.as_path()
            }
        };
        let mut args = Vec::new();
        for a in self.args {
            match *a {
                "{pid}" => args.push(pid.to_string()),
                "{cgroup}" => args.push(cgroup.to_string()),
                "{daemonset}" => args.extend(super::daemonset::serve_args(SERVE_LISTEN)?),
                other => args.push(other.to_string()),
            }
        }
        Ok(Some(Tool::new(
            self.name,
            path.into(),
            args,
            self.ready,
            self.report,
        )?))
    }
}

/// Round 1 runs the modes in `ALL`'s order, round 2 starts at the second,
/// ...: slow drift of the machine is spread over all modes.
pub(super) fn order(round: u32) -> [Mode; ALL.len()] {
    rotated(ALL, round)
}

/// `modes` in round `round`'s order: rotated by one every round, so each
/// leads a round in turn.
pub(super) fn rotated<const N: usize>(mut modes: [Mode; N], round: u32) -> [Mode; N] {
    modes.rotate_left((round as usize - 1) % N);
    modes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_rotates_every_round() {
        assert_eq!(order(1), ALL);
        assert_eq!(order(2)[0], ALL[1]);
        assert_eq!(order(2)[ALL.len() - 1], ALL[0]);
        assert_eq!(order(ALL.len() as u32 + 1), order(1));
    }

    #[test]
    fn modes_selects_the_named_and_the_needed() {
        let only = vec!["no-causes".to_string()];
        let run: Vec<&str> = ALL
            .iter()
            .filter(|m| m.selected(&only))
            .map(|m| m.name)
            .collect();
        assert_eq!(
            run,
            [
                "baseline",
                "runqlat",
                "noop",
                "timer",
                "timer-decision",
                "schedlat",
                "no-causes",
                "filtered",
                "victims"
            ]
        );
        assert!(ALL.iter().all(|m| m.selected(&[])));
        assert!(known_name("no-such").is_err());
    }

    /// Issue 28: every mode a user runs has a row, against runqlat.
    #[test]
    fn every_mode_a_user_runs_is_measured() {
        let commands: Vec<String> = ALL.iter().map(Mode::command).collect();
        for command in [
            "runqlat",
            "schedlat",
            "schedlat --no-causes",
            "schedlat --no-decision",
            "schedlat serve",
            "schedlat serve --cgroups",
            "schedlat serve --pids",
            "schedlat victims",
            "schedlat -p PID",
            "schedlat --waking",
            "schedlat record --ring 5m",
            "schedlat record --ring 5m --stacks=holder",
            "schedlat record --ring 5m --stacks",
            "DaemonSet: schedlat serve --web.allow-unauthenticated --cgroups --pairs",
        ] {
            assert!(
                commands.iter().any(|c| c == command),
                "{command}: {commands:?}"
            );
        }
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "mode names are keys: unique");
    }
}
