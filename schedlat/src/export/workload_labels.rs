//! What a cgroup's series says of the workload it is, beside its path:
//! the labels the path carries (`unit`, `slice`, `pod_uid`,
//! `container_id`, `runtime`, `qos`: sys/workload/path.rs) and, where the
//! container runtime's files name it, `namespace`, `pod` and `container`
//! spelled as cAdvisor (the kubelet's `container_*` metrics) and
//! kube-state-metrics spell them, so a query joins schedlat's series with
//! theirs `on (namespace, pod, container)` without relabelling.
//!
//! A label is absent, not empty, where the cgroup has nothing to say
//! (a system service has no pod): Prometheus treats both alike. These
//! labels are fixed with the series' (keyed_series.rs): they describe the
//! key, never split it, so the number of series is the same with or
//! without them. `serve --cgroup-labels` keeps a subset.

use super::model::Labels;
use crate::sys::workload::level::Workload;

/// One label a cgroup's series may carry besides `cgroup`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WorkloadLabel {
    /// The Kubernetes namespace of its pod (the runtime's files).
    Namespace,
    /// Its pod's name (the runtime's files).
    Pod,
    /// Its container's name (the runtime's files); `POD` for a pod's
    /// sandbox (pause) container, as cAdvisor long named it.
    Container,
    /// Its systemd unit: `nginx.service`, `cri-containerd-<id>.scope`.
    Unit,
    /// The innermost slice it is in.
    Slice,
    /// Its pod's UID, dashed as Kubernetes spells it (kube-state-metrics'
    /// `uid`).
    PodUid,
    /// Its container's 64-hex-digit ID.
    ContainerId,
    /// The runtime that made it: docker, containerd, cri-o, podman.
    Runtime,
    /// Its pod's QoS class: guaranteed, burstable, besteffort.
    Qos,
}

impl WorkloadLabel {
    /// Every label, in the order a series carries them.
    pub(crate) const ALL: [WorkloadLabel; 9] = [
        WorkloadLabel::Namespace,
        WorkloadLabel::Pod,
        WorkloadLabel::Container,
        WorkloadLabel::Unit,
        WorkloadLabel::Slice,
        WorkloadLabel::PodUid,
        WorkloadLabel::ContainerId,
        WorkloadLabel::Runtime,
        WorkloadLabel::Qos,
    ];

    /// The label's name on the waiting side (the cgroup whose tasks
    /// waited), and on the holding side of a pair of cgroups.
    pub(crate) fn names(self) -> (&'static str, &'static str) {
        match self {
            WorkloadLabel::Namespace => ("namespace", "holder_namespace"),
            WorkloadLabel::Pod => ("pod", "holder_pod"),
            WorkloadLabel::Container => ("container", "holder_container"),
            WorkloadLabel::Unit => ("unit", "holder_unit"),
            WorkloadLabel::Slice => ("slice", "holder_slice"),
            WorkloadLabel::PodUid => ("pod_uid", "holder_pod_uid"),
            WorkloadLabel::ContainerId => ("container_id", "holder_container_id"),
            WorkloadLabel::Runtime => ("runtime", "holder_runtime"),
            WorkloadLabel::Qos => ("qos", "holder_qos"),
        }
    }

    /// The label's name as `--cgroup-labels` takes it.
    pub(crate) fn name(self) -> &'static str {
        self.names().0
    }

    /// Its value for `workload`; None where it has none.
    pub(crate) fn value(self, workload: &Workload) -> Option<String> {
        let (labels, names) = (&workload.labels, workload.names.as_ref());
        let named = |f: fn(&_) -> &Option<String>| names.and_then(|n| f(n).clone());
        match self {
            WorkloadLabel::Namespace => named(|n| &n.namespace),
            WorkloadLabel::Pod => named(|n| &n.pod),
            WorkloadLabel::Container => named(|n| &n.container).or_else(|| {
                names
                    .filter(|n| n.sandbox && n.pod.is_some())
                    .map(|_| "POD".to_string())
            }),
            WorkloadLabel::Unit => labels.unit.clone(),
            WorkloadLabel::Slice => labels.slice.clone(),
            WorkloadLabel::PodUid => labels.pod_uid.clone().or_else(|| named(|n| &n.pod_uid)),
            WorkloadLabel::ContainerId => labels.container_id.clone(),
            WorkloadLabel::Runtime => labels.runtime.map(|r| r.as_str().to_string()),
            WorkloadLabel::Qos => labels.qos.map(|q| q.as_str().to_string()),
        }
    }

    /// The label called `name`, as `--cgroup-labels` takes it.
    pub(crate) fn parse(name: &str) -> Option<WorkloadLabel> {
        WorkloadLabel::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// Which of the workload labels the cgroups' series carry (all by
/// default; `serve --cgroup-labels` keeps fewer, for smaller scrapes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkloadLabels {
    kept: Vec<WorkloadLabel>,
}

impl Default for WorkloadLabels {
    fn default() -> WorkloadLabels {
        WorkloadLabels {
            kept: WorkloadLabel::ALL.to_vec(),
        }
    }
}

