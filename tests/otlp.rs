//! Root integration tests of `serve --otlp-endpoint`, against a receiver
//! built from the collector's own protobuf classes (PyPI's
//! opentelemetry-proto: tests/readers/otlp_receiver.py):
//! - accept: every exponential histogram pushed equals the native
//!   histogram serve's protobuf scrape exports of the same cumulative
//!   state (scale = schema, offset one below, every bucket, count, sum,
//!   zero count);
//! - per pod: on a Kubernetes-like node (tests/common/kube_node.rs), each
//!   pod's container is its own resource, named with the semantic
//!   conventions' `k8s.*` and `container.*` attributes as serve's labels
//!   name it, and its histograms equal the scrape's of its cgroup;
//! - refuse (503, Retry-After: 1): retries bounded, the backoff in the
//!   requests' times, the queue (and serve's memory) bounded;
//! - hang: each attempt bounded by the timeout, scrapes answered meanwhile,
//!   and serve still exits promptly.

use std::{
    collections::BTreeMap,
    fs,
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{HOG, SLEEPER, TestCgroup, pinned_sh, v2_root},
    cpu::CpuTimes,
    exposition::sample,
    http,
    kube_node::{KubeNode, PodContainer, keyed_root, load},
    pki::Pki,
    prometheus::unix_now,
    require_root,
    serve::Server,
    workload::workload_cpu,
};
use prost::Message;
use serde_json::Value;

use crate::common;

/// The receiver, in one of its modes, on a free loopback port; killed when
/// dropped.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

impl Receiver {
    fn start(mode: &str) -> Receiver {
        Receiver::start_with(mode, &[])
    }

    /// With more arguments (`--tls-cert`, `--tls-key`).
    fn start_with(mode: &str, extra: &[&str]) -> Receiver {
        let dir = std::env::temp_dir().join(format!("schedlat-otlp-{}-{mode}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let out = dir.join("requests.jsonl");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/readers/otlp_receiver.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--port", &port.to_string(), "--mode", mode, "--out"])
            .arg(&out)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "listening",
            "the receiver did not start (opentelemetry-proto missing? `cargo xtask setup --test` installs it)"
        );
        Receiver {
            child,
            port,
            out,
            _dir: TempDir(dir),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/metrics", self.port)
    }

    /// The decoded requests, in order (accept mode).
    fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// When each request arrived (any mode), Unix seconds.
    fn times(&self) -> Vec<f64> {
        let path = self.out.with_extension("jsonl.times");
        fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    }

    /// Bytes received over all requests.
    fn bytes(&self) -> u64 {
        fs::read_to_string(self.out.with_extension("jsonl.bytes"))
            .map_or(0, |s| s.trim().parse().unwrap())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// Prometheus' protobuf exposition, the part a native histogram needs
// (io.prometheus.client's metrics.proto, proto2).
#[derive(Clone, PartialEq, Message)]
struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "3")]
    r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    metric: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
struct Metric {
    #[prost(message, repeated, tag = "1")]
    label: Vec<LabelPair>,
    #[prost(message, optional, tag = "7")]
    histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
struct LabelPair {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    sample_sum: Option<f64>,
    #[prost(sint32, optional, tag = "5")]
    schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "false", tag = "13")]
    positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    length: Option<u32>,
}

const PROTOBUF: &str =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

/// One histogram as both sides hold it: (family, sorted labels) ->
/// (scale, zero count, zero threshold, count, sum, nonzero buckets by
/// *Prometheus'* index).
type Histograms =
    BTreeMap<(String, Vec<(String, String)>), (i64, u64, f64, u64, f64, Vec<(i64, u64)>)>;

