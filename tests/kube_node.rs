//! A Kubernetes-like node (both kubelet cgroup drivers, containerd and
//! CRI-O files, a systemd service; tests/common/kube_node.rs) with a
//! sleeper in one container and hogs in another on one CPU: every view
//! names the pods, containers and unit as their owners know them.
//! Root: these load eBPF programs.

mod common;

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    net::{SocketAddr, TcpListener},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{
        HOG, Procs, SLEEPER, TestCgroup, churn_named, other_cpu, pinned_sh, v1_cpu_root, v2_root,
    },
    cpu::CpuTimes,
    http,
    kube_node::KubeNode,
    prometheus::{PROMETHEUS, Prometheus},
    require_root, run_schedlat,
    serve::Server,
    status_field,
    workload::workload_cpu,
};

type Labels = BTreeMap<String, String>;

/// The labels of each `family` sample in a text exposition.
fn series(page: &str, family: &str) -> Vec<Labels> {
    let prefix = format!("{family}{{");
    page.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let body = &rest[..rest.rfind('}').expect("a closing brace")];
            let mut labels = Labels::new();
            for pair in body.split("\",").map(|p| p.trim_end_matches('"')) {
                let (name, value) = pair.split_once("=\"").expect("name=\"value\"");
                labels.insert(name.to_string(), value.to_string());
            }
            labels
        })
        .collect()
}

/// The node's load: a sleeper in `web`, two hogs in `batch` on the
/// workload CPU (so web's waits are behind batch), a sleeper in the unit
/// on another CPU.
fn load(node: &KubeNode) -> Procs {
    let cpu = workload_cpu();
    let sleeper = pinned_sh(cpu, SLEEPER);
    node.web.add(sleeper.id());
    let hogs: Vec<_> = (0..2).map(|_| pinned_sh(cpu, HOG)).collect();
    for hog in &hogs {
        node.batch.add(hog.id());
    }
    let service = pinned_sh(other_cpu(), SLEEPER);
    node.unit.add(service.id());
    let mut children = vec![sleeper, service];
    children.extend(hogs);
    Procs(children)
}

/// The hierarchy `--cgroups` keys by here: v1 cpu on hybrid hosts.
fn keyed_root() -> std::path::PathBuf {
    v1_cpu_root().unwrap_or_else(v2_root)
}

/// Scrapes until every cgroup of `want` has a series (bounded).
fn scrape_until(server: &Server, want: &[&str]) -> Vec<Labels> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let page = http::get(server.addr, "/metrics", None).unwrap().body;
        let found = series(&page, "schedlat_cgroup_runqueue_latency_seconds_count");
        let has = |c: &str| {
            found
                .iter()
                .any(|l| l.get("cgroup").is_some_and(|v| v == c))
        };
        if want.iter().all(|c| has(c)) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no series for all of {want:?} within 15 s: {found:?}\nserve:\n{}",
            server.stderr()
        );
        thread::sleep(Duration::from_millis(300));
    }
}

fn of<'a>(found: &'a [Labels], cgroup: &str) -> &'a Labels {
    let mut matching = found.iter().filter(|l| l["cgroup"] == cgroup);
    let one = matching
        .next()
        .unwrap_or_else(|| panic!("no series of {cgroup}"));
    assert!(
        matching.next().is_none(),
        "{cgroup} has more than one series: the labels split it: {found:?}"
    );
    one
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    (pairs.iter())
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn serve_labels_each_cgroup_by_its_pod_container_and_unit() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let server = Server::start(&["--cgroups"]);
    let (web, batch, unit) = (&node.web, &node.batch, &node.unit);
    let found = scrape_until(&server, &[&web.cgroup, &batch.cgroup, &unit.cgroup]);

    let web_unit = format!("cri-containerd-{}.scope", web.id);
    let web_slice = format!("kubepods-burstable-pod{}.slice", web.uid.replace('-', "_"));
    assert_eq!(
        *of(&found, &web.cgroup),
        labels(&[
            ("cgroup", &web.cgroup),
            ("namespace", "shop"),
            ("pod", "web-1"),
            ("container", "nginx"),
            ("unit", &web_unit),
            ("slice", &web_slice),
            ("pod_uid", &web.uid),
            ("container_id", &web.id),
            ("runtime", "containerd"),
            ("qos", "burstable"),
        ])
    );
    // The cgroupfs driver: no unit, no runtime in the path; CRI-O's files
    // name it all the same.
    assert_eq!(
        *of(&found, &batch.cgroup),
        labels(&[
            ("cgroup", &batch.cgroup),
            ("namespace", "jobs"),
            ("pod", "batch-7"),
            ("container", "cruncher"),
            ("pod_uid", &batch.uid),
            ("container_id", &batch.id),
            ("qos", "besteffort"),
        ])
    );
    assert_eq!(
        *of(&found, &unit.cgroup),
        labels(&[
            ("cgroup", &unit.cgroup),
            ("unit", &node.unit_name),
            ("slice", "system.slice"),
        ])
    );
    // Every series of the family names its cgroup once: no cgroup is
    // split by its labels (the overflow series has the cgroup label only).
    let mut cgroups: Vec<_> = found.iter().map(|l| &l["cgroup"]).collect();
    let all = cgroups.len();
    cgroups.sort();
    cgroups.dedup();
    assert_eq!(cgroups.len(), all, "a cgroup in two series: {found:?}");
}

