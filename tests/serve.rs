//! Root integration tests of `schedlat serve`: its exposition checked by
//! promtool, scraped by a real Prometheus server whose p99 must agree with
//! schedlat's own histogram mode on a known load, and its errors and
//! signals. Every process is started and stopped here, and each test checks
//! that nothing listens on its ports afterwards.

use std::{
    net::TcpListener,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{TestCgroup, busy_and_idle, v2_root},
    cpu::CpuTimes,
    exposition::{promtool_check, sample, samples},
    http::{self, nothing_listens},
    parse_json_lines,
    prometheus::{Prometheus, unix_now},
    require_root, run_schedlat,
    serve::Server,
    sleeper, workload,
};

use crate::common;

const HISTOGRAM: &str = "schedlat_runqueue_latency_seconds";
const PROCESS_HISTOGRAM: &str = "schedlat_process_runqueue_latency_seconds";
const CGROUP_HISTOGRAM: &str = "schedlat_cgroup_runqueue_latency_seconds";
const OVERFLOW: &str = "__overflow__";
/// The cause split's waits (export/families/cause_split.rs), whole system and per cgroup.
const BY_CAUSE: &str = "schedlat_runqueue_waits_by_cause_total";
const CGROUP_BY_CAUSE: &str = "schedlat_cgroup_runqueue_waits_by_cause_total";
/// The decision split's waits per cgroup (export/families/decision.rs).
const CGROUP_BY_DECISION: &str = "schedlat_cgroup_runqueue_waits_by_decision_total";
/// What Prometheus 2.x sends (scrape.go, `scrapeAcceptHeader`).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// `fifo_blocker` waits: each victim wakeup waits HOLD on the run queue.
const HOLD: Duration = Duration::from_millis(3);
const GAP: Duration = Duration::from_millis(2);
/// ~8 s of load.
const ROUNDS: u32 = 1_600;

