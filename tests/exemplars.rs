//! Root integration test of `serve --exemplars`: a real Prometheus 3.x
//! with exemplar storage, scraping OpenMetrics, must answer
//! `/api/v1/query_exemplars` for a cgroup's series with the pid, tid and
//! comm of the tasks whose waits made that cgroup's tail, and serve's own
//! OpenMetrics exposition must put each exemplar on the bucket that counts
//! its wait. (The protobuf encoding of the same exemplars is checked by
//! the unit tests, decoded by prost.)

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

use crate::common;

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

/// A task named with a quote, as any local user may name theirs.
const QUOTED: &str = "schedlat-q\"ote";

/// Issue 48, 16: a task named with a quote put `comm="...\"..."` in an
/// exemplar: valid OpenMetrics, but Python's prometheus_client refused the
/// whole body, so any local user could break its readers of `serve
/// --exemplars`. Now such a name is left out of the exemplar (the tid
/// stays), and the real parser reads every exemplar of the scrape.
#[test]
fn python_reads_the_exemplars_of_a_task_named_with_a_quote() {
    if !require_root() {
        return;
    }
    let server = Server::start(&[&format!("--exemplars={}ms", MIN_SECONDS * 1e3)]);
    let cpu = CpuTimes::now();
    let hogs = Hogs::start_named(workload_cpu(), 3, QUOTED);
    let tids: Vec<String> = hogs.pids().iter().map(|p| format!("tid=\"{p}\"")).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let body = http::get(server.addr, "/metrics", Some(OPENMETRICS))
            .unwrap()
            .body;
        let named = body
            .lines()
            .filter_map(|l| l.split_once(" # {"))
            .any(|(_, exemplar)| tids.iter().any(|t| exemplar.contains(t.as_str())));
        if named {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no exemplar of the hogs after 20 s ({}); serve:\n{}",
            cpu.busy_since(),
            server.stderr()
        );
        thread::sleep(Duration::from_millis(300));
    };
    let reader = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/readers/check_openmetrics.py");
    let mut python = std::process::Command::new("python3")
        .arg(reader)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (the readers need `cargo xtask setup`)");
    std::io::Write::write_all(&mut python.stdin.take().unwrap(), body.as_bytes()).unwrap();
    let out = python.wait_with_output().unwrap();
    let parsed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "prometheus_client refused the body: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hog_tids: Vec<String> = hogs.pids().iter().map(u32::to_string).collect();
    let of_hogs: Vec<serde_json::Value> = parsed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| {
            hog_tids
                .iter()
                .any(|t| e["tid"].as_str() == Some(t.as_str()))
        })
        .collect();
    assert!(
        !of_hogs.is_empty(),
        "the parser saw no exemplar of the hogs:\n{parsed}"
    );
    // (A hog's wait before its exec named it has the test's thread name.)
    for e in &of_hogs {
        assert!(
            !e["comm"].as_str().is_some_and(|c| c.contains('"')),
            "a name that needs escaping: {e}"
        );
    }
    drop(hogs);
}