impl WorkloadLabels {
    /// Only these (in the order of [`WorkloadLabel::ALL`]); none at all
    /// leaves the `cgroup` label alone.
    pub(crate) fn only(kept: &[WorkloadLabel]) -> WorkloadLabels {
        WorkloadLabels {
            kept: (WorkloadLabel::ALL.into_iter())
                .filter(|l| kept.contains(l))
                .collect(),
        }
    }

    /// Whether a label kept comes from the runtimes' files (namespace,
    /// pod, container): else they need not be read at all.
    pub(crate) fn needs_runtime_files(&self) -> bool {
        (self.kept.iter()).any(|l| {
            matches!(
                l,
                WorkloadLabel::Namespace | WorkloadLabel::Pod | WorkloadLabel::Container
            )
        })
    }

    /// `workload`'s labels, those it has values for, named
    /// `name(label)`: [`WorkloadLabel::name`] for the cgroup whose tasks
    /// waited, the second of [`WorkloadLabel::names`] (`holder_pod`...)
    /// for the holding side of a pair.
    pub(crate) fn of(
        &self,
        workload: &Workload,
        name: fn(WorkloadLabel) -> &'static str,
    ) -> Labels {
        (self.kept.iter())
            .filter_map(|&l| Some((name(l), l.value(workload)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::workload::{
        level::tests::{ID, UID_, workload},
        names::{ContainerNames, NameSource},
    };

    fn kube_names(container: Option<&str>, sandbox: bool) -> ContainerNames {
        ContainerNames {
            container: container.map(Into::into),
            pod: Some("web-1".into()),
            namespace: Some("shop".into()),
            pod_uid: Some("3f1c2d4e-5b6a-7c8d-9e0f-123456789abc".into()),
            sandbox,
            source: Some(NameSource::ContainerdBundle),
            cgroups: Vec::new(),
        }
    }

    fn kube_path() -> String {
        format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"
        )
    }

    #[test]
    fn a_named_kubernetes_container_carries_cadvisors_names_and_the_paths_labels() {
        let w = workload(&kube_path(), Some(kube_names(Some("nginx"), false)));
        let labels = WorkloadLabels::default().of(&w, WorkloadLabel::name);
        let want: Labels = vec![
            ("namespace", "shop".into()),
            ("pod", "web-1".into()),
            ("container", "nginx".into()),
            ("unit", format!("cri-containerd-{ID}.scope")),
            ("slice", format!("kubepods-burstable-pod{UID_}.slice")),
            ("pod_uid", "3f1c2d4e-5b6a-7c8d-9e0f-123456789abc".into()),
            ("container_id", ID.into()),
            ("runtime", "containerd".into()),
            ("qos", "burstable".into()),
        ];
        assert_eq!(labels, want);
        // The holding side: the same values under holder_ names.
        let holder = WorkloadLabels::default().of(&w, |l| l.names().1);
        assert_eq!(holder.len(), want.len());
        assert!(holder.iter().all(|(n, _)| n.starts_with("holder_")));
        assert_eq!(holder[2], ("holder_container", "nginx".into()));
    }

    #[test]
    fn labels_without_a_value_are_absent_and_the_sandbox_is_pod() {
        // Before (or without) the runtime's files: the path's labels only.
        let bare = WorkloadLabels::default().of(&workload(&kube_path(), None), WorkloadLabel::name);
        let names: Vec<_> = bare.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["unit", "slice", "pod_uid", "container_id", "runtime", "qos"]
        );
        // A service: its unit and slice, nothing of Kubernetes.
        let svc = WorkloadLabels::default().of(
            &workload("/system.slice/nginx.service", None),
            WorkloadLabel::name,
        );
        assert_eq!(
            svc,
            vec![
                ("unit", "nginx.service".to_string()),
                ("slice", "system.slice".to_string())
            ]
        );
        // The root cgroup, or a path that is no cgroup's: nothing.
        assert!(
            WorkloadLabels::default()
                .of(&workload("/", None), WorkloadLabel::name)
                .is_empty()
        );
        let hostile = workload("/kubepods/../etc", None);
        assert!(
            WorkloadLabels::default()
                .of(&hostile, WorkloadLabel::name)
                .is_empty()
        );
        // The pod's sandbox: container="POD".
        let sandbox = workload(&kube_path(), Some(kube_names(None, true)));
        let labels = WorkloadLabels::default().of(&sandbox, WorkloadLabel::name);
        assert!(labels.contains(&("container", "POD".into())), "{labels:?}");
    }

    #[test]
    fn the_allow_list_keeps_only_its_labels_in_the_usual_order() {
        let w = workload(&kube_path(), Some(kube_names(Some("nginx"), false)));
        let kept = WorkloadLabels::only(&[WorkloadLabel::Container, WorkloadLabel::Pod]);
        assert_eq!(
            kept.of(&w, WorkloadLabel::name),
            vec![("pod", "web-1".into()), ("container", "nginx".into())]
        );
        assert!(
            WorkloadLabels::only(&[])
                .of(&w, WorkloadLabel::name)
                .is_empty()
        );
        for l in WorkloadLabel::ALL {
            assert_eq!(WorkloadLabel::parse(l.name()), Some(l));
        }
        assert_eq!(WorkloadLabel::parse("cgroup"), None);
    }
}
