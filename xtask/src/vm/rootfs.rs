//! The systemd guest's root file system: Debian 12 (minbase, plus systemd
//! as init and D-Bus) from `debootstrap`, trimmed of documentation and
//! package caches, packed once as a cpio archive in vm-test's downloads
//! directory (mod.rs, `downloads_dir`: outside the checkout) and reused
//! until its recipe changes (about 2 minutes to make, 90 MiB).
//! The kernel unpacks it as the initramfs and systemd runs from it as PID
//! 1: no disk image, and no kernel module to mount one.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::util::is_root;

/// The Debian release and what it is made of. A change here makes a new
/// archive (the stamp beside it records the recipe it was made from).
const SUITE: &str = "bookworm";
const PACKAGES: &str = "systemd,systemd-sysv,dbus";
const MIRROR: &str = "http://deb.debian.org/debian";

/// What the guest does not need: the archive stays small and quick to
/// boot under emulation.
const TRIMMED: [&str; 6] = [
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
    "var/cache/apt/archives",
    "var/lib/apt/lists",
];

/// The packed root file system (made first if missing or stale).
pub(super) fn archive(dir: &Path) -> Result<PathBuf> {
    let cpio = dir.join(format!("{SUITE}-systemd.cpio"));
    let stamp = dir.join(format!("{SUITE}-systemd.recipe"));
    let recipe = format!(
        "debootstrap --variant=minbase --include={PACKAGES} {SUITE} {MIRROR}\ntrimmed: {}\n",
        TRIMMED.join(" ")
    );
    if cpio.is_file() && fs::read_to_string(&stamp).is_ok_and(|r| r == recipe) {
        return Ok(cpio);
    }
    if !is_root() {
        bail!("making the systemd guest's root file system runs debootstrap, which needs root");
    }
    fs::create_dir_all(dir)?;
    let tree = dir.join(".debootstrap");
    let _ = fs::remove_dir_all(&tree);
    eprintln!(
        "vm-test: debootstrap {SUITE} with systemd into {} (once, about 2 minutes)",
        tree.display()
    );
    let out = Command::new("debootstrap")
        .args(["--variant=minbase", &format!("--include={PACKAGES}"), SUITE])
        .arg(&tree)
        .arg(MIRROR)
        .output()
        .context("cannot run debootstrap (apt-get install debootstrap)")?;
    if !out.status.success() {
        bail!(
            "debootstrap failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    for path in TRIMMED {
        let path = tree.join(path);
        if path.is_dir() {
            fs::remove_dir_all(&path)?;
            fs::create_dir_all(&path)?;
        }
    }
    // Owners kept (root runs this): the rootfs has files of other groups.
    super::initramfs::cpio(&tree, &cpio, false)?;
    fs::remove_dir_all(&tree)?;
    fs::write(&stamp, recipe)?;
    eprintln!(
        "vm-test: {} ({:.0} MiB)",
        cpio.display(),
        fs::metadata(&cpio)?.len() as f64 / (1 << 20) as f64
    );
    Ok(cpio)
}
