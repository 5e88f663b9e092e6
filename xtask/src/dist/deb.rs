//! The .deb: DEBIAN/control (its Depends from the binary's linkage),
//! DEBIAN/md5sums, then `dpkg-deb --build` on the staged tree. No
//! maintainer scripts: the service is installed disabled, and enabled with
//! `systemctl enable --now schedlat` by whoever wants it.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail, ensure};

use super::{
    glibc::Linkage,
    package::{NAME, VERSION},
};

pub(super) fn build(root: &Path, linkage: &Linkage, dist: &Path) -> Result<PathBuf> {
    let arch = dpkg_architecture()?;
    let md5sums = md5sums(root)?;
    let installed_kib = installed_size_kib(root)?;
    let debian = root.join("DEBIAN");
    fs::create_dir_all(&debian)?;
    fs::write(debian.join("md5sums"), md5sums)?;
    fs::write(
        debian.join("control"),
        control(&arch, installed_kib, linkage),
    )?;
    let deb = dist.join(format!("{NAME}_{VERSION}_{arch}.deb"));
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(root)
        .arg(&deb)
        .output()
        .context("running dpkg-deb")?;
    if !out.status.success() {
        bail!(
            "dpkg-deb --build failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(deb)
}

fn control(arch: &str, installed_kib: u64, linkage: &Linkage) -> String {
    let mut depends = vec![format!("libc6 (>= {})", linkage.glibc)];
    if linkage.needed.iter().any(|n| n == "libgcc_s.so.1") {
        depends.push("libgcc-s1".to_string());
    }
    format!(
        "\
Package: {NAME}
Version: {VERSION}
Architecture: {arch}
Maintainer: schedlat developers <schedlat@example.invalid>
Installed-Size: {installed_kib}
Depends: {}
Section: utils
Priority: optional
Homepage: https://example.invalid/schedlat
Description: run-queue latency tracer (eBPF)
 schedlat measures how long runnable tasks wait for a CPU, in the kernel
 with eBPF, and prints runqlat-style histograms with percentiles and a
 verdict on their shape. It also attributes waits to the tasks that caused
 them, follows one process or cgroup, and serves Prometheus metrics (the
 schedlat.service unit, disabled until enabled).
 .
 Needs Linux 5.8 or newer, and root or CAP_BPF and CAP_PERFMON.
",
        depends.join(", ")
    )
}

fn dpkg_architecture() -> Result<String> {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .context("running dpkg (building a .deb needs dpkg-deb)")?;
    ensure!(out.status.success(), "dpkg --print-architecture failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Every regular file under `root`, relative, sorted.
fn files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                found.push(path.strip_prefix(root)?.to_path_buf());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `md5sum`'s format, for `dpkg --verify` / debsums.
fn md5sums(root: &Path) -> Result<String> {
    let names: Vec<PathBuf> = files(root)?;
    let out = Command::new("md5sum")
        .args(&names)
        .current_dir(root)
        .output()
        .context("running md5sum")?;
    ensure!(out.status.success(), "md5sum failed");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn installed_size_kib(root: &Path) -> Result<u64> {
    let mut bytes = 0;
    for name in files(root)? {
        bytes += fs::metadata(root.join(&name))?.len();
    }
    Ok(bytes.div_ceil(1024))
}
