//! `cargo xtask bench --scrape N`: what a Prometheus scrape of `schedlat
//! serve` costs, with few and with many tasks on the machine (the
//! `--sleepers` values).
//!
//! A scrape reads the per-CPU statistics map (one lookup returns every
//! CPU), lists the BPF programs for schedlat's own run-time counters, and
//! encodes about 10 KB of text. Per `--sleepers` value, this starts the
//! release `schedlat serve` on a free loopback port and scrapes it N times
//! back to back over one keep-alive connection with Prometheus' Accept
//! header, as Prometheus does, and reports:
//!
//! - latency seen by the scraper (request written to last body byte);
//! - the server's CPU time per scrape, from /proc/PID/schedstat (ns on CPU,
//!   every thread of serve: it has one once loaded);
//! - serve's own wall time per scrape, from the body's
//!   `schedlat_last_scrape_duration_seconds` (p50/p99): the latency less
//!   the wait for a CPU before serve starts and the transfer;
//! - the body size.
//!
//! Each row is measured three times: plain `serve`, `serve --pids` (one
//! histogram per process, read from the kernel's key map in a few batch
//! lookups), with the ratio of the two, and `serve --pids` scraped for
//! protobuf with native histograms (`proto`, as a Prometheus with
//! `--enable-feature=native-histograms` scrapes it). With
//! `--sleeper-processes` every sleeper is a process, so a row of N
//! sleepers has N+ keys; the key map is then sized to hold them all
//! (`--max-keys`), and `--max-series` keeps its default: the `series`
//! column counts the keyed series in the body, overflow included.
//!
//! `--pids` scrapes are paced a second apart, as a Prometheus would scrape
//! (and every sleeper wakes once a second): serve exports only the keys
//! that waited since the previous scrape, so back-to-back scrapes would see
//! almost none and understate the cost.
//!
//! With `--sleeper-processes`, each row is measured once more with as many
//! idle processes (`idle`): each waits once after serve starts, so it has a
//! key, and not again while the scrapes are timed. The closing lines give
//! serve's CPU per key and scrape: per idle key (the idle rows' slope), per
//! active key (the `--pids` rows' slope), and what a key that waited costs
//! over an idle one.
//!
//! With `--sleeper-processes`, each row is also measured as `serve
//! --cgroups` with every sleeper in a cgroup of its own (own_cgroups.rs):
//! as many keys as `--pids`, plus the decision split's per-key map and the
//! cause and decision counters per series (`--cgroups`).

use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::Result;

use super::{
    options::{Options, schedlat_binary},
    own_cgroups::{self, OwnCgroups},
    pid_max,
    serve_client::{ACCEPT, Conn, Serve, cpu_ns},
    sleepers::{SleeperProcess, Sleeping, room_for_tasks, tasks},
};
use crate::util::require_root;

/// The same with native histograms on: protobuf first.
const ACCEPT_PROTOBUF: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