#[test]
fn a_container_made_after_serve_started_is_named_too() {
    if !require_root() {
        return;
    }
    // Named from its runtime's files as the kernel reports its cgroup
    // made (serve's start found no container to ask for).
    let server = Server::start(&["--cgroups"]);
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let found = scrape_until(&server, &[&node.web.cgroup]);
    let web = of(&found, &node.web.cgroup);
    let named = |l: &str| web.get(l).map(String::as_str);
    assert_eq!(
        (named("namespace"), named("pod"), named("container")),
        (Some("shop"), Some("web-1"), Some("nginx")),
        "{web:?}"
    );
}

#[test]
fn serve_keeps_only_the_labels_asked_for() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let server = Server::start(&["--cgroups", "--cgroup-labels", "pod,container"]);
    let none = Server::start(&["--cgroups", "--cgroup-labels", "none"]);
    let web = &node.web;
    let found = scrape_until(&server, &[&web.cgroup]);
    assert_eq!(
        *of(&found, &web.cgroup),
        labels(&[
            ("cgroup", &web.cgroup),
            ("pod", "web-1"),
            ("container", "nginx")
        ])
    );
    let found = scrape_until(&none, &[&web.cgroup]);
    assert_eq!(*of(&found, &web.cgroup), labels(&[("cgroup", &web.cgroup)]));
    // A pin by unit name: its series besides the one --max-series 1
    // leaves to the others, and the overflow.
    let pinned = Server::start(&["--cgroups", "--max-series", "1", "--pin", &node.unit_name]);
    let found = scrape_until(&pinned, &[&node.unit.cgroup]);
    assert!(
        found.len() <= 3,
        "the pinned unit, one other, overflow: {found:?}"
    );
}

