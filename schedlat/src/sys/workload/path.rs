//! What a cgroup path says about its workload, read from the path alone:
//! the systemd unit and slice, the Kubernetes pod UID and QoS class, the
//! container ID and the runtime that made it. No file is read, no API
//! asked, no privilege needed: the kubelet, systemd and the container
//! runtimes name their cgroups after these, and the names are kept as
//! they are spelled (docs/containers.md lists the layouts).
//!
//! The path is relative to its hierarchy's root (as `/proc/PID/cgroup`
//! prints it), in any hierarchy (cgroup v2 or a v1 controller: the
//! runtimes lay out every hierarchy alike), from either kubelet cgroup
//! driver:
//!
//! - systemd: `/kubepods.slice/kubepods-burstable.slice/
//!   kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope`;
//! - cgroupfs: `/kubepods/burstable/pod<uid>/<id>`;
//! - a runtime's systemd path used as a directory name:
//!   `.../kubepods-pod<uid>.slice:cri-containerd:<id>`;
//! - nested: a node that is itself a container (kind, k3d), whose pods'
//!   paths start with the node's own (`/system.slice/docker-<node>.scope/
//!   kubelet.slice/...`): the innermost pod and the container inside it
//!   are the workload's.
//!
//! Every label is checked against the alphabet its owner allows (hex IDs,
//! UUIDs, systemd's unit-name characters): a component that does not fit
//! gives no label, so a hostile directory name never reaches a label.

/// The workload labels of one cgroup path; each None when the path does
/// not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathLabels {
    /// The innermost systemd unit (`nginx.service`, `session-3.scope`,
    /// `user@1000.service`, `cri-containerd-<id>.scope`).
    pub unit: Option<String>,
    /// The innermost systemd slice (`system.slice`,
    /// `kubepods-burstable-pod<uid>.slice`).
    pub slice: Option<String>,
    /// The Kubernetes pod's UID, dashed as the API spells it whichever
    /// driver wrote it (systemd writes `_` for `-`).
    pub pod_uid: Option<String>,
    /// The container's ID: 64 lowercase hex digits, bare (the form
    /// cAdvisor's `id` ends with and the CRI reports).
    pub container_id: Option<String>,
    /// The runtime the container's cgroup name shows.
    pub runtime: Option<Runtime>,
    /// The pod's QoS class.
    pub qos: Option<Qos>,
    /// The user's service manager (`user@1000.service`) the container or
    /// pod is under: a subtree systemd delegates to that user, who may
    /// name cgroups there anything, `docker-<another's ID>.scope` too. Such
    /// a container is that user's (rootless podman), never a system
    /// runtime's: it is named from no system runtime's files and never
    /// adds up with a system container of the same ID.
    pub delegated: Option<String>,
}

/// A container runtime, as its cgroup names show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// `docker-<id>.scope`, `/docker/<id>`.
    Docker,
    /// `cri-containerd-<id>.scope`, `nerdctl-<id>.scope`.
    Containerd,
    /// `crio-<id>.scope`, `crio-<id>`.
    CriO,
    /// `libpod-<id>.scope`, `libpod-<id>`.
    Podman,
}

impl Runtime {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Podman => "podman",
        }
    }
}

/// A pod's QoS class (the kubelet's cgroup per class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl Qos {
    /// The label value, as kube-state-metrics' `qos_class` spells it
    /// lowercased.
    pub fn as_str(self) -> &'static str {
        match self {
            Qos::Guaranteed => "guaranteed",
            Qos::Burstable => "burstable",
            Qos::BestEffort => "besteffort",
        }
    }
}

/// Longer paths are not parsed: the kernel's own cgroup path buffer for
/// its tracepoints is 1 KiB (kernel/cgroup/cgroup.c
/// TRACE_CGROUP_PATH_LEN), and the deepest real layout (a kind node's
/// pod) is under 400 bytes.
pub const MAX_PATH: usize = 4096;

/// systemd's limit on a unit name (src/basic/unit-name.h UNIT_NAME_MAX).
const MAX_UNIT: usize = 255;

/// The hex digits of a container ID.
const ID_LEN: usize = 64;