pub(super) fn run(opts: &Options, scrapes: u32) -> Result<()> {
    require_root("schedlat serve loads eBPF programs")?;
    let exe = schedlat_binary(opts)?;
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let other = if cpus > 1 {
        (opts.cpu + 1) % cpus
    } else {
        opts.cpu
    };
    let what = if opts.sleeper_processes {
        "processes"
    } else {
        "threads of one process"
    };
    println!(
        "scrapes of `schedlat serve`: {scrapes} per row, over one keep-alive connection; sleepers are {what}"
    );
    println!(
        "{:>8}  {:<9}  {:>9} {:>9} {:>9} {:>9}  {:>13}  {:>11}  {:>9}  {:>6}  {:>10}",
        "tasks",
        "serve",
        "p50 us",
        "p99 us",
        "max us",
        "mean us",
        "serve CPU us",
        "own p50/p99",
        "bytes",
        "series",
        "BPF progs"
    );
    // Room for the largest row, restored when the bench ends however it ends.
    let largest = opts.sleepers.iter().copied().max().unwrap_or(0);
    let raised = match tasks() {
        Some(now) if largest > 0 => pid_max::raise_for(largest + MARGIN, now)?,
        _ => None,
    };
    if let Some(raised) = &raised {
        println!(
            "kernel.pid_max raised from {} to {} for this run (restored after) to hold {largest} sleepers",
            raised.old(),
            raised.new
        );
    }
    let mut rows = Vec::new();
    for &n in &opts.sleepers {
        // The sleepers, serve's threads and what else starts meanwhile.
        if let Some(room) = room_for_tasks().filter(|&room| room < n + MARGIN) {
            println!(
                "{n:>8}  skipped: kernel.pid_max leaves room for {room} more tasks (sysctl kernel.pid_max to raise it)"
            );
            continue;
        }
        eprintln!("bench: starting {n} sleeping/waking {what} on CPU {other}");
        let sleepers = SleeperProcess::spawn(n, other, opts.sleeping())?;
        // Room for every sleeper's key, and the machine's other processes.
        let max_keys = (n + 4096).to_string();
        let plain = measure(&exe, scrapes, &[], Duration::ZERO, ACCEPT, None)?;
        print_row(n, "plain", &plain);
        let pids = ["--pids", "--max-keys", &max_keys];
        let keyed = measure(&exe, scrapes, &pids, PACE, ACCEPT, None)?;
        print_row(n, "--pids", &keyed);
        // As a Prometheus with native histograms scrapes it (the series
        // column is not counted in protobuf).
        let proto = measure(&exe, scrapes, &pids, PACE, ACCEPT_PROTOBUF, None)?;
        print_row(n, "proto", &proto);
        drop(sleepers);
        print_ratio(n, "ratio", &keyed, &plain);
        if keyed.unkeyed > 0.0 {
            println!(
                "          (--pids: {} waits unkeyed: the key map was full)",
                keyed.unkeyed
            );
        }
        // The same keys, idle: each sleeper waits once after serve starts
        // (so it has a key), then not again while the scrapes are timed.
        let idle = if opts.sleeper_processes {
            eprintln!("bench: starting {n} idle processes on CPU {other}");
            let sleepers = SleeperProcess::spawn(n, other, Sleeping::IdleProcesses)?;
            let idle = measure(&exe, scrapes, &pids, PACE, ACCEPT, Some(&sleepers))?;
            print_row(n, "idle", &idle);
            print_ratio(n, "ratio", &idle, &plain);
            Some(idle)
        } else {
            None
        };
        // The same number of keys per cgroup: every sleeper in a cgroup of
        // its own (`serve --cgroups` also reads the decision split's
        // per-key map).
        let cgroups = if opts.sleeper_processes {
            eprintln!("bench: starting {n} sleeping/waking processes, a cgroup each");
            let sleepers = SleeperProcess::spawn(n, other, opts.sleeping())?;
            let cgroups = OwnCgroups::create(&own_cgroups::children(sleepers.pid())?)?;
            let args = ["--cgroups", "--max-keys", &max_keys];
            let row = measure(&exe, scrapes, &args, PACE, ACCEPT, None)?;
            print_row(n, "--cgroups", &row);
            print_ratio(n, "ratio", &row, &plain);
            drop(sleepers);
            drop(cgroups);
            Some(row)
        } else {
            None
        };
        rows.push(Rows {
            n,
            active: keyed,
            idle,
            cgroups,
        });
    }
    print_scaling(&rows);
    // Processes: a push's keys are the --pids keys of as many processes.
    if opts.sleeper_processes {
        super::otlp_push::run(&exe, other, scrapes)?;
    }
    Ok(())
}

/// Tasks a row leaves room for beside its sleepers: serve's threads and
/// what else starts meanwhile.
const MARGIN: usize = 1_000;

/// Time from one `--pids` scrape's start to the next.
const PACE: Duration = Duration::from_secs(1);

/// `row` against `base`, column by column.
fn print_ratio(n: usize, what: &str, row: &Row, base: &Row) {
    println!(
        "{n:>8}  {what:<9}  {:>9.2} {:>9.2} {:>9.2} {:>9.2}  {:>13.2}  {:>11}  {:>9.1}",
        row.p50_us / base.p50_us,
        row.p99_us / base.p99_us,
        row.max_us / base.max_us,
        row.mean_us / base.mean_us,
        row.cpu_us / base.cpu_us,
        "",
        row.bytes as f64 / base.bytes as f64,
    );
}

/// One `--sleepers` value's rows that the scaling lines compare.
struct Rows {
    n: usize,
    /// `--pids`, every key waiting between two scrapes.
    active: Row,
    /// `--pids`, the keys idle.
    idle: Option<Row>,
    /// `--cgroups`, a cgroup per sleeper, every key waiting.
    cgroups: Option<Row>,
}

