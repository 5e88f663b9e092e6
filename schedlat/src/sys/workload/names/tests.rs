//! Fixtures shaped as each runtime writes its files (fields trimmed to
//! those read, plus neighbours that must not confuse the parsers).

use std::os::unix::fs::symlink;

use super::*;

const ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
const UID: &str = "3f1c2d4e-5b6a-7c8d-9e0f-123456789abc";

fn containerd_bundle(kind: &str, name: &str) -> String {
    format!(
        r#"{{"ociVersion":"1.1.0","process":{{"args":["/pause"]}},
        "annotations":{{
          "io.kubernetes.cri.container-type":"{kind}",
          "io.kubernetes.cri.container-name":"{name}",
          "io.kubernetes.cri.image-name":"docker.io/library/nginx:1.25",
          "io.kubernetes.cri.sandbox-id":"{ID}",
          "io.kubernetes.cri.sandbox-name":"web-7d4b9c",
          "io.kubernetes.cri.sandbox-namespace":"shop",
          "io.kubernetes.cri.sandbox-uid":"{UID}"}},
        "linux":{{"cgroupsPath":"kubepods-burstable-pod{}.slice:cri-containerd:{ID}"}}}}"#,
        UID.replace('-', "_")
    )
}

#[test]
fn containerd_bundles_name_the_pod_and_the_container() {
    let names = parse_containerd_bundle(&containerd_bundle("container", "nginx")).unwrap();
    assert_eq!(
        names,
        ContainerNames {
            container: Some("nginx".into()),
            pod: Some("web-7d4b9c".into()),
            namespace: Some("shop".into()),
            pod_uid: Some(UID.into()),
            sandbox: false,
            source: Some(NameSource::ContainerdBundle),
            cgroups: vec![format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
                UID.replace('-', "_")
            )],
        }
    );
    // The pause container: the sandbox's annotations have no container
    // name of their own.
    let pause = parse_containerd_bundle(&containerd_bundle("sandbox", "")).unwrap();
    assert!(pause.sandbox);
    assert_eq!(pause.pod.as_deref(), Some("web-7d4b9c"));
    assert_eq!(pause.container, None);
    // nerdctl's containers outside Kubernetes.
    let nerdctl = r#"{"annotations":{"nerdctl/name":"db","nerdctl/namespace":"default"}}"#;
    assert_eq!(
        parse_containerd_bundle(nerdctl)
            .unwrap()
            .container
            .as_deref(),
        Some("db")
    );
    assert_eq!(parse_containerd_bundle(r#"{"annotations":{}}"#), None);
    assert_eq!(parse_containerd_bundle("not json"), None);
}

#[test]
fn cri_o_configs_name_the_pod_and_the_container() {
    let config = format!(
        r#"{{"annotations":{{
          "io.kubernetes.cri-o.ContainerType":"container",
          "io.kubernetes.cri-o.Name":"k8s_api_api-5f9_shop_{UID}_0",
          "io.kubernetes.container.name":"api",
          "io.kubernetes.pod.name":"api-5f9",
          "io.kubernetes.pod.namespace":"shop",
          "io.kubernetes.pod.uid":"{UID}"}}}}"#
    );
    let names = parse_storage_config(&config).unwrap();
    assert_eq!(names.container.as_deref(), Some("api"));
    assert_eq!(names.pod.as_deref(), Some("api-5f9"));
    assert_eq!(names.namespace.as_deref(), Some("shop"));
    assert_eq!(names.pod_uid.as_deref(), Some(UID));
    assert_eq!(names.source, Some(NameSource::StorageConfig));
    // A podman container's config has no Kubernetes annotations.
    let podman = r#"{"annotations":{"io.container.manager":"libpod","org.opencontainers.image.stopSignal":"15"}}"#;
    assert_eq!(parse_storage_config(podman), None);
}