/// serve's protobuf scrape's native histograms.
fn scraped(server: &Server) -> Histograms {
    let got = http::get(server.addr, "/metrics", Some(PROTOBUF)).unwrap();
    assert_eq!(got.status, 200);
    let mut buf = got.bytes.as_slice();
    let mut out = Histograms::new();
    while !buf.is_empty() {
        let family = MetricFamily::decode_length_delimited(&mut buf).expect("a MetricFamily");
        for m in family.metric {
            let Some(h) = m.histogram else { continue };
            let mut labels: Vec<(String, String)> = (m.label.into_iter())
                .map(|l| (l.name.unwrap(), l.value.unwrap()))
                .collect();
            labels.sort();
            let (mut index, mut count, mut deltas) = (0i64, 0i64, h.positive_delta.iter());
            let mut buckets = Vec::new();
            for span in &h.positive_span {
                index += i64::from(span.offset.unwrap());
                for _ in 0..span.length.unwrap() {
                    count += deltas.next().unwrap();
                    if count > 0 {
                        buckets.push((index, count as u64));
                    }
                    index += 1;
                }
            }
            out.insert(
                (family.name.clone().unwrap(), labels),
                (
                    i64::from(h.schema.unwrap()),
                    h.zero_count.unwrap(),
                    h.zero_threshold.unwrap(),
                    h.sample_count.unwrap(),
                    h.sample_sum.unwrap(),
                    buckets,
                ),
            );
        }
    }
    out
}

/// A pushed request's exponential histograms, as the receiver decoded
/// them, with the buckets put at Prometheus' index (OTLP's + 1).
fn pushed_histograms(request: &Value) -> Histograms {
    let mut out = Histograms::new();
    for resource in request["resources"].as_array().unwrap() {
        for scope in resource["scopes"].as_array().unwrap() {
            for metric in scope["metrics"].as_array().unwrap() {
                if metric["kind"] != "exponential_histogram" {
                    continue;
                }
                assert_eq!(metric["temporality"], "cumulative", "{metric}");
                for p in metric["points"].as_array().unwrap() {
                    let mut labels: Vec<(String, String)> = (p["attributes"].as_object().unwrap())
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect();
                    labels.sort();
                    let offset = p["positive"]["offset"].as_i64().unwrap();
                    let buckets: Vec<(i64, u64)> = (p["positive"]["bucket_counts"].as_array())
                        .unwrap()
                        .iter()
                        .enumerate()
                        .map(|(k, n)| (offset + k as i64 + 1, n.as_u64().unwrap()))
                        .filter(|&(_, n)| n > 0)
                        .collect();
                    out.insert(
                        (metric["name"].as_str().unwrap().to_string(), labels),
                        (
                            p["scale"].as_i64().unwrap(),
                            p["zero_count"].as_u64().unwrap(),
                            p["zero_threshold"].as_f64().unwrap(),
                            p["count"].as_u64().unwrap(),
                            p["sum"].as_f64().unwrap(),
                            buckets,
                        ),
                    );
                }
            }
        }
    }
    out
}