/// The sum of `name`'s samples whose labels contain `with` and
/// `split="SPLIT"`, per split: every wait is in one cause of each, so
/// each sum is the histogram's count.
fn split_sums(text: &str, name: &str, with: &str) -> Vec<(&'static str, f64)> {
    ["began", "placement", "held_by", "queue_depth"]
        .into_iter()
        .map(|split| {
            let label = format!("split=\"{split}\"");
            let sum = samples(text, name)
                .into_iter()
                .filter(|(l, _)| l.contains(with) && l.contains(&label))
                .map(|(_, v)| v)
                .sum();
            (split, sum)
        })
        .collect()
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
    // The cause split (issue 15): each split adds up to the waits of the
    // histogram, read a moment apart (a few waits may end in between).
    for (split, sum) in split_sums(&text.body, BY_CAUSE, "") {
        assert!(
            (sum - count).abs() <= count * 0.01 + 10.0,
            "split {split}: {sum} waits against {count}: {}",
            text.body
        );
    }
    assert!(
        sample(
            &text.body,
            "schedlat_runqueue_wait_overlap_measured_waits_total"
        )
        .is_some(),
        "{}",
        text.body
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

/// Waits until Prometheus has scraped serve once (scraping works before
/// any load starts).
fn wait_for_first_scrape(prometheus: &Prometheus, server: &Server) {
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
}

/// The load of the Prometheus tests, measured at the same time by
/// schedlat's histogram mode for this process: its window (Unix seconds),
/// schedlat's interval record and its p99 in seconds, which must be the
/// load's 3 ms, and how busy the CPUs were meanwhile (for the messages:
/// the load's FIFO waits do not depend on the rest of the machine, but
/// Prometheus' scrapes and this process' other threads do).
struct Load {
    started: f64,
    ended: f64,
    record: serde_json::Value,
    own_p99: f64,
    busy: String,
}

fn measured_load(me: &str) -> Load {
    let own = TracerProcess::start(SCHEDLAT, &["--json", "-p", me]);
    let started = unix_now();
    let cpus = CpuTimes::now();
    workload::fifo_blocker_fifo_victim(workload::workload_cpu(), HOLD, GAP, ROUNDS);
    let busy = cpus.busy_since();
    let ended = unix_now();
    let (status, lines) = own.stop_with(libc::SIGINT);
    assert!(status.success());
    let record = parse_json_lines(&lines).swap_remove(0);
    let own_p99 = own_p99_seconds(&record);
    assert!(
        (0.002..=0.004).contains(&own_p99),
        "schedlat's own p99 {own_p99} s is not the load's 3 ms ({busy}): {record}"
    );
    Load {
        started,
        ended,
        record,
        own_p99,
        busy,
    }
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
    wait_for_first_scrape(&prometheus, &server);

    // The load, measured at the same time by schedlat's histogram mode.
    let Load {
        started,
        ended,
        record,
        own_p99,
        busy,
    } = measured_load(&me);

    // Wait for a scrape after the load ended, so the window is complete.
    let deadline = Instant::now() + Duration::from_secs(10);
    while prometheus
        .query_value(&format!("timestamp({HISTOGRAM}_count{series})"), None)
        .is_none_or(|t| t < ended)
    {
        assert!(
            Instant::now() < deadline,
            "no scrape after the load ({busy})"
        );
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
        record["count"]
    );
    // The load's own p99 is already held to 2-4 ms above; Prometheus' is
    // held to it, not to that range again: a load at 3.8 ms plus the
    // bucket interpolation (up to a quarter) can read just over 4 ms.
    assert!(
        (prom_p99 - own_p99).abs() <= 0.25 * own_p99,
        "Prometheus p99 {prom_p99} s vs schedlat {own_p99} s: beyond one bucket ({busy})"
    );

    // The per-process family (the default --key-buckets slo: one bucket per
    // power of two, narrow ones only at 0.5, 1, 2, 5, 10 and 50 ms, none of
    // them the load's 3 ms): its p99 lies in the same power of two as the
    // true one, so within a factor of two of schedlat's own (the error its
    // HELP states away from those thresholds).
    let per_process = format!(
        "histogram_quantile(0.99, sum by (le) (rate({PROCESS_HISTOGRAM}_bucket{{job=\"schedlat\",pid=\"{me}\"}}[{window}s])))"
    );
    let process_p99 = prometheus
        .query_value(&per_process, Some(ended))
        .unwrap_or_else(|| panic!("{per_process}: no result"));
    eprintln!("per-process p99 (slo buckets): {:.3} ms", process_p99 * 1e3);
    assert!(
        (0.5 * own_p99..=2.0 * own_p99).contains(&process_p99),
        "per-process p99 {process_p99} s vs schedlat {own_p99} s: beyond a factor of two ({busy})"
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
    let (status, _, stderr) = run_schedlat(&[
        "serve",
        "--listen",
        "192.0.2.1:9415",
        "--web.allow-unauthenticated",
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no interface of this machine"), "{stderr}");
}

/// A listener other machines can reach answers anyone, and serve has no
/// authentication: refused (exit 2, before anything is loaded) unless
/// `--web.allow-unauthenticated` says the network decides, then announced.
#[test]
fn non_loopback_listen_needs_an_explicit_opt_out_and_is_announced() {
    if !require_root() {
        return;
    }
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let (status, _, stderr) = run_schedlat(&["serve", "--listen", listen]);
        assert_eq!(status.code(), Some(2), "{listen}: {stderr}");
        assert!(
            stderr.contains("reachable from other machines")
                && stderr.contains("--web.allow-unauthenticated"),
            "{listen}: {stderr}"
        );
    }
    let mut cmd = std::process::Command::new(common::SCHEDLAT);
    cmd.args([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--web.allow-unauthenticated",
    ]);
    let server = Server::start_command(cmd);
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

/// Prometheus' protobuf Accept header with native histograms on (2.42,
/// `scrapeAcceptHeaderWithProtobuf`).
const PROTOBUF_ACCEPT: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The stated worst errors of a percentile from the native histograms
/// (schema 3): the total, from the kernel's buckets, and the per-key
/// family in the default `--key-buckets slo` (as `log2`'s: its worst
/// source bucket is a whole power of two). The HELP states them too.
const NATIVE_TOTAL_ERROR: f64 = 0.122;
const NATIVE_SLO_ERROR: f64 = 0.397;

/// The native-histogram path, end to end: a real Prometheus with
/// `--enable-feature=native-histograms` asks for protobuf, stores the
/// histograms as native ones, and its `histogram_quantile(0.99, ...)` over
/// them agrees with schedlat's own p99 of the same load within the stated
/// re-bucketing error: for the whole (here: this process') total and for
/// the per-process series of `--pids`.
///
/// The load and the comparison are those of the classic test above: ~3 ms
/// waits from a SCHED_FIFO blocker, measured by both sides for this process
/// only (`-p`).
#[test]
fn prometheus_native_histograms_give_the_p99_within_the_stated_error() {
    if !require_root() {
        return;
    }
    let me = std::process::id().to_string();
    let server = Server::start(&["-p", &me, "--pids"]);

    // Asked for protobuf, serve answers it.
    let got = http::get(server.addr, "/metrics", Some(PROTOBUF_ACCEPT)).unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(
        got.header("content-type"),
        Some(
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
        )
    );
    assert!(!got.body.is_empty());

    let prometheus = Prometheus::start_with(server.addr, "1s", &["native-histograms"]);
    let series = format!("{{job=\"schedlat\",pid=\"{me}\"}}");
    wait_for_first_scrape(&prometheus, &server);

    let Load {
        started,
        ended,
        own_p99,
        busy,
        ..
    } = measured_load(&me);

    let deadline = Instant::now() + Duration::from_secs(10);
    while prometheus
        .query_value(&format!("timestamp({HISTOGRAM}{series})"), None)
        .is_none_or(|t| t < ended)
    {
        assert!(
            Instant::now() < deadline,
            "no scrape after the load ({busy}); Prometheus log:\n{}",
            prometheus.log()
        );
        thread::sleep(Duration::from_millis(200));
    }

    // Stored as native histograms: a raw sample is a histogram, not a
    // value, and there are no classic `_bucket` series.
    let raw = prometheus.query(&format!("{HISTOGRAM}{series}"), Some(ended));
    assert_eq!(raw.len(), 1, "{raw:?}");
    assert!(raw[0].get("histogram").is_some(), "not native: {raw:?}");
    assert!(
        prometheus
            .query(&format!("{HISTOGRAM}_bucket{series}"), Some(ended))
            .is_empty()
    );

    let window = (ended - started).floor() as u64 - 1;
    let total_expr = format!("histogram_quantile(0.99, rate({HISTOGRAM}{series}[{window}s]))");
    let total_p99 = prometheus
        .query_value(&total_expr, Some(ended))
        .unwrap_or_else(|| panic!("{total_expr}: no result"));
    let key_expr = format!(
        "histogram_quantile(0.99, sum(rate({PROCESS_HISTOGRAM}{{job=\"schedlat\",pid=\"{me}\"}}[{window}s])))"
    );
    let key_p99 = prometheus
        .query_value(&key_expr, Some(ended))
        .unwrap_or_else(|| panic!("{key_expr}: no result"));
    eprintln!(
        "native p99: total {:.3} ms, per-process {:.3} ms; schedlat {:.3} ms",
        total_p99 * 1e3,
        key_p99 * 1e3,
        own_p99 * 1e3
    );
    assert!(
        (total_p99 - own_p99).abs() <= NATIVE_TOTAL_ERROR * own_p99,
        "native total p99 {total_p99} s vs schedlat {own_p99} s: beyond {NATIVE_TOTAL_ERROR} ({busy})"
    );
    assert!(
        (key_p99 - own_p99).abs() <= NATIVE_SLO_ERROR * own_p99,
        "native per-process p99 {key_p99} s vs schedlat {own_p99} s: beyond {NATIVE_SLO_ERROR} ({busy})"
    );
    // The HELP states those errors.
    let metadata = prometheus.api(&format!("/api/v1/metadata?metric={HISTOGRAM}"));
    let help = metadata[HISTOGRAM][0]["help"].as_str().unwrap_or_default();
    assert!(help.contains("within 12.2%"), "{metadata}");

    let (serve_addr, prometheus_addr) = (server.addr, prometheus.addr);
    drop(prometheus);
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(serve_addr) && nothing_listens(prometheus_addr));
}

/// Per-cgroup `_count` samples of a classic-text scrape, by cgroup label
/// (the first label; `scope` follows it under -c).
fn cgroup_counts(body: &str) -> Vec<(String, u64)> {
    samples(body, &format!("{CGROUP_HISTOGRAM}_count"))
        .into_iter()
        .map(|(labels, v)| {
            let path = labels
                .strip_prefix("cgroup=\"")
                .and_then(|l| l.split_once('"'))
                .map(|(path, _)| path)
                .unwrap_or_else(|| panic!("unexpected labels {labels}"));
            (path.to_string(), v as u64)
        })
        .collect()
}

fn count_of(counts: &[(String, u64)], path: &str) -> Option<u64> {
    counts.iter().find(|(p, _)| p == path).map(|(_, n)| *n)
}

/// `serve --cgroups --cgroup-splits full` on the whole cgroup v2
/// hierarchy: two cgroups made here, A with a CPU hog and a sleeper on one
/// CPU, B with a sleeper on the other, each get a series labelled with its
/// path, with their waits and their cause and decision splits; the
/// exposition passes promtool. Beside it the default `serve --cgroups`
/// (`--cgroup-splits alerting`): the splits' seconds the mixin reads, the
/// same waits, gzip-compressed when asked.
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
    let c = root.to_string_lossy();
    let server = Server::start(&["--cgroups", "-c", &c, "--cgroup-splits", "full"]);
    let alerting = Server::start(&["--cgroups", "-c", &c]);
    let procs = busy_and_idle(&a, &b, 1);
    thread::sleep(Duration::from_secs(2));

    let body = server.scrape_text();
    let gzipped =
        http::get_with(alerting.addr, "/metrics", &[("Accept-Encoding", "gzip")]).unwrap();
    // A scrape writes the keys that waited since the last one (and a key
    // whose names are pending waits one scrape): a scrape right after the
    // gzip one found the idle group's sleeper with no new wait about half
    // the time, and so no series for it.
    thread::sleep(Duration::from_millis(500));
    let defaults = alerting.scrape_text();
    let counts = cgroup_counts(&body);
    for group in [&a, &b] {
        let n = count_of(&counts, &group.rel)
            .unwrap_or_else(|| panic!("no series for {}: {counts:?}", group.rel));
        assert!(n >= 50, "{}: {n} waits: {counts:?}", group.rel);
        // -c is a filter: the series say so.
        let labels = format!(
            "cgroup=\"{}\",scope=\"cgroup={}\",le=\"+Inf\"",
            group.rel,
            root.display()
        );
        let inf = samples(&body, &format!("{CGROUP_HISTOGRAM}_bucket"))
            .into_iter()
            .find(|(l, _)| *l == labels)
            .map(|(_, v)| v as u64);
        assert_eq!(inf, Some(n), "{}: +Inf bucket", group.rel);
        // The cause split of the same series (issue 15): read with the
        // histogram from one kernel value, so every split adds up exactly.
        let key = format!("cgroup=\"{}\",scope=", group.rel);
        for (split, sum) in split_sums(&body, CGROUP_BY_CAUSE, &key) {
            assert_eq!(sum as u64, n, "{}: split {split}: {body}", group.rel);
        }
        // The decision split of the same series (issue 24), from a map of
        // its own read right after the histograms: each split adds up to
        // the series' waits plus those that ended between the two reads
        // (a few on a quiet machine: 5 of 1,594 were seen under CI, whose
        // read walks every key of the hierarchy; 1% plus 4 bounds it).
        for split in ["outcome", "decision", "passes", "holder"] {
            let label = format!("split=\"{split}\"");
            let sum: f64 = samples(&body, CGROUP_BY_DECISION)
                .into_iter()
                .filter(|(l, _)| l.contains(&key) && l.contains(&label))
                .map(|(_, v)| v)
                .sum();
            let sum = sum as u64;
            assert!(
                sum >= n && sum <= n + n / 100 + 4,
                "{}: decision split {split} {sum} of {n} waits: {body}",
                group.rel
            );
        }
    }
    // A's waits (the hog's and the sleeper's on one CPU) include
    // preemptions; B's sleeper alone on its CPU is woken.
    let began = |group: &TestCgroup, cause: &str| {
        let labels = format!(
            "cgroup=\"{}\",scope=\"cgroup={}\",split=\"began\",cause=\"{cause}\"",
            group.rel,
            root.display()
        );
        samples(&body, CGROUP_BY_CAUSE)
            .into_iter()
            .find(|(l, _)| *l == labels)
            .map_or(0.0, |(_, v)| v)
    };
    assert!(began(&a, "preempted") > 0.0, "{body}");
    assert!(began(&b, "woken") > began(&b, "preempted"), "{body}");
    alerting_splits_per_cgroup(&defaults, &[&a, &b]);
    gzip_decodes_to_the_text(&gzipped, &defaults);
    // Nothing overflowed (the default limit is 100): no overflow series;
    // and the key map holds every key.
    assert_eq!(count_of(&counts, OVERFLOW), None, "{counts:?}");
    assert_eq!(sample(&body, "schedlat_overflow_keys"), Some(0.0));
    assert_eq!(
        sample(&body, "schedlat_keyed_series"),
        Some(counts.len() as f64)
    );
    assert_eq!(sample(&body, "schedlat_unkeyed_waits_total"), Some(0.0));
    promtool_check(&body);

    drop(procs);
    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(addr));
}

/// The default per-cgroup splits (`--cgroup-splits alerting`): no counts
/// families, the held_by split's seconds adding up to each series' time
/// (one kernel value: exactly, to the printed digits), the decision split
/// by outcome and rule only and without the classes this EEVDF kernel
/// cannot produce; the total keeps every split.
fn alerting_splits_per_cgroup(body: &str, groups: &[&TestCgroup]) {
    const SECONDS_BY_CAUSE: &str = "schedlat_cgroup_runqueue_wait_by_cause_seconds_total";
    const SECONDS_BY_DECISION: &str = "schedlat_cgroup_runqueue_wait_by_decision_seconds_total";
    for absent in [
        CGROUP_BY_CAUSE,
        CGROUP_BY_DECISION,
        "schedlat_cgroup_runqueue_wait_overlap_measured_waits_total",
    ] {
        assert!(!body.contains(absent), "{absent} in {body}");
    }
    for group in groups {
        let key = format!("cgroup=\"{}\",", group.rel);
        let sum = samples(body, &format!("{CGROUP_HISTOGRAM}_sum"))
            .into_iter()
            .find(|(l, _)| l.starts_with(&key))
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {} series: {body}", group.rel));
        let of = |name: &str| -> Vec<(String, f64)> {
            (samples(body, name).into_iter())
                .filter(|(l, _)| l.starts_with(&key))
                .collect()
        };
        let by_cause = of(SECONDS_BY_CAUSE);
        assert!(
            by_cause
                .iter()
                .all(|(l, _)| l.contains("split=\"held_by\"")),
            "{by_cause:?}"
        );
        let held: f64 = by_cause.iter().map(|(_, v)| v).sum();
        assert!(
            (held - sum).abs() <= 1e-6 + sum * 1e-6,
            "{}: held_by {held} s of {sum} s",
            group.rel
        );
        let by_decision = of(SECONDS_BY_DECISION);
        assert!(
            (by_decision.iter())
                .all(|(l, _)| l.contains("split=\"outcome\"") || l.contains("split=\"decision\"")),
            "{by_decision:?}"
        );
        assert!(!by_decision.is_empty(), "{body}");
    }
    // EEVDF (6.6+) has no wakeup granularity: no such class per cgroup,
    // and the total keeps it (at 0).
    if common::kernel::kernel_version() >= (6, 6) {
        let has_class = |name: &str| {
            (samples(body, name).into_iter())
                .any(|(l, _)| l.contains("class=\"wakeup_granularity\""))
        };
        assert!(!has_class(SECONDS_BY_DECISION), "{body}");
        assert!(
            has_class("schedlat_runqueue_wait_by_decision_seconds_total"),
            "{body}"
        );
    }
    assert!(
        (samples(body, BY_CAUSE).into_iter()).any(|(l, _)| l.contains("split=\"queue_depth\"")),
        "{body}"
    );
    promtool_check(body);
}

/// A scrape asked for with `Accept-Encoding: gzip` (as Prometheus asks)
/// comes compressed and decodes to the same exposition as a plain one.
fn gzip_decodes_to_the_text(gzipped: &http::Response, text: &str) {
    use std::io::Read;
    assert_eq!(gzipped.status, 200);
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    let mut decoded = String::new();
    flate2::read::GzDecoder::new(gzipped.bytes.as_slice())
        .read_to_string(&mut decoded)
        .expect("a gzip stream");
    assert!(
        gzipped.bytes.len() * 4 < decoded.len(),
        "{} bytes for {} of text",
        gzipped.bytes.len(),
        decoded.len()
    );
    // The same families, scraped a moment apart.
    let names = |body: &str| -> Vec<String> {
        (body.lines())
            .filter(|l| l.starts_with("# TYPE"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(names(&decoded), names(text));
}

/// Every series' last value, across scrapes: Prometheus keeps a series'
/// last sample while it is left out.
#[derive(Default)]
struct LastValues(std::collections::BTreeMap<String, u64>);

impl LastValues {
    /// Takes a scrape's series; none went down (no false counter reset).
    fn update(&mut self, counts: &[(String, u64)]) {
        for (name, n) in counts {
            let before = self.0.insert(name.clone(), *n).unwrap_or(0);
            assert!(*n >= before, "{name} went down: {before} -> {n}");
        }
    }

    fn sum(&self) -> u64 {
        self.0.values().sum()
    }
}

/// `--max-series 1` on a parent cgroup holding two test cgroups, A busy
/// (a hog and a sleeper on one CPU) and B idle (a sleeper): in each scrape
/// the group that waited most since the previous one gets the series, the
/// other's new waits go to the overflow series. Across scrapes no series
/// goes down, and the last value of every series, plus overflow (which
/// counts the unkeyed waits too), is the total; a second serve without a limit sees the same
/// waits. With `--pin B` B has a series in every scrape. Then both groups
/// are removed: idle and gone, they are left out, overflow keeps its count.
#[test]
fn max_series_ranks_by_wait_pins_and_accounts_for_every_wait() {
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
    let pinned = Server::start(&[
        "--cgroups",
        "-c",
        &parent.path(),
        "--max-series",
        "1",
        "--pin",
        &b.rel,
    ]);
    let full = Server::start(&["--cgroups", "-c", &parent.path()]);
    let procs = busy_and_idle(&a, &b, 1);

    let mut last = LastValues::default();
    let mut overflowed = 0;
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(400));
        let body = limited.scrape_text();
        let counts = cgroup_counts(&body);
        last.update(&counts);
        let keyed: Vec<_> = counts.iter().filter(|(p, _)| p != OVERFLOW).collect();
        assert!(keyed.len() <= 1, "{counts:?}");
        let folded = sample(&body, "schedlat_overflow_keys").unwrap();
        overflowed += folded as u64;
        // Keys are read before the total, and overflow is the rest of it:
        // never more than the total, at any scrape.
        let total = samples(&body, &format!("{HISTOGRAM}_count"))[0].1 as u64;
        assert!(last.sum() <= total, "{:?} > {total}", last.0);
        assert_eq!(
            sample(&body, "schedlat_keyed_series"),
            Some(counts.len() as f64)
        );
        let pinned_counts = cgroup_counts(&pinned.scrape_text());
        assert!(
            count_of(&pinned_counts, &b.rel).is_some(),
            "pinned {} missing: {pinned_counts:?}",
            b.rel
        );
    }
    assert!(overflowed > 0, "both groups wait: one overflowed");

    // The load ends; a killed shell's last `sleep` may still run a moment.
    drop(procs);
    a.wait_empty();
    b.wait_empty();
    thread::sleep(Duration::from_millis(100));

    let body = limited.scrape_text();
    promtool_check(&body);
    let counts = cgroup_counts(&body);
    last.update(&counts);
    let total = samples(&body, &format!("{HISTOGRAM}_count"))[0].1 as u64;
    let unkeyed = sample(&body, "schedlat_unkeyed_waits_total").unwrap() as u64;
    let overflow = count_of(&counts, OVERFLOW).expect("something overflowed");
    assert_eq!(unkeyed, 0);
    // Every wait of the total is in exactly one series.
    assert_eq!(last.sum(), total, "{:?}", last.0);
    let unlimited = cgroup_counts(&full.scrape_text());
    let both = count_of(&unlimited, &a.rel).unwrap() + count_of(&unlimited, &b.rel).unwrap();
    assert_eq!(both, last.sum(), "{unlimited:?} vs {:?}", last.0);
    assert!(overflow >= 50, "{:?}", last.0);

    // Remove both groups: idle and gone, they are left out and deleted;
    // overflow keeps its count.
    drop(b);
    drop(a);
    for _ in 0..2 {
        let after = cgroup_counts(&limited.scrape_text());
        assert_eq!(after, [(OVERFLOW.to_string(), overflow)]);
    }

    let addrs = [limited.addr, pinned.addr, full.addr];
    for server in [limited, pinned, full] {
        assert!(server.stop_with(libc::SIGINT).success());
    }
    assert!(addrs.iter().all(|&a| nothing_listens(a)));
    drop(parent);
}

/// `serve --pids` while processes come and go: two shell loops under a
/// test cgroup start a `sleep` every 5 ms, each a key that waits a few
/// times and exits, and `--max-series 3` keeps most of them in overflow.
/// At every scrape no series goes down (no false counter reset), and the
/// last value of every series seen (overflow counts the unkeyed waits) is
/// at most the total (the keys are read before the total); once the load
/// stops, exactly the total. After the load, the idle processes are left out: only overflow
/// is exported.
#[test]
fn pids_come_and_go_without_false_resets_and_add_up_to_the_total() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let parent = TestCgroup::new(&root, "serve-churn");
    let (a, b) = (
        TestCgroup::new(&root, "serve-churn/a"),
        TestCgroup::new(&root, "serve-churn/b"),
    );
    let server = Server::start(&["--pids", "-c", &parent.path(), "--max-series", "3"]);
    let procs = busy_and_idle(&a, &b, 1);

    let counts = |body: &str| -> Vec<(String, u64)> {
        samples(body, &format!("{PROCESS_HISTOGRAM}_count"))
            .into_iter()
            .map(|(labels, v)| (labels, v as u64))
            .collect()
    };
    let total = |body: &str| samples(body, &format!("{HISTOGRAM}_count"))[0].1 as u64;
    let mut last = LastValues::default();
    let mut scrapes = 0;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(250));
        let body = server.scrape_text();
        let now = counts(&body);
        last.update(&now);
        let keyed = now.iter().filter(|(l, _)| !l.contains(OVERFLOW)).count();
        assert!(keyed <= 3, "{now:?}");
        assert!(
            last.sum() <= total(&body),
            "series {} > total {}",
            last.sum(),
            total(&body)
        );
        scrapes += 1;
    }
    let seen = last.0.keys().filter(|l| !l.contains(OVERFLOW)).count();
    assert!(
        seen > 3,
        "processes came and went: {seen} had a series in {scrapes} scrapes"
    );

    drop(procs);
    a.wait_empty();
    b.wait_empty();
    thread::sleep(Duration::from_millis(100));
    let body = server.scrape_text();
    last.update(&counts(&body));
    assert_eq!(last.sum(), total(&body), "{:?}", last.0);
    // Idle, and gone: left out; only overflow is exported.
    for _ in 0..3 {
        let body = server.scrape_text();
        let now = counts(&body);
        last.update(&now);
        assert!(now.iter().all(|(l, _)| l.contains(OVERFLOW)), "{now:?}");
    }
    promtool_check(&server.scrape_text());

    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(addr));
    drop((a, b, parent));
}

