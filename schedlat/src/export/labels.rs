//! The labels of the exported series: which waits a series counts (the
//! filter's `scope`), which key a per-key series is (`cgroup`, or `pid` and
//! `comm`), and the overflow series of `--max-series`. A new label naming
//! the key goes in [`key`] and [`overflow`] (a series and its overflow
//! carry the same key label names); what a cgroup is as a workload (pod,
//! container, unit...) is workload_labels.rs', added after `cgroup`.

use schedlat_common::scope::Breakdown;

use super::{
    model::Labels,
    workload_labels::{WorkloadLabel, WorkloadLabels},
};
use crate::{
    collect::keylabels::{KeyLabels, task_comm},
    kernel::filter::{Filter, comm_str, cpu_list_str},
};

/// The label value of the overflow series.
pub(crate) const OVERFLOW: &str = "__overflow__";

/// The label names of a breakdown, and the values of its overflow series.
pub(crate) fn overflow(by: Breakdown) -> Labels {
    match by {
        Breakdown::Process => vec![("pid", OVERFLOW.into()), ("comm", OVERFLOW.into())],
        _ => vec![("cgroup", OVERFLOW.into())],
    }
}

/// A key's labels as exported: `cgroup="/path"` and what `workload`
/// keeps of the labels of the workload it is, or `pid="1234",
/// comm="name"` (`comm`: the name the kernel stored with the key).
pub(crate) fn key(
    labels: &mut KeyLabels,
    key: u64,
    comm: &[u8; 16],
    workload: &WorkloadLabels,
) -> Labels {
    match labels.by() {
        Breakdown::Process => vec![("pid", key.to_string()), ("comm", task_comm(key, comm))],
        _ => cgroup(labels, key, workload, ("cgroup", WorkloadLabel::name)),
    }
}

/// A neighbour pair's labels (families/neighbours.rs): the victim's as a
/// per-cgroup series has them, then the holder's under the same names
/// prefixed `holder_`.
pub(crate) fn pair(
    labels: &mut KeyLabels,
    victim: u64,
    holder: u64,
    workload: &WorkloadLabels,
) -> Labels {
    let mut out = cgroup(labels, victim, workload, ("cgroup", WorkloadLabel::name));
    let holder_name: fn(WorkloadLabel) -> &'static str = |l| l.names().1;
    out.extend(cgroup(
        labels,
        holder,
        workload,
        ("holder_cgroup", holder_name),
    ));
    out
}

/// The overflow pair's labels.
pub(crate) fn overflow_pair() -> Labels {
    vec![
        ("cgroup", OVERFLOW.into()),
        ("holder_cgroup", OVERFLOW.into()),
    ]
}

/// The labels of a second-role series (families/neighbours.rs): the
/// pair's, `victim` waiting and `user` having used the share, then
/// `group`, the path of the group whose share was used.
pub(crate) fn share(
    labels: &mut KeyLabels,
    (victim, user): (u64, u64),
    group: Option<u64>,
    workload: &WorkloadLabels,
) -> Labels {
    let mut out = pair(labels, victim, user, workload);
    out.push(group_label(labels, group));
    out
}

/// The labels of a level's series (families/neighbours.rs): the waiting
/// cgroup's as a per-cgroup series has them, then `group`, the path of
/// the group (one of its ancestors in the cpu controller's hierarchy) at
/// whose level its waits were decided.
pub(crate) fn level(
    labels: &mut KeyLabels,
    victim: u64,
    group: u64,
    workload: &WorkloadLabels,
) -> Labels {
    let mut out = cgroup(labels, victim, workload, ("cgroup", WorkloadLabel::name));
    out.push(group_label(labels, Some(group)));
    out
}

/// `group="/path"`, or `(removed)` for a group gone before it was named.
fn group_label(labels: &mut KeyLabels, group: Option<u64>) -> (&'static str, String) {
    let path = group.and_then(|g| labels.cgroup_name(g));
    ("group", path.unwrap_or_else(|| "(removed)".into()))
}

/// The overflow level's labels.
pub(crate) fn overflow_level() -> Labels {
    vec![("cgroup", OVERFLOW.into()), ("group", OVERFLOW.into())]
}

/// Cgroup `id`'s path and workload labels, under these names.
fn cgroup(
    labels: &mut KeyLabels,
    id: u64,
    workload: &WorkloadLabels,
    (path_name, name): (&'static str, fn(WorkloadLabel) -> &'static str),
) -> Labels {
    match labels.workload(id) {
        Some(named) => {
            let mut out = vec![(path_name, named.path.clone())];
            out.extend(workload.of(&named, name));
            out
        }
        None => vec![(path_name, format!("(removed, id {id})"))],
    }
}

/// The filter as a label value, e.g. `pid=1234,cpu=0-3`; None for the
/// whole system.
pub(crate) fn scope(filter: &Filter) -> Option<(&'static str, String)> {
    let mut parts = Vec::new();
    if let Some(pid) = filter.tgid {
        parts.push(format!("pid={pid}"));
    }
    if let Some(tid) = filter.tid {
        parts.push(format!("tid={tid}"));
    }
    if let Some(comm) = &filter.comm {
        parts.push(format!("comm={}", comm_str(comm)));
    }
    if let Some(c) = &filter.cgroup {
        parts.push(format!("cgroup={}", c.dir.display()));
    }
    if let Some(cpus) = &filter.cpus {
        parts.push(format!("cpu={}", cpu_list_str(cpus)));
    }
    (!parts.is_empty()).then(|| ("scope", parts.join(",")))
}

/// The total's labels: `pid` with -p, and the scope.
pub(crate) fn total(filter: &Filter) -> Labels {
    let mut labels: Labels = filter
        .tgid
        .map(|pid| vec![("pid", pid.to_string())])
        .unwrap_or_default();
    labels.extend(scope(filter));
    labels
}
