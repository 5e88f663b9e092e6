//! Root integration test of `serve --exemplars`: a real Prometheus 3.x
//! with exemplar storage, scraping OpenMetrics, must answer
//! `/api/v1/query_exemplars` for a cgroup's series with the pid, tid and
//! comm of the tasks whose waits made that cgroup's tail, and serve's own
//! OpenMetrics exposition must put each exemplar on the bucket that counts
//! its wait. (The protobuf encoding of the same exemplars is checked by
//! the unit tests, decoded by prost.)

mod common;

use std::{
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{TestCgroup, v2_root},
    cpu::CpuTimes,
    http::{self, nothing_listens},
    prometheus::{Prometheus, prometheus3_dir, unix_now},
    require_root,
    serve::Server,
    workload::{Hogs, workload_cpu},
};

const CGROUP_HISTOGRAM: &str = "schedlat_cgroup_runqueue_latency_seconds";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0";
/// The exemplars' threshold: shorter than the hogs' waits behind each
/// other (a slice or two each), longer than most waits of an idle CPU.
const MIN_SECONDS: f64 = 0.001;
const VICTIM: &str = "schedlat-exvic";

/// The exemplars of `selector` stored between `start` and now.
fn exemplars(prometheus: &Prometheus, selector: &str, start: f64) -> Vec<serde_json::Value> {
    let target = format!(
        "/api/v1/query_exemplars?query={}&start={start:.3}&end={:.3}",
        http::encode_query_value(selector),
        unix_now() + 1.0
    );
    let data = prometheus.api(&target);
    (data.as_array().into_iter().flatten())
        .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Three CPU hogs named VICTIM in a cgroup of their own, on one CPU: each
/// waits behind the other two, milliseconds at a time. Prometheus must
/// return exemplars for that cgroup's series naming one of the hogs (the
/// group holds nothing else), each wait at least the threshold and stamped
/// within the test; serve's OpenMetrics must carry each exemplar on the
/// bucket whose bounds hold its value.
#[test]
fn prometheus_returns_the_waiting_task_from_a_cgroups_exemplars() {
    if !require_root() {
        return;
    }
    let Some(p3) = prometheus3_dir() else {
        return;
    };
    let root = v2_root();
    let group = TestCgroup::new(&root, "exemplars");
    let server = Server::start(&[
        "--cgroups",
        "-c",
        &root.to_string_lossy(),
        &format!("--exemplars={}ms", MIN_SECONDS * 1e3),
    ]);
    let prometheus = Prometheus::launch(
        &p3.join("prometheus"),
        server.addr,
        "1s",
        &["exemplar-storage"],
        &[],
    );

    let cpu = CpuTimes::now();
    let started = unix_now();
    let hogs = Hogs::start_named(workload_cpu(), 3, VICTIM);
    for pid in hogs.pids() {
        group.add(pid);
    }
    let pids: Vec<String> = hogs.pids().iter().map(u32::to_string).collect();
    let selector = format!(
        "{{__name__=~\"{CGROUP_HISTOGRAM}(_bucket)?\",cgroup=\"{}\"}}",
        group.rel
    );

    // Until it has stored exemplars of the group from two scrapes.
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let found = exemplars(&prometheus, &selector, started);
        if found.len() >= 2 {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "{} exemplars of {} after 20 s ({}); serve:\n{}\nPrometheus:\n{}",
            found.len(),
            group.rel,
            cpu.busy_since(),
            server.stderr(),
            prometheus.log()
        );
        thread::sleep(Duration::from_millis(500));
    };
    let now = unix_now();
    for e in &found {
        let labels = &e["labels"];
        let pid = labels["pid"].as_str().unwrap_or_default();
        assert!(
            pids.iter().any(|p| p == pid),
            "{e} is not a hog of {pids:?}"
        );
        assert_eq!(labels["tid"], labels["pid"], "a hog has one thread: {e}");
        assert_eq!(labels["comm"], VICTIM, "{e}");
        let value: f64 = e["value"].as_str().unwrap().parse().unwrap();
        assert!(value >= MIN_SECONDS, "{e} below the threshold");
        let at = e["timestamp"].as_f64().unwrap();
        assert!(
            (started - 1.0..=now + 1.0).contains(&at),
            "{e} stamped outside the test's {started}..{now}"
        );
    }

    // serve's own exposition: each exemplar on the bucket that holds it.
    thread::sleep(Duration::from_millis(1_500));
    let body = http::get(server.addr, "/metrics", Some(OPENMETRICS))
        .unwrap()
        .body;
    let mut checked = 0;
    let mut below = 0.0;
    for line in body.lines() {
        let Some((sample, exemplar)) = line.split_once(" # {") else {
            // A series' buckets follow its _sum and _count.
            below = le_of(line).unwrap_or(0.0);
            continue;
        };
        let le = le_of(sample).unwrap_or_else(|| panic!("an exemplar off a bucket: {line}"));
        let value: f64 = exemplar
            .rsplit_once("} ")
            .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(
            below < value && value <= le,
            "{line}: not within ({below}, {le}]"
        );
        for label in ["pid=\"", "tid=\"", "comm=\""] {
            assert!(exemplar.contains(label), "{line}");
        }
        below = le;
        checked += 1;
    }
    assert!(
        checked >= 1,
        "no exemplar in a scrape during the load ({}):\n{body}",
        cpu.busy_since()
    );
    // The classic text format has none.
    assert!(!server.scrape_text().contains(" # {"));

    drop(hogs);
    let (serve_addr, prometheus_addr) = (server.addr, prometheus.addr);
    drop(prometheus);
    assert!(server.stop_with(libc::SIGINT).success());
    assert!(nothing_listens(serve_addr) && nothing_listens(prometheus_addr));
}

/// The `le` of a bucket sample line, +Inf as infinity; None for another
/// line.
fn le_of(line: &str) -> Option<f64> {
    let (_, rest) = line.split_once("_bucket{")?;
    let le = rest.split("le=\"").nth(1)?.split('"').next()?;
    match le {
        "+Inf" => Some(f64::INFINITY),
        v => v.parse().ok(),
    }
}
