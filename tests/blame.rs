//! Root: who the NoisyNeighbour alert names, over a small labelled set of
//! cases induced on a node laid out as the kubelet makes it
//! (tests/common/kube_node.rs), each scraped by a real Prometheus that
//! evaluates the mixin's rules and alerts. In every case the victim is
//! pod shop/web-1's sleeper (container nginx) on one CPU, and what shares
//! that CPU with it is the case:
//!
//! | case | the right answer |
//! |---|---|
//! | nothing else (steal-free idle) | nobody |
//! | a sibling pod of its QoS class with more CPU weight | the sibling, as holder |
//! | a pod of another QoS class with more CPU weight | that pod, as holder |
//! | its own loop under its own `cpu.max` | nobody (self: its quota) |
//! | its pod's second container with more CPU weight | nobody (self: its pod) |
//! | root-cgroup system load | the root cgroup, as holder |
//! | another pod's loops and a root-cgroup loop (the kubelet case) | the pod, as having used the shared group's share |
//!
//! Precision: every alert raised during a case names one of that case's
//! parties (nobody in the self and idle cases, and never the victim);
//! recall: the right party is named for the victim. An alert counts from
//! the moment it is pending: its `for` is longer than a test.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Child,
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{Procs, fifo_bursts, niced_loop, python_sleeper},
    cpu::CpuTimes,
    kube_node::{KubeNode, PodContainer, keyed_root},
    prometheus::{PROMETHEUS, Prometheus},
    require_root,
    serve::Server,
    workload::workload_cpu,
};

use crate::common;

/// How long a case is watched at least, and at most while the right
/// party is not yet named.
const AT_LEAST: Duration = Duration::from_secs(15);
const AT_MOST: Duration = Duration::from_secs(40);

/// An alert: (victim's cgroup, holder's cgroup, role).
type Named = (String, String, String);

const HELD: &str = "held_cpu";
const USED_SHARE: &str = "used_share";

/// The rendered rules and alerts of the mixin.
fn rule_files() -> [PathBuf; 2] {
    let mixin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mixin/rendered");
    [mixin.join("rules.yaml"), mixin.join("alerts.yaml")]
}

/// The NoisyNeighbour alerts pending or firing now.
fn noisy_neighbour_alerts(prometheus: &Prometheus) -> BTreeSet<Named> {
    let label = |a: &serde_json::Value, l: &str| a["metric"][l].as_str().unwrap_or("").to_string();
    (prometheus
        .query("ALERTS{alertname=\"NoisyNeighbour\"}", None)
        .iter())
    .map(|a| {
        (
            label(a, "cgroup"),
            label(a, "holder_cgroup"),
            label(a, "role"),
        )
    })
    .collect()
}

/// What the alert read of `victim` at the end, for failure messages: its
/// p99, its share of waits held by another cgroup, its own throttling and
/// its neighbours' ratios.
fn inputs(prometheus: &Prometheus, victim: &str) -> String {
    let of = |record: &str| {
        let expr = format!("{record}{{cgroup=\"{victim}\"}}");
        let values: Vec<String> = (prometheus.query(&expr, None).iter())
            .map(|s| {
                let holder = s["metric"]["holder_cgroup"].as_str().unwrap_or("");
                format!("{holder} {}", s["value"][1].as_str().unwrap_or("?"))
            })
            .collect();
        format!("{record}: {values:?}")
    };
    [
        "cgroup:schedlat_runqueue_latency_seconds:p99_rate5m",
        "cgroup:schedlat_runqueue_wait_held_by_others:ratio_rate5m",
        "cgroup:schedlat_runqueue_wait_throttled:ratio_rate5m",
        "cgroup_holder:schedlat_neighbour_wait_seconds:ratio_rate5m",
        "cgroup_holder:schedlat_neighbour_share_seconds:ratio_rate5m",
    ]
    .map(of)
    .join("; ")
}