/// The requests received up to one that arrived after `still` (Unix
/// seconds) and its margin: the last of them holds the state of then.
/// Bounded: 10 s.
fn requests_after(receiver: &Receiver, still: f64, server: &Server) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let requests = receiver.requests();
        if (requests.iter()).any(|r| r["received_unix"].as_f64().unwrap() > still + 0.5) {
            return requests;
        }
        assert!(
            Instant::now() < deadline,
            "no push within 10 s of the load's end ({} requests in all); serve:\n{}",
            requests.len(),
            server.stderr()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// A push, as a scrape, carries the per-key series that waited since the
/// previous one: each series' latest pushed value is its value now.
fn latest_histograms(requests: &[Value]) -> Histograms {
    let mut pushed = Histograms::new();
    for r in requests {
        pushed.extend(pushed_histograms(r));
    }
    pushed
}

/// Two CPU hogs in one test cgroup and a sleeper in another, on one CPU,
/// then nothing: `serve --cgroups -c <their parent>` counts only their
/// waits, so once they have exited its cumulative state stands still, and
/// the pushes up to one after that, each series at its latest, hold the
/// same histograms as a scrape after that. Every
/// exponential histogram pushed must equal the scrape's native histogram
/// of the same series: scale = schema, the same zero count and threshold,
/// count and sum, and every bucket one index apart.
#[test]
fn pushed_exponential_histograms_equal_the_scraped_native_histograms() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let parent = TestCgroup::new(&root, "otlp");
    let hogs_group = TestCgroup::new(&root, "otlp/hogs");
    let sleeper_group = TestCgroup::new(&root, "otlp/sleeper");
    let receiver = Receiver::start("accept");
    let server = Server::start(&[
        "--cgroups",
        "-c",
        &parent.path(),
        "--otlp-endpoint",
        &receiver.url(),
        "--otlp-interval",
        "300ms",
        "--otlp-compression",
        "gzip",
    ]);
    let cpu = CpuTimes::now();
    let load = workload_cpu();
    let mut procs: Vec<Child> = (0..2).map(|_| pinned_sh(load, HOG)).collect();
    for p in &procs {
        hogs_group.add(p.id());
    }
    let sleeper = pinned_sh(load, SLEEPER);
    sleeper_group.add(sleeper.id());
    procs.push(sleeper);
    thread::sleep(Duration::from_millis(1_500));
    for p in &mut procs {
        let _ = p.kill();
        let _ = p.wait();
    }
    hogs_group.wait_empty();
    sleeper_group.wait_empty();
    // Nothing of the test cgroups runs any more; a push after this
    // moment (and the margin for the last exits' waits) holds the final
    // state, as does a scrape.
    let still = unix_now() + 0.2;
    thread::sleep(Duration::from_millis(900));
    let scrape = scraped(&server);
    let requests = requests_after(&receiver, still, &server);
    let pushed = latest_histograms(&requests);
    let request = requests.last().unwrap();
    let context = || format!("{}; serve:\n{}", cpu.busy_since(), server.stderr());
    // The total and a series per test cgroup at least.
    let cgroup_series = |h: &Histograms, group: &TestCgroup| {
        h.keys()
            .filter(|(name, labels)| {
                name == "schedlat_cgroup_runqueue_latency_seconds"
                    && labels
                        .iter()
                        .any(|(k, v)| k == "cgroup" && v.ends_with(group.rel.as_str()))
            })
            .count()
    };
    assert_eq!(
        cgroup_series(&scrape, &hogs_group),
        1,
        "{scrape:?}; {}",
        context()
    );
    assert_eq!(
        cgroup_series(&scrape, &sleeper_group),
        1,
        "{scrape:?}; {}",
        context()
    );
    let (_, total) = scrape
        .iter()
        .find(|((name, _), _)| name == "schedlat_runqueue_latency_seconds")
        .expect("the total");
    assert!(
        total.3 >= 100,
        "the hogs waited behind each other: {total:?}; {}",
        context()
    );
    // Side by side: the same series, each equal.
    assert_eq!(
        pushed.keys().collect::<Vec<_>>(),
        scrape.keys().collect::<Vec<_>>(),
        "the same histogram series; {}",
        context()
    );
    for (series, native) in &scrape {
        let otlp = &pushed[series];
        assert_eq!(otlp.0, native.0, "{series:?}: scale vs schema");
        assert_eq!(otlp.1, native.1, "{series:?}: zero count");
        assert_eq!(otlp.2, native.2, "{series:?}: zero threshold");
        assert_eq!(otlp.3, native.3, "{series:?}: count; {}", context());
        assert_eq!(otlp.4, native.4, "{series:?}: sum");
        assert_eq!(
            otlp.5,
            native.5,
            "{series:?}: buckets (at Prometheus' index); {}",
            context()
        );
        assert_eq!(
            otlp.1 + otlp.5.iter().map(|(_, n)| n).sum::<u64>(),
            otlp.3,
            "{series:?}: OTLP's count is the zero count plus the buckets'"
        );
    }
    assert_eq!(request["content_encoding"], "gzip");
    // The resource, and the counters as cumulative monotonic sums.
    let resource = &request["resources"][0]["attributes"];
    assert_eq!(resource["service.name"], "schedlat", "{resource}");
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(resource["host.name"], host.trim(), "{resource}");
    let metrics = request["resources"][0]["scopes"][0]["metrics"]
        .as_array()
        .unwrap();
    let waits = (metrics.iter())
        .find(|m| m["name"] == "schedlat_otlp_requests_sent_total")
        .unwrap_or_else(|| panic!("the push's own counters: {metrics:?}"));
    assert_eq!(
        (&waits["kind"], &waits["temporality"], &waits["monotonic"]),
        (&"sum".into(), &"cumulative".into(), &true.into())
    );
}

