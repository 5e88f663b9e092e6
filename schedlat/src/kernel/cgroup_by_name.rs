//! `-c` by the name a workload's owner knows: a container ID (or a unique
//! prefix of at least [`MIN_PREFIX`] digits), a pod UID (either spelling),
//! or a systemd unit or slice, found by reading every cgroup path of the
//! hierarchies (cgroup v2 first, then the v1 cpu controller's, as for a
//! relative path) with the path's own labels (sys/workload/path.rs). The
//! cgroup chosen is the outermost with that label: the container's own
//! cgroup, not a child of it; the pod's, not one of its containers'.

use std::path::PathBuf;

use crate::{
    kernel::{
        btf::CssChoice,
        cgroupfs::{self, CgroupTarget, Hierarchy},
    },
    sys::{
        mounts::Mounts,
        workload::{
            path,
            wanted::{MIN_PREFIX, Wanted},
        },
    },
};

/// The cgroup `-c ARG` names when ARG is a container ID or prefix, a pod
/// UID or a unit; None when ARG is none of these (then it was a path).
pub(crate) fn find(mounts: &Mounts, arg: &str) -> Option<Result<CgroupTarget, String>> {
    let wanted = Wanted::of(arg)?;
    let v2 = mounts.v2.iter().map(|m| (m.clone(), CssChoice::Default));
    let v1 = mounts
        .v1_cpu
        .iter()
        .map(|m| (m.clone(), CssChoice::Controllers(vec!["cpu".into()])));
    let mut looked = Vec::new();
    for (mount, css) in v2.chain(v1) {
        let hierarchy = Hierarchy { mount, css };
        looked.push(hierarchy.describe());
        let paths: Vec<String> = hierarchy.paths_by_id().into_values().collect();
        match choose(&wanted, &paths) {
            Ok(Some(rel)) => {
                let dir: PathBuf = hierarchy.mount.join(rel.trim_start_matches('/'));
                return Some(cgroupfs::resolve(mounts, &dir));
            }
            Ok(None) => {}
            Err(e) => return Some(Err(format!("-c {arg}: {e}"))),
        }
    }
    Some(Err(format!(
        "-c {arg}: no {} {arg} in any cgroup path ({}); give a cgroup path, a container ID or a unique prefix of at least {MIN_PREFIX} digits, a pod UID or a systemd unit",
        wanted.what(),
        looked.join(", ")
    )))
}

/// Of `paths` (relative to one hierarchy's root), the outermost whose
/// label matches; an error when a container prefix matches several
/// containers.
fn choose(wanted: &Wanted, paths: &[String]) -> Result<Option<String>, String> {
    let mut matches: Vec<(String, &String)> = paths
        .iter()
        .filter_map(|p| Some((wanted.key(&path::parse(p))?.to_string(), p)))
        .collect();
    // By key, then outermost first.
    matches.sort_by(|(a, p), (b, q)| {
        (a, p.matches('/').count(), p.len()).cmp(&(b, q.matches('/').count(), q.len()))
    });
    let mut keys: Vec<&str> = matches.iter().map(|(k, _)| k.as_str()).collect();
    keys.dedup();
    if keys.len() > 1 {
        let shown = keys[..keys.len().min(5)].join(", ");
        let more = if keys.len() > 5 { ", ..." } else { "" };
        return Err(format!(
            "matches {} {}s ({shown}{more}): give more of it",
            keys.len(),
            wanted.what(),
        ));
    }
    Ok(matches.first().map(|(_, p)| (*p).clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
    const UID_: &str = "3f1c2d4e_5b6a_7c8d_9e0f_123456789abc";

    fn node() -> Vec<String> {
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        let other = "9a8b".to_string() + &"0".repeat(60);
        vec![
            "/".into(),
            "/system.slice".into(),
            "/system.slice/nginx.service".into(),
            "/kubepods.slice".into(),
            "/kubepods.slice/kubepods-burstable.slice".into(),
            pod.clone(),
            format!("{pod}/cri-containerd-{ID}.scope"),
            format!("{pod}/cri-containerd-{other}.scope"),
            format!("/machine.slice/libpod-{}.scope", "ab".repeat(32)),
            format!("/machine.slice/libpod-{}.scope/container", "ab".repeat(32)),
        ]
    }

    fn find_in(arg: &str) -> Result<Option<String>, String> {
        choose(&Wanted::of(arg).unwrap(), &node())
    }

    #[test]
    fn a_container_by_id_or_unique_prefix_a_pod_by_uid_a_unit_by_name() {
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        let container = Ok(Some(format!("{pod}/cri-containerd-{ID}.scope")));
        assert_eq!(find_in(ID), container);
        assert_eq!(find_in(&ID[..12]), container);
        assert_eq!(find_in(&ID[..12].to_uppercase()), container);
        // The container's own cgroup, not its `container` child.
        assert_eq!(
            find_in("abab"),
            Ok(Some(format!(
                "/machine.slice/libpod-{}.scope",
                "ab".repeat(32)
            )))
        );
        // The pod, in either spelling: its cgroup, not a container's.
        assert_eq!(find_in(UID_), Ok(Some(pod.clone())));
        assert_eq!(find_in(&UID_.replace('_', "-")), Ok(Some(pod)));
        assert_eq!(
            find_in("nginx.service"),
            Ok(Some("/system.slice/nginx.service".into()))
        );
        assert_eq!(
            find_in("kubepods.slice"),
            Ok(Some("/kubepods.slice".into()))
        );
        assert_eq!(find_in("absent.service"), Ok(None));
    }

    #[test]
    fn an_ambiguous_prefix_names_the_candidates() {
        let e = find_in("9a8b").unwrap_err();
        assert!(e.contains("matches 2 containers"), "{e}");
        assert!(e.contains(&ID[..20]), "{e}");
    }

    #[test]
    fn paths_and_short_prefixes_are_not_names() {
        for arg in [
            "abc",
            "mygroup",
            "/sys/fs/cgroup/x",
            "a/b.service",
            "xyz.txt",
        ] {
            assert_eq!(Wanted::of(arg), None, "{arg}");
        }
    }
}