/// Watches the node with `serve --cgroups --pairs` and a Prometheus that
/// evaluates the mixin every second, for AT_LEAST and until every one of
/// `wanted` is named (at most AT_MOST): every alert seen meanwhile, and
/// what the alert read of web-1 at the end.
fn alerts_during(node: &KubeNode, wanted: &[Named]) -> (BTreeSet<Named>, String) {
    let server = Server::start(&["--cgroups", "--pairs", "-c", &node.path()]);
    let prometheus =
        Prometheus::launch(Path::new(PROMETHEUS), server.addr, "1s", &[], &rule_files());
    let began = Instant::now();
    let mut seen = BTreeSet::new();
    loop {
        thread::sleep(Duration::from_secs(1));
        seen.extend(noisy_neighbour_alerts(&prometheus));
        let elapsed = began.elapsed();
        let all_named = wanted.iter().all(|w| seen.contains(w));
        if elapsed >= AT_MOST || (elapsed >= AT_LEAST && all_named) {
            return (seen, inputs(&prometheus, &node.web.cgroup));
        }
    }
}

/// Sets the CPU weight of the cgroup at `dir`: v1 `cpu.shares` or v2
/// `cpu.weight`, whichever its hierarchy has (v1's range 2..262144, v2's
/// 1..10000: `shares` is given in v1's and scaled as the kubelet does).
fn weigh(dir: &Path, shares: u64) {
    if dir.join("cpu.shares").exists() {
        fs::write(dir.join("cpu.shares"), shares.to_string()).expect("cpu.shares");
        return;
    }
    let weight = 1 + (shares.saturating_sub(2) * 9999) / 262_142;
    fs::write(dir.join("cpu.weight"), weight.to_string())
        .unwrap_or_else(|e| panic!("cpu.weight of {}: {e}", dir.display()));
}

/// Caps the cgroup at `dir` at `quota_us` per 100 ms: v1 cfs quota or v2
/// cpu.max, whichever its hierarchy has.
fn cap(dir: &Path, quota_us: u64) {
    if dir.join("cpu.cfs_quota_us").exists() {
        fs::write(dir.join("cpu.cfs_period_us"), "100000").expect("cpu.cfs_period_us");
        fs::write(dir.join("cpu.cfs_quota_us"), quota_us.to_string()).expect("cpu.cfs_quota_us");
    } else {
        fs::write(dir.join("cpu.max"), format!("{quota_us} 100000")).expect("cpu.max");
    }
}

/// `n` busy loops on `cpu` at `nice`, each moved into `into`'s cgroup.
fn loops_in(cpu: usize, n: usize, nice: i32, into: &Path) -> Vec<Child> {
    (0..n)
        .map(|_| {
            let child = niced_loop(cpu, nice);
            fs::write(into.join("cgroup.procs"), child.id().to_string())
                .unwrap_or_else(|e| panic!("into {}: {e}", into.display()));
            child
        })
        .collect()
}

/// The directory of a container's pod (its parent).
fn pod_of(c: &PodContainer) -> &Path {
    c.dir.parent().unwrap()
}

