//! Which of a dump's series `replay --series` means. The recorder names
//! its per-cgroup series by path (`cgroup = /kubepods.slice/...`), and a
//! path carries what its owner calls it (sys/workload/path.rs), so a
//! workload finds its series without the host it was recorded on, named
//! as `-c` names it (sys/workload/wanted.rs): a container ID or a unique
//! prefix of 4 hex digits or more, a pod UID (either spelling), a unit or
//! slice, or a cgroup path, each bare or spelled as the dump spells its
//! series (`container = ID`, `pod = UID`, `unit = NAME`, `cgroup = /path`).
//! As `-c` counts a cgroup's subtree, a workload or a path recorded as
//! several cgroups (a pod's containers, a slice's units) is their series
//! added up.

use super::recording::Window;
use crate::sys::workload::{path, wanted::Wanted};

/// The series picked: what the report calls it, and the names of the
/// dump's series it adds up (one for a series named as the dump names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Picked {
    pub shown: String,
    pub names: Vec<String>,
}

/// What `--series` asked for that the dump does not have: the sentence
/// that says so and what it has instead (empty: the caller lists the
/// dump's series).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotFound(pub String);

const CGROUP: &str = "cgroup = ";

/// The series `asked` names in `w`: a series' own name; a cgroup path
/// (bare or `cgroup = /path`), for its series and those below it; or a
/// workload, bare or spelled `container = `, `pod = `, `unit = `, matched
/// against the paths of its cgroup series.
pub(crate) fn pick(w: &Window, asked: &str) -> Result<Picked, NotFound> {
    let names = w.series_names();
    if names.iter().any(|n| n == asked) {
        return Ok(Picked {
            shown: asked.to_string(),
            names: vec![asked.to_string()],
        });
    }
    let asked = asked.trim();
    let spelled = asked.split_once(" = ").map(|(k, v)| (k.trim(), v.trim()));
    let wanted = match spelled {
        Some(("cgroup", dir)) => return under(&names, dir),
        Some((kind, value)) => Wanted::spelled(kind, value),
        None if asked.starts_with('/') => return under(&names, asked),
        None => Wanted::of(asked),
    };
    let Some(wanted) = wanted else {
        return Err(NotFound(String::new()));
    };
    let cgroups = || (names.iter()).filter_map(|n| Some((n, n.strip_prefix(CGROUP)?)));
    // Each series with what it matched: the container's full ID, the
    // pod's UID; a unit's or slice's cgroup (the path down to the
    // component of that name), the outermost kept, as `-c` keeps it.
    let mut found: Vec<(String, String)> = match &wanted {
        Wanted::Unit(unit) => (cgroups())
            .filter_map(|(n, p)| Some((unit_cgroup(p, unit)?, n.clone())))
            .collect(),
        _ => (cgroups())
            .filter_map(|(n, p)| Some((wanted.key(&path::parse(p))?.to_string(), n.clone())))
            .collect(),
    };
    if let Wanted::Unit(_) = wanted
        && let Some(outer) = (found.iter().map(|(dir, _)| dir.clone()))
            .min_by_key(|d| (d.matches('/').count(), d.clone()))
    {
        found.retain(|(dir, _)| *dir == outer);
    }
    let (kind, value) = (wanted.what(), wanted.value());
    let mut keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    match keys[..] {
        [] => Err(NotFound(format!(
            "no cgroup series of the dump is {kind} {value} (a dump keeps paths, not the runtimes' names: give a container's ID or a unique prefix of it, a pod's UID, a unit or a cgroup path){}",
            choices(w)
        ))),
        [key] => Ok(Picked {
            shown: match &wanted {
                Wanted::Unit(unit) => format!("unit = {unit}"),
                _ => format!("{kind} = {key}"),
            },
            names: found.into_iter().map(|(_, n)| n).collect(),
        }),
        _ => Err(NotFound(format!(
            "`{value}` is the start of {} container IDs in the dump: {}; give more of one",
            keys.len(),
            keys.join(", ")
        ))),
    }
}

