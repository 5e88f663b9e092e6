//! The names a container's runtime keeps on the host's disk: the pod's
//! name, its namespace and the container's name, as the kubelet passed
//! them to the runtime (annotations of the OCI bundle, labels of Docker's
//! config), or the name a user gave `podman run --name`. Parsers of the
//! files' text (tests and fuzz targets feed them), and where each runtime
//! keeps its files.
//!
//! Sources, by runtime:
//! - containerd: each running task's OCI bundle,
//!   `/run/containerd/io.containerd.runtime.v2.task/<namespace>/<id>/config.json`
//!   (annotations `io.kubernetes.cri.sandbox-name`, `-namespace`, `-uid`,
//!   `container-name`, `container-type`; nerdctl's `nerdctl/name`);
//! - CRI-O and podman (containers/storage): `<root>/overlay-containers/
//!   <id>/userdata/config.json` under `/run/containers/storage` and
//!   `/var/lib/containers/storage` (CRI-O's annotations
//!   `io.kubernetes.pod.name`, `.namespace`, `.uid`,
//!   `io.kubernetes.container.name`), and the storage's
//!   `overlay-containers/containers.json` for the name podman gave it;
//! - Docker: `/var/lib/docker/containers/<id>/config.v2.json` (`Name`, and
//!   the `io.kubernetes.*` labels cri-dockerd sets).
//!
//! A runtime whose only source is its socket (none of these, on a layout
//! where the files are elsewhere or unreadable) gets no names: the labels
//! from the path still hold.

use std::{
    collections::HashMap,
    fs, io,
    io::Read,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::path::Runtime;

/// Which file a name came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameSource {
    /// containerd's OCI bundle of the running task (config.json).
    ContainerdBundle,
    /// The OCI config of a containers/storage container (CRI-O, podman).
    StorageConfig,
    /// containers/storage's containers.json (the name podman gave it).
    StorageContainers,
    /// Docker's config.v2.json.
    DockerConfig,
}

impl NameSource {
    /// As shown beside a name (`--json`, docs/containers.md).
    pub fn as_str(self) -> &'static str {
        match self {
            NameSource::ContainerdBundle => "containerd-bundle",
            NameSource::StorageConfig => "storage-config",
            NameSource::StorageContainers => "storage-containers",
            NameSource::DockerConfig => "docker-config",
        }
    }
}

/// A container's names, as far as its runtime's files say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerNames {
    /// The container's name (Kubernetes' container name, or the name
    /// Docker or podman gave it).
    pub container: Option<String>,
    /// The pod's name and namespace, and UID, for a Kubernetes container.
    pub pod: Option<String>,
    pub namespace: Option<String>,
    pub pod_uid: Option<String>,
    /// The pod's sandbox (pause) container rather than one of its own.
    pub sandbox: bool,
    /// Where the names came from; None when nothing was found.
    pub source: Option<NameSource>,
    /// The cgroups the runtime's own record puts the container in (the
    /// OCI `linux.cgroupsPath`, Docker's cgroup parent), from the
    /// hierarchy's root: the names are a cgroup's only when it is one of
    /// these ([`ContainerNames::hold_for`]). Empty when the record says
    /// none: then no cgroup takes them.
    pub cgroups: Vec<String>,
}

impl ContainerNames {
    fn is_empty(&self) -> bool {
        self.container.is_none() && self.pod.is_none() && self.namespace.is_none()
    }

    /// Whether these names are those of the cgroup at `path`, container
    /// `id`: the container's own cgroup in the path (up to the component
    /// with its ID: a cgroup below it is still the container's) is one the
    /// runtime's record names, whole or as its end (a node whose runtime
    /// runs in a cgroup namespace of its own, as kind's, records the path
    /// below the node's cgroup). A cgroup anyone else made with the ID in
    /// its name, elsewhere, is not the container's.
    pub fn hold_for(&self, path: &str, id: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        let Some(at) = parts.iter().rposition(|p| p.contains(id)) else {
            return false;
        };
        let own = parts[..=at].join("/");
        self.cgroups.iter().any(|c| own.ends_with(c.as_str()))
    }
}

