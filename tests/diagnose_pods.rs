//! `schedlat diagnose -c` on a kubelet-shaped node (tests/common/kube_node.rs,
//! its cgroups in both hierarchies on a hybrid host, as the kubelet makes
//! them): every name `-c` takes elsewhere resolves, a pod's cgroup is read
//! with its containers below it, and the pod's own containers and threads,
//! and the root cgroup's own tasks, are told apart from its neighbours.
//! Root, on the real kernel.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use common::{
    SCHEDLAT,
    cgroup::{HOG, Procs, SLEEPER, TestCgroup, pinned_sh, v1_cpu_root, v2_root},
    cpu::CpuTimes,
    kube_node::{KubeNode, Mirror, keyed_root, test_name},
    require_root,
    workload::workload_cpu,
};

use crate::common;

/// The node in the hierarchy `--cgroups` keys by, and on a hybrid host
/// its mirror in cgroup v2 (where a group's cpu.pressure is).
fn node() -> (KubeNode, Option<Mirror>) {
    let root = keyed_root();
    let node = KubeNode::new(&root);
    let mirror = (root != v2_root()).then(|| node.mirror(&v2_root()));
    (node, mirror)
}

/// Moves `pid` into the group at `rel` in both hierarchies.
fn place(dir: &Path, rel: &str, mirror: &Option<Mirror>, pid: u32) {
    fs::write(dir.join("cgroup.procs"), pid.to_string())
        .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
    if let Some(m) = mirror {
        m.add(rel, pid);
    }
}

/// Another container of the web pod (a sidecar), in both hierarchies;
/// removed before the node.
struct Sidecar {
    groups: Vec<TestCgroup>,
}

fn sidecar(node: &KubeNode, tag: &str) -> Sidecar {
    let pod = test_name(&node.web.cgroup);
    let pod = pod.rsplit_once('/').unwrap().0;
    let name = format!("{pod}/cri-containerd-{}.scope", tag.repeat(64 / tag.len()));
    let mut roots = vec![keyed_root()];
    if roots[0] != v2_root() {
        roots.push(v2_root());
    }
    Sidecar {
        groups: roots.iter().map(|r| TestCgroup::new(r, &name)).collect(),
    }
}

impl Sidecar {
    fn add(&self, pid: u32) {
        for g in &self.groups {
            g.add(pid);
        }
    }
}