/// Each pushed resource's attributes, keyed by the `cgroup` attribute of
/// the per-cgroup histogram points it holds, the latest push's winning.
fn resources_by_cgroup(requests: &[Value]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for request in requests {
        for resource in request["resources"].as_array().unwrap() {
            let attributes: BTreeMap<String, String> = (resource["attributes"].as_object())
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            for scope in resource["scopes"].as_array().unwrap() {
                for metric in scope["metrics"].as_array().unwrap() {
                    if metric["name"] != "schedlat_cgroup_runqueue_latency_seconds" {
                        continue;
                    }
                    for p in metric["points"].as_array().unwrap() {
                        let cgroup = p["attributes"]["cgroup"].as_str().unwrap();
                        out.insert(cgroup.to_string(), attributes.clone());
                    }
                }
            }
        }
    }
    out
}

/// A Kubernetes-like node (a containerd pod under the systemd driver, a
/// CRI-O pod under cgroupfs, a systemd service; tests/common/kube_node.rs)
/// with a sleeper in one pod behind two hogs in the other: `serve --cgroups
/// -c <node>` pushes each pod's container as its own resource, with the
/// host's attributes and the semantic conventions' k8s.namespace.name,
/// k8s.pod.name, k8s.pod.uid, k8s.container.name, container.id (and
/// container.runtime where the cgroup names it) as serve's labels name the
/// container; the service is of the host's resource. Each pod's
/// exponential histogram equals the scrape's native histogram of its
/// cgroup once the node is still.
#[test]
fn each_pod_is_its_own_resource_with_the_histograms_of_its_cgroup() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let receiver = Receiver::start("accept");
    let server = Server::start(&[
        "--cgroups",
        "-c",
        &node.path(),
        "--otlp-endpoint",
        &receiver.url(),
        "--otlp-interval",
        "300ms",
    ]);
    let cpu = CpuTimes::now();
    let procs = load(&node);
    thread::sleep(Duration::from_millis(1_500));
    drop(procs);
    node.wait_empty();
    let still = unix_now() + 0.2;
    thread::sleep(Duration::from_millis(900));
    let scrape = scraped(&server);
    let requests = requests_after(&receiver, still, &server);
    let pushed = latest_histograms(&requests);
    let resources = resources_by_cgroup(&requests);
    let context = || format!("{}; serve:\n{}", cpu.busy_since(), server.stderr());
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let version = env!("CARGO_PKG_VERSION");
    let host_resource = [
        ("service.name", "schedlat"),
        ("service.version", version),
        ("host.name", host),
        ("service.instance.id", host),
    ];
    let expect = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        (host_resource.iter().chain(pairs))
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let pod_resource = |c: &PodContainer| {
        expect(&[
            ("k8s.namespace.name", c.namespace),
            ("k8s.pod.name", c.pod),
            ("k8s.pod.uid", &c.uid),
            ("k8s.container.name", c.container),
            ("container.id", &c.id),
            ("container.runtime", c.runtime),
        ])
    };
    let (web, batch, unit) = (&node.web, &node.batch, &node.unit);
    for (c, want) in [
        (web, pod_resource(web)),
        (batch, pod_resource(batch)),
        (unit, expect(&[])),
    ] {
        let got = resources.get(&c.cgroup).unwrap_or_else(|| {
            panic!(
                "no pushed resource holds {}'s histogram: {resources:#?}; {}",
                c.cgroup,
                context()
            )
        });
        assert_eq!(*got, want, "{}'s resource; {}", c.cgroup, context());
    }
    // The scrape's series of each cgroup, and the push's of the same
    // labels: the same histogram, count first.
    let of = |h: &Histograms, cgroup: &str| -> Vec<_> {
        (h.iter())
            .filter(|((name, labels), _)| {
                name == "schedlat_cgroup_runqueue_latency_seconds"
                    && labels.iter().any(|(k, v)| k == "cgroup" && v == cgroup)
            })
            .map(|(series, h)| (series.clone(), h.clone()))
            .collect()
    };
    for c in [web, batch, unit] {
        let (native, otlp) = (of(&scrape, &c.cgroup), of(&pushed, &c.cgroup));
        assert_eq!(native.len(), 1, "{}: {scrape:?}; {}", c.cgroup, context());
        let counts =
            |h: &[(_, (_, _, _, u64, _, _))]| h.iter().map(|(_, h)| h.3).collect::<Vec<_>>();
        assert_eq!(
            counts(&otlp),
            counts(&native),
            "{}: pushed vs scraped counts; {}",
            c.cgroup,
            context()
        );
        assert_eq!(
            otlp,
            native,
            "{}: the whole histogram; {}",
            c.cgroup,
            context()
        );
    }
    let (_, sleeper) = &of(&scrape, &web.cgroup)[0];
    assert!(
        sleeper.3 >= 10,
        "web's sleeper woke behind batch's hogs: {sleeper:?}; {}",
        context()
    );
}