/// The labels `path` carries. A path with a `.` or `..` component, a NUL,
/// or over [`MAX_PATH`] bytes is not a cgroup path: no labels.
pub fn parse(path: &str) -> PathLabels {
    let mut labels = PathLabels::default();
    if path.len() > MAX_PATH || path.contains('\0') {
        return labels;
    }
    let parts = components(path);
    if parts.iter().any(|(_, p)| *p == Part::Dots) {
        return labels;
    }
    // The innermost pod decides which containers are its: those below it.
    // A container above it is the node the pod runs in (kind, k3d).
    let pod_at = parts
        .iter()
        .rposition(|(_, p)| matches!(p, Part::Pod { .. }));
    let below_pod = pod_at.map_or(0, |i| i + 1);
    let mut after_docker = false;
    // The user's service manager the path went through so far.
    let mut manager: Option<&str> = None;
    for (i, (name, part)) in parts.iter().enumerate() {
        match part {
            Part::Container { runtime, id } if i >= below_pod => {
                labels.container_id = Some(id.clone());
                labels.runtime = *runtime;
                labels.delegated = manager.map(str::to_string);
            }
            Part::Bare(id) if i >= below_pod => {
                labels.container_id = Some(id.clone());
                labels.runtime = after_docker.then_some(Runtime::Docker);
                labels.delegated = manager.map(str::to_string);
            }
            Part::Pod { uid, qos } if Some(i) == pod_at => {
                labels.pod_uid = Some(uid.clone());
                labels.delegated = manager.map(str::to_string);
                // The pod's own name says its class (systemd); else the
                // class cgroup above it; else it is directly under
                // kubepods: guaranteed.
                labels.qos = Some(qos.or(labels.qos).unwrap_or(Qos::Guaranteed));
            }
            Part::Qos(q) if pod_at.is_some_and(|p| i < p) => labels.qos = Some(*q),
            _ => {}
        }
        if is_unit_name(name) {
            if name.ends_with(".slice") {
                labels.slice = Some(name.to_string());
            } else if UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                labels.unit = Some(name.to_string());
            }
        }
        after_docker = *part == Part::Docker;
        if is_user_manager(name) {
            manager = Some(name);
        }
    }
    labels
}

/// `user@<uid>.service`: a user's service manager, whose subtree systemd
/// delegates to that user.
fn is_user_manager(name: &str) -> bool {
    name.strip_prefix("user@")
        .and_then(|rest| rest.strip_suffix(".service"))
        .is_some_and(|uid| !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit()))
}

/// What one path component is, as far as the labels go.
#[derive(Debug, PartialEq, Eq)]
enum Part {
    /// `.` or `..`: never in a real cgroup path.
    Dots,
    /// A runtime's container cgroup: `<prefix>-<id>[.scope]`, or the
    /// systemd `slice:prefix:id` form.
    Container {
        runtime: Option<Runtime>,
        id: String,
    },
    /// 64 hex digits alone: a cgroupfs container (runtime from context).
    Bare(String),
    /// A pod's cgroup, with its QoS class when its name says (systemd).
    Pod { uid: String, qos: Option<Qos> },
    /// A QoS class cgroup: `burstable`, `kubepods-besteffort.slice`...
    Qos(Qos),
    /// `docker`: Docker's cgroupfs containers are its children.
    Docker,
    /// Anything else (units and slices are named from the component).
    Other,
}

/// The unit suffixes of cgroups with processes (systemd
/// src/basic/unit-def.h: services, scopes, sockets, mounts, swaps).
const UNIT_SUFFIXES: [&str; 5] = [".service", ".scope", ".socket", ".mount", ".swap"];

/// The container cgroup prefixes: `<prefix>-<id>`, with `.scope` under
/// the systemd cgroup driver. Monitors (`crio-conmon-<id>`,
/// `libpod-conmon-<id>`) are not the container: their prefix is longer
/// and does not match.
const CONTAINER_PREFIXES: [(&str, Runtime); 5] = [
    ("docker", Runtime::Docker),
    ("cri-containerd", Runtime::Containerd),
    ("nerdctl", Runtime::Containerd),
    ("crio", Runtime::CriO),
    ("libpod", Runtime::Podman),
];

