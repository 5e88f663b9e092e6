//! A Kubernetes-like node (both kubelet cgroup drivers, containerd and
//! CRI-O files, a systemd service; tests/common/kube_node.rs) with a
//! sleeper in one container and hogs in another on one CPU: every view
//! names the pods, containers and unit as their owners know them.
//! Root: these load eBPF programs.

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
    cgroup::{HOG, Procs, SLEEPER, TestCgroup, churn_named, pinned_sh},
    cpu::CpuTimes,
    http,
    kube_node::{KubeNode, keyed_root, load},
    prometheus::{PROMETHEUS, Prometheus},
    require_root, run_schedlat,
    serve::Server,
    status_field,
    workload::workload_cpu,
};

use crate::common;

#[path = "kube_node/views.rs"]
mod views;

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

/// Issue 48, item 5, as the attacker would do it: user 65534, given a
/// delegated subtree (`user@65534.service`, as systemd delegates one to
/// every logged-in user), makes a cgroup named like the web pod's
/// container scope there and runs a busy loop in it. The real container
/// keeps its names; the look-alike takes none of them (no runtime's
/// record puts a container there), and the two are never one series.
#[test]
fn a_users_look_alike_of_a_container_scope_takes_none_of_its_names() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let root = keyed_root();
    // systemd's layout: user.slice/user-UID.slice/user@UID.service,
    // the last owned by the user (Delegate=yes).
    let service = node
        .web
        .dir
        .ancestors()
        .nth(4)
        .expect("the node's cgroup")
        .join("user.slice/user-65534.slice/user@65534.service");
    std::fs::create_dir_all(&service).unwrap();
    let mut look_alike = LookAlike {
        service: service.clone(),
        process: None,
    };
    for file in ["", "cgroup.procs", "tasks"] {
        let path = service.join(file);
        if path.exists() {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        }
    }
    let scope = format!("cri-containerd-{}.scope", node.web.id);
    let fake = service.join("app.slice").join(&scope);
    let script = format!(
        "sleep 0.3; mkdir -p {dir} && echo $$ > {dir}/cgroup.procs && exec taskset -c {cpu} sh -c '{HOG}'",
        dir = fake.display(),
        cpu = workload_cpu(),
    );
    let nobody = look_alike.process.insert(
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                &script,
            ])
            .spawn()
            .expect("setpriv"),
    );
    // Root puts it in the subtree; from there on it moves itself.
    std::fs::write(service.join("cgroup.procs"), nobody.id().to_string()).unwrap();
    let fake_rel = format!("/{}", fake.strip_prefix(&root).unwrap().display());
    let server = Server::start(&["--cgroups"]);
    let found = scrape_until(&server, &[&node.web.cgroup, &fake_rel]);
    let web = of(&found, &node.web.cgroup);
    assert_eq!(web.get("pod").map(String::as_str), Some("web-1"), "{web:?}");
    assert_eq!(
        web.get("container").map(String::as_str),
        Some("nginx"),
        "{web:?}"
    );
    let fake_labels = of(&found, &fake_rel);
    // What its own path says (runtime and container_id, read off the scope's
    // name, as for any cgroup) it keeps; the names the system runtime's
    // record gives the real container, none.
    for label in ["namespace", "pod", "container", "pod_uid"] {
        assert!(
            !fake_labels.contains_key(label),
            "the look-alike made by uid 65534 took `{label}`: {fake_labels:?} (the real one: {web:?})"
        );
    }
    drop(server);
    drop(look_alike);
}

/// Ends the look-alike's process and removes its cgroups, innermost first,
/// also when the test fails.
struct LookAlike {
    service: std::path::PathBuf,
    process: Option<std::process::Child>,
}

impl Drop for LookAlike {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // Its shell execs taskset, which execs the loop's shell: one
            // process all along.
            let _ = process.kill();
            let _ = process.wait();
        }
        let mut dirs: Vec<std::path::PathBuf> = walk(&self.service);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            for _ in 0..50 {
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
        if let Some(user_slice) = self.service.parent().and_then(Path::parent) {
            let _ = std::fs::remove_dir(user_slice.join("user-65534.slice"));
            let _ = std::fs::remove_dir(user_slice);
        }
    }
}

/// `dir` and every directory below it.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&entry.path()));
            }
        }
    }
    out
}