/// The gaps between the requests the receiver got (seconds).
fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A collector that answers 503 with `Retry-After: 1`: serve retries with
/// exponential backoff (each gap at least the Retry-After, the later ones
/// doubling) and keeps at most `--otlp-queue` requests however many
/// intervals pass, the older ones dropped (and its memory with them);
/// scrapes say so. (A request given up after its attempts: the unit
/// tests of export/otlp/delivery.rs.)
#[test]
fn a_refusing_collector_gets_bounded_retries_with_backoff_and_bounded_memory() {
    if !require_root() {
        return;
    }
    let receiver = Receiver::start("refuse");
    let server = Server::start(&[
        "--otlp-endpoint",
        &receiver.url(),
        "--otlp-interval",
        "100ms",
        "--otlp-queue",
        "3",
    ]);
    let cpu = CpuTimes::now();
    let rss = || common::status_field(server.pid(), "VmRSS:");
    thread::sleep(Duration::from_secs(2));
    let rss_early = rss();
    thread::sleep(Duration::from_secs(7));
    let times = receiver.times();
    let text = server.scrape_text();
    let rss_late = rss();
    let context = format!(
        "requests at {times:?}, gaps {:?}; {}; serve:\n{}",
        gaps(&times),
        cpu.busy_since(),
        server.stderr()
    );
    // 90 intervals; attempts at about 0, 1, 3, 7 s (1, 2, 4 s apart).
    assert!(
        (3..=6).contains(&times.len()),
        "{} attempts in 9 s of 100 ms intervals: want 3 to 6 with backoff; {context}",
        times.len()
    );
    let g = gaps(&times);
    assert!(
        g.iter().all(|&g| g >= 0.95),
        "each gap at least the Retry-After (1 s); {context}"
    );
    assert!(g[1] >= 1.8, "the second gap doubled; {context}");
    assert!(
        g.windows(2).all(|w| w[1] >= w[0] * 1.5),
        "every gap longer than the one before (exponential backoff); {context}"
    );
    assert!(server.stderr().contains("HTTP 503"), "{context}");
    // Bounded queue: at most 3 waiting, the superseded ones dropped.
    let queued = sample(&text, "schedlat_otlp_queue_requests").unwrap();
    let dropped = sample(&text, "schedlat_otlp_requests_dropped_total").unwrap();
    let failed = sample(&text, "schedlat_otlp_attempts_failed_total").unwrap();
    let queued_bytes = sample(&text, "schedlat_otlp_queue_bytes").unwrap();
    assert!(queued <= 3.0, "queue {queued}; {context}");
    assert!(
        dropped >= 50.0,
        "of ~90 requests, {dropped} dropped; {context}"
    );
    assert!(
        (failed - times.len() as f64).abs() <= 1.0,
        "failed attempts {failed} vs {} received; {context}",
        times.len()
    );
    assert_eq!(
        sample(&text, "schedlat_otlp_requests_sent_total"),
        Some(0.0),
        "{context}"
    );
    let per_request = receiver.bytes() as f64 / times.len() as f64;
    assert!(
        queued_bytes <= 3.0 * per_request * 1.5,
        "queued {queued_bytes} bytes, a request ~{per_request}; {context}"
    );
    let kib = |s: &str| -> u64 { s.trim_end_matches(" kB").trim().parse().unwrap() };
    assert!(
        kib(&rss_late) <= kib(&rss_early) + 4 * 1024,
        "serve's RSS grew from {rss_early} to {rss_late}; {context}"
    );
}

