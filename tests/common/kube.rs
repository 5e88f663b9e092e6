//! The Kubernetes manifests of deploy/kubernetes as the tests see them:
//! built by `kubectl kustomize` (the base, plus components), read as JSON,
//! and the DaemonSet's pod turned into the `podman run` flags that give a
//! container the same user, capabilities, seccomp profile, root file
//! system and mounts.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::Value;

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// `kubectl kustomize` of the base with `components`, as YAML. A
/// kustomization may only name paths relative to itself: it is written
/// beside the repository's, under deploy/kubernetes/.test-NAME.
pub(crate) fn kustomize_yaml(name: &str, components: &[&str]) -> String {
    let kube = repo().join("deploy/kubernetes");
    let dir = kube.join(format!(".test-{name}-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: {}\ncomponents: {}\n",
        list(vec!["../base".into()]),
        list(
            components
                .iter()
                .map(|c| format!("../components/{c}"))
                .collect()
        ),
    );
    fs::write(dir.join("kustomization.yaml"), text).unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl runs");
    let _ = fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "kubectl kustomize {components:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The documents of a YAML stream, as JSON (PyYAML, installed with
/// kubernetes-validate by `cargo xtask setup`).
pub(crate) fn documents(yaml: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "YAML to JSON failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {docs:#?}"))
}

/// The pod template's spec and its one container.
pub(crate) fn pod(daemonset: &Value) -> (&Value, &Value) {
    let spec = &daemonset["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container: {spec:#}");
    (spec, &containers[0])
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// `podman run` flags with the DaemonSet pod's security settings and
/// mounts. `localhost_profile` is the seccomp file a `Localhost` profile
/// names on the node. A setting this does not know fails the test: nothing
/// of the pod's securityContext is skipped.
///
/// `image_user` is the image's own `uid:gid`: when the pod asks for that
/// very user, no `--user` is given, because podman (unlike Kubernetes,
/// which has no ambient capabilities) adds the granted capabilities to
/// the ambient set of an explicit non-root `--user`, and the test would
/// then not see what a node does: the capabilities coming from the
/// binary's file capabilities alone.
pub(crate) fn podman_flags(
    daemonset: &Value,
    localhost_profile: &Path,
    image_user: &str,
) -> Vec<String> {
    let (spec, container) = pod(daemonset);
    let mut flags = Vec::new();
    let pod_ctx = spec["securityContext"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let ctx = container["securityContext"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, value) in pod_ctx.iter().chain(ctx.iter()) {
        match key.as_str() {
            // runAsNonRoot is an admission check on the user below.
            "runAsNonRoot" => assert_eq!(value, true),
            "runAsUser" | "runAsGroup" => {}
            "seccompProfile" => match value["type"].as_str().unwrap() {
                // podman's own default: containers/common's, as CRI-O's.
                "RuntimeDefault" => {}
                "Localhost" => flags.push(format!(
                    "--security-opt=seccomp={}",
                    localhost_profile.display()
                )),
                other => panic!("seccompProfile type {other}"),
            },
            "allowPrivilegeEscalation" => {
                if value == false {
                    flags.push("--security-opt=no-new-privileges".into());
                }
            }
            "readOnlyRootFilesystem" => {
                if value == true {
                    flags.push("--read-only".into());
                }
            }
            "capabilities" => {
                for cap in strings(&value["drop"]) {
                    flags.push(format!("--cap-drop={cap}"));
                }
                for cap in strings(&value["add"]) {
                    flags.push(format!("--cap-add={cap}"));
                }
            }
            other => panic!("securityContext.{other} has no podman translation here"),
        }
    }
    let user = ctx.get("runAsUser").or(pod_ctx.get("runAsUser"));
    let group = ctx.get("runAsGroup").or(pod_ctx.get("runAsGroup"));
    if let Some(user) = user {
        let group = group.map_or(String::new(), |g| format!(":{g}"));
        let user = format!("{user}{group}");
        if user != image_user {
            flags.push(format!("--user={user}"));
        }
    }
    if spec["hostPID"] == true {
        flags.push("--pid=host".into());
    }
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    for mount in container["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("a mount's volume");
        let host = volume["hostPath"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("only hostPath volumes are translated: {volume}"));
        let ro = if mount["readOnly"] == true { ":ro" } else { "" };
        flags.push(format!(
            "--volume={host}:{}{ro}",
            mount["mountPath"].as_str().unwrap()
        ));
    }
    if let Some(memory) = container["resources"]["limits"]["memory"].as_str() {
        flags.push(format!("--memory={}", memory.trim_end_matches('i')));
    }
    flags
}

/// The container's arguments (the image's entrypoint is schedlat).
pub(crate) fn args(daemonset: &Value) -> Vec<String> {
    strings(&pod(daemonset).1["args"])
}