/// The cgroup an OCI `linux.cgroupsPath` puts a container in, from the
/// hierarchy's root: systemd's `slice:prefix:name` (the unit
/// `prefix-name.scope` in the slice, its dashes the slices above it, as
/// runc and crun place it), or a cgroupfs path.
pub fn oci_cgroup(cgroups_path: &str) -> Option<String> {
    let fields: Vec<&str> = cgroups_path.split(':').collect();
    if let [slice, prefix, name] = fields[..] {
        if name.is_empty() {
            return None;
        }
        let unit = if name.ends_with(".slice") {
            name.to_string()
        } else if prefix.is_empty() {
            format!("{name}.scope")
        } else {
            format!("{prefix}-{name}.scope")
        };
        let slice = if slice.is_empty() {
            "system.slice"
        } else {
            slice
        };
        return Some(format!("{}/{unit}", slice_path(slice)?));
    }
    let path = cgroups_path.trim_matches('/');
    (!path.is_empty() && fields.len() == 1).then(|| format!("/{path}"))
}

/// A systemd slice's cgroup: `a-b-c.slice` is `/a.slice/a-b.slice/a-b-c.slice`,
/// `-.slice` the root.
fn slice_path(slice: &str) -> Option<String> {
    if slice == "-.slice" {
        return Some(String::new());
    }
    let name = slice.strip_suffix(".slice")?;
    let mut path = String::new();
    for (i, _) in name.match_indices('-').chain([(name.len(), "")]) {
        path.push('/');
        path.push_str(&name[..i]);
        path.push_str(".slice");
    }
    Some(path)
}

/// The cgroup an OCI config's `linux.cgroupsPath` names, if it has one.
fn config_cgroups(config: &Value) -> Vec<String> {
    config
        .pointer("/linux/cgroupsPath")
        .and_then(Value::as_str)
        .and_then(oci_cgroup)
        .into_iter()
        .collect()
}

/// The cgroups Docker puts container `id` in, from its hostconfig.json's
/// `CgroupParent`: under a systemd slice the unit `docker-<id>.scope`,
/// under a cgroupfs parent the directory `<id>`; with none, either of the
/// defaults (`/system.slice/docker-<id>.scope`, `/docker/<id>`), as the
/// daemon's cgroup driver chooses.
pub fn parse_docker_cgroups(hostconfig: &str, id: &str) -> Vec<String> {
    let Ok(config) = serde_json::from_str::<Value>(hostconfig) else {
        return Vec::new();
    };
    let parent = config
        .get("CgroupParent")
        .and_then(Value::as_str)
        .unwrap_or("");
    let scope = format!("docker-{id}.scope");
    if parent.is_empty() {
        vec![format!("/system.slice/{scope}"), format!("/docker/{id}")]
    } else if parent.ends_with(".slice") && !parent.contains('/') {
        slice_path(parent)
            .map(|s| vec![format!("{s}/{scope}")])
            .unwrap_or_default()
    } else {
        vec![format!("/{}/{id}", parent.trim_matches('/'))]
    }
}

/// The longest name kept: Kubernetes object names are at most 253
/// characters (DNS subdomain), container names 63.
const MAX_NAME: usize = 253;

/// The largest file read: bundles and configs are tens of KiB;
/// containers.json grows by about 1 KiB per container.
const MAX_FILE: u64 = 16 << 20;

/// The largest containers.json read: it is read one entry at a time
/// ([`parse_storage_containers`]), so only the time to read it bounds it
/// (a quarter of a million containers).
const MAX_STREAMED: u64 = 256 << 20;

/// A name as a label may carry it: the characters Kubernetes, Docker and
/// podman allow in names (letters, digits, `.`, `_`, `-`), at most
/// 253 bytes (`MAX_NAME`). Anything else is not a name they gave: dropped.
pub fn clean_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then(|| s.to_string())
}