/// The path's components, each with what it is. A component in the
/// systemd `slice:prefix:id` form counts as two: its slice, then its
/// container.
fn components(path: &str) -> Vec<(&str, Part)> {
    let mut parts = Vec::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        if let Some((slice, container)) = colon_form(c) {
            parts.push((slice, classify(slice)));
            parts.push((c, container));
        } else {
            parts.push((c, classify(c)));
        }
    }
    parts
}

fn classify(c: &str) -> Part {
    if c == "." || c == ".." {
        return Part::Dots;
    }
    if is_container_id(c) {
        return Part::Bare(c.to_string());
    }
    if let Some(part) = container_scope(c) {
        return part;
    }
    if let Some(part) = pod_or_qos(c) {
        return part;
    }
    if c == "docker" {
        return Part::Docker;
    }
    Part::Other
}

/// `<prefix>-<id>` or `<prefix>-<id>.scope`.
fn container_scope(c: &str) -> Option<Part> {
    let stem = c.strip_suffix(".scope").unwrap_or(c);
    let (prefix, id) = stem.rsplit_once('-')?;
    let runtime = runtime_of(prefix)?;
    is_container_id(id).then(|| Part::Container {
        runtime: Some(runtime),
        id: id.to_string(),
    })
}

/// `<slice>:<prefix>:<id>`: a runtime's systemd cgroup path
/// (`kubepods-burstable-pod<uid>.slice:cri-containerd:<id>`) taken as a
/// directory name (a runtime configured for systemd cgroups on a host
/// where systemd does not manage them). Its slice part names the pod.
fn colon_form(c: &str) -> Option<(&str, Part)> {
    let mut fields = c.split(':');
    let (slice, prefix, id) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || !is_container_id(id) {
        return None;
    }
    let container = Part::Container {
        runtime: runtime_of(prefix),
        id: id.to_string(),
    };
    Some((slice, container))
}

fn runtime_of(prefix: &str) -> Option<Runtime> {
    CONTAINER_PREFIXES
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, r)| *r)
}

/// A pod or a QoS class cgroup, in either driver's spelling:
/// `pod<uid>`, `burstable`, `besteffort` (cgroupfs), or a slice whose last
/// dash-separated word is `pod<uid_>` or a class (`kubepods-burstable-
/// pod<uid_>.slice`, `kubelet-kubepods-besteffort.slice`).
fn pod_or_qos(c: &str) -> Option<Part> {
    let Some(stem) = c.strip_suffix(".slice") else {
        // cgroupfs: the UID keeps its dashes.
        if let Some(uid) = c.strip_prefix("pod") {
            return is_pod_uid(uid).then(|| Part::Pod {
                uid: uid.to_string(),
                qos: None,
            });
        }
        return qos_of(c).map(Part::Qos);
    };
    if !stem.contains("kubepods") {
        return None;
    }
    // systemd: dashes separate the slice's ancestry, so the UID's are `_`.
    let mut words = stem.rsplit('-');
    let last = words.next()?;
    if let Some(uid) = last.strip_prefix("pod") {
        let uid = uid.replace('_', "-");
        return is_pod_uid(&uid).then(|| Part::Pod {
            uid,
            qos: words.next().and_then(qos_of),
        });
    }
    qos_of(last).map(Part::Qos)
}

fn qos_of(word: &str) -> Option<Qos> {
    match word {
        "burstable" => Some(Qos::Burstable),
        "besteffort" => Some(Qos::BestEffort),
        _ => None,
    }
}

/// 64 lowercase hex digits.
pub fn is_container_id(s: &str) -> bool {
    s.len() == ID_LEN && is_lower_hex(s)
}

/// A pod UID: a dashed UUID (8-4-4-4-12 hex digits), or 32 hex digits (a
/// static pod's UID is its manifest's hash).
pub fn is_pod_uid(s: &str) -> bool {
    if s.len() == 32 {
        return is_lower_hex(s);
    }
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A name systemd accepts for a unit: ASCII letters, digits and `:-_.\@`,
/// at most 255 bytes, not starting with a dot (src/basic/unit-name.c
/// VALID_CHARS, unit_name_is_valid()).
fn is_unit_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_UNIT
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
}

#[cfg(test)]
mod tests;