/// Under a filter every histogram series is labelled with its scope, and
/// passes promtool; the per-process family with it too.
#[test]
fn filtered_series_are_labelled_with_their_scope() {
    if !require_root() {
        return;
    }
    let cpu = workload::workload_cpu().to_string();
    let server = Server::start(&["--cpu", &cpu, "--pids"]);
    workload::ping_pong(workload::workload_cpu(), 1_000);
    let body = server.scrape_text();
    let scope = format!("scope=\"cpu={cpu}\"");
    let total = samples(&body, &format!("{HISTOGRAM}_count"));
    assert_eq!(total.len(), 1, "{body}");
    assert_eq!(total[0].0, scope, "{body}");
    let keyed = samples(&body, &format!("{PROCESS_HISTOGRAM}_count"));
    assert!(!keyed.is_empty(), "{body}");
    assert!(keyed.iter().all(|(l, _)| l.ends_with(&scope)), "{keyed:?}");
    promtool_check(&body);
    // serve's own cost, from the previous scrape.
    let body = server.scrape_text();
    assert!(sample(&body, "schedlat_last_scrape_body_bytes").unwrap() > 1_000.0);
    assert!(sample(&body, "schedlat_last_scrape_duration_seconds").unwrap() > 0.0);
    assert_eq!(sample(&body, "schedlat_scrapes_total"), Some(2.0));
    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(addr));
}

