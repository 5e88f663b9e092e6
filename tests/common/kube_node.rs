//! A Kubernetes node's cgroups and runtime files as the kubelet and its
//! runtimes lay them out, with no kubelet: real cgroups (in the hierarchy
//! `--cgroups` keys by) under a node cgroup of the test's own, as on a
//! kind node, and the files the runtimes keep their names in, at the
//! host's real places. Everything made is removed when dropped, also when
//! the test fails. One node at a time in a test binary: the tests that
//! make one wait for the one before.
//!
//! - `web`: pod shop/web-1, container nginx, the systemd cgroup driver
//!   with containerd (`kubepods-burstable-pod<uid>.slice/
//!   cri-containerd-<id>.scope`), named by containerd's task bundle;
//! - `batch`: pod jobs/batch-7, container cruncher, the cgroupfs driver
//!   with CRI-O (`kubepods/besteffort/pod<uid>/<id>`), named by CRI-O's
//!   container config;
//! - `unit`: a systemd service of the node (`system.slice/<name>.service`).

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
    time::{SystemTime, UNIX_EPOCH},
};

use super::{
    cgroup::{HOG, Procs, SLEEPER, TestCgroup, other_cpu, pinned_sh, v1_cpu_root, v2_root},
    workload::workload_cpu,
};

/// One container of a pod, as the labels should name it.
pub(crate) struct PodContainer {
    /// Its cgroup, relative to the hierarchy root (the `cgroup` label).
    pub cgroup: String,
    /// Its cgroup's directory.
    pub dir: PathBuf,
    pub namespace: &'static str,
    pub pod: &'static str,
    pub container: &'static str,
    pub id: String,
    /// Dashed, as Kubernetes spells it.
    pub uid: String,
    pub runtime: &'static str,
    pub qos: &'static str,
}

impl PodContainer {
    /// Moves process `pid` into the container's cgroup.
    pub(crate) fn add(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.dir.display()));
    }
}

pub(crate) struct KubeNode {
    pub web: PodContainer,
    pub batch: PodContainer,
    /// The node's systemd service: its cgroup, relative to the root.
    pub unit: PodContainer,
    /// The unit's name (`schedlat-test-<pid>.service`).
    pub unit_name: String,
    /// The hierarchy's mount the node is under.
    root: PathBuf,
    /// Every cgroup made, parents first (removed innermost first).
    groups: Vec<TestCgroup>,
    /// Directories made for the runtimes' files, removed when dropped.
    made: Vec<PathBuf>,
    /// Held while the node exists (its cgroups' names are the test
    /// binary's, the same in every test).
    _one_at_a_time: MutexGuard<'static, ()>,
}

static ONE_NODE: Mutex<()> = Mutex::new(());

/// 64 hex digits unique to this test run, `tag` first.
fn container_id(tag: u32) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag:08x}{:08x}{nanos:048x}", std::process::id())
}

/// A pod UID unique to this test run, dashed.
fn pod_uid(tag: u32) -> String {
    let hex = container_id(tag);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[52..64]
    )
}

