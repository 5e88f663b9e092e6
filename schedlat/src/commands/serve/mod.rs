//! `schedlat serve`: a Prometheus/OpenMetrics endpoint. The same kernel
//! measurement as the histogram mode, read at scrape time instead of at
//! intervals, as cumulative histograms and counters (see README,
//! "Prometheus").
//!
//! - buckets: the exported `le` boundaries;
//! - scrape: what a scrape reads from the kernel;
//! - keyed: the per-cgroup or per-process series and `--max-series`;
//! - metrics: the snapshot and its encoding (prometheus-client);
//! - negotiate: OpenMetrics or classic text, from `Accept`;
//! - http: the hyper server; listen: `--listen` and binding.

mod buckets;
mod http;
mod keyed;
mod listen;
mod metrics;
mod negotiate;
mod scrape;

use std::{net::SocketAddr, rc::Rc, time::Duration};

use anyhow::{Context, Result};
use tokio::{
    signal::unix::{SignalKind, signal},
    task::LocalSet,
};

use schedlat_common::scope::Breakdown;

use crate::{
    cli::{FilterArgs, KernelArgs},
    commands::breakdown::{DEFAULT_MAX_KEYS, max_keys_parser},
    commands::run::Ended,
    kernel::filter::Filter,
    kernel::loader::Tracer,
    kernel::modes::{Keyed, Modes},
};

/// Options of `schedlat serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address for the /metrics endpoint. Loopback by default; another
    /// machine's Prometheus needs an explicit address such as 0.0.0.0:9415
    /// (the endpoint has no authentication). Port 0 picks a free port.
    #[arg(long, value_name = "IP:PORT", default_value = listen::DEFAULT, value_parser = listen::parse)]
    pub listen: SocketAddr,

    /// Also one histogram per cgroup of the task that waited, label
    /// cgroup="/path" (in -c's hierarchy, else the cpu controller's)
    #[arg(long, group = "keyed", help_heading = "Per-key series (pick one)")]
    pub cgroups: bool,

    /// Also one histogram per process that waited, labels pid and comm
    #[arg(
        short = 'P',
        long,
        group = "keyed",
        help_heading = "Per-key series (pick one)"
    )]
    pub pids: bool,

    /// At most N per-key series; keys first seen beyond them are summed into
    /// one series labelled "__overflow__" (and counted)
    #[arg(long, value_name = "N", default_value_t = 1000, requires = "keyed", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Per-key series (pick one)")]
    pub max_series: u32,

    /// Keys the kernel keeps (1.4 KiB each); waits beyond them are counted
    /// in schedlat_unkeyed_waits_total
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_KEYS, requires = "keyed", value_parser = max_keys_parser(), help_heading = "Per-key series (pick one)")]
    pub max_keys: u32,
}

impl ServeArgs {
    fn keyed(&self) -> Option<Keyed> {
        let by = if self.cgroups {
            Breakdown::Cgroup
        } else if self.pids {
            Breakdown::Process
        } else {
            return None;
        };
        Some(Keyed {
            by,
            max_keys: self.max_keys,
        })
    }
}

pub async fn run(args: &ServeArgs, kernel: &KernelArgs, filter: &FilterArgs) -> Result<Ended> {
    // Signal handlers first, so a Ctrl-C during loading is not fatal.
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;

    let filter = Filter::resolve(filter)?;
    // Bind before loading: a taken port fails fast, with nothing attached.
    let listener = listen::bind(args.listen).await?;
    let addr = listener
        .local_addr()
        .context("reading the listening address")?;

    // Microseconds, as in histogram mode; the fine buckets that the exporter
    // reads are nanoseconds whatever the unit.
    let keyed = args.keyed();
    let modes = Modes::histogram(keyed);
    let tracer = Tracer::load_modes(kernel.hook, &kernel.sources(), 1_000, &filter, &modes)?;
    for note in &tracer.notes {
        eprintln!("schedlat: {note}");
    }
    eprintln!("schedlat: hook mode {}", tracer.mode());
    if let Some(target) = filter.describe() {
        eprintln!("schedlat: only waits of {target}");
    }
    if !addr.ip().is_loopback() {
        eprintln!(
            "schedlat: note: {addr} is reachable from other machines; /metrics has no authentication"
        );
    }
    if let Some(k) = keyed {
        eprintln!(
            "schedlat: per-{} series, at most {} (--max-series), {} keys in the kernel (--max-keys)",
            if k.by == Breakdown::Cgroup {
                "cgroup"
            } else {
                "process"
            },
            args.max_series,
            k.max_keys
        );
    }
    let keyed = keyed.map(|k| (k.by, args.max_series));
    let source = Rc::new(scrape::Source::new(tracer, &filter, keyed));
    eprintln!("Serving run queue latency on http://{addr}/metrics ... Hit Ctrl-C to end.");

    // One thread: connections are tasks on it, and a scrape is a map read
    // and some formatting, so nothing blocks for long. LocalSet because the
    // tracer is not shared across threads.
    let connections = LocalSet::new();
    let open = http::Connections::new(http::MAX_CONNECTIONS, http::FIRST_REQUEST_TIMEOUT);
    let mut accept_errors = listen::ErrorLog::new(Duration::from_secs(10));
    // With -p, a target that exits ends the run, as in histogram mode.
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    connections
        .run_until(async {
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => open.spawn(stream, source.clone()),
                        // Out of fds or a connection reset before accept:
                        // free a descriptor, keep serving the others.
                        Err(e) => {
                            if let Some(line) = accept_errors.line(&e) {
                                eprintln!("schedlat: {line}");
                            }
                            open.shed_one();
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    },
                    _ = watch.tick(), if filter.is_active() => {
                        if !filter.target_alive() {
                            eprintln!("schedlat: the target process exited; stopping");
                            break;
                        }
                    }
                    _ = sigint.recv() => break,
                    _ = sigterm.recv() => break,
                }
            }
        })
        .await;
    // Stop listening, drop open connections, then detach the programs.
    drop(listener);
    drop(connections);
    drop(source);
    Ok(Ended::Done)
}
