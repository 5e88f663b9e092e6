//! Root integration tests of `schedlat serve`: its exposition checked by
//! promtool, scraped by a real Prometheus server whose p99 must agree with
//! schedlat's own histogram mode on a known load, and its errors and
//! signals. Every process is started and stopped here, and each test checks
//! that nothing listens on its ports afterwards.

mod common;

use std::{
    net::TcpListener,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{TestCgroup, busy_and_idle, v2_root},
    http::{self, nothing_listens},
    parse_json_lines,
    prometheus::{PROMTOOL, Prometheus, unix_now},
    require_root, run_schedlat,
    serve::Server,
    workload,
};

const HISTOGRAM: &str = "schedlat_runqueue_latency_seconds";
const PROCESS_HISTOGRAM: &str = "schedlat_process_runqueue_latency_seconds";
const CGROUP_HISTOGRAM: &str = "schedlat_cgroup_runqueue_latency_seconds";
const OVERFLOW: &str = "__overflow__";
/// What Prometheus 2.x sends (scrape.go, `scrapeAcceptHeader`).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// `fifo_blocker` waits: each victim wakeup waits HOLD on the run queue.
const HOLD: Duration = Duration::from_millis(3);
const GAP: Duration = Duration::from_millis(2);
/// ~8 s of load.
const ROUNDS: u32 = 1_600;

/// The value of an unlabelled sample line `name value` in an exposition.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The labelled samples `name{labels} value` of an exposition, as
/// (labels, value); `labels` is the text between the braces.
fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `promtool check metrics` (lint included) passes on `body`.
fn promtool_check(body: &str) {
    let mut promtool = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; `cargo xtask setup` installs it)");
    {
        use std::io::Write;
        let mut stdin = promtool.stdin.take().unwrap();
        stdin.write_all(body.as_bytes()).unwrap();
    }
    let checked = promtool.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(
        checked.status.success() && report.trim().is_empty(),
        "promtool check metrics: {}\n{report}\n{body}",
        checked.status,
    );
}