impl KubeNode {
    /// The node's cgroups under `root` (a cgroup hierarchy's mount) and
    /// the runtimes' files under `/`.
    pub(crate) fn new(root: &Path) -> KubeNode {
        let one_at_a_time = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
        let (web_id, web_uid) = (container_id(0xa), pod_uid(0xa));
        let (batch_id, batch_uid) = (container_id(0xb), pod_uid(0xb));
        let pid = std::process::id();
        let escaped = web_uid.replace('-', "_");
        // The runtimes write these before they make the cgroups.
        let mut made = Vec::new();
        containerd_bundle(&mut made, &web_id, &web_uid, ("shop", "web-1", "nginx"));
        let userdata = Path::new("/run/containers/storage/overlay-containers")
            .join(&batch_id)
            .join("userdata");
        write_file(
            &mut made,
            &userdata.join("config.json"),
            &serde_json::json!({"ociVersion": "1.0.0", "annotations": {
                "io.kubernetes.cri-o.ContainerType": "container",
                "io.kubernetes.container.name": "cruncher",
                "io.kubernetes.pod.name": "batch-7",
                "io.kubernetes.pod.namespace": "jobs",
                "io.kubernetes.pod.uid": batch_uid,
            }, "linux": {
                "cgroupsPath": format!("/kubepods/besteffort/pod{batch_uid}/{batch_id}"),
            }})
            .to_string(),
        );
        let mut groups = Vec::new();
        let web_leaf = format!(
            "node/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice/cri-containerd-{web_id}.scope"
        );
        let batch_leaf = format!("node/kubepods/besteffort/pod{batch_uid}/{batch_id}");
        let unit_name = format!("schedlat-test-{pid}.service");
        let unit_leaf = format!("node/system.slice/{unit_name}");
        for name in [
            "node".to_string(),
            "node/kubepods.slice".into(),
            "node/kubepods.slice/kubepods-burstable.slice".into(),
            format!(
                "node/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"
            ),
            "node/kubepods".into(),
            "node/kubepods/besteffort".into(),
            format!("node/kubepods/besteffort/pod{batch_uid}"),
            "node/system.slice".into(),
            web_leaf,
            batch_leaf,
            unit_leaf,
        ] {
            groups.push(TestCgroup::new(root, &name));
        }
        let leaf = |i: usize| (groups[i].rel.clone(), PathBuf::from(groups[i].path()));
        let ((web_cgroup, web_dir), (batch_cgroup, batch_dir)) = (leaf(8), leaf(9));
        let (unit_cgroup, unit_dir) = leaf(10);

        KubeNode {
            web: PodContainer {
                cgroup: web_cgroup,
                dir: web_dir,
                namespace: "shop",
                pod: "web-1",
                container: "nginx",
                id: web_id,
                uid: web_uid,
                runtime: "containerd",
                qos: "burstable",
            },
            batch: PodContainer {
                cgroup: batch_cgroup,
                dir: batch_dir,
                namespace: "jobs",
                pod: "batch-7",
                container: "cruncher",
                id: batch_id,
                uid: batch_uid,
                runtime: "",
                qos: "besteffort",
            },
            unit: PodContainer {
                cgroup: unit_cgroup,
                dir: unit_dir,
                namespace: "",
                pod: "",
                container: "",
                id: String::new(),
                uid: String::new(),
                runtime: "",
                qos: "",
            },
            unit_name,
            root: root.to_path_buf(),
            groups,
            made,
            _one_at_a_time: one_at_a_time,
        }
    }
}

impl KubeNode {
    /// The node's own cgroup (the parent of all its pods and units), as a
    /// `-c` argument.
    pub(crate) fn path(&self) -> String {
        self.groups[0].path()
    }

    /// Waits (bounded) until no process is left in any of the node's
    /// cgroups: after that, nothing more of the node waits.
    pub(crate) fn wait_empty(&self) {
        for group in &self.groups {
            group.wait_empty();
        }
    }
}

/// The node's cgroups again in another hierarchy (cgroup v2 beside the
/// v1 cpu hierarchy on a hybrid host), where the kubelet and the runtimes
/// make every cgroup too: the same paths. Removed innermost first when
/// dropped.
pub(crate) struct Mirror {
    root: PathBuf,
    groups: Vec<TestCgroup>,
}

impl KubeNode {
    /// The node's cgroups made again under `root`, with the same paths.
    pub(crate) fn mirror(&self, root: &Path) -> Mirror {
        let groups = self
            .groups
            .iter()
            .map(|g| TestCgroup::new(root, &test_name(&g.rel)))
            .collect();
        Mirror {
            root: root.to_path_buf(),
            groups,
        }
    }

    /// Enables the cpu controller from the node down to each of `leaves`,
    /// as the kubelet does at every level of cgroup v2 (v1 has it
    /// everywhere: the writes fail there, harmlessly).
    pub(crate) fn enable_cpu(&self, leaves: &[&Path]) {
        for leaf in leaves {
            for dir in leaf.ancestors().skip(1) {
                if !dir.starts_with(self.path()) {
                    break;
                }
                let _ = fs::write(dir.join("cgroup.subtree_control"), "+cpu");
            }
        }
    }

    /// The directory of the web pod's own cgroup (its container's parent).
    pub(crate) fn web_pod_dir(&self) -> PathBuf {
        self.web.dir.parent().unwrap().to_path_buf()
    }
}

/// The name `TestCgroup::new` was given for the cgroup at `rel`.
pub(crate) fn test_name(rel: &str) -> String {
    let prefix = format!("/schedlat-test-{}-", std::process::id());
    rel.strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{rel} is no test cgroup"))
        .to_string()
}

