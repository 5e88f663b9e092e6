//! `cargo xtask bench`'s options, and the schedlat binary they name.

use std::path::PathBuf;

use anyhow::Result;

use super::{modes, sleepers};
use crate::util::workspace_root;

#[derive(clap::Args, Debug)]
pub(crate) struct Options {
    /// Rounds; each runs the load once per mode, in a rotated order.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Loops of `perf bench sched pipe` per run (its `-l`).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: u64,
    /// Calls of `perf bench syscall basic` per run (its `-l`); each mode's
    /// cost per system call is the best of five such runs a round.
    #[arg(long, default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub syscall_loops: u64,
    /// CPU the load and the tracers are pinned to.
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
    /// Exit with an error when a target is missed (stretch targets excepted).
    #[arg(long)]
    pub strict: bool,
    /// Also write all results (per round and summary) as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Run the whole comparison once per value, with that many extra threads
    /// sleeping and waking (once a second each) on another CPU: a tracer's
    /// cost per switch should not grow with the number of tasks.
    #[arg(long, value_delimiter = ',', default_value = "100,10000")]
    pub sleepers: Vec<usize>,
    /// The --sleepers are processes (one thread each) rather than threads
    /// of one process: with --scrape, each is a key of `serve --pids`.
    #[arg(long)]
    pub sleeper_processes: bool,
    /// Instead of the comparison: scrape `schedlat serve` N times per
    /// --sleepers value, plain and with --pids, and report latency and
    /// serve's CPU per scrape.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub scrape: Option<u32>,
    /// Run only these modes (by their --json names, e.g. `no-causes,pid`)
    /// besides the ones every ratio needs (baseline, runqlat, schedlat,
    /// victims, filtered): a shorter run to compare a few modes.
    #[arg(long, value_delimiter = ',', value_name = "NAMES", value_parser = modes::known_name)]
    pub modes: Vec<String>,
    /// The schedlat binary to measure (default: the release build), e.g. an
    /// older build to compare against in the same conditions; every mode
    /// (the comparison, --scrape, --soak, --recorder) runs it.
    #[arg(long, value_name = "PATH")]
    pub schedlat: Option<PathBuf>,
    /// Instead of the comparison: run `schedlat -P 1` and `serve --pids`
    /// for SECS seconds (600 if no value) under a fork storm, sampling RSS,
    /// file descriptors and BPF map memory; reports whether they stay flat.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "600",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub soak: Option<u64>,
    /// Instead of the comparison: the flight recorder (`record --ring`)
    /// beside plain histogram mode under a fork storm for SECONDS (default
    /// 600): CPU and sampled RSS of each.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600",
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "soak")]
    pub recorder: Option<u64>,
    /// Instead of the comparison: the seed case of docs/decision.md,
    /// cyclictest (SCHED_OTHER, 1 ms) beside six loops on --cpu's CPU (the
    /// last CPU when --cpu is 0) for SECONDS (default 180), traced by
    /// `schedlat --comm cyclictest`: cyclictest's p99 and max beside the decision split.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "180",
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["soak", "recorder"])]
    pub seed: Option<u64>,
    /// Rounds of the application row (nginx serving wrk, under no tracer,
    /// runqlat, the default and the DaemonSet's configuration), run after
    /// the comparison; 0 leaves it out.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub app_rounds: u32,
    /// Seconds of each wrk run of the application row.
    #[arg(long, default_value_t = 3, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub app_seconds: u64,
    /// wrk's connections in the application row. With 1, every request
    /// wakes the server and the client, so a tracer's cost per event is on
    /// every request; with a few more the server never sleeps.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub app_connections: u32,
    /// Let idle CPUs halt during the application row, as on an untuned
    /// host (by default they poll: /dev/cpu_dma_latency held at 0).
    #[arg(long)]
    pub app_halt: bool,
    /// Instead of the comparison: only the application row.
    #[arg(long, conflicts_with_all = ["soak", "recorder", "seed", "scrape"])]
    pub app_only: bool,
}

impl Options {
    /// What the `--sleepers` are.
    pub(super) fn sleeping(&self) -> sleepers::Sleeping {
        if self.sleeper_processes {
            sleepers::Sleeping::Processes
        } else {
            sleepers::Sleeping::Threads
        }
    }
}

/// The binary every mode measures: `--schedlat`, else the release build.
pub(super) fn schedlat_binary(opts: &Options) -> Result<PathBuf> {
    let path = opts
        .schedlat
        .clone()
        .unwrap_or_else(|| workspace_root().join("target/release/schedlat"));
    if !path.exists() {
        anyhow::bail!(
            "{} is missing: `cargo xtask build` first, or give another with --schedlat",
            path.display()
        );
    }
    Ok(path)
}