/// One case: a fresh node, web-1's sleeper on the workload CPU, then
/// `load` (given the node, the CPU and the hierarchy's root: the
/// processes it started and the case's parties, each a holder cgroup and
/// role that must be named for web-1, and any other holder an alert may
/// name). Checks precision and recall as the module says.
fn case(
    name: &str,
    load: impl FnOnce(
        &mut KubeNode,
        usize,
        &Path,
    ) -> (Vec<Child>, Vec<(String, &'static str)>, Vec<String>),
) {
    let root = keyed_root();
    let mut node = KubeNode::new(&root);
    let cpu = workload_cpu();
    let mut procs = vec![python_sleeper(cpu)];
    node.web.add(procs[0].id());
    let (more, named, also) = load(&mut node, cpu, &root);
    procs.extend(more);
    let procs = Procs(procs);
    let victim = node.web.cgroup.clone();
    let wanted: Vec<Named> = (named.iter())
        .map(|(holder, role)| (victim.clone(), holder.clone(), role.to_string()))
        .collect();
    let times = CpuTimes::now();
    let (seen, read) = alerts_during(&node, &wanted);
    let busy = format!("{}; the alert read of web-1: {read}", times.busy_since());
    drop(procs);
    node.wait_empty();
    drop(node);
    let missed: Vec<&Named> = wanted.iter().filter(|w| !seen.contains(w)).collect();
    assert!(
        missed.is_empty(),
        "{name}: NoisyNeighbour did not name {missed:?}; it named {seen:?} ({busy})"
    );
    let parties: BTreeSet<&String> = named.iter().map(|(h, _)| h).chain(&also).collect();
    let wrong: Vec<&Named> = (seen.iter())
        .filter(|(_, holder, _)| !parties.contains(holder) || *holder == victim)
        .collect();
    assert!(
        wrong.is_empty(),
        "{name}: NoisyNeighbour named {wrong:?}, none of them a party of the case ({parties:?}) ({busy})"
    );
    eprintln!("{name}: named {seen:?} ({busy})");
}

/// More weight for the noisy side, less for the victim's: the kubelet
/// gives a pod cpu.shares by its requests (1,024 a CPU, 2 for best
/// effort), so a pod that requests 8 CPUs beside one that requests 20 m.
const HEAVY: u64 = 8192;
const LIGHT: u64 = 20;

#[test]
fn steal_free_idle_names_nobody() {
    if !require_root() {
        return;
    }
    case("idle", |_, _, _| (vec![], vec![], vec![]));
}

#[test]
fn a_heavier_sibling_pod_is_named_as_holder() {
    if !require_root() {
        return;
    }
    case("a sibling pod", |node, cpu, _| {
        let sibling = node.burstable_sibling();
        node.enable_cpu(&[&sibling.dir, &node.web.dir]);
        weigh(pod_of(&sibling), HEAVY);
        weigh(pod_of(&node.web), LIGHT);
        let loops = loops_in(cpu, 2, 0, &sibling.dir);
        (loops, vec![(sibling.cgroup, HELD)], vec![])
    });
}

#[test]
fn a_heavier_pod_of_another_qos_class_is_named_as_holder() {
    if !require_root() {
        return;
    }
    case("a pod of another QoS class", |node, cpu, _| {
        node.enable_cpu(&[&node.batch.dir, &node.web.dir]);
        // The QoS classes' groups meet at the node's queue.
        let batch_qos = pod_of(&node.batch).parent().unwrap().parent().unwrap();
        let web_qos = pod_of(&node.web).parent().unwrap().parent().unwrap();
        weigh(batch_qos, HEAVY);
        weigh(web_qos, LIGHT);
        let loops = loops_in(cpu, 2, 0, &node.batch.dir);
        (loops, vec![(node.batch.cgroup.clone(), HELD)], vec![])
    });
}

#[test]
fn a_container_throttled_by_its_own_quota_names_nobody() {
    if !require_root() {
        return;
    }
    case("its own cpu.max", |node, cpu, _| {
        node.enable_cpu(&[&node.web.dir]);
        cap(&node.web.dir, 20_000);
        let loops = loops_in(cpu, 1, 0, &node.web.dir);
        (loops, vec![], vec![])
    });
}

#[test]
fn its_own_pods_second_container_names_nobody() {
    if !require_root() {
        return;
    }
    case("its pod's second container", |node, cpu, _| {
        let sidecar = node.web_sidecar();
        node.enable_cpu(&[&sidecar.dir]);
        weigh(&sidecar.dir, HEAVY);
        weigh(&node.web.dir, LIGHT);
        let loops = loops_in(cpu, 2, 0, &sidecar.dir);
        (loops, vec![], vec![])
    });
}

#[test]
fn root_cgroup_load_is_named_as_the_root_cgroup() {
    if !require_root() {
        return;
    }
    case("root-cgroup load", |_, cpu, root| {
        // A real-time system daemon of the root cgroup that runs in
        // bursts of 20 ms. Fair load there does not make web-1 wait past
        // a slice (measured, p99: 3.9 ms beside four busy loops with the
        // node's group at a fiftieth of their weight; 3.4 ms beside 20 ms
        // bursts at nice -19).
        let loops = vec![fifo_bursts(cpu)];
        fs::write(root.join("cgroup.procs"), loops[0].id().to_string()).expect("to the root");
        (loops, vec![("/".to_string(), HELD)], vec![])
    });
}

#[test]
fn the_pod_that_used_the_shared_groups_share_is_named_for_it() {
    if !require_root() {
        return;
    }
    case("the kubelet case", |node, cpu, root| {
        node.enable_cpu(&[&node.batch.dir, &node.web.dir]);
        let mut loops = loops_in(cpu, 2, 0, &node.batch.dir);
        loops.extend(loops_in(cpu, 1, 0, root));
        let batch = node.batch.cgroup.clone();
        // Both parties also hold the CPU during some of web-1's waits.
        (
            loops,
            vec![(batch.clone(), USED_SHARE)],
            vec![batch, "/".to_string()],
        )
    });
}