/// What a key costs a scrape in serve's CPU: an idle key (the slope of the
/// idle rows between task counts), a key that waited (the slope of the
/// `--pids` rows, whose every sleeper waits between two scrapes; and its
/// cost over an idle one at the same count), and a cgroup's key that
/// waited (the `--cgroups` rows' slope).
fn print_scaling(rows: &[Rows]) {
    let ns_per_key = |from: f64, to: f64, keys: usize| (to - from) * 1e3 / keys as f64;
    let slope = |r0: &Option<Row>, r1: &Option<Row>, more| match (r0, r1) {
        (Some(r0), Some(r1)) => format!("{:.0} ns", ns_per_key(r0.cpu_us, r1.cpu_us, more)),
        _ => "-".to_string(),
    };
    println!("serve CPU per key and scrape:");
    for pair in rows.windows(2) {
        let (r0, r1) = (&pair[0], &pair[1]);
        let Some(more) = r1.n.checked_sub(r0.n).filter(|&d| d > 0) else {
            continue;
        };
        println!(
            "  {} -> {} tasks: per idle key {}, per active key {:.0} ns, per active cgroup {}",
            r0.n,
            r1.n,
            slope(&r0.idle, &r1.idle, more),
            ns_per_key(r0.active.cpu_us, r1.active.cpu_us, more),
            slope(&r0.cgroups, &r1.cgroups, more),
        );
    }
    for r in rows {
        if let Some(idle) = &r.idle {
            println!(
                "  at {} tasks: a key that waited costs {:.0} ns more than an idle one",
                r.n,
                ns_per_key(idle.cpu_us, r.active.cpu_us, r.n)
            );
        }
    }
}

fn print_row(n: usize, serve: &str, row: &Row) {
    println!(
        "{n:>8}  {serve:<9}  {:>9.0} {:>9.0} {:>9.0} {:>9.0}  {:>13.0}  {:>11}  {:>9}  {:>6}  {:>10}",
        row.p50_us,
        row.p99_us,
        row.max_us,
        row.mean_us,
        row.cpu_us,
        row.own,
        row.bytes,
        row.series,
        row.programs
    );
}

struct Row {
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    mean_us: f64,
    /// serve's CPU time per scrape.
    cpu_us: f64,
    /// serve's own wall time per scrape (its
    /// `schedlat_last_scrape_duration_seconds`), p50/p99 in us; "-" where
    /// the body is protobuf.
    own: String,
    bytes: usize,
    /// Per-process series in the last body (overflow included).
    series: usize,
    /// schedlat_unkeyed_waits_total in the last body.
    unkeyed: f64,
    /// BPF programs on the host: serve lists them all for its own run-time
    /// counters, so this is what scales a scrape's syscalls (3 per program).
    programs: usize,
}

/// `pace`: the time from one scrape's start to the next's; `idle`: idle
/// sleepers, woken once after serve starts.
fn measure(
    exe: &std::path::Path,
    scrapes: u32,
    extra: &[&str],
    pace: Duration,
    accept: &str,
    idle: Option<&SleeperProcess>,
) -> Result<Row> {
    let server = Serve::start(exe, extra)?;
    let programs = aya::programs::loaded_programs().count();
    if let Some(sleepers) = idle {
        sleepers.wake()?;
    }
    // Every sleeper wakes once a second (or was just woken): by then each
    // has its key.
    thread::sleep(Duration::from_millis(1_500));
    let mut conn = Conn::open(server.addr, accept)?;
    // The first scrape also faults in the encoder's code and buffers.
    conn.scrape()?;
    thread::sleep(pace);
    let cpu_before = cpu_ns(server.pid())?;
    let mut latencies = Vec::with_capacity(scrapes as usize);
    let mut own = Vec::with_capacity(scrapes as usize);
    let mut body = Vec::new();
    for _ in 0..scrapes {
        let start = Instant::now();
        body = conn.scrape()?;
        latencies.push(start.elapsed().as_secs_f64() * 1e6);
        // The previous scrape's wall time inside serve: reading and
        // encoding, without the wait for a CPU before it starts.
        if let Some(seconds) = String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix("schedlat_last_scrape_duration_seconds "))
            .and_then(|v| v.trim().parse::<f64>().ok())
        {
            own.push(seconds * 1e6);
        }
        thread::sleep(pace.saturating_sub(start.elapsed()));
    }
    let text = String::from_utf8_lossy(&body);
    let series = text
        .lines()
        .filter(|l| {
            l.starts_with("schedlat_process_runqueue_latency_seconds_count{")
                || l.starts_with("schedlat_cgroup_runqueue_latency_seconds_count{")
        })
        .count();
    let unkeyed = text
        .lines()
        .find_map(|l| l.strip_prefix("schedlat_unkeyed_waits_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    let cpu_after = cpu_ns(server.pid())?;
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    own.sort_by(f64::total_cmp);
    let own = if own.is_empty() {
        "-".to_string()
    } else {
        let at = |q: f64| own[((own.len() - 1) as f64 * q).round() as usize];
        format!("{:.0}/{:.0}", at(0.5), at(0.99))
    };
    Ok(Row {
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
        mean_us: latencies.iter().sum::<f64>() / latencies.len() as f64,
        cpu_us: (cpu_after - cpu_before) as f64 / 1e3 / f64::from(scrapes),
        own,
        bytes: body.len(),
        series,
        unkeyed,
        programs,
    })
}