#[test]
fn containers_json_names_podman_containers() {
    let list = format!(
        r#"[{{"id":"{}","names":["other"],"image":"x","layer":"y"}},
            {{"id":"{ID}","names":["sleeper","alias"],"image":"x","layer":"z","metadata":"{{}}"}}]"#,
        "0".repeat(64)
    );
    let names = parse_storage_containers(list.as_bytes(), ID).unwrap();
    assert_eq!(names.container.as_deref(), Some("sleeper"));
    assert_eq!(names.source, Some(NameSource::StorageContainers));
    assert_eq!(
        parse_storage_containers(list.as_bytes(), &"1".repeat(64)),
        None
    );
    assert_eq!(parse_storage_containers(&b"{}"[..], ID), None);
}

#[test]
fn docker_configs_name_the_container_and_cri_dockerd_pods() {
    let plain = r#"{"ID":"x","Name":"/redis","Config":{"Labels":{"maintainer":"me"}}}"#;
    let names = parse_docker_config(plain).unwrap();
    assert_eq!(names.container.as_deref(), Some("redis"));
    assert_eq!(names.pod, None);
    let kube = format!(
        r#"{{"Name":"/k8s_app_web-1_shop_{UID}_0","Config":{{"Labels":{{
          "io.kubernetes.container.name":"app",
          "io.kubernetes.pod.name":"web-1",
          "io.kubernetes.pod.namespace":"shop",
          "io.kubernetes.pod.uid":"{UID}",
          "io.kubernetes.docker.type":"container"}}}}}}"#
    );
    let names = parse_docker_config(&kube).unwrap();
    assert_eq!(names.container.as_deref(), Some("app"));
    assert_eq!(names.pod.as_deref(), Some("web-1"));
    assert_eq!(names.pod_uid.as_deref(), Some(UID));
    assert!(!names.sandbox);
}

#[test]
fn hostile_names_are_dropped() {
    for bad in [
        "",
        "a b",
        "evil\u{1b}[8m",
        "new\nline",
        "q\"uote",
        &"n".repeat(254),
        "päd",
    ] {
        assert_eq!(clean_name(bad), None, "{bad:?}");
    }
    assert_eq!(
        clean_name("web-7d4b9c_0.x").as_deref(),
        Some("web-7d4b9c_0.x")
    );
    let config = r#"{"annotations":{"io.kubernetes.pod.name":"ok","io.kubernetes.container.name":"bad\u001b[2J","io.kubernetes.pod.uid":"../../etc"}}"#;
    let names = parse_storage_config(config).unwrap();
    assert_eq!(names.pod.as_deref(), Some("ok"));
    assert_eq!(names.container, None);
    assert_eq!(names.pod_uid, None);
}

/// A host root laid out as the runtimes lay out theirs.
struct Host(PathBuf);