impl Mirror {
    /// Moves process `pid` into the mirror's group of path `rel`.
    pub(crate) fn add(&self, rel: &str, pid: u32) {
        let dir = self.root.join(rel.trim_start_matches('/'));
        fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        while let Some(group) = self.groups.pop() {
            drop(group);
        }
    }
}

/// The hierarchy `--cgroups` keys by: v1 cpu on hybrid hosts.
pub(crate) fn keyed_root() -> PathBuf {
    v1_cpu_root().unwrap_or_else(v2_root)
}

/// The node's load: a sleeper in `web`, two hogs in `batch` on the
/// workload CPU (so web's waits are behind batch), a sleeper in the unit
/// on another CPU.
pub(crate) fn load(node: &KubeNode) -> Procs {
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

impl KubeNode {
    /// A second container of pod shop/web-1, `sidecar` (containerd, as
    /// nginx): a cgroup beside nginx's under the pod's, named by its own
    /// task bundle.
    pub(crate) fn web_sidecar(&mut self) -> PodContainer {
        let pod_dir = test_name(&self.web.cgroup);
        let pod_dir = pod_dir.rsplit_once('/').unwrap().0.to_string();
        let uid = self.web.uid.clone();
        self.containerd_container(&pod_dir, &uid, ("shop", "web-1", "sidecar"), 0xc)
    }

    /// Pod shop/api-2, container api: web-1's sibling in the burstable
    /// QoS class (containerd, the systemd driver, as web-1).
    pub(crate) fn burstable_sibling(&mut self) -> PodContainer {
        let uid = pod_uid(0xd);
        let pod_dir = format!(
            "node/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        );
        self.groups.push(TestCgroup::new(&self.root, &pod_dir));
        self.containerd_container(&pod_dir, &uid, ("shop", "api-2", "api"), 0xd)
    }

    /// A containerd container of the pod whose cgroup is `pod_dir` (a
    /// test cgroup's name) and UID `uid`: its task bundle and its cgroup.
    fn containerd_container(
        &mut self,
        pod_dir: &str,
        uid: &str,
        (namespace, pod, container): (&'static str, &'static str, &'static str),
        tag: u32,
    ) -> PodContainer {
        let id = container_id(tag);
        containerd_bundle(&mut self.made, &id, uid, (namespace, pod, container));
        let group = TestCgroup::new(&self.root, &format!("{pod_dir}/cri-containerd-{id}.scope"));
        let made = PodContainer {
            cgroup: group.rel.clone(),
            dir: PathBuf::from(group.path()),
            namespace,
            pod,
            container,
            id,
            uid: uid.to_string(),
            runtime: "containerd",
            qos: "burstable",
        };
        self.groups.push(group);
        made
    }
}

/// containerd's task bundle of container `id` of pod `uid` (burstable,
/// the systemd driver), as the CRI plugin writes it before the cgroup.
fn containerd_bundle(
    made: &mut Vec<PathBuf>,
    id: &str,
    uid: &str,
    (namespace, pod, container): (&str, &str, &str),
) {
    let bundle = Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io").join(id);
    let escaped = uid.replace('-', "_");
    write_file(
        made,
        &bundle.join("config.json"),
        &serde_json::json!({"ociVersion": "1.1.0", "annotations": {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.container-name": container,
            "io.kubernetes.cri.sandbox-name": pod,
            "io.kubernetes.cri.sandbox-namespace": namespace,
            "io.kubernetes.cri.sandbox-uid": uid,
        }, "linux": {
            "cgroupsPath": format!("kubepods-burstable-pod{escaped}.slice:cri-containerd:{id}"),
        }})
        .to_string(),
    );
}

/// Writes `text` to `file`, noting the outermost directory it had to
/// make (removed when the node is dropped).
fn write_file(made: &mut Vec<PathBuf>, file: &Path, text: &str) {
    let dir = file.parent().unwrap();
    let mut outermost = dir;
    while let Some(parent) = outermost.parent().filter(|p| !p.exists()) {
        outermost = parent;
    }
    made.push(outermost.to_path_buf());
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    fs::write(file, text).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
}

impl Drop for KubeNode {
    fn drop(&mut self) {
        for dir in &self.made {
            let _ = fs::remove_dir_all(dir);
        }
        while let Some(group) = self.groups.pop() {
            drop(group);
        }
    }
}