#[test]
fn exposition_passes_promtool_in_both_formats() {
    if !require_root() {
        return;
    }
    let server = Server::start(&[]);
    workload::ping_pong(workload::workload_cpu(), 2_000);

    // No Accept (curl, a browser): the classic text format, which promtool
    // checks, lint included.
    let text = http::get(server.addr, "/metrics", None).unwrap();
    assert_eq!(text.status, 200);
    assert_eq!(
        text.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let count = sample(&text.body, &format!("{HISTOGRAM}_count")).unwrap();
    assert!(count >= 2_000.0, "ping-pong waits counted: {}", text.body);
    assert_eq!(
        sample(&text.body, &format!("{HISTOGRAM}_bucket{{le=\"+Inf\"}}")),
        Some(count)
    );
    promtool_check(&text.body);

    // Prometheus' Accept header: OpenMetrics (promtool 2.42 cannot parse it;
    // the Prometheus test below scrapes it for real).
    let om = http::get(server.addr, "/metrics", Some(PROMETHEUS_ACCEPT)).unwrap();
    assert_eq!(
        om.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(om.body.ends_with("# EOF\n"), "{}", om.body);
    assert!(om.body.contains(&format!("# UNIT {HISTOGRAM} seconds\n")));

    let addr = server.addr;
    assert!(server.stop_with(libc::SIGTERM).success());
    assert!(nothing_listens(addr), "{addr} still accepts connections");
}

/// p99 of schedlat's own `--json` histogram (nearest rank, linear inside the
/// fine bucket), in seconds.
fn own_p99_seconds(record: &serde_json::Value) -> f64 {
    let count = record["count"].as_u64().unwrap();
    let rank = (count as f64 * 0.99).ceil() as u64;
    let mut below = 0;
    for b in record["buckets"].as_array().unwrap() {
        let n = b["count"].as_u64().unwrap();
        if below + n >= rank {
            let low = b["low_ns"].as_u64().unwrap() as f64;
            let high = b["high_ns"].as_u64().map_or(low, |h| h as f64 + 1.0);
            return (low + (high - low) * (rank - below) as f64 / n as f64) / 1e9;
        }
        below += n;
    }
    panic!("rank {rank} beyond {count} waits: {record}");
}

/// The acceptance test of the exporter: a real Prometheus scrapes `schedlat
/// serve` every second while a known load runs; its
/// `histogram_quantile(0.99, rate(..._bucket[W]))` over the load must agree
/// with the p99 that schedlat's histogram mode measures over the same load.
///
/// The load: a SCHED_FIFO thread keeps a CPU for 3 ms after waking a
/// lower-priority SCHED_FIFO thread there, every 5 ms: ~200 waits a second
/// of 3.0-3.1 ms, half of this process' waits, and no normal task can stretch
/// them. Both sides measure only this process (`-p`, which serve exports as a
/// `pid` label): the population is then the load, not whatever else the
/// machine runs. (A whole-system p99 moves with a compile in the background,
/// and the two sides' windows differ by up to a scrape interval at each end,
/// so on a busy machine they would measure different bursts.)
///
/// Tolerance, 25%: histogram_quantile interpolates linearly inside the `le`
/// bucket that holds the rank, and the exported buckets are a quarter of
/// their lower bound wide; schedlat's own estimate lies in the same bucket.
/// Both must also lie in 2-4 ms, the wait the load is built to produce.
#[test]
fn prometheus_p99_agrees_with_schedlat_histogram() {
    if !require_root() {
        return;
    }
    let me = std::process::id().to_string();
    // --pids: the per-process family too, queried below.
    let server = Server::start(&["-p", &me, "--pids"]);
    let prometheus = Prometheus::start(server.addr, "1s");
    let series = format!("{{job=\"schedlat\",pid=\"{me}\"}}");

    // Scraping works before the load starts.
    let deadline = Instant::now() + Duration::from_secs(15);
    while prometheus.query_value("up{job=\"schedlat\"}", None) != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped schedlat serve: {:?}\nPrometheus log:\n{}\nserve stderr:\n{}",
            prometheus.api("/api/v1/targets"),
            prometheus.log(),
            server.stderr()
        );
        thread::sleep(Duration::from_millis(200));
    }

    // The load, measured at the same time by schedlat's histogram mode.
    let own = TracerProcess::start(SCHEDLAT, &["--json", "-p", &me]);
    let started = unix_now();
    workload::fifo_blocker_fifo_victim(workload::workload_cpu(), HOLD, GAP, ROUNDS);
    let ended = unix_now();
    let (status, lines) = own.stop_with(libc::SIGINT);
    assert!(status.success());
    let records = parse_json_lines(&lines);
    let own_p99 = own_p99_seconds(&records[0]);

    // Wait for a scrape after the load ended, so the window is complete.
    let deadline = Instant::now() + Duration::from_secs(10);
    while prometheus
        .query_value(&format!("timestamp({HISTOGRAM}_count{series})"), None)
        .is_none_or(|t| t < ended)
    {
        assert!(Instant::now() < deadline, "no scrape after the load");
        thread::sleep(Duration::from_millis(200));
    }
    // The whole load but its first second, ending with it.
    let window = (ended - started).floor() as u64 - 1;
    let expr = format!("histogram_quantile(0.99, rate({HISTOGRAM}_bucket{series}[{window}s]))");
    let prom_p99 = prometheus
        .query_value(&expr, Some(ended))
        .unwrap_or_else(|| panic!("{expr}: no result"));
    let waits = prometheus
        .query_value(
            &format!("increase({HISTOGRAM}_count{series}[{window}s])"),
            Some(ended),
        )
        .unwrap();
    eprintln!(
        "p99: Prometheus {:.3} ms, schedlat {:.3} ms; {} waits in schedlat's histogram, ~{waits:.0} in Prometheus' {window} s window",
        prom_p99 * 1e3,
        own_p99 * 1e3,
        records[0]["count"]
    );
    assert!(
        (0.002..=0.004).contains(&own_p99),
        "schedlat's own p99 {own_p99} s is not the load's 3 ms: {}",
        records[0]
    );
    assert!(
        (0.002..=0.004).contains(&prom_p99),
        "Prometheus' p99 {prom_p99} s is not the load's 3 ms"
    );
    assert!(
        (prom_p99 - own_p99).abs() <= 0.25 * own_p99,
        "Prometheus p99 {prom_p99} s vs schedlat {own_p99} s: beyond one bucket"
    );

    // With -p, this process' own series holds the same waits as the total
    // (read a moment earlier in each scrape): the same p99.
    let per_process = format!(
        "histogram_quantile(0.99, rate({PROCESS_HISTOGRAM}_bucket{{job=\"schedlat\",pid=\"{me}\"}}[{window}s]))"
    );
    let process_p99 = prometheus
        .query_value(&per_process, Some(ended))
        .unwrap_or_else(|| panic!("{per_process}: no result"));
    assert!(
        (process_p99 - prom_p99).abs() <= 0.01 * prom_p99,
        "per-process p99 {process_p99} s vs total {prom_p99} s"
    );

    // Prometheus negotiated OpenMetrics: only that format carries units.
    let metadata = prometheus.api(&format!("/api/v1/metadata?metric={HISTOGRAM}"));
    assert_eq!(metadata[HISTOGRAM][0]["unit"], "seconds", "{metadata}");
    assert_eq!(metadata[HISTOGRAM][0]["type"], "histogram", "{metadata}");

    let (serve_addr, prometheus_addr) = (server.addr, prometheus.addr);
    drop(prometheus);
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(serve_addr) && nothing_listens(prometheus_addr));
}