/// A scrape target serving `body` to every request, as cAdvisor would.
fn fixture_target(body: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

#[test]
fn serve_joins_cadvisor_series_in_prometheus_without_relabelling() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let server = Server::start(&["--cgroups"]);
    let web = &node.web;
    // cAdvisor's spelling (the kubelet's /metrics/cadvisor): namespace,
    // pod, container, and id the cgroup path as the kubelet sees it.
    let cadvisor = format!(
        "# TYPE container_cpu_cfs_throttled_seconds_total counter\n\
         container_cpu_cfs_throttled_seconds_total{{container=\"nginx\",id=\"/kubepods.slice/kubepods-burstable.slice/{}\",image=\"docker.io/library/nginx:1.27\",name=\"{}\",namespace=\"shop\",pod=\"web-1\"}} 12.5\n",
        Path::new(&web.cgroup)
            .file_name()
            .unwrap()
            .to_string_lossy(),
        web.id
    );
    let target = fixture_target(cadvisor);
    let prometheus = Prometheus::launch_targets(
        Path::new(PROMETHEUS),
        &[server.addr, target],
        "1s",
        &[],
        &[],
    );
    let join = "schedlat_cgroup_runqueue_latency_seconds_count \
                * on (namespace, pod, container) group_left (image) \
                container_cpu_cfs_throttled_seconds_total";
    let deadline = Instant::now() + Duration::from_secs(30);
    let result = loop {
        let result = prometheus.query(join, None);
        if !result.is_empty() {
            break result;
        }
        assert!(
            Instant::now() < deadline,
            "the join found nothing within 30 s; schedlat's series: {:?}\nPrometheus log:\n{}",
            series(
                &http::get(server.addr, "/metrics", None).unwrap().body,
                "schedlat_cgroup_runqueue_latency_seconds_count"
            ),
            prometheus.log()
        );
        thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(result.len(), 1, "one container joined: {result:?}");
    let metric = &result[0]["metric"];
    assert_eq!(metric["cgroup"], web.cgroup.as_str(), "{result:?}");
    assert_eq!(
        metric["image"], "docker.io/library/nginx:1.27",
        "{result:?}"
    );
    let value: f64 = result[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(value > 0.0, "web waited and was throttled: {result:?}");
}

#[test]
fn the_breakdown_names_containers_and_units_and_keeps_the_path() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let (web, batch, unit) = (&node.web, &node.batch, &node.unit);
    let (status, stdout, stderr) = run_schedlat(&["--cgroups", "--json", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let interval: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("one JSON interval");
    let keys = interval["breakdown"]["keys"].as_array().unwrap();
    let key = |cgroup: &str| {
        (keys.iter())
            .find(|k| k["cgroup"] == cgroup)
            .unwrap_or_else(|| panic!("no key of {cgroup}: {keys:?}"))
    };
    let w = key(&web.cgroup);
    assert_eq!(
        w["label"],
        format!("container = shop/web-1/nginx, cgroup = {}", web.cgroup)
    );
    let workload = &w["workload"];
    assert_eq!(
        (
            &workload["is"],
            &workload["name"],
            &workload["namespace"],
            &workload["pod"],
            &workload["container"]
        ),
        (
            &"container".into(),
            &"shop/web-1/nginx".into(),
            &"shop".into(),
            &"web-1".into(),
            &"nginx".into()
        ),
        "{w}"
    );
    assert_eq!(workload["container_id"], web.id.as_str(), "{w}");
    assert_eq!(workload["names_from"], "containerd-bundle", "{w}");
    let b = key(&batch.cgroup);
    assert_eq!(
        b["label"],
        format!(
            "container = jobs/batch-7/cruncher, cgroup = {}",
            batch.cgroup
        )
    );
    assert_eq!(b["workload"]["names_from"], "storage-config", "{b}");
    let u = key(&unit.cgroup);
    assert_eq!(
        u["label"],
        format!("unit = {}, cgroup = {}", node.unit_name, unit.cgroup)
    );
    assert_eq!(u["workload"]["pod"], serde_json::Value::Null, "{u}");

    // The text: runqlat's label line, the owner's name first.
    let (status, stdout, stderr) = run_schedlat(&["--cgroups", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let line = format!("container = shop/web-1/nginx, cgroup = {}", web.cgroup);
    assert!(
        stdout.lines().any(|l| l == line),
        "no `{line}` in:\n{stdout}"
    );
}

#[test]
fn diagnose_names_the_noisy_neighbour_by_its_pod_and_container() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let dir = node.web.dir.to_string_lossy().into_owned();
    let (status, stdout, stderr) = run_schedlat(&["diagnose", "--json", "-d", "3", "-c", &dir]);
    assert!(status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("diagnose's JSON");
    let causes = r["causes"].as_array().unwrap();
    let cause = causes
        .iter()
        .find(|c| c["name"] == "noisy neighbour (other cgroups)")
        .unwrap_or_else(|| panic!("no noisy neighbour behind 2 hogs on the sleeper's CPU: {r}"));
    let evidence = cause["evidence"].as_str().unwrap();
    // Among the neighbours named (on a busy machine the root cgroup's
    // tasks may be charged with more than the hogs), by pod and container.
    let named = evidence
        .split("the other cgroups charged with most: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no neighbour named: {evidence}"));
    assert!(
        named.contains("container jobs/batch-7/cruncher (sh"),
        "{evidence}"
    );
    assert!(
        !named.contains(&node.batch.cgroup),
        "the path, not the name: {evidence}"
    );
    // The next step acts on the first named, by name and, once, by path.
    let step = cause["next_step"].as_str().unwrap();
    if named.starts_with("container jobs/batch-7/cruncher") {
        assert!(
            step.contains("than container jobs/batch-7/cruncher, cap it")
                && step.contains(&node.batch.cgroup),
            "{step}"
        );
    }
}

#[test]
fn the_breakdown_rolls_cgroups_up_per_pod_and_per_unit() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let load = load(&node);
    let web = &node.web;
    // A sidecar in web's pod that no runtime file names: it adds up with
    // nginx under the pod's UID all the same.
    let sidecar_id = format!(
        "{}{}",
        &web.id[..63],
        if web.id.ends_with('5') { '6' } else { '5' }
    );
    let prefix = format!("/schedlat-test-{}-", std::process::id());
    let name = web
        .cgroup
        .strip_prefix(&prefix)
        .unwrap()
        .replace(&web.id, &sidecar_id);
    let sidecar = TestCgroup::new(&keyed_root(), &name);
    let sidecar_sleeper = Procs(vec![pinned_sh(workload_cpu(), SLEEPER)]);
    sidecar.add(sidecar_sleeper.pids()[0]);
    let pod_dir = web.dir.parent().unwrap().to_string_lossy().into_owned();

    // Scoped to the pod: its one row adds up every wait of its two
    // containers, as many as the whole interval counts.
    let (status, stdout, stderr) = run_schedlat(&[
        "-c",
        &pod_dir,
        "--cgroups",
        "--by",
        "pod",
        "--top",
        "0",
        "--json",
        "2",
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let interval: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one interval");
    let breakdown = &interval["breakdown"];
    assert_eq!(breakdown["rolled_up_by"], "pod", "{breakdown}");
    let keys = breakdown["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "one pod: {keys:?}");
    let pod = &keys[0];
    assert_eq!(pod["label"], "pod = shop/web-1 (2 cgroups)", "{pod}");
    let mut both = vec![web.cgroup.clone(), sidecar.rel.clone()];
    both.sort();
    assert_eq!(pod["cgroups"], serde_json::json!(both), "{pod}");
    assert_eq!(pod["cgroup"], serde_json::Value::Null, "{pod}");
    let workload = &pod["workload"];
    assert_eq!(
        (
            &workload["is"],
            &workload["name"],
            &workload["pod_uid"],
            &workload["container"]
        ),
        (
            &"pod".into(),
            &"shop/web-1".into(),
            &web.uid.as_str().into(),
            &serde_json::Value::Null
        ),
        "{pod}"
    );
    // The keys and the total are read one after the other: a wait ending
    // between the two reads is in one of them only.
    let (total, rolled) = (
        interval["count"].as_u64().unwrap(),
        pod["count"].as_u64().unwrap(),
    );
    assert!(
        total > 100 && rolled.abs_diff(total) <= total / 50 + 2,
        "the pod's row counts {rolled} waits, the interval {total}: {pod}"
    );

    // The node: one row per pod and per unit, by name, in text too.
    let (status, stdout, stderr) =
        run_schedlat(&["--cgroups", "--by", "unit", "--top", "0", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let unit = format!("unit = {}", node.unit_name);
    assert!(
        stdout.lines().any(|l| l == unit),
        "no `{unit}` in:\n{stdout}"
    );
    drop(load);
}

/// A containerd task bundle of the test's, removed when dropped.
struct Bundle(std::path::PathBuf);

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn slow_record_and_compare_take_a_workload_and_compare_it_across_a_restart() {
    if !require_root() {
        return;
    }
    let root = keyed_root();
    let node = KubeNode::new(&root);
    let load = load(&node);
    let web = &node.web;
    let dir = std::env::temp_dir().join(format!("schedlat-scopes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("before.json"), dir.join("after.json"));

    // slow -c by the pod's UID: every wait it reports is the pod's.
    let out = std::process::Command::new("timeout")
        .args([
            "-s",
            "INT",
            "2",
            common::SCHEDLAT,
            "slow",
            "--threshold",
            "1us",
            "--json",
        ])
        .args(["-c", &web.uid])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let comms: Vec<String> = (stdout.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "wait")
        .map(|e| e["victim"]["comm"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !comms.is_empty() && comms.iter().all(|c| c == "sh" || c == "sleep"),
        "slow -c {}: {comms:?}\n{}",
        web.uid,
        String::from_utf8_lossy(&out.stderr)
    );

    // record -c by a prefix of the container's ID, keeping what it is.
    let (status, _, stderr) = run_schedlat(&[
        "record",
        "-o",
        a.to_str().unwrap(),
        "-c",
        &web.id[..12],
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let first = std::fs::read_to_string(&a).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["scope"]["workload"], "container shop/web-1/nginx",
        "{first}"
    );
    assert_eq!(
        first["scope"]["cgroup"],
        web.dir.to_string_lossy().as_ref(),
        "{first}"
    );

    // The container restarted: a new ID, a new cgroup in its pod, the same
    // names in its new task bundle; the sleeper moves there.
    let new_id = format!("c0ffee00{}", &web.id[8..]);
    let bundle = Bundle(
        std::path::Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io").join(&new_id),
    );
    std::fs::create_dir_all(&bundle.0).unwrap();
    let config = serde_json::json!({"ociVersion": "1.1.0", "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "nginx",
        "io.kubernetes.cri.sandbox-name": "web-1",
        "io.kubernetes.cri.sandbox-namespace": "shop",
        "io.kubernetes.cri.sandbox-uid": web.uid,
    }});
    std::fs::write(bundle.0.join("config.json"), config.to_string()).unwrap();
    let prefix = format!("/schedlat-test-{}-", std::process::id());
    let name = web
        .cgroup
        .strip_prefix(&prefix)
        .unwrap()
        .replace(&web.id, &new_id);
    let restarted = TestCgroup::new(&root, &name);
    restarted.add(load.pids()[0]);
    let (status, _, stderr) = run_schedlat(&[
        "record",
        "-o",
        b.to_str().unwrap(),
        "-c",
        &new_id[..12],
        "1",
    ]);
    assert!(status.success(), "{stderr}");

    // compare: one container before and after, though its path changed.
    let (status, stdout, stderr) = run_schedlat(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(status.success(), "{stderr}");
    let compared: serde_json::Value = serde_json::from_str(stdout.trim()).expect("compare's JSON");
    assert_eq!(
        compared["scope_differences"],
        serde_json::json!([]),
        "{compared}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows of one victims JSON table whose workload is `name`.
fn rows_named<'a>(table: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    (table.as_array().unwrap().iter())
        .filter(|r| r["workload"]["name"] == name)
        .collect()
}

#[test]
fn victims_name_each_task_by_its_container_and_who_waited_behind_whom() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let load = load(&node);
    let sleeper = load.pids()[0];
    let (web, batch) = (&node.web, &node.batch);
    let cpus = CpuTimes::now();
    let (status, stdout, stderr) = run_schedlat(&[
        "victims",
        "--pairs",
        "--by",
        "container",
        "--top",
        "0",
        "--json",
        "2",
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON interval");
    // The sleeper's shell (alive at the end) by its container, the path kept.
    let row = (r["victims"].as_array().unwrap().iter())
        .find(|v| v["pid"] == sleeper)
        .unwrap_or_else(|| panic!("no victim row of the sleeper {sleeper}: {r}"));
    assert_eq!(row["workload"]["name"], "shop/web-1/nginx", "{row}");
    assert_eq!(row["workload"]["is"], "container", "{row}");
    assert_eq!(row["cgroup"], web.cgroup.as_str(), "{row}");
    // The hogs are culprits, named by their container too.
    let hogs = rows_named(&r["culprits"], "jobs/batch-7/cruncher");
    assert!(!hogs.is_empty(), "no culprit of batch: {}", r["culprits"]);
    assert!(
        hogs.iter().all(|h| h["cgroup"] == batch.cgroup.as_str()),
        "{hogs:?}"
    );
    // Who waited behind whom, named at the container level: web behind
    // batch. The sleeper wakes ~200 times a second beside two hogs on its
    // CPU; on a machine busy with other work the root cgroup's tasks hold
    // most of its waits' ends (measured: 4 of 500 behind the hogs with
    // both CPUs 100% busy), so the pair is only asked to be there, named.
    let pairs = &r["pairs"];
    assert_eq!(pairs["by"], "container");
    let behind = (pairs["rows"].as_array().unwrap().iter())
        .find(|p| p["victim"] == "shop/web-1/nginx" && p["holder"] == "jobs/batch-7/cruncher")
        .unwrap_or_else(|| panic!("no pair web <- batch ({}): {pairs}", cpus.busy_since()));
    assert!(behind["sum_ns"].as_u64().unwrap() > 0, "{behind}");

    // The text: a WORKLOAD column, and the table under its heading.
    let (status, stdout, stderr) =
        run_schedlat(&["victims", "--pairs", "--by", "pod", "--top", "0", "2", "1"]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("WORKLOAD"), "{stdout}");
    let line = (stdout.lines())
        .find(|l| l.split_whitespace().nth(1) == Some(&sleeper.to_string()))
        .unwrap_or_else(|| panic!("no row of the sleeper {sleeper}:\n{stdout}"));
    assert!(
        line.ends_with("container shop/web-1/nginx"),
        "{line}\n{stdout}"
    );
    // Both pods wait (behind each other, or behind the busy machine's
    // other tasks): each is named at the pod level.
    let pairs = stdout
        .split("waiting pod <- pod that held the CPU")
        .nth(1)
        .unwrap_or_else(|| panic!("no pod table:\n{stdout}"));
    for pod in ["shop/web-1", "jobs/batch-7"] {
        assert!(
            pairs.lines().any(|l| l.contains(&format!("  {pod} <- "))),
            "{pod} waited behind no one ({}):\n{stdout}",
            cpus.busy_since()
        );
    }
}

/// serve's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let field = status_field(pid, "VmRSS:");
    field.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn serve_through_a_churn_of_3000_container_cgroups_stays_bounded() {
    if !require_root() {
        return;
    }
    let root = keyed_root();
    // Container-like cgroups under a pod slice, each living ~10 ms.
    let pod = TestCgroup::new(&root, "churn-pod-burstable.slice");
    let server = Server::start(&["--cgroups", "--max-series", "50"]);
    let before = rss_kib(server.pid());
    let (addr, stop) = (server.addr, Arc::new(AtomicBool::new(false)));
    let scraping = Arc::clone(&stop);
    let prefix = pod.rel.clone();
    let scraper = thread::spawn(move || {
        let (mut scrapes, mut most_series, mut unnamed, mut labelled) = (0, 0, Vec::new(), 0);
        while !scraping.load(Ordering::Relaxed) {
            // A scrape that blocked would fail here (10 s read timeout).
            let page = http::get(addr, "/metrics", None)
                .expect("serve answers")
                .body;
            let found = series(&page, "schedlat_cgroup_runqueue_latency_seconds_count");
            most_series = most_series.max(found.len());
            for l in &found {
                if l["cgroup"].contains("(removed, id") {
                    unnamed.push(l["cgroup"].clone());
                }
                if l["cgroup"].starts_with(&prefix) && l.contains_key("container_id") {
                    labelled += 1;
                }
            }
            scrapes += 1;
            thread::sleep(Duration::from_millis(200));
        }
        (scrapes, most_series, unnamed, labelled)
    });
    let made = churn_named(
        &pod,
        &root,
        3000,
        4,
        0.01,
        ("$(printf 'cri-containerd-%064x.scope' $i)", |i| {
            format!("cri-containerd-{i:064x}.scope")
        }),
    );
    stop.store(true, Ordering::Relaxed);
    let (scrapes, most_series, unnamed, labelled) = scraper.join().expect("the scraper");
    let after = rss_kib(server.pid());
    assert_eq!(made.len(), 3000);
    assert!(scrapes >= 5, "{scrapes} scrapes during the churn");
    // --max-series 50, plus the overflow series.
    assert!(most_series <= 51, "{most_series} series in a scrape");
    assert!(unnamed.is_empty(), "unnamed series: {unnamed:?}");
    assert!(
        labelled > 0,
        "no churned container's series carried its container_id in {scrapes} scrapes"
    );
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "serve grew from {before} KiB to {after} KiB through 3,000 cgroups"
    );
    eprintln!(
        "churn of 3000: {scrapes} scrapes, at most {most_series} series, {labelled} churned series with container_id, RSS {before} -> {after} KiB"
    );
}
