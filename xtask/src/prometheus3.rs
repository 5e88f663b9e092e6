//! Prometheus 3.x for the tests, beside Debian 12's 2.42: the mixin's
//! native-histogram rule tests need a 3.x promtool (2.x cannot read native
//! series in a test), and the exporter is checked against both major
//! versions. Only Debian unstable packages 3.x, so its `prometheus` and
//! `promtool` packages are fetched through a private apt configuration
//! (apt.rs; the machine's apt sources are untouched) and only their
//! binaries are kept, in `target/tools/prometheus-3/`. They are Go
//! binaries linked only against glibc (2.34 or newer), so they run here.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{
    apt::{Apt, Archive},
    util::{output, run_quiet, workspace_root},
};

/// Where the binaries go (the tests look here, or in
/// `SCHEDLAT_PROMETHEUS3_DIR`).
pub(crate) fn dir() -> PathBuf {
    workspace_root().join("target/tools/prometheus-3")
}

/// True when both binaries are there and run.
pub(crate) fn present() -> bool {
    ["prometheus", "promtool"].iter().all(|b| {
        Command::new(dir().join(b))
            .arg("--version")
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains(", version 3.")
            })
    })
}

/// Fetches and unpacks them (about 36 MB of packages, once).
pub(crate) fn install() -> Result<()> {
    let tools = workspace_root().join("target/tools");
    let apt = Apt::for_archive(Archive::Sid, &tools.join("apt"))?;
    if apt.needs_update() {
        eprintln!(
            "setup: fetching Debian unstable's package lists (private, under target/tools/apt)"
        );
    }
    run_quiet(apt.command("apt-get").args(["update", "-qq"]))
        .context("apt-get update (Debian unstable)")?;
    let scratch = tools.join(".prometheus-3");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)?;
    for package in ["prometheus", "promtool"] {
        let version = candidate(&apt, package)?;
        if !version.starts_with("3.") {
            bail!("Debian unstable's {package} is {version}, not 3.x");
        }
        eprintln!("setup: downloading {package} {version} (Debian unstable)");
        run_quiet(
            apt.command("apt-get")
                .args(["download", "-q", &format!("{package}={version}")])
                .current_dir(&scratch),
        )
        .with_context(|| format!("apt-get download {package}={version}"))?;
    }
    let unpacked = scratch.join("root");
    for deb in fs::read_dir(&scratch)?.filter_map(|e| e.ok().map(|e| e.path())) {
        if deb.extension().is_some_and(|x| x == "deb") {
            run_quiet(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))
                .with_context(|| format!("dpkg-deb -x {}", deb.display()))?;
        }
    }
    let out = dir();
    fs::create_dir_all(&out)?;
    for binary in ["prometheus", "promtool"] {
        copy(&unpacked.join("usr/bin").join(binary), &out.join(binary))?;
    }
    fs::remove_dir_all(&scratch)?;
    Ok(())
}

fn candidate(apt: &Apt, package: &str) -> Result<String> {
    let policy = output(apt.command("apt-cache").args(["policy", package]))?;
    policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| v != "(none)")
        .with_context(|| format!("Debian unstable has no {package} (apt-cache policy)"))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}
