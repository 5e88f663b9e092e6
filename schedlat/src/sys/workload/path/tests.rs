//! Fixtures of every layout docs/containers.md lists, as the kubelet,
//! systemd and the runtimes write them, and hostile paths.

use super::*;
use crate::sys::procfs::parse_proc_cgroup;

const ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
const NODE: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const UID: &str = "3f1c2d4e-5b6a-7c8d-9e0f-123456789abc";
const UID_: &str = "3f1c2d4e_5b6a_7c8d_9e0f_123456789abc";

/// The expected labels: unit, slice, pod_uid, container_id, runtime, qos.
fn labels(
    unit: Option<&str>,
    slice: Option<&str>,
    pod_uid: Option<&str>,
    container_id: Option<&str>,
    runtime: Option<Runtime>,
    qos: Option<Qos>,
) -> PathLabels {
    PathLabels {
        unit: unit.map(str::to_string),
        slice: slice.map(str::to_string),
        pod_uid: pod_uid.map(str::to_string),
        container_id: container_id.map(str::to_string),
        runtime,
        qos,
        delegated: None,
    }
}

fn check(path: &str, want: PathLabels) {
    assert_eq!(parse(path), want, "{path}");
}

#[test]
fn kubelet_systemd_driver() {
    let pod = format!("kubepods-burstable-pod{UID_}.slice");
    let scope = format!("cri-containerd-{ID}.scope");
    check(
        &format!("/kubepods.slice/kubepods-burstable.slice/{pod}/{scope}"),
        labels(
            Some(&scope),
            Some(&pod),
            Some(UID),
            Some(ID),
            Some(Runtime::Containerd),
            Some(Qos::Burstable),
        ),
    );
    // The pod's own cgroup: its pause container and the containers are
    // below it.
    check(
        &format!("/kubepods.slice/kubepods-burstable.slice/{pod}"),
        labels(
            None,
            Some(&pod),
            Some(UID),
            None,
            None,
            Some(Qos::Burstable),
        ),
    );
    let pod = format!("kubepods-besteffort-pod{UID_}.slice");
    let scope = format!("crio-{ID}.scope");
    check(
        &format!("/kubepods.slice/kubepods-besteffort.slice/{pod}/{scope}"),
        labels(
            Some(&scope),
            Some(&pod),
            Some(UID),
            Some(ID),
            Some(Runtime::CriO),
            Some(Qos::BestEffort),
        ),
    );
    // Guaranteed pods sit directly under kubepods.slice.
    let pod = format!("kubepods-pod{UID_}.slice");
    let scope = format!("docker-{ID}.scope");
    check(
        &format!("/kubepods.slice/{pod}/{scope}"),
        labels(
            Some(&scope),
            Some(&pod),
            Some(UID),
            Some(ID),
            Some(Runtime::Docker),
            Some(Qos::Guaranteed),
        ),
    );
    // CRI-O's monitor of a container is in the pod, not the container.
    let conmon = format!("crio-conmon-{ID}.scope");
    check(
        &format!("/kubepods.slice/kubepods-pod{UID_}.slice/{conmon}"),
        labels(
            Some(&conmon),
            Some(&format!("kubepods-pod{UID_}.slice")),
            Some(UID),
            None,
            None,
            Some(Qos::Guaranteed),
        ),
    );
    // The kubelet's QoS cgroups alone name no pod and no class.
    check(
        "/kubepods.slice/kubepods-burstable.slice",
        labels(
            None,
            Some("kubepods-burstable.slice"),
            None,
            None,
            None,
            None,
        ),
    );
}

#[test]
fn kubelet_cgroupfs_driver() {
    check(
        &format!("/kubepods/burstable/pod{UID}/{ID}"),
        labels(None, None, Some(UID), Some(ID), None, Some(Qos::Burstable)),
    );
    check(
        &format!("/kubepods/pod{UID}/{ID}"),
        labels(None, None, Some(UID), Some(ID), None, Some(Qos::Guaranteed)),
    );
    check(
        &format!("/kubepods/besteffort/pod{UID}/crio-{ID}"),
        labels(
            None,
            None,
            Some(UID),
            Some(ID),
            Some(Runtime::CriO),
            Some(Qos::BestEffort),
        ),
    );
    // A static pod's UID is its manifest's hash: 32 hex digits.
    let hash = "0123456789abcdef0123456789abcdef";
    check(
        &format!("/kubepods/burstable/pod{hash}/{ID}"),
        labels(None, None, Some(hash), Some(ID), None, Some(Qos::Burstable)),
    );
}

#[test]
fn a_runtimes_systemd_path_used_as_a_directory_name() {
    let dir = format!("kubepods-burstable-pod{UID_}.slice:cri-containerd:{ID}");
    check(
        &format!("/system.slice/containerd.service/{dir}"),
        labels(
            Some("containerd.service"),
            Some(&format!("kubepods-burstable-pod{UID_}.slice")),
            Some(UID),
            Some(ID),
            Some(Runtime::Containerd),
            Some(Qos::Burstable),
        ),
    );
}