/// Gives the node's cgroup the most CPU weight its hierarchy allows (v1
/// cpu.shares, v2 cpu.weight where the controller is enabled), so that
/// the host's other work (a CI build beside the test) takes a negligible
/// share of the workload CPU from the node's pods: the cases built here
/// are about what the pod's own tasks do to each other.
fn favour(node: &KubeNode) {
    let dir = PathBuf::from(node.path());
    for (file, max) in [("cpu.shares", "262144"), ("cpu.weight", "10000")] {
        if dir.join(file).exists() {
            fs::write(dir.join(file), max).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}

/// `schedlat diagnose --json -d SECS ARGS`: the report, and how busy the
/// CPUs were meanwhile (for failure messages).
fn diagnose(secs: u32, args: &[&str]) -> (serde_json::Value, String) {
    let cpus = CpuTimes::now();
    let out = Command::new(SCHEDLAT)
        .args(["diagnose", "--json", "-d", &secs.to_string()])
        .args(args)
        .output()
        .expect("schedlat runs");
    let busy = format!("{}; load {}", cpus.busy_since(), load());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "diagnose {args:?} failed ({busy}): {stderr}"
    );
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {stderr}"));
    (report, busy)
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn cause_names(r: &serde_json::Value) -> Vec<String> {
    (r["causes"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every next step the report proposes, one string.
fn steps(r: &serde_json::Value) -> String {
    (r["causes"].as_array().unwrap().iter())
        .filter_map(|c| c["next_step"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `whose` of the culprit rows that have one.
fn whose(r: &serde_json::Value) -> Vec<String> {
    (r["ebpf"]["victims"]["culprits"].as_array().unwrap().iter())
        .filter_map(|c| Some(c["whose"].as_str()?.to_string()))
        .collect()
}

/// A cap on the root cgroup, in any wording the steps use.
fn caps_the_root(steps: &str) -> bool {
    [
        "cap / ",
        "cap /,",
        "cap /)",
        "of cgroup /)",
        "than /,",
        "than / ",
    ]
    .iter()
    .any(|s| steps.contains(s))
}

/// Issue 42: `-c` with a pod UID (dashed and underscored), a container ID
/// prefix, a systemd unit and the pod's own directory each resolves; the
/// pod's cgroup, which holds no task itself, is read with its container
/// below it (a busy loop and a sleeper there: threads found), and nothing
/// blames the kernel's schedstat or PSI. Before: "no cgroup ..." for the
/// names, and for the pod "schedstat reads zero (CONFIG_SCHED_INFO off?)"
/// and "PSI is unavailable".
#[test]
fn diagnose_takes_every_name_of_a_workload_and_reads_a_pods_subtree() {
    if !require_root() {
        return;
    }
    let (node, mirror) = node();
    let cpu = workload_cpu();
    let procs = Procs(vec![
        pinned_sh(cpu, SLEEPER),
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, SLEEPER),
    ]);
    let pids = procs.pids();
    for &pid in &pids[..2] {
        place(&node.web.dir, &node.web.cgroup, &mirror, pid);
    }
    place(&node.unit.dir, &node.unit.cgroup, &mirror, pids[2]);
    let pod_dir = node.web_pod_dir();
    let underscored = node.web.uid.replace('-', "_");
    let cases: [(&str, &str, usize); 5] = [
        ("the pod UID", &node.web.uid, 2),
        ("the pod UID with underscores", &underscored, 2),
        ("a container ID prefix", &node.web.id[..12], 2),
        ("the unit", &node.unit_name, 1),
        ("the pod's directory", pod_dir.to_str().unwrap(), 2),
    ];
    let pod_rel = test_name(&node.web.cgroup);
    let pod_rel = pod_rel.rsplit_once('/').unwrap().0;
    for (what, arg, min_threads) in cases {
        let (r, busy) = diagnose(1, &["-c", arg]);
        let threads = r["findings"]["threads"].as_u64().unwrap();
        assert!(
            threads as usize >= min_threads,
            "{what} ({arg}): {threads} threads ({busy}): {r}"
        );
        let scope = r["scope"].as_str().unwrap();
        let wanted = if what == "the unit" {
            node.unit_name.as_str()
        } else {
            pod_rel
        };
        assert!(scope.contains(wanted), "{what}: scope {scope}");
        let waiting = r["waiting"].to_string();
        assert!(
            !waiting.contains("CONFIG_SCHED_INFO") && !waiting.contains("PSI is unavailable"),
            "{what} ({arg}) blames the kernel ({busy}): {waiting}"
        );
        // Its PSI is its own group's (cgroup v2, the twin on a hybrid host).
        assert!(
            !r["findings"]["psi_cgroup"].is_null(),
            "{what} ({arg}): no PSI of its own ({busy}): {r}"
        );
    }
    drop(procs);
    node.wait_empty();
}

/// A process of two threads: one sleeping 5 ms at a time, one hashing
/// (CPython releases its lock while hashing a large buffer, so the hashing
/// thread holds the CPU, not the lock), both pinned to `cpu`.
fn two_threads(cpu: usize) -> Child {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "python3", "-c"])
        .arg(
            "import hashlib, threading, time\n\
             data = b'x' * (1 << 24)\n\
             def busy():\n    while True: hashlib.sha256(data).digest()\n\
             threading.Thread(target=busy, daemon=True).start()\n\
             while True: time.sleep(0.005)",
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset and python3 run")
}

/// Issue 42: a pod's waits behind its own containers and its own threads
/// are its own, never a neighbour's. A busy loop in each of the pod's
/// three containers (and the web container's sleeper), on one CPU: every
/// wait of a loop ends when another container's loop leaves the CPU, so
/// the kernel's split counts most of the pod's waiting as held by another
/// cgroup (another css_set), and before this diagnose named the pod's own
/// sidecars its noisy neighbours to cap. Then a process whose second
/// thread is the holder. The node is given the CPU's weight over the
/// host's other work (`favour`), so these are the pod's waits.
#[test]
fn a_pods_own_container_or_thread_is_no_neighbour() {
    if !require_root() {
        return;
    }
    let (node, mirror) = node();
    favour(&node);
    let sidecars = [sidecar(&node, "5c"), sidecar(&node, "6d")];
    let cpu = workload_cpu();
    let procs = Procs(vec![
        pinned_sh(cpu, SLEEPER),
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, HOG),
    ]);
    let pids = procs.pids();
    for &pid in &pids[..2] {
        place(&node.web.dir, &node.web.cgroup, &mirror, pid);
    }
    sidecars[0].add(pids[2]);
    sidecars[1].add(pids[3]);
    let (r, busy) = diagnose(3, &["-c", &node.web.uid]);
    drop(procs);
    let held_by = &r["ebpf"]["causes"]["held_by"];
    let sum = |class: &str| held_by[class]["sum_ns"].as_u64().unwrap_or(0);
    assert!(
        sum("other_cgroup") > sum("same_cgroup"),
        "the split did not count most waits behind another css_set: the case is not built ({busy}): {held_by}"
    );
    assert_eq!(
        r["waiting"]["verdict"], "significant",
        "three loops on one CPU did not wait ({busy}): {r}"
    );
    let names = cause_names(&r);
    assert!(
        !names.iter().any(|n| n.starts_with("noisy neighbour")),
        "the pod's own sidecars named its neighbours ({busy}): {r}"
    );
    // The waits are the pod's own contention, its containers' loops in it.
    let inside = (r["causes"].as_array().unwrap().iter())
        .find(|c| c["name"] == "contention inside the cgroup")
        .unwrap_or_else(|| panic!("{names:?} ({busy}): {r}"));
    let evidence = inside["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("the scope's own tasks in other groups below it"),
        "{evidence}"
    );
    assert!(!caps_the_root(&steps(&r)), "{}", steps(&r));
    assert!(
        whose(&r).contains(&"own".to_string()),
        "{:?} ({busy})",
        whose(&r)
    );
    drop(sidecars);

    // The waiter's own second thread holds the CPU.
    let child = two_threads(cpu);
    place(&node.web.dir, &node.web.cgroup, &mirror, child.id());
    let procs = Procs(vec![child]);
    let (r, busy) = diagnose(3, &["-c", &node.web.id[..16]]);
    drop(procs);
    let names = cause_names(&r);
    assert!(
        !names.iter().any(|n| n.starts_with("noisy neighbour")),
        "its own thread named a neighbour ({busy}): {r}"
    );
    assert!(r["findings"]["threads"].as_u64().unwrap() >= 2, "{r}");
    node.wait_empty();
}

/// Issue 42: behind the root cgroup's own tasks (busy loops nobody placed
/// in a group), the report names them as such and proposes no cap on `/`
/// (the root has no cpu.max). Before: "cap /".
#[test]
fn the_root_cgroups_own_tasks_are_named_and_never_capped() {
    if !require_root() {
        return;
    }
    let (node, mirror) = node();
    let cpu = workload_cpu();
    let procs = Procs(vec![
        pinned_sh(cpu, SLEEPER),
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, HOG),
    ]);
    let pids = procs.pids();
    place(&node.web.dir, &node.web.cgroup, &mirror, pids[0]);
    let roots: Vec<PathBuf> = [Some(v2_root()), v1_cpu_root()]
        .into_iter()
        .flatten()
        .collect();
    for &hog in &pids[1..] {
        for root in &roots {
            fs::write(root.join("cgroup.procs"), hog.to_string()).unwrap();
        }
    }
    let pod = node.web_pod_dir();
    let (r, busy) = diagnose(3, &["-c", pod.to_str().unwrap()]);
    drop(procs);
    let all = steps(&r);
    assert!(!caps_the_root(&all), "a cap on / ({busy}): {all}");
    let neighbour = (r["causes"].as_array().unwrap().iter())
        .find(|c| c["name"] == "noisy neighbour (other cgroups)")
        .unwrap_or_else(|| panic!("no noisy neighbour ({busy}): {r}"));
    let evidence = neighbour["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("the root cgroup's own tasks"),
        "{evidence} ({busy})"
    );
    let step = neighbour["next_step"].as_str().unwrap();
    assert!(step.contains("no cpu.max"), "{step}");
    // The culprits table says whose the loops are.
    assert!(
        whose(&r).contains(&"root-cgroup".to_string()),
        "{:?} ({busy})",
        whose(&r)
    );
    node.wait_empty();
}
