//! Which of a dump's series `replay --series` means. The recorder names
//! its per-cgroup series by path (`cgroup = /kubepods.slice/...`), and a
//! path carries what its owner calls it (sys/workload/path.rs), so a
//! workload's spelling finds its series without the host it was recorded
//! on: `container = ID` (or a unique prefix of 4 hex digits or more),
//! `pod = UID` (either spelling), `unit = NAME`. A workload recorded as
//! several cgroups (a pod's containers) is their series added up.

use super::recording::Window;
use crate::sys::workload::path::{self, PathLabels};

/// The series picked: what the report calls it, and the names of the
/// dump's series it adds up (one for a series named as the dump names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Picked {
    pub shown: String,
    pub names: Vec<String>,
}

/// What `--series` asked for that the dump does not have: the sentence
/// that says so and what it has instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotFound(pub String);

/// The series `asked` names in `w`: a series' own name, or a workload
/// spelled `container = `, `pod = ` or `unit = ` matched against the
/// paths of its cgroup series.
pub(crate) fn pick(w: &Window, asked: &str) -> Result<Picked, NotFound> {
    let names = w.series_names();
    if names.iter().any(|n| n == asked) {
        return Ok(Picked {
            shown: asked.to_string(),
            names: vec![asked.to_string()],
        });
    }
    let Some((kind, value)) = asked.split_once(" = ") else {
        return Err(NotFound(String::new()));
    };
    let value = value.trim();
    let cgroups = || {
        (names.iter())
            .filter_map(|n| Some((n, path::parse(n.strip_prefix("cgroup = ")?))))
            .collect::<Vec<_>>()
    };
    let of = |get: &dyn Fn(&PathLabels) -> Option<String>| -> Vec<(String, String)> {
        (cgroups().into_iter())
            .filter_map(|(n, labels)| Some((get(&labels)?, n.clone())))
            .collect()
    };
    let found: Vec<(String, String)> = match kind.trim() {
        "container" if value.len() >= 4 && value.bytes().all(|b| b.is_ascii_hexdigit()) => {
            let value = value.to_ascii_lowercase();
            of(&|l| l.container_id.clone().filter(|id| id.starts_with(&value)))
        }
        "pod" => {
            let uid = value.replace('_', "-").to_ascii_lowercase();
            of(&|l| l.pod_uid.clone().filter(|u| *u == uid))
        }
        "unit" => of(&|l| l.unit.clone().filter(|u| u == value)),
        _ => return Err(NotFound(String::new())),
    };
    let mut ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    match ids[..] {
        [] => Err(NotFound(format!(
            "no cgroup series of the dump is {kind} {value} (a dump keeps paths, not the runtimes' names: give a container's ID or a unique prefix of it, a pod's UID or a unit){}",
            choices(w)
        ))),
        [id] => Ok(Picked {
            shown: format!("{} = {id}", kind.trim()),
            names: found.into_iter().map(|(_, n)| n).collect(),
        }),
        _ => Err(NotFound(format!(
            "`{value}` is the start of {} container IDs in the dump: {}; give more of one",
            ids.len(),
            ids.join(", ")
        ))),
    }
}

/// The workloads the dump's cgroup series can be asked for by, for an
/// error: `; its workloads: container = ID, pod = UID, unit = NAME, ...`.
fn choices(w: &Window) -> String {
    let mut all: Vec<String> = Vec::new();
    for name in w.series_names() {
        let Some(p) = name.strip_prefix("cgroup = ") else {
            continue;
        };
        let labels = path::parse(p);
        // A container's own scope is a unit too: named by its ID instead.
        let workload = labels.container_id.is_some() || labels.pod_uid.is_some();
        let spelled = [
            labels.container_id.map(|id| format!("container = {id}")),
            labels.pod_uid.map(|u| format!("pod = {u}")),
            (labels.unit.filter(|_| !workload)).map(|u| format!("unit = {u}")),
        ];
        for s in spelled.into_iter().flatten() {
            if !all.contains(&s) {
                all.push(s);
            }
        }
    }
    if all.is_empty() {
        "; none of its cgroup series is a container, a pod or a unit".into()
    } else {
        format!("; its workloads: {}", all.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::recording::{CompactWaits, Second},
        histogram::Waits,
    };

    const ID: &str = "9a8b7c6d5e4f00112233445566778899aabbccddeeff00112233445566778899";
    const UID: &str = "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f";

    /// A dump of a node: two containers of one pod, and a unit.
    fn node() -> Window {
        let pod = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            UID.replace('-', "_")
        );
        let other = format!("{}{}", &ID[..20], "f".repeat(44));
        let names = [
            "total".to_string(),
            format!("cgroup = {pod}/cri-containerd-{ID}.scope"),
            format!("cgroup = {pod}/cri-containerd-{other}.scope"),
            "cgroup = /system.slice/nginx.service".to_string(),
        ];
        let waits = CompactWaits::of(&Waits::default());
        let second = Second {
            start_mono_ns: 0,
            end_mono_ns: 1_000_000_000,
            series: names.into_iter().map(|n| (n, waits.clone())).collect(),
            series_dropped: 0,
            slow_lost: 0,
        };
        Window {
            seconds: vec![std::sync::Arc::new(second)],
            ..Window::default()
        }
    }

    /// Issue 25: the recorder keys its series by path; replay finds them
    /// by the workload's spellings too.
    #[test]
    fn a_workload_spelling_picks_its_cgroups_series() {
        let w = node();
        let pod = pick(&w, &format!("pod = {}", UID.replace('-', "_"))).unwrap();
        assert_eq!(pod.shown, format!("pod = {UID}"));
        assert_eq!(pod.names.len(), 2, "both containers: {pod:?}");
        let one = pick(&w, &format!("container = {}", &ID[..24])).unwrap();
        assert_eq!(
            (one.shown, one.names.len()),
            (format!("container = {ID}"), 1)
        );
        let unit = pick(&w, "unit = nginx.service").unwrap();
        assert_eq!(unit.names, ["cgroup = /system.slice/nginx.service"]);
        assert_eq!(pick(&w, "total").unwrap().names, ["total"]);
        // A prefix both containers share is refused, naming both.
        let err = pick(&w, &format!("container = {}", &ID[..20])).unwrap_err();
        assert!(err.0.contains("is the start of 2 container IDs"), "{err:?}");
        // What the dump has, spelled as it can be asked for.
        let err = pick(&w, "unit = web.service").unwrap_err();
        assert!(
            err.0.starts_with("no cgroup series of the dump is unit web.service")
                && err.0.ends_with(&format!(
                    "; its workloads: container = {ID}, pod = {UID}, container = {}{}, unit = nginx.service",
                    &ID[..20],
                    "f".repeat(44)
                )),
            "{err:?}"
        );
        assert_eq!(pick(&w, "cgroup = /nope"), Err(NotFound(String::new())));
        assert_eq!(pick(&w, "container = xyz"), Err(NotFound(String::new())));
    }
}