/// The annotations of an OCI runtime config (config.json).
fn annotations(config: &Value) -> HashMap<&str, &str> {
    config
        .get("annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The names in an OCI config's annotations, under `keys` (pod name,
/// namespace, pod UID, container name, container type and its sandbox
/// value).
fn from_annotations(
    text: &str,
    keys: [&str; 5],
    sandbox_value: &str,
    source: NameSource,
) -> Option<ContainerNames> {
    let config: Value = serde_json::from_str(text).ok()?;
    let a = annotations(&config);
    let get = |k: &str| a.get(k).and_then(|v| clean_name(v));
    let [pod, namespace, uid, container, kind] = keys;
    let names = ContainerNames {
        pod: get(pod),
        namespace: get(namespace),
        pod_uid: a
            .get(uid)
            .filter(|u| super::path::is_pod_uid(u))
            .map(|u| u.to_string()),
        container: get(container).or_else(|| get("nerdctl/name")),
        sandbox: a.get(kind) == Some(&sandbox_value),
        source: Some(source),
        cgroups: config_cgroups(&config),
    };
    (!names.is_empty() || names.sandbox).then_some(names)
}

/// containerd's bundle config.json (CRI annotations, or nerdctl's name).
pub fn parse_containerd_bundle(text: &str) -> Option<ContainerNames> {
    from_annotations(
        text,
        [
            "io.kubernetes.cri.sandbox-name",
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.cri.sandbox-uid",
            "io.kubernetes.cri.container-name",
            "io.kubernetes.cri.container-type",
        ],
        "sandbox",
        NameSource::ContainerdBundle,
    )
}

/// A containers/storage container's config.json, as CRI-O writes it.
pub fn parse_storage_config(text: &str) -> Option<ContainerNames> {
    from_annotations(
        text,
        [
            "io.kubernetes.pod.name",
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.uid",
            "io.kubernetes.container.name",
            "io.kubernetes.cri-o.ContainerType",
        ],
        "sandbox",
        NameSource::StorageConfig,
    )
}

/// The name containers/storage keeps for container `id` (its first in
/// `names`: what `podman ps` shows), read from `reader` one entry at a
/// time: the file grows by about 1 KiB per container, and only one entry
/// (and the match) is held, not the whole list.
pub fn parse_storage_containers(reader: impl Read, id: &str) -> Option<ContainerNames> {
    use serde::de::{Deserializer as _, SeqAccess, Visitor};

    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        id: String,
        #[serde(default)]
        names: Vec<String>,
    }
    struct Find<'a>(&'a str);
    impl<'de> Visitor<'de> for Find<'_> {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of containers")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            // Every entry is read (the list must end well), one at a time.
            while let Some(entry) = seq.next_element::<Entry>()? {
                if found.is_none() && entry.id == self.0 {
                    found = entry.names.into_iter().next();
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_reader(io::BufReader::new(reader));
    let name = (&mut de).deserialize_seq(Find(id)).ok()??;
    de.end().ok()?;
    Some(ContainerNames {
        container: Some(clean_name(&name)?),
        source: Some(NameSource::StorageContainers),
        ..ContainerNames::default()
    })
}

/// Docker's config.v2.json: `Name` (with Docker's leading `/`), and the
/// Kubernetes labels cri-dockerd puts on the containers it makes.
pub fn parse_docker_config(text: &str) -> Option<ContainerNames> {
    let config: Value = serde_json::from_str(text).ok()?;
    let labels = config.pointer("/Config/Labels").and_then(Value::as_object);
    let label = |k: &str| labels?.get(k)?.as_str().and_then(clean_name);
    let kube_name = label("io.kubernetes.container.name");
    let own = config
        .get("Name")
        .and_then(Value::as_str)
        .and_then(|n| clean_name(n.trim_start_matches('/')));
    let names = ContainerNames {
        container: kube_name.filter(|n| n != "POD").or(own),
        pod: label("io.kubernetes.pod.name"),
        namespace: label("io.kubernetes.pod.namespace"),
        pod_uid: label("io.kubernetes.pod.uid").filter(|u| super::path::is_pod_uid(u)),
        sandbox: label("io.kubernetes.docker.type").as_deref() == Some("podsandbox"),
        source: Some(NameSource::DockerConfig),
        cgroups: Vec::new(),
    };
    (!names.is_empty()).then_some(names)
}

/// Where the runtimes keep their files: the host's usual places, under
/// `root` (`/`, or where the host's file system is mounted when schedlat
/// runs in a container: docs/containers.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameRoots {
    /// containerd's v2 task directories (one subdirectory per namespace).
    pub containerd_tasks: Vec<PathBuf>,
    /// containers/storage roots (run root, graph root).
    pub storage: Vec<PathBuf>,
    pub docker: PathBuf,
}

impl NameRoots {
    pub fn under(root: &Path) -> NameRoots {
        let at = |p: &str| root.join(p);
        NameRoots {
            containerd_tasks: vec![
                at("run/containerd/io.containerd.runtime.v2.task"),
                at("run/containerd/io.containerd.runtime.v1.linux"),
            ],
            storage: vec![
                at("run/containers/storage"),
                at("var/lib/containers/storage"),
            ],
            docker: at("var/lib/docker/containers"),
        }
    }

    /// The names of container `id` (64 hex digits, checked), from the
    /// sources of `runtime`, or of every runtime when the path did not
    /// say. Reads files: callers that must not wait use [`super::cache`].
    pub fn resolve(&self, id: &str, runtime: Option<Runtime>) -> Option<ContainerNames> {
        if !super::path::is_container_id(id) {
            return None;
        }
        let wants = |r: Runtime| runtime.is_none_or(|want| want == r);
        let containerd = || {
            self.containerd_tasks.iter().find_map(|tasks| {
                let namespaces = fs::read_dir(tasks).ok()?;
                namespaces.flatten().find_map(|ns| {
                    let text = read_capped(&ns.path().join(id).join("config.json")).ok()?;
                    parse_containerd_bundle(&text)
                })
            })
        };
        let storage = || {
            self.storage.iter().find_map(|root| {
                let dir = root.join("overlay-containers");
                let config = read_capped(&dir.join(id).join("userdata/config.json")).ok();
                let kube = config.as_deref().and_then(parse_storage_config);
                kube.or_else(|| {
                    let list = open_capped(&dir.join("containers.json"), MAX_STREAMED).ok()?;
                    // podman's name, in the cgroup its config puts it.
                    let cgroups = serde_json::from_str(config.as_deref()?)
                        .map(|c| config_cgroups(&c))
                        .ok()?;
                    Some(ContainerNames {
                        cgroups,
                        ..parse_storage_containers(list, id)?
                    })
                })
            })
        };
        let docker = || {
            let dir = self.docker.join(id);
            let text = read_capped(&dir.join("config.v2.json")).ok()?;
            let hostconfig = read_capped(&dir.join("hostconfig.json")).unwrap_or_default();
            let mut cgroups = parse_docker_cgroups(&hostconfig, id);
            // Docker's own OCI spec, where containerd runs its containers
            // (namespace moby): its cgroupsPath also holds a parent set
            // for the whole daemon (`--cgroup-parent`), which
            // hostconfig.json does not.
            for tasks in &self.containerd_tasks {
                let spec = read_capped(&tasks.join("moby").join(id).join("config.json"));
                if let Ok(config) = serde_json::from_str(&spec.unwrap_or_default()) {
                    cgroups.extend(config_cgroups(&config));
                }
            }
            Some(ContainerNames {
                cgroups,
                ..parse_docker_config(&text)?
            })
        };
        let mut found = None;
        if wants(Runtime::Containerd) {
            found = found.or_else(containerd);
        }
        if wants(Runtime::CriO) || wants(Runtime::Podman) {
            found = found.or_else(storage);
        }
        if wants(Runtime::Docker) {
            found = found.or_else(docker);
        }
        found
    }
}

/// A regular file's text, up to [`MAX_FILE`] bytes. A FIFO or a device
/// planted there is refused, not read: it is opened without blocking.
fn read_capped(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open_capped(path, MAX_FILE)?.read_to_string(&mut text)?;
    Ok(text)
}

/// A regular file, opened without blocking (a FIFO or a device planted
/// there is refused, not read) nor following a link in its own name, to
/// be read up to `cap` bytes; a larger one is refused.
fn open_capped(path: &Path, cap: u64) -> io::Result<io::Take<fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    // Cut at the cap, the JSON would not parse and the names would be
    // missing without a word: said once per run, and not read.
    if meta.len() > cap {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            say!(
                "schedlat: {} is {} MiB, over the {} MiB read for container names: the names it holds are not read (said once)",
                path.display(),
                meta.len() >> 20,
                cap >> 20
            );
        });
        return Err(io::Error::other("over the size read"));
    }
    Ok(file.take(cap))
}

#[cfg(test)]
mod tests;