/// A collector that reads the request and never answers: each attempt
/// ends at `--otlp-timeout` (the next comes at least that much later),
/// scrapes are answered meanwhile, and serve exits promptly on SIGTERM
/// (its last push bounded by the same timeout).
#[test]
fn a_hanging_collector_costs_at_most_the_timeout_per_push() {
    if !require_root() {
        return;
    }
    let receiver = Receiver::start("hang");
    let server = Server::start(&[
        "--otlp-endpoint",
        &receiver.url(),
        "--otlp-interval",
        "200ms",
        "--otlp-timeout",
        "1s",
    ]);
    let cpu = CpuTimes::now();
    let fds = || {
        fs::read_dir(format!("/proc/{}/fd", server.pid()))
            .unwrap()
            .count()
    };
    let fds_before = fds();
    let mut slowest = Duration::ZERO;
    let end = Instant::now() + Duration::from_secs(6);
    while Instant::now() < end {
        let asked = Instant::now();
        let text = server.scrape_text();
        slowest = slowest.max(asked.elapsed());
        assert!(text.contains("schedlat_runqueue_latency_seconds_count"));
        thread::sleep(Duration::from_millis(250));
    }
    let times = receiver.times();
    let context = format!(
        "requests at {times:?}, gaps {:?}; slowest scrape {slowest:?}; {}; serve:\n{}",
        gaps(&times),
        cpu.busy_since(),
        server.stderr()
    );
    // Attempts at about 0, 2 (1 s timeout + 1 s backoff), 5 s.
    assert!(
        (2..=4).contains(&times.len()),
        "{} attempts in 6 s; {context}",
        times.len()
    );
    assert!(
        gaps(&times).iter().all(|&g| g >= 1.9),
        "each attempt waited out its 1 s timeout and a backoff; {context}"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "scrapes are not held up by the stuck push; {context}"
    );
    assert!(
        server.stderr().contains("no answer within 1.00 s"),
        "{context}"
    );
    // A timed-out attempt's connection is closed, not left to the hung
    // collector (at most the one in flight is open).
    let fds_after = fds();
    assert!(
        fds_after <= fds_before + 1,
        "serve's descriptors went from {fds_before} to {fds_after}; {context}"
    );
    let stopping = Instant::now();
    let status = server.stop_with(libc::SIGTERM);
    let took = stopping.elapsed();
    assert!(status.success(), "{status:?}; {context}");
    assert!(
        took < Duration::from_secs(3),
        "exit took {took:?}: the last push is bounded by the 1 s timeout; {context}"
    );
}