#[test]
fn unparsable_listen_address_is_a_usage_error() {
    for bad in ["localhost:9415", "127.0.0.1", "127.0.0.1:65536", "nonsense"] {
        let (status, stdout, stderr) = run_schedlat(&["serve", "--listen", bad]);
        assert_eq!(status.code(), Some(2), "{bad}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("is not IP:PORT"), "{bad}: {stderr}");
    }
}

#[test]
fn port_in_use_and_foreign_address_fail_clearly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, _, stderr) = run_schedlat(&["serve", "--listen", &addr]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot listen on {addr}: the port is already in use"
        )),
        "{stderr}"
    );
    // Nothing was loaded: the bind comes first.
    assert!(!stderr.contains("hook mode"), "{stderr}");

    // TEST-NET-1 (RFC 5737) is nobody's address.
    let (status, _, stderr) = run_schedlat(&["serve", "--listen", "192.0.2.1:9415"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no interface of this machine"), "{stderr}");
}

#[test]
fn non_loopback_listen_is_announced() {
    if !require_root() {
        return;
    }
    let server = Server::start_on("0.0.0.0:0");
    assert!(
        server.stderr().contains("is reachable from other machines"),
        "{}",
        server.stderr()
    );
    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], addr.port()));
    assert!(nothing_listens(loopback));
}

/// Per-cgroup `_count` samples of a classic-text scrape, by cgroup label.
fn cgroup_counts(body: &str) -> Vec<(String, u64)> {
    samples(body, &format!("{CGROUP_HISTOGRAM}_count"))
        .into_iter()
        .map(|(labels, v)| {
            let path = labels
                .strip_prefix("cgroup=\"")
                .and_then(|l| l.strip_suffix('"'))
                .unwrap_or_else(|| panic!("unexpected labels {labels}"));
            (path.to_string(), v as u64)
        })
        .collect()
}

fn count_of(counts: &[(String, u64)], path: &str) -> Option<u64> {
    counts.iter().find(|(p, _)| p == path).map(|(_, n)| *n)
}

fn scrape_text(server: &Server) -> String {
    let got = http::get(server.addr, "/metrics", None).unwrap();
    assert_eq!(got.status, 200, "{}", got.body);
    got.body
}

/// `serve --cgroups` on the whole cgroup v2 hierarchy: two cgroups made
/// here, A with a CPU hog and a sleeper on one CPU, B with a sleeper on the
/// other, each get a series labelled with its path, with their waits; the
/// exposition passes promtool.
#[test]
fn cgroup_series_are_labelled_with_paths_and_pass_promtool() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let (a, b) = (
        TestCgroup::new(&root, "serve-a"),
        TestCgroup::new(&root, "serve-b"),
    );
    let server = Server::start(&["--cgroups", "-c", &root.to_string_lossy()]);
    let procs = busy_and_idle(&a, &b, 1);
    thread::sleep(Duration::from_secs(2));

    let body = scrape_text(&server);
    let counts = cgroup_counts(&body);
    for group in [&a, &b] {
        let n = count_of(&counts, &group.rel)
            .unwrap_or_else(|| panic!("no series for {}: {counts:?}", group.rel));
        assert!(n >= 50, "{}: {n} waits: {counts:?}", group.rel);
        let inf = samples(&body, &format!("{CGROUP_HISTOGRAM}_bucket"))
            .into_iter()
            .find(|(l, _)| *l == format!("cgroup=\"{}\",le=\"+Inf\"", group.rel))
            .map(|(_, v)| v as u64);
        assert_eq!(inf, Some(n), "{}: +Inf bucket", group.rel);
    }
    // Nothing overflowed (the default limit is 1000) and the key map holds
    // every key.
    assert_eq!(count_of(&counts, OVERFLOW), Some(0), "{counts:?}");
    assert_eq!(sample(&body, "schedlat_overflow_keys_total"), Some(0.0));
    assert_eq!(sample(&body, "schedlat_unkeyed_waits_total"), Some(0.0));
    promtool_check(&body);

    drop(procs);
    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(addr));
}

