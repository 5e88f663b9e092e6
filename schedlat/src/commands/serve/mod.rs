//! `schedlat serve`: a Prometheus/OpenMetrics endpoint. The same kernel
//! measurement as the histogram mode, read at scrape time instead of at
//! intervals, as cumulative histograms and counters (see
//! docs/prometheus.md). What the exposition holds and how it is encoded is the
//! export layer's; serve reads, listens and answers.
//!
//! - scrape: what a scrape reads from the kernel (with `--cgroups` or
//!   `--pids`, through the keyed intervals of collect/, and the per-key
//!   series of export/);
//! - http: the hyper server; routes: what each path answers; listen:
//!   `--listen` and binding; notify: readiness for systemd (`Type=notify`);
//! - snapshot: `POST /snapshot`, the flight recorder's dump (`--ring`,
//!   `--web.enable-snapshot`); guard: the Host and Origin checks every
//!   request passes first, and the dumps' rate limit;
//! - web: `--web.config.file`, TLS and basic authentication as the
//!   Prometheus exporters configure them, re-read when it changes or on
//!   SIGHUP;
//! - otlp: `--otlp-endpoint`, the same families pushed to an
//!   OpenTelemetry collector (export/otlp/ encodes them); otlp_endpoint:
//!   its URL; otlp_tls: its `https://` client side;
//! - unseen: the scrapes and the push as two readers of one set of
//!   per-key intervals;
//! - raw: the request handling on raw bytes, for the `http` fuzz target.

mod guard;
mod http;
pub(crate) mod listen;
mod notify;
pub(crate) mod otlp;
mod otlp_endpoint;
mod otlp_tls;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod raw;
mod routes;
mod scrape;
mod snapshot;
mod unseen;
pub(crate) mod web;

use std::{cell::RefCell, net::SocketAddr, path::PathBuf, rc::Rc, time::Duration};

use anyhow::{Context, Result};
use schedlat_common::{scope::Breakdown, victims::SlowEvent};
use tokio::{
    signal::unix::{SignalKind, signal},
    task::LocalSet,
};

use crate::{
    collect::slow::{SlowEvents, SlowRecord},
    commands::{
        UsageError,
        session::{self, Ended, Signals},
    },
    export::{
        cgroup_splits::CgroupSplits, key_buckets::KeyBuckets, keyed_series::Pins,
        workload_labels::WorkloadLabels,
    },
    kernel::{
        filter::{Filter, FilterSpec},
        loader::KernelAccess,
        modes::{Keyed, Modes},
    },
    recorder::{DumpKind, Flight, RecorderOptions},
};

/// Where `schedlat serve` listens and what it exports.
pub(crate) struct ServeOptions {
    pub listen: SocketAddr,
    /// Per-key series (`--cgroups`, `--pids`) and the kernel's key limit.
    pub keyed: Option<Keyed>,
    /// At most this many per-key series per scrape, pinned ones aside.
    pub max_series: u32,
    /// The per-key families' buckets.
    pub key_buckets: KeyBuckets,
    /// How much of the splits a cgroup's series carries (`--cgroup-splits`).
    pub cgroup_splits: CgroupSplits,
    /// Keys that always get a series.
    pub pins: Pins,
    /// The workload labels of the per-cgroup series.
    pub workload_labels: WorkloadLabels,
    /// Exemplars of the waits of at least this long (`--exemplars`).
    pub exemplars_ns: Option<u64>,
    /// The flight recorder (`--ring`), dumped on SIGHUP and triggers.
    pub ring: Option<RecorderOptions>,
    /// `POST /snapshot` dumps it too (`--web.enable-snapshot`).
    pub snapshot_enabled: bool,
    /// Listen beyond loopback with no authentication
    /// (`--web.allow-unauthenticated`).
    pub allow_unauthenticated: bool,
    /// TLS and basic auth (`--web.config.file`).
    pub web_config: Option<PathBuf>,
    /// The neighbour pairs (`--pairs`).
    pub pairs: Option<PairSeriesOptions>,
    /// The OTLP push (`--otlp-endpoint`).
    pub otlp: Option<otlp::OtlpOptions>,
}

