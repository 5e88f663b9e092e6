//! The configuration the shipped DaemonSet runs (deploy/kubernetes/base/
//! daemonset.yaml), read from the manifest rather than typed again, so
//! that the bench's `daemonset` row measures what a cluster runs, whatever
//! the manifest says today.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::workspace_root;

/// The manifest, relative to the workspace.
const MANIFEST: &str = "deploy/kubernetes/base/daemonset.yaml";

/// The DaemonSet's schedlat container's arguments, with its `--listen`
/// address replaced by a free port on loopback (the bench scrapes nothing
/// and must not collide with a real exporter).
pub(super) fn serve_args(listen: &str) -> Result<Vec<String>> {
    let path = workspace_root().join(MANIFEST);
    // PyYAML, which `cargo xtask setup` installs for the manifests' tests.
    let script = "import json, sys, yaml\n\
                  docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get('kind') == 'DaemonSet']\n\
                  print(json.dumps([c.get('args', []) for d in docs for c in d['spec']['template']['spec']['containers']]))";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .context("running python3 (with PyYAML) to read the DaemonSet")?;
    if !out.status.success() {
        bail!(
            "reading {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let containers: Vec<Vec<String>> = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("the containers' args of {}", path.display()))?;
    let args = containers
        .into_iter()
        .find(|a| a.first().is_some_and(|c| c == "serve"))
        .with_context(|| format!("no container of {} runs `serve`", path.display()))?;
    Ok(local(args, listen))
}

/// `args` with the value of `--listen` (both spellings) set to `listen`.
fn local(args: Vec<String>, listen: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut next_is_address = false;
    for arg in args {
        if next_is_address {
            out.push(listen.to_string());
            next_is_address = false;
        } else if arg == "--listen" {
            next_is_address = true;
            out.push(arg);
        } else if arg.starts_with("--listen=") {
            out.push(format!("--listen={listen}"));
        } else {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_address_is_replaced_and_the_rest_kept() {
        let args = ["serve", "--listen", "0.0.0.0:9415", "--cgroups", "--pairs"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            local(args, "127.0.0.1:0"),
            ["serve", "--listen", "127.0.0.1:0", "--cgroups", "--pairs"]
        );
        let args = ["serve", "--listen=[::]:9415", "--pairs"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            local(args, "127.0.0.1:0"),
            ["serve", "--listen=127.0.0.1:0", "--pairs"]
        );
    }

    /// The shipped manifest runs serve per cgroup with the pairs: the row
    /// measures that (python3 and PyYAML come with `cargo xtask setup`).
    #[test]
    fn the_manifest_runs_serve() {
        let args = serve_args("127.0.0.1:0").expect("the DaemonSet's args");
        assert_eq!(args[0], "serve", "{args:?}");
        assert!(args.iter().any(|a| a == "127.0.0.1:0"), "{args:?}");
        assert!(!args.iter().any(|a| a.contains("9415")), "{args:?}");
    }
}