/// The cgroup series at or below `dir`; none is a bad name (the caller
/// lists what the dump has).
fn under(names: &[String], dir: &str) -> Result<Picked, NotFound> {
    let dir = dir.trim_end_matches('/');
    let dir = if dir.is_empty() { "/" } else { dir };
    let inside = |p: &str| {
        p == dir
            || dir == "/"
            || p.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let picked: Vec<String> = (names.iter())
        .filter(|n| n.strip_prefix(CGROUP).is_some_and(inside))
        .cloned()
        .collect();
    if picked.is_empty() {
        return Err(NotFound(String::new()));
    }
    Ok(Picked {
        shown: format!("{CGROUP}{dir}"),
        names: picked,
    })
}

/// The cgroup of the unit or slice `unit` that `path` is in: the path down
/// to the first component of that name; None when it is in none.
fn unit_cgroup(path: &str, unit: &str) -> Option<String> {
    let mut dir = String::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        dir.push('/');
        dir.push_str(c);
        if c == unit {
            return Some(dir);
        }
    }
    None
}

/// The workloads the dump's cgroup series can be asked for by, for an
/// error: `; its workloads: container = ID, pod = UID, unit = NAME, ...`.
fn choices(w: &Window) -> String {
    let mut all: Vec<String> = Vec::new();
    for name in w.series_names() {
        let Some(p) = name.strip_prefix(CGROUP) else {
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
        assert_eq!(pick(&w, "pod = 9a8b7c6d"), Err(NotFound(String::new())));
    }

    /// Issue 25: `--series` takes what `-c` takes, bare: a container ID
    /// or a unique prefix, a pod UID, a unit or slice, a cgroup path (its
    /// subtree, as `-c` counts it); the same refusals.
    #[test]
    fn a_workload_named_as_dash_c_names_it_picks_its_series() {
        let w = node();
        let one = pick(&w, &ID[..24].to_uppercase()).unwrap();
        assert_eq!(
            (one.shown, one.names.len()),
            (format!("container = {ID}"), 1)
        );
        let pod = pick(&w, UID).unwrap();
        assert_eq!((pod.shown, pod.names.len()), (format!("pod = {UID}"), 2));
        let unit = pick(&w, "nginx.service").unwrap();
        assert_eq!(unit.names, ["cgroup = /system.slice/nginx.service"]);
        // A slice: every series below it, as -c kubepods.slice counts.
        let slice = pick(&w, "kubepods.slice").unwrap();
        assert_eq!(
            (slice.shown.as_str(), slice.names.len()),
            ("unit = kubepods.slice", 2)
        );
        let system = pick(&w, "unit = system.slice").unwrap();
        assert_eq!(system.names, ["cgroup = /system.slice/nginx.service"]);
        // A path: its series and those below it.
        let dir = pick(&w, "/kubepods.slice/").unwrap();
        assert_eq!(
            (dir.shown.as_str(), dir.names.len()),
            ("cgroup = /kubepods.slice", 2)
        );
        assert_eq!(pick(&w, "cgroup = /kubepods.slice").unwrap().names.len(), 2);
        assert_eq!(
            pick(&w, "/kube"),
            Err(NotFound(String::new())),
            "whole components"
        );
        // Ambiguous and unknown, as when spelled out.
        let err = pick(&w, &ID[..20]).unwrap_err();
        assert!(err.0.contains("is the start of 2 container IDs"), "{err:?}");
        let err = pick(&w, "ffff").unwrap_err();
        assert!(
            err.0
                .starts_with("no cgroup series of the dump is container ffff"),
            "{err:?}"
        );
        let err = pick(&w, "web.service").unwrap_err();
        assert!(err.0.contains("its workloads: container = "), "{err:?}");
        assert_eq!(pick(&w, "mygroup"), Err(NotFound(String::new())));
    }
}
