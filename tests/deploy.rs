//! The Kubernetes manifests (deploy/kubernetes), as kustomize builds them,
//! checked against the Kubernetes schemas and for what the pod asks of
//! the node. tests/image.rs runs the image with the DaemonSet's settings.

use std::{fs, path::Path, process::Command};

use common::{
    container::{run, text},
    kube,
};

use crate::common;

/// Every component, to validate them together.
const COMPONENTS: [&str; 4] = [
    "servicemonitor",
    "kernel-before-5.11",
    "pids",
    "seccomp-localhost",
];

/// kubernetes-validate (PyPI) with `--strict` (unknown fields refused)
/// over a YAML stream; its output on failure.
fn kubernetes_validate(yaml: &str) -> Result<String, String> {
    let file =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("k8s-{}.yaml", std::process::id()));
    fs::write(&file, yaml).unwrap();
    let out = run(Command::new("kubernetes-validate")
        .args(["--strict"])
        .arg(&file));
    let _ = fs::remove_file(&file);
    let report = text(&out);
    if out.status.success() && !report.contains("ERROR") {
        Ok(report)
    } else {
        Err(report)
    }
}

/// The ServiceMonitor against prometheus-operator's CRD schema, through
/// @kubernetes-models/prometheus-operator (npm), which `cargo xtask setup`
/// installs in target/npm/deploy with tests/deploy/servicemonitor.mjs.
fn servicemonitor_validate(yaml: &str) -> Result<String, String> {
    let dir = kube::repo().join("target/npm/deploy");
    let file = dir.join(format!("manifests-{}.yaml", std::process::id()));
    fs::write(&file, yaml).unwrap();
    let out = run(Command::new("node")
        .arg(dir.join("servicemonitor.mjs"))
        .arg(&file)
        .current_dir(&dir));
    let _ = fs::remove_file(&file);
    let report = text(&out);
    if out.status.success() {
        Ok(report)
    } else {
        Err(report)
    }
}

#[test]
fn manifests_pass_the_kubernetes_schemas() {
    for components in [&[][..], &COMPONENTS[..]] {
        let yaml = kube::kustomize_yaml("schemas", components);
        let report = kubernetes_validate(&yaml).unwrap_or_else(|e| panic!("{components:?}: {e}"));
        for kind in ["namespace", "service", "daemonset"] {
            assert!(
                report.contains(&format!("passed for resource {kind}/schedlat")),
                "{report}"
            );
        }
        if !components.is_empty() {
            let report = servicemonitor_validate(&yaml).unwrap_or_else(|e| panic!("{e}"));
            assert!(report.contains("ok schedlat"), "{report}");
        }
    }
    // The validators do refuse: a misspelt field, a malformed duration.
    let yaml = kube::kustomize_yaml("schemas-bad", &COMPONENTS);
    let bad = yaml.replace(
        "readOnlyRootFilesystem: true",
        "readOnlyRootFileSystem: true",
    );
    let e = kubernetes_validate(&bad).expect_err("a misspelt field passed");
    assert!(e.contains("readOnlyRootFileSystem"), "{e}");
    let bad = yaml.replace("interval: 15s", "interval: 15 seconds");
    let e = servicemonitor_validate(&bad).expect_err("a malformed interval passed");
    assert!(e.contains("interval"), "{e}");
}

/// What the issue asks of the pod, read from what kustomize builds.
#[test]
fn daemonset_asks_for_two_capabilities_and_two_read_only_host_paths() {
    let docs = kube::documents(&kube::kustomize_yaml("pod", &[]));
    let daemonset = kube::find(&docs, "DaemonSet");
    let (spec, container) = kube::pod(daemonset);
    let ctx = &container["securityContext"];
    assert_eq!(ctx["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(
        ctx["capabilities"]["add"],
        serde_json::json!(["BPF", "PERFMON"])
    );
    assert_eq!(ctx["readOnlyRootFilesystem"], true);
    assert_eq!(ctx["allowPrivilegeEscalation"], false);
    assert!(ctx.get("privileged").is_none(), "{ctx:#}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(spec["hostPID"], false);
    assert!(spec.get("hostNetwork").is_none(), "{spec:#}");
    let mut host_paths: Vec<&str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v["hostPath"]["path"]
                .as_str()
                .expect("hostPath volumes only")
        })
        .collect();
    host_paths.sort_unstable();
    assert_eq!(host_paths, ["/sys/fs/cgroup", "/sys/kernel/btf"]);
    for mount in container["volumeMounts"].as_array().unwrap() {
        assert_eq!(mount["readOnly"], true, "{mount}");
    }
    // Probes and the Service use the port the container serves on.
    let port = &container["ports"][0];
    assert_eq!(port["name"], "metrics");
    let args = kube::args(daemonset);
    assert!(
        args.join(" ")
            .contains(&format!("--listen 0.0.0.0:{}", port["containerPort"])),
        "{args:?}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let service = kube::find(&docs, "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert!(
        container["resources"]["limits"].get("cpu").is_none(),
        "no CPU limit"
    );

    // The older-kernel component adds exactly CAP_SYS_RESOURCE; the pids one
    // shares the node's PID namespace.
    let docs = kube::documents(&kube::kustomize_yaml(
        "old",
        &["kernel-before-5.11", "pids"],
    ));
    let daemonset = kube::find(&docs, "DaemonSet");
    let (spec, container) = kube::pod(daemonset);
    assert_eq!(
        container["securityContext"]["capabilities"]["add"],
        serde_json::json!(["BPF", "PERFMON", "SYS_RESOURCE"])
    );
    assert_eq!(spec["hostPID"], true);
    assert!(kube::args(daemonset).contains(&"--pids".to_string()));
}

/// `schedlat check` runs before serve as serve would run: the same image,
/// securityContext (the older-kernel component's capability included) and
/// mounts.
#[test]
fn the_init_container_runs_check_as_serve_would_run() {
    for components in [&[][..], &["kernel-before-5.11"][..]] {
        let docs = kube::documents(&kube::kustomize_yaml("check", components));
        let daemonset = kube::find(&docs, "DaemonSet");
        let (spec, container) = kube::pod(daemonset);
        let init = &spec["initContainers"][0];
        assert_eq!(init["name"], "check", "{spec:#}");
        assert_eq!(
            init["args"],
            serde_json::json!(["check", "--require", "histogram,cgroups"])
        );
        for field in ["image", "securityContext", "volumeMounts", "resources"] {
            assert_eq!(init[field], container[field], "{components:?} {field}");
        }
    }
}