#[test]
fn nested_nodes_name_the_innermost_pod_and_its_container() {
    // kind: the node is a Docker container; the kubelet inside it uses
    // the systemd driver under kubelet.slice.
    let node = format!("/system.slice/docker-{NODE}.scope");
    let pod = format!("kubelet-kubepods-burstable-pod{UID_}.slice");
    let pod_path = format!(
        "{node}/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/{pod}"
    );
    let scope = format!("cri-containerd-{ID}.scope");
    check(
        &format!("{pod_path}/{scope}"),
        labels(
            Some(&scope),
            Some(&pod),
            Some(UID),
            Some(ID),
            Some(Runtime::Containerd),
            Some(Qos::Burstable),
        ),
    );
    // The pod itself: the node above it is not the pod's container.
    check(
        &pod_path,
        labels(
            Some(&format!("docker-{NODE}.scope")),
            Some(&pod),
            Some(UID),
            None,
            None,
            Some(Qos::Burstable),
        ),
    );
    // The node alone is a container.
    check(
        &node,
        labels(
            Some(&format!("docker-{NODE}.scope")),
            Some("system.slice"),
            None,
            Some(NODE),
            Some(Runtime::Docker),
            None,
        ),
    );
    // k3d: a k3s node in Docker, cgroupfs inside. The pod's container is
    // under the pod, not under `docker`: its runtime is not Docker's.
    check(
        &format!("/docker/{NODE}/kubepods/besteffort/pod{UID}/{ID}"),
        labels(None, None, Some(UID), Some(ID), None, Some(Qos::BestEffort)),
    );
}

#[test]
fn docker_podman_and_nerdctl_outside_kubernetes() {
    check(
        &format!("/docker/{ID}"),
        labels(None, None, None, Some(ID), Some(Runtime::Docker), None),
    );
    let scope = format!("docker-{ID}.scope");
    check(
        &format!("/system.slice/{scope}"),
        labels(
            Some(&scope),
            Some("system.slice"),
            None,
            Some(ID),
            Some(Runtime::Docker),
            None,
        ),
    );
    let scope = format!("libpod-{ID}.scope");
    let podman = labels(
        Some(&scope),
        Some("machine.slice"),
        None,
        Some(ID),
        Some(Runtime::Podman),
        None,
    );
    check(&format!("/machine.slice/{scope}"), podman.clone());
    // podman's `container` child (a container running systemd, or
    // --cgroups=split) is still the container.
    check(&format!("/machine.slice/{scope}/container"), podman);
    // A podman pod: its slice names podman's pod id, not a Kubernetes UID.
    let pod_slice = format!("machine-libpod_pod_{NODE}.slice");
    check(
        &format!("/machine.slice/{pod_slice}/{scope}"),
        labels(
            Some(&scope),
            Some(&pod_slice),
            None,
            Some(ID),
            Some(Runtime::Podman),
            None,
        ),
    );
    // Rootless, under the user's manager: that user's.
    check(
        &format!("/user.slice/user-1000.slice/user@1000.service/user.slice/{scope}"),
        PathLabels {
            delegated: Some("user@1000.service".into()),
            ..labels(
                Some(&scope),
                Some("user.slice"),
                None,
                Some(ID),
                Some(Runtime::Podman),
                None,
            )
        },
    );
    // cgroupfs manager; the monitor is not the container.
    check(
        &format!("/libpod_parent/libpod-{ID}"),
        labels(None, None, None, Some(ID), Some(Runtime::Podman), None),
    );
    check(
        &format!("/machine.slice/libpod-conmon-{ID}.scope"),
        labels(
            Some(&format!("libpod-conmon-{ID}.scope")),
            Some("machine.slice"),
            None,
            None,
            None,
            None,
        ),
    );
    let scope = format!("nerdctl-{ID}.scope");
    check(
        &format!("/nerdctl.slice/{scope}"),
        labels(
            Some(&scope),
            Some("nerdctl.slice"),
            None,
            Some(ID),
            Some(Runtime::Containerd),
            None,
        ),
    );
}

#[test]
fn systemd_units_and_slices() {
    let unit = |path: &str, unit: &str, slice: Option<&str>| {
        check(path, labels(Some(unit), slice, None, None, None, None));
    };
    unit(
        "/system.slice/nginx.service",
        "nginx.service",
        Some("system.slice"),
    );
    unit(
        "/user.slice/user-1000.slice/session-3.scope",
        "session-3.scope",
        Some("user-1000.slice"),
    );
    unit(
        "/user.slice/user-1000.slice/user@1000.service",
        "user@1000.service",
        Some("user-1000.slice"),
    );
    unit(
        "/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo@1.service",
        "app-foo@1.service",
        Some("app.slice"),
    );
    unit(
        "/system.slice/system-getty.slice/getty@tty1.service",
        "getty@tty1.service",
        Some("system-getty.slice"),
    );
    // systemd's escapes are part of the name, as systemctl prints it.
    unit(
        r"/system.slice/dev-disk-by\x2duuid-1234.swap",
        r"dev-disk-by\x2duuid-1234.swap",
        Some("system.slice"),
    );
    unit("/init.scope", "init.scope", None);
    check(
        "/system.slice",
        labels(None, Some("system.slice"), None, None, None, None),
    );
    check("/", PathLabels::default());
    check("", PathLabels::default());
}