/// A bad endpoint, header or OpenTelemetry variable is a usage error (exit
/// 2) that says what to give, before anything is loaded (no root needed).
#[test]
fn bad_push_options_are_usage_errors() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(common::SCHEDLAT)
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("schedlat runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (args, env, says) in [
        (
            &["--otlp-endpoint", "localhost:4318"][..],
            &[][..],
            "http://localhost:4318/v1/metrics",
        ),
        (
            &[
                "--otlp-endpoint",
                "https://c:4318/v1/metrics",
                "--otlp-certificate",
                "/nonexistent/ca.pem",
            ],
            &[],
            "/nonexistent/ca.pem",
        ),
        (
            &[
                "--otlp-endpoint",
                "http://c:4318/v1/metrics",
                "--otlp-header",
                "key",
            ],
            &[],
            "KEY=VALUE",
        ),
        (
            &[
                "--otlp-endpoint",
                "http://c:4318/v1/metrics",
                "--otlp-interval",
                "0",
            ],
            &[],
            "more than 0",
        ),
        (
            &[],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        // Issue 48, 14: credentials in the URL were not sent, and printed
        // in clear in every log line; now refused, never repeated.
        (
            &["--otlp-endpoint", "http://user:s3cret@c:4318/v1/metrics"][..],
            &[][..],
            "--otlp-header 'Authorization=Basic",
        ),
        (
            &[],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:s3cret@c:4318")],
            "REDACTED@c:4318",
        ),
        (
            &[],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_RESOURCE_ATTRIBUTES", "novalue"),
            ],
            "OTEL_RESOURCE_ATTRIBUTES",
        ),
    ] {
        let (code, stderr) = run(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?} {env:?}: {stderr}");
    }
}

/// Waits up to 10 s for `done`; the failure says `what` did not happen and
/// what serve printed.
fn within_10_s(what: &str, server: &Server, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} within 10 s; serve:\n{}",
            server.stderr()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// A receiver speaking HTTPS with the test CA's server certificate, `extra`
/// arguments added, and its URL.
fn https_receiver(pki: &Pki, extra: &[&str]) -> (Receiver, String) {
    let (cert, key) = (pki.path("server.crt"), pki.path("server.key"));
    let mut args = vec!["--tls-cert", &cert, "--tls-key", &key];
    args.extend(extra);
    let receiver = Receiver::start_with("accept", &args);
    let url = format!("https://127.0.0.1:{}/v1/metrics", receiver.port);
    (receiver, url)
}

/// An `https://` collector: serve checks its certificate against
/// `--otlp-certificate` (the test's CA) and pushes; against another CA (the
/// system's bundle, which does not hold the test's) the handshake fails,
/// nothing reaches the receiver as a request, and serve says why.
#[test]
fn an_https_collector_is_pushed_to_when_its_certificate_chains_to_the_ca() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("otlp");
    let (receiver, url) = https_receiver(&pki, &[]);
    let trusted = Server::start(&[
        "--otlp-endpoint",
        &url,
        "--otlp-certificate",
        &pki.path("ca.crt"),
        "--otlp-interval",
        "200ms",
    ]);
    within_10_s("no push over TLS", &trusted, || {
        receiver.requests().len() >= 2
    });
    drop(trusted);
    let accepted = receiver.requests().len();
    assert_eq!(
        receiver.requests()[0]["content_encoding"],
        "identity",
        "no --otlp-compression"
    );
    let untrusted = Server::start(&["--otlp-endpoint", &url, "--otlp-interval", "200ms"]);
    within_10_s("no TLS failure said", &untrusted, || {
        untrusted.stderr().contains("TLS with 127.0.0.1")
    });
    assert!(
        untrusted.stderr().contains("UnknownIssuer"),
        "{}",
        untrusted.stderr()
    );
    assert!(
        receiver.requests().len() <= accepted + 1,
        "the untrusted collector got requests; serve:\n{}",
        untrusted.stderr()
    );
}

