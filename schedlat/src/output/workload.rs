//! A cgroup as the workload it is, for people (a table cell) and for
//! machines (the JSON object the breakdown keys and the victims rows carry).

use serde_json::json;

use super::escape::printable;
use crate::{
    collect::workloads::TaskWorkload,
    sys::workload::{
        level::{Level, Workload},
        names::ContainerNames,
    },
};

/// A cgroup as a workload (docs/json.md `breakdown`, `victims`): what its
/// owner calls it, and every label and name known, null where unknown.
pub(crate) fn workload_json(w: &Workload) -> serde_json::Value {
    let (is, name) = w.owner_name();
    let (labels, names) = (&w.labels, w.names.as_ref());
    let named = |f: fn(&ContainerNames) -> &Option<String>| names.and_then(|n| f(n).clone());
    json!({
        "is": is,
        "name": name,
        "namespace": named(|n| &n.namespace),
        "pod": named(|n| &n.pod),
        "container": named(|n| &n.container),
        "unit": labels.unit,
        "slice": labels.slice,
        "pod_uid": labels.pod_uid,
        "container_id": labels.container_id,
        "runtime": labels.runtime.map(|r| r.as_str()),
        "qos": labels.qos.map(|q| q.as_str()),
        "names_from": names.and_then(|n| n.source).map(|s| s.as_str()),
    })
}

/// A row of cgroups rolled up at `level` (`--by`), from `w`, one of them:
/// `is` the level and `name` its name there, the labels finer than the
/// level (a pod's containers, a unit's container) null.
pub(crate) fn rolled_up_json(level: Level, w: &Workload) -> serde_json::Value {
    let mut json = workload_json(w);
    json["is"] = level.as_str().into();
    json["name"] = w.name_at(level).into();
    let finer: &[&str] = match level {
        Level::Cgroup | Level::Container => &[],
        Level::Pod => &["container", "container_id", "runtime", "unit"],
        Level::Unit => &[
            "container",
            "container_id",
            "namespace",
            "pod",
            "pod_uid",
            "qos",
        ],
    };
    for field in finer {
        json[*field] = serde_json::Value::Null;
    }
    json
}

/// A task's workload in a table's last column: `container shop/web-1/nginx`,
/// `unit nginx.service`, `pod ...`, else the cgroup's path; `(exited)` for
/// a task that had exited when it was read (its cgroup no longer known),
/// `-` for one in no cgroup known (the idle task).
pub(crate) fn cell(w: Option<&TaskWorkload>) -> String {
    match w {
        Some(TaskWorkload::Exited) => "(exited)".to_string(),
        Some(TaskWorkload::In(w)) => match w.owner_name() {
            ("cgroup", path) => printable(&path).into_owned(),
            (is, name) => format!("{is} {}", printable(&name)),
        },
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::workload::path;

    fn at(p: &str) -> Workload {
        Workload {
            path: p.to_string(),
            labels: path::parse(p),
            names: None,
        }
    }

    #[test]
    fn a_cell_says_what_the_cgroup_is_and_keeps_hostile_names_inert() {
        let cell_at = |p| cell(Some(&TaskWorkload::In(Box::new(at(p)))));
        assert_eq!(cell_at("/system.slice/nginx.service"), "unit nginx.service");
        assert_eq!(cell_at("/batch/job\u{1b}[2J"), "/batch/job?[2J");
        assert_eq!(cell(None), "-");
        assert_eq!(cell(Some(&TaskWorkload::Exited)), "(exited)");
        let json = workload_json(&at("/system.slice/nginx.service"));
        assert_eq!(
            (&json["is"], &json["unit"]),
            (&"unit".into(), &"nginx.service".into())
        );
    }
}