#[test]
fn cgroup_v1_and_v2_spellings_give_the_same_labels() {
    // /proc/PID/cgroup of one container on a hybrid host: the v1
    // controllers' lines and the v2 line carry the same path.
    let path = format!("/kubepods/burstable/pod{UID}/{ID}");
    let text =
        format!("12:cpu,cpuacct:{path}\n4:memory:{path}\n1:name=systemd:{path}\n0::{path}\n");
    let lines = parse_proc_cgroup(&text).unwrap();
    let want = labels(None, None, Some(UID), Some(ID), None, Some(Qos::Burstable));
    for line in lines {
        assert_eq!(parse(&line.path), want, "hierarchy {}", line.hierarchy);
    }
}

#[test]
fn hostile_paths_give_no_label_they_do_not_carry() {
    let none = PathLabels::default();
    // Too long: not parsed at all.
    let long = format!("/{}/docker-{ID}.scope", "a".repeat(MAX_PATH));
    check(&long, none.clone());
    // `..` and `.` are never in a cgroup path.
    check(&format!("/docker/../docker/{ID}"), none.clone());
    check(&format!("/./docker-{ID}.scope"), none.clone());
    check(&format!("/docker-{ID}.scope\0"), none.clone());
    // A unit name that looks like a container ID is a unit.
    let unit = format!("{ID}.service");
    check(
        &format!("/system.slice/{unit}"),
        labels(Some(&unit), Some("system.slice"), None, None, None, None),
    );
    // Control bytes, quotes and spaces: not a unit, no label.
    for name in [
        "evil\x1b[8m.service",
        "a b.service",
        "q\"uote.scope",
        "nl\n.scope",
    ] {
        check(
            &format!("/system.slice/{name}"),
            labels(None, Some("system.slice"), None, None, None, None),
        );
    }
    // Almost an ID: 63 digits, upper case, a suffix after the scope.
    for c in [
        format!("docker-{}.scope", &ID[1..]),
        format!("docker-{}.scope", ID.to_uppercase()),
        format!("docker-{ID}.scope.evil"),
        format!("docker-{ID}x"),
        format!("unknown-{ID}.scope"),
    ] {
        let got = parse(&format!("/x/{c}"));
        assert_eq!(got.container_id, None, "{c}");
        assert_eq!(got.runtime, None, "{c}");
    }
    // Almost a pod: a malformed or upper-case UID, or not the kubelet's.
    for c in [
        "podnot-a-uid".to_string(),
        format!("pod{}", UID.to_uppercase()),
        format!("kubepods-pod{UID}.slice"),
        format!("system-pod{UID_}.slice"),
    ] {
        assert_eq!(parse(&format!("/kubepods/{c}")).pod_uid, None, "{c}");
    }
    // A unit name over systemd's limit is not a unit.
    let long_unit = format!("{}.service", "u".repeat(MAX_UNIT));
    assert_eq!(parse(&format!("/{long_unit}")).unit, None);
}

#[test]
fn uids_and_ids_are_checked_exactly() {
    assert!(is_pod_uid(UID));
    assert!(!is_pod_uid(UID_));
    assert!(!is_pod_uid(&UID.replace('-', "")[..31]));
    assert!(is_container_id(ID));
    assert!(!is_container_id(&ID[..63]));
    assert!(!is_container_id(&format!("{}g", &ID[..63])));
}

/// Issue 48 item 5: a user with a delegated subtree made
/// `user@UID.service/app.slice/docker-<another's ID>.scope` (or a
/// `kubepods-...-pod<UID>.slice`) and took that container's or pod's
/// names and, under `--by container`, its identity. The path says whose
/// subtree it is; such a container or pod is marked as that user's.
#[test]
fn a_container_or_pod_under_a_users_manager_is_that_users() {
    let user = "/user.slice/user-65534.slice/user@65534.service/app.slice";
    let fake = parse(&format!("{user}/docker-{ID}.scope"));
    assert_eq!(fake.container_id.as_deref(), Some(ID));
    assert_eq!(fake.delegated.as_deref(), Some("user@65534.service"));
    let fake_pod = parse(&format!("{user}/kubepods-besteffort-pod{UID_}.slice"));
    assert_eq!(fake_pod.pod_uid.as_deref(), Some(UID));
    assert_eq!(fake_pod.delegated.as_deref(), Some("user@65534.service"));
    // The system's own are no one's.
    let real = parse(&format!("/system.slice/docker-{ID}.scope"));
    assert_eq!(real.delegated, None);
    let pod = parse(&format!(
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice"
    ));
    assert_eq!(pod.delegated, None);
    // Not a manager: `user@x.service`, a unit named like one elsewhere.
    assert_eq!(
        parse(&format!("/system.slice/user@x.service/docker-{ID}.scope")).delegated,
        None
    );
}