/// A collector that asks for a client certificate (mutual TLS): serve
/// with `--otlp-client-certificate` and `--otlp-client-key` from the CA
/// the collector trusts pushes; without them, or with another CA's
/// certificate, the handshake fails, the collector gets no request, and
/// serve says so.
#[test]
fn a_collector_that_asks_for_a_client_certificate_gets_pushes_only_from_its_ca() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("otlp-mtls");
    let (receiver, url) = https_receiver(&pki, &["--tls-client-ca", &pki.path("ca.crt")]);
    let ca = pki.path("ca.crt");
    let push = |identity: &[&str]| {
        let mut args = vec!["--otlp-endpoint", &url, "--otlp-certificate", &ca];
        args.extend(["--otlp-interval", "200ms"]);
        args.extend(identity);
        Server::start(&args)
    };
    let (client_crt, client_key) = (pki.path("client.crt"), pki.path("client.key"));
    let trusted = push(&[
        "--otlp-client-certificate",
        &client_crt,
        "--otlp-client-key",
        &client_key,
    ]);
    within_10_s("no push with the client certificate", &trusted, || {
        receiver.requests().len() >= 2
    });
    drop(trusted);
    let (stranger_crt, stranger_key) = (pki.path("stranger.crt"), pki.path("stranger.key"));
    // The collector's TLS alert is said: which certificate is wrong.
    let refused: [(&[&str], &str); 2] = [
        (&[], "CertificateRequired"),
        (
            &[
                "--otlp-client-certificate",
                &stranger_crt,
                "--otlp-client-key",
                &stranger_key,
            ],
            "UnknownCA",
        ),
    ];
    for (identity, alert) in refused {
        let before = receiver.times().len();
        let server = push(identity);
        within_10_s(&format!("{identity:?}: no {alert} said"), &server, || {
            server.stderr().contains(alert)
        });
        // A second of pushes every 200 ms: none reaches the collector.
        thread::sleep(Duration::from_secs(1));
        assert_eq!(
            receiver.times().len(),
            before,
            "{identity:?}: the collector got a request; serve:\n{}",
            server.stderr()
        );
    }
}

/// Issue 48, 12 and 14: a collector answering every push with a hostile
/// partial-success message (terminal escapes, newlines forging
/// "schedlat: FAKE LINE", 20 KB) had it printed raw at every push: 41,526
/// forged lines in 25 s. Now it is said once, printable and cut. The
/// endpoint's query (an API key) never shows in the log.
#[test]
fn a_collectors_partial_success_is_said_once_escaped_and_cut() {
    if !require_root() {
        return;
    }
    let receiver = Receiver::start("partial");
    let url = format!("{}?api_key=s3cret", receiver.url());
    let server = Server::start(&["--otlp-endpoint", &url, "--otlp-interval", "100ms"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while receiver.times().len() < 10 {
        assert!(
            Instant::now() < deadline,
            "{} pushes in 20 s:\n{}",
            receiver.times().len(),
            server.stderr()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let log = server.stderr();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("rejected 7 data points"))
        .collect();
    assert_eq!(said.len(), 1, "{} pushes:\n{log}", receiver.times().len());
    assert!(said[0].len() < 1_000, "{} bytes", said[0].len());
    assert!(!log.contains('\x1b'), "a terminal escape reached the log");
    assert!(
        !log.lines().any(|l| l.starts_with("schedlat: FAKE LINE")),
        "a forged line:\n{log}"
    );
    assert!(!log.contains("s3cret"), "{log}");
    assert!(log.contains("api_key=REDACTED"), "{log}");
}