/// `--pairs`: the kernel's pair table and the pairs exported per scrape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairSeriesOptions {
    /// Pairs the kernel's table holds (`--max-pairs`).
    pub max_pairs: u32,
    /// Pairs with a series of their own per scrape (`--max-pair-series`).
    pub max_series: u32,
}

pub(crate) async fn run(
    args: &ServeOptions,
    kernel: &KernelAccess,
    filter: &FilterSpec,
) -> Result<Ended> {
    let mut signals = Signals::install()?;

    let beyond_loopback = !args.listen.ip().is_loopback();
    // Read before anything is bound or loaded: a bad file fails fast. A
    // listener beyond loopback takes only a configuration that
    // authenticates, unless told otherwise.
    let web = match &args.web_config {
        Some(path) => Some(Rc::new(
            web::Web::open(path, beyond_loopback && !args.allow_unauthenticated)
                .map_err(|e| UsageError(format!("--web.config.file {}: {e}", path.display())))?,
        )),
        None => None,
    };
    if beyond_loopback && !args.allow_unauthenticated && web.is_none() {
        return Err(UsageError(format!(
            "--listen {} is reachable from other machines, and serve answers anyone who connects: /metrics carries PIDs, process names and cgroup paths{}. Give a --web.config.file with basic_auth_users (or client certificates), listen on loopback (the default, 127.0.0.1:9415), or, where the network decides who may connect (a firewall, a Kubernetes NetworkPolicy), add --web.allow-unauthenticated",
            args.listen,
            if args.snapshot_enabled {
                ", and POST /snapshot writes dumps"
            } else {
                ""
            }
        ))
        .into());
    }
    // The push's CA bundle is read before anything is loaded, too.
    let otlp = match &args.otlp {
        Some(o) => Some(Rc::new(otlp::Push::new(o.clone()).map_err(UsageError)?)),
        None => None,
    };
    let filter = Filter::resolve(filter)?;
    // Bind before loading: a taken port fails fast, with nothing attached.
    let listener = listen::bind(args.listen).await?;
    let addr = listener
        .local_addr()
        .context("reading the listening address")?;

    // Microseconds, as in histogram mode; the fine buckets that the exporter
    // reads are nanoseconds whatever the unit.
    let keyed = args.keyed;
    let mut modes = Modes::histogram(keyed);
    if let Some(pairs) = args.pairs {
        modes = modes.with_pairs(pairs.max_pairs);
    }
    if let Some(ring) = &args.ring {
        modes = Flight::with_slow(ring, modes);
    }
    // One slow threshold in the kernel: the lower of the recorder's and the
    // exemplars' (the recorder keeps only its own, ring_waits).
    if let Some(min) = args.exemplars_ns {
        modes.slow_ns = Some(modes.slow_ns.map_or(min, |ring| ring.min(min)));
    }
    // The dump directory checked before loading: refused, nothing is
    // attached.
    let writer = match &args.ring {
        Some(ring) => Some(Flight::open_dumps(ring)?),
        None => None,
    };
    let mut tracer = session::attach_resolved(kernel, &filter, 1_000, &modes)?;
    // Where the cumulative values start, for the OTLP points.
    let start_unix_ns = otlp::unix_now_ns();
    // The slow waits and the ring, taken before the scrapes own
    // the tracer.
    let mut events = match modes.slow_ns {
        Some(_) => Some(SlowEvents::take(&mut tracer)?),
        None => None,
    };
    let flight = match (&args.ring, writer) {
        (Some(ring), Some(writer)) => {
            let how = if args.snapshot_enabled {
                "POST /snapshot or SIGHUP dumps now"
            } else {
                "SIGHUP dumps now"
            };
            let flight = Flight::start(ring, writer, &mut tracer, how)?;
            Some(Rc::new(RefCell::new(flight)))
        }
        _ => None,
    };
    let ring_waits = |mut slow: Vec<SlowRecord>| {
        let min = args.ring.as_ref().map_or(0, |r| r.slow_ns);
        slow.retain(|r| r.event.wait_ns >= min);
        slow
    };
    // SIGHUP dumps the ring and re-reads the web configuration; with
    // neither it ends serve, as it always did.
    let mut sighup = if flight.is_some() || web.is_some() {
        Some(signal(SignalKind::hangup()).context("installing SIGHUP handler")?)
    } else {
        None
    };
    let tls = web.as_ref().is_some_and(|w| w.now().tls.is_some());
    if let Some(web) = &web {
        say!(
            "schedlat: web configuration {}: {}",
            web.path().display(),
            web.now().config.describe()
        );
    }
    if beyond_loopback && !web.as_ref().is_some_and(|w| w.now().config.authenticates()) {
        say!(
            "schedlat: note: {addr} is reachable from other machines, without authentication (--web.allow-unauthenticated)"
        );
    }
    if let Some(k) = keyed {
        say!(
            "schedlat: per-{} series, at most {} per scrape (--max-series){}, {} keys in the kernel (--max-keys)",
            if k.by == Breakdown::Cgroup {
                "cgroup"
            } else {
                "process"
            },
            args.max_series,
            if args.pins.values.is_empty() {
                String::new()
            } else {
                format!(" plus pinned {}", args.pins.values.join(", "))
            },
            k.max_keys
        );
    }
    if let Some(p) = args.pairs {
        say!(
            "schedlat: neighbour pairs, at most {} per scrape (--max-pair-series), {} in the kernel (--max-pairs)",
            p.max_series,
            p.max_pairs
        );
    }
    let keyed = keyed.map(|k| scrape::KeyedOptions {
        by: k.by,
        max_series: args.max_series,
        layout: args.key_buckets,
        splits: args.cgroup_splits,
        pins: args.pins.clone(),
        workload: args.workload_labels.clone(),
    });
    let pairs = args.pairs.map(|p| scrape::PairOptions {
        max_series: p.max_series,
        workload: args.workload_labels.clone(),
    });
    if let Some(min) = args.exemplars_ns {
        say!(
            "schedlat: exemplars: per bucket, the latest wait of at least {} (OpenMetrics, protobuf)",
            crate::analysis::fmt_ns(min)
        );
    }
    let scraper = Rc::new(scrape::Scraper::new(
        tracer,
        &filter,
        keyed,
        pairs,
        args.exemplars_ns.is_some(),
        args.otlp.is_some(),
    ));
    let url = format!("{}://{addr}/metrics", if tls { "https" } else { "http" });
    if let Some(o) = &otlp {
        say!(
            "schedlat: pushing OTLP metrics to {} every {} (--otlp-interval)",
            o.options.endpoint.url,
            crate::analysis::fmt_ns(o.options.interval.as_nanos() as u64)
        );
    }
    // The descriptors left after loading bound the clients: none left is
    // an error, not a "Serving" that can never accept.
    let limit = crate::sys::own_limits::open_files();
    let open = limit.and_then(crate::sys::own_limits::open_descriptors);
    let slots = match (open, limit) {
        (Some(open), Some(limit)) => http::client_slots(open, limit).map_err(anyhow::Error::msg)?,
        _ => http::MAX_CONNECTIONS,
    };
    if slots < http::MAX_CONNECTIONS {
        say!(
            "schedlat: at most {slots} clients at once: the open-file limit (RLIMIT_NOFILE) leaves no more descriptors; raise it (LimitNOFILE=) for more"
        );
    }
    say!("Serving run queue latency on {url} ... Hit Ctrl-C to end.");
    // Attached and bound: what `systemctl start` waits for.
    notify::notify(&format!(
        "READY=1\nSTATUS=Serving run queue latency on {url}"
    ));

    // One thread: connections are tasks on it, and a scrape is a map read
    // and some formatting, so nothing blocks for long. LocalSet because the
    // tracer is not shared across threads.
    let endpoint = Rc::new(routes::Endpoint {
        listen: addr,
        snapshot: flight.clone().filter(|_| args.snapshot_enabled),
        snapshot_limit: RefCell::new(guard::RateLimit::new(snapshot::INTERVAL)),
        web: web.clone(),
    });
    let connections = LocalSet::new();
    let pushing = (otlp.as_ref())
        .map(|o| connections.spawn_local(otlp::push(scraper.clone(), o.clone(), start_unix_ns)));
    let open = http::Connections::new(slots, http::FIRST_REQUEST_TIMEOUT);
    let mut accept_errors = listen::ErrorLog::new(Duration::from_secs(10));
    let handshake_errors = Rc::new(RefCell::new(listen::ErrorLog::new(Duration::from_secs(10))));
    // With -p/-t, a target that exits does not end the run (unlike the
    // histogram mode): the scrape target stays up, with what it measured,
    // and says the process is gone (schedlat_target_alive 0).
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    let mut second = tokio::time::interval(Duration::from_secs(1));
    second.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    second.tick().await;
    connections
        .run_until(async {
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            // Each connection takes the configuration in
                            // force when it comes (re-read if it changed,
                            // on the connection's task).
                            let web = web.clone();
                            let tls = async move {
                                match web {
                                    Some(web) => web.current().await.tls.clone(),
                                    None => None,
                                }
                            };
                            let (scraper, endpoint) = (scraper.clone(), endpoint.clone());
                            open.spawn(stream, tls, &handshake_errors, move |request| {
                                routes::respond(request, scraper.clone(), endpoint.clone())
                            });
                            // The connection shed to make room closes at
                            // its task's next turn: let it, before the next
                            // accept. Accepting on meanwhile (300 idle
                            // clients queued) ran out of descriptors and
                            // held a scrape back 4-5 s.
                            for _ in 0..64 {
                                if !open.over_limit() {
                                    break;
                                }
                                tokio::task::yield_now().await;
                            }
                        }
                        // Out of fds or a connection reset before accept:
                        // free a descriptor, keep serving the others.
                        Err(e) => {
                            if let Some(line) = accept_errors.accept_failed(&e) {
                                say!("schedlat: {line}");
                            }
                            open.shed_one();
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    },
                    _ = watch.tick(), if filter.tgid.is_some() || filter.tid.is_some() => {
                        if scraper.target_exited(filter.target_alive()) {
                            say!("schedlat: the target process exited; still serving (schedlat_target_alive 0)");
                        }
                    }
                    slow = slow_events(events.as_mut()) => {
                        let slow = slow.context("waiting for slow events")?;
                        scraper.slow_waits(&events_of(&slow));
                        if let Some(flight) = &flight {
                            flight.borrow_mut().push_slow(ring_waits(slow));
                        }
                    }
                    _ = second.tick(), if flight.is_some() => {
                        if let (Some(flight), Some(events)) = (&flight, events.as_mut()) {
                            let slow = events.drain();
                            scraper.slow_waits(&events_of(&slow));
                            flight.borrow_mut().second(&mut scraper.tracer(), ring_waits(slow))?;
                        }
                    }
                    _ = hangup(sighup.as_mut()) => {
                        if let Some(web) = &web {
                            // Off this loop: the reload waits for a
                            // blocking thread.
                            let web = web.clone();
                            tokio::task::spawn_local(async move { web.reload("SIGHUP").await });
                        }
                        if let Some(flight) = &flight {
                            flight.borrow().dump("SIGHUP", DumpKind::Sighup);
                        }
                    }
                    _ = signals.recv() => break,
                }
            }
            Ok::<(), anyhow::Error>(())
        })
        .await?;
    notify::notify("STOPPING=1");
    // What was counted since the last push goes out before the programs
    // detach (within the timeout).
    if let (Some(o), Some(pushing)) = (&otlp, pushing) {
        pushing.abort();
        connections
            .run_until(otlp::last_push(&scraper, o, start_unix_ns))
            .await;
    }
    // Stop listening, drop open connections, then detach the programs.
    drop(listener);
    drop(connections);
    drop(scraper);
    // The dumps asked for finish before exit (the connections, which held
    // the other references, are gone).
    if let Some(flight) = flight.and_then(|f| Rc::try_unwrap(f).ok()) {
        flight.into_inner().finish();
    }
    Ok(Ended::Done)
}

/// The events of slow waits read (the exemplars take the event alone).
fn events_of(records: &[SlowRecord]) -> Vec<SlowEvent> {
    records.iter().map(|r| r.event).collect()
}

/// The next slow waits; never, without a ring or exemplars.
async fn slow_events(events: Option<&mut SlowEvents>) -> std::io::Result<Vec<SlowRecord>> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// The next SIGHUP; never, without a ring or a web configuration (SIGHUP
/// then ends serve as before).
async fn hangup(sighup: Option<&mut tokio::signal::unix::Signal>) {
    match sighup {
        Some(sighup) => {
            sighup.recv().await;
        }
        None => std::future::pending().await,
    }
}