impl Host {
    fn new(name: &str) -> Host {
        let dir =
            std::env::temp_dir().join(format!("schedlat-names-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Host(dir)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn each_runtime_is_found_where_it_keeps_its_files() {
    let host = Host::new("layout");
    let roots = NameRoots::under(&host.0);
    assert_eq!(roots.resolve(ID, None), None);
    host.write(
        &format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json"),
        &containerd_bundle("container", "nginx"),
    );
    let names = roots.resolve(ID, Some(Runtime::Containerd)).unwrap();
    assert_eq!(names.container.as_deref(), Some("nginx"));
    // The runtime the path named decides where to look.
    assert_eq!(roots.resolve(ID, Some(Runtime::Docker)), None);
    assert_eq!(
        roots.resolve(ID, None).unwrap().source,
        Some(NameSource::ContainerdBundle)
    );

    let other = "ab".repeat(32);
    host.write(
        "var/lib/containers/storage/overlay-containers/containers.json",
        &format!(r#"[{{"id":"{other}","names":["sleeper"]}}]"#),
    );
    host.write(
        &format!("var/lib/containers/storage/overlay-containers/{other}/userdata/config.json"),
        r#"{"annotations":{"io.container.manager":"libpod"}}"#,
    );
    let podman = roots.resolve(&other, Some(Runtime::Podman)).unwrap();
    assert_eq!(podman.container.as_deref(), Some("sleeper"));
    assert_eq!(podman.source, Some(NameSource::StorageContainers));

    let docker = "cd".repeat(32);
    host.write(
        &format!("var/lib/docker/containers/{docker}/config.v2.json"),
        r#"{"Name":"/redis"}"#,
    );
    assert_eq!(
        roots.resolve(&docker, None).unwrap().container.as_deref(),
        Some("redis")
    );
    // Not an ID: never a path.
    assert_eq!(roots.resolve("../../../etc", None), None);
}

#[test]
fn planted_fifos_and_links_are_not_read() {
    let host = Host::new("hostile");
    let roots = NameRoots::under(&host.0);
    let dir = host.0.join(format!("var/lib/docker/containers/{ID}"));
    fs::create_dir_all(&dir).unwrap();
    let fifo = std::ffi::CString::new(dir.join("config.v2.json").to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // Would block forever if opened for reading the usual way.
    assert_eq!(roots.resolve(ID, Some(Runtime::Docker)), None);
    fs::remove_file(dir.join("config.v2.json")).unwrap();
    let target = host.write("elsewhere.json", r#"{"Name":"/linked"}"#);
    symlink(&target, dir.join("config.v2.json")).unwrap();
    assert_eq!(roots.resolve(ID, Some(Runtime::Docker)), None);
}

/// Issue 48 item 10: a containers.json over 16 MiB was read cut at the cap,
/// failed to parse, and gave no podman names with no word. It is refused
/// by size now (said once on stderr), not read cut.
#[test]
fn a_file_over_the_cap_is_refused_not_read_cut() {
    let host = Host::new("over-cap");
    let path = host.write("big.json", "[]");
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(MAX_FILE + 1)
        .unwrap();
    let e = read_capped(&path).unwrap_err();
    assert!(e.to_string().contains("over the size read"), "{e}");
    let small = host.write("small.json", "[]");
    assert_eq!(read_capped(&small).unwrap(), "[]");
}

/// Issue 48 item 5: the cgroup each runtime's record puts a container in,
/// as runc and crun place it from the OCI `linux.cgroupsPath` and Docker
/// from its cgroup parent.
#[test]
fn records_name_the_cgroup_they_put_a_container_in() {
    assert_eq!(
        oci_cgroup(&format!(
            "kubepods-besteffort-pod1_2.slice:cri-containerd:{ID}"
        ))
        .unwrap(),
        format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice/cri-containerd-{ID}.scope"
        )
    );
    assert_eq!(
        oci_cgroup(&format!("machine.slice:libpod:{ID}")).unwrap(),
        format!("/machine.slice/libpod-{ID}.scope")
    );
    assert_eq!(
        oci_cgroup(&format!("/kubepods/besteffort/pod{UID}/{ID}")).unwrap(),
        format!("/kubepods/besteffort/pod{UID}/{ID}")
    );
    assert_eq!(
        oci_cgroup(&format!("-.slice::{ID}")).unwrap(),
        format!("/{ID}.scope")
    );
    for bad in ["", "/", "a:b", "system.slice:docker:", "notaslice:docker:x"] {
        assert_eq!(oci_cgroup(bad), None, "{bad}");
    }
    assert_eq!(
        parse_docker_cgroups(r#"{"CgroupParent":""}"#, ID),
        [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}")
        ]
    );
    assert_eq!(
        parse_docker_cgroups(r#"{"CgroupParent":"kubepods-pod1.slice"}"#, ID),
        [format!(
            "/kubepods.slice/kubepods-pod1.slice/docker-{ID}.scope"
        )]
    );
    assert_eq!(
        parse_docker_cgroups(r#"{"CgroupParent":"/ci/"}"#, ID),
        [format!("/ci/{ID}")]
    );
    // No record, no cgroup: the names go to none.
    assert!(parse_docker_cgroups("", ID).is_empty());
    let names = ContainerNames {
        cgroups: vec![format!("/system.slice/docker-{ID}.scope")],
        ..ContainerNames::default()
    };
    assert!(names.hold_for(&format!("/system.slice/docker-{ID}.scope"), ID));
    assert!(names.hold_for(&format!("/system.slice/docker-{ID}.scope/sub"), ID));
    assert!(!names.hold_for(&format!("/app.slice/docker-{ID}.scope"), ID));
    assert!(!names.hold_for(&format!("/xsystem.slice/docker-{ID}.scope"), ID));
    assert!(!names.hold_for("/system.slice", ID));
}

/// Issue 48 item 10: a containers.json over 16 MiB (about 16,000 podman
/// containers) was refused whole, and none of its containers got its
/// name. It is read one entry at a time now, so its size is no longer
/// held in memory and the cap is the time to read it, not its size.
#[test]
fn a_containers_json_over_16_mib_still_names_podman_containers() {
    let host = Host::new("big-containers");
    let filler = "x".repeat(1000);
    let mut list = String::from("[");
    for i in 0..18_000 {
        list.push_str(&format!(
            r#"{{"id":"{i:064x}","names":["c{i}"],"metadata":"{filler}","layer":"{i:064x}"}},"#
        ));
    }
    list.push_str(&format!(r#"{{"id":"{ID}","names":["db","alias"]}}]"#));
    assert!(list.len() as u64 > MAX_FILE, "{}", list.len());
    let storage = "var/lib/containers/storage/overlay-containers";
    host.write(&format!("{storage}/containers.json"), &list);
    host.write(
        &format!("{storage}/{ID}/userdata/config.json"),
        &format!(r#"{{"linux":{{"cgroupsPath":"machine.slice:libpod:{ID}"}}}}"#),
    );
    let roots = NameRoots::under(&host.0);
    let names = roots.resolve(ID, Some(Runtime::Podman)).unwrap();
    assert_eq!(names.container.as_deref(), Some("db"));
    assert_eq!(names.cgroups, [format!("/machine.slice/libpod-{ID}.scope")]);
    // A list cut short names no one, even one before the cut.
    let cut = &list[..list.len() / 2];
    assert_eq!(
        parse_storage_containers(cut.as_bytes(), &format!("{:064x}", 1)),
        None
    );
}

/// Issue 48 item 5: a daemon-wide `--cgroup-parent` is in no
/// hostconfig.json; Docker's OCI spec in containerd's moby namespace says
/// where its container is.
#[test]
fn dockers_oci_spec_names_a_daemon_wide_cgroup_parent() {
    let host = Host::new("moby");
    host.write(
        &format!("var/lib/docker/containers/{ID}/config.v2.json"),
        r#"{"Name":"/redis"}"#,
    );
    host.write(
        &format!("var/lib/docker/containers/{ID}/hostconfig.json"),
        r#"{"CgroupParent":""}"#,
    );
    let roots = NameRoots::under(&host.0);
    let names = roots.resolve(ID, Some(Runtime::Docker)).unwrap();
    assert!(!names.hold_for(&format!("/ci.slice/docker-{ID}.scope"), ID));
    host.write(
        &format!("run/containerd/io.containerd.runtime.v2.task/moby/{ID}/config.json"),
        &format!(r#"{{"linux":{{"cgroupsPath":"ci.slice:docker:{ID}"}}}}"#),
    );
    let names = roots.resolve(ID, Some(Runtime::Docker)).unwrap();
    assert!(names.hold_for(&format!("/ci.slice/docker-{ID}.scope"), ID));
    assert!(names.hold_for(&format!("/system.slice/docker-{ID}.scope"), ID));
}