/// `--max-series 1` on a parent cgroup holding two test cgroups: exactly one
/// keyed series, the other group's waits in the overflow series. Checked
/// exactly once the load has ended, against a second serve without a limit
/// attached to the same waits, and against the total. Then both groups are
/// removed: the first scrape still exports them, the next drops the keyed
/// series, and the overflow series keeps its count (it never goes down).
#[test]
fn max_series_folds_the_other_keys_into_the_overflow_series() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let parent = TestCgroup::new(&root, "serve-limit");
    let (a, b) = (
        TestCgroup::new(&root, "serve-limit/a"),
        TestCgroup::new(&root, "serve-limit/b"),
    );
    let limited = Server::start(&["--cgroups", "-c", &parent.path(), "--max-series", "1"]);
    let full = Server::start(&["--cgroups", "-c", &parent.path()]);
    let procs = busy_and_idle(&a, &b, 1);
    thread::sleep(Duration::from_secs(2));

    // While the load runs: one keyed series, one overflow, one folded key.
    let running = cgroup_counts(&scrape_text(&limited));
    assert_eq!(running.len(), 2, "{running:?}");
    assert_eq!(running[1].0, OVERFLOW, "{running:?}");
    assert!(running[1].1 > 0, "{running:?}");

    // The load ends; a killed shell's last `sleep` may still run a moment.
    drop(procs);
    a.wait_empty();
    b.wait_empty();
    thread::sleep(Duration::from_millis(100));

    let body = scrape_text(&limited);
    promtool_check(&body);
    let counts = cgroup_counts(&body);
    let total = sample(&body, &format!("{HISTOGRAM}_count")).unwrap() as u64;
    let unkeyed = sample(&body, "schedlat_unkeyed_waits_total").unwrap() as u64;
    let unlimited = cgroup_counts(&scrape_text(&full));
    assert_eq!(counts.len(), 2, "{counts:?}");
    let (shown, shown_n) = counts[0].clone();
    let overflow = count_of(&counts, OVERFLOW).unwrap();
    let other = if shown == a.rel { &b.rel } else { &a.rel };
    assert!(shown == a.rel || shown == b.rel, "{counts:?}");
    assert_eq!(
        sample(&body, "schedlat_overflow_keys_total"),
        Some(1.0),
        "{body}"
    );
    // The same waits, seen by the unlimited serve: the shown group's count,
    // and the other group's in the overflow series.
    assert_eq!(count_of(&unlimited, &shown), Some(shown_n), "{unlimited:?}");
    assert_eq!(count_of(&unlimited, other), Some(overflow), "{unlimited:?}");
    assert!(shown_n >= 50 && overflow >= 50, "{counts:?}");
    // Every wait of the total is in exactly one series, or unkeyed.
    assert_eq!(unkeyed, 0);
    assert_eq!(shown_n + overflow + unkeyed, total, "{counts:?}");

    // Remove both groups: exported once more (no wait since the last
    // scrape, so deleted now), then the keyed series is gone and overflow
    // keeps its count.
    drop(b);
    drop(a);
    let again = cgroup_counts(&scrape_text(&limited));
    assert_eq!(again, counts);
    let after = cgroup_counts(&scrape_text(&limited));
    assert_eq!(after, [(OVERFLOW.to_string(), overflow)]);

    let (l, f) = (limited.addr, full.addr);
    assert!(limited.stop_with(libc::SIGINT).success());
    assert!(full.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(l) && nothing_listens(f));
    drop(parent);
}