/// `serve -p PID` keeps serving when the target exits, and says so.
#[test]
fn serve_keeps_serving_when_the_target_exits() {
    if !require_root() {
        return;
    }
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = target.id().to_string();
    let server = Server::start(&["-p", &pid]);
    assert_eq!(
        sample(&server.scrape_text(), "schedlat_target_alive"),
        Some(1.0)
    );
    target.kill().unwrap();
    target.wait().unwrap();
    thread::sleep(Duration::from_millis(1_200));
    let body = server.scrape_text();
    assert_eq!(sample(&body, "schedlat_target_alive"), Some(0.0), "{body}");
    assert!(
        server.stderr().contains("still serving"),
        "{}",
        server.stderr()
    );
    let addr = server.addr;
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(addr));
}

/// `serve --ring`: after a few seconds with waits (a sleeper among CPU
/// hogs), `POST /snapshot` answers 202 with the dump's directory, written
/// off the serving thread, which `replay` reads back as per-second
/// intervals with those waits; `/metrics` still answers; GET is refused.
#[test]
fn post_snapshot_dumps_the_flight_recorder() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-serve-ring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let before_ns = (unix_now() * 1e9) as u64;
    let server = Server::start(&[
        "--ring",
        "30s",
        "--dump-dir",
        dir.to_str().unwrap(),
        "--slow-threshold",
        "1ms",
        "--web.enable-snapshot",
    ]);
    {
        let cpu = workload::workload_cpu();
        let _hogs = workload::Hogs::start_named(cpu, sleeper::HOGS, sleeper::HOG);
        let rounds = (4_000 / sleeper::PERIOD.as_millis()) as u32;
        workload::named_sleeper(cpu, sleeper::PERIOD, rounds, "snap-sleeper");
    }
    let get = http::get(server.addr, "/snapshot", None).unwrap();
    assert_eq!(get.status, 405, "{get:?}");
    assert_eq!(get.header("allow"), Some("POST"), "{get:?}");

    let posted = http::post(server.addr, "/snapshot").unwrap();
    assert_eq!(posted.status, 202, "{posted:?}\n{}", server.stderr());
    let path = posted
        .body
        .lines()
        .find_map(|l| l.strip_prefix("dump: "))
        .unwrap_or_else(|| panic!("no `dump: PATH` in {:?}", posted.body));
    let path = std::path::PathBuf::from(path);
    assert!(path.starts_with(&dir), "{path:?} is not in {dir:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.join("dump.jsonl").exists() {
        assert!(
            Instant::now() < deadline,
            "{path:?} not written within 30 s: {}",
            server.stderr()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let metrics = http::get(server.addr, "/metrics", None).unwrap();
    assert_eq!(metrics.status, 200);

    let out = Command::new(SCHEDLAT)
        .arg("replay")
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let intervals: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["type"] == "interval")
        .collect();
    // About 4 s of sleeper plus start-up: at least 3 whole seconds, all
    // after serve started, and with the sleeper's waits in them.
    assert!(intervals.len() >= 3, "{stdout}");
    assert!(
        intervals
            .iter()
            .all(|i| i["start_unix_ns"].as_u64().unwrap() >= before_ns),
        "{stdout}"
    );
    let waits: u64 = intervals.iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert!(waits >= 100, "{waits} waits in {stdout}");
    let status = server.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `--ring`, `/snapshot` says how to get one.
#[test]
fn post_snapshot_without_a_ring_says_how_to_get_one() {
    if !require_root() {
        return;
    }
    let server = Server::start(&[]);
    let r = http::post(server.addr, "/snapshot").unwrap();
    assert_eq!(r.status, 404, "{r:?}");
    assert!(r.body.contains("--ring"), "{}", r.body);
    let metrics = http::get(server.addr, "/metrics", None).unwrap();
    assert_eq!(metrics.status, 200);
}
