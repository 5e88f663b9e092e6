//! `cargo xtask dist`: the release binary (eBPF object embedded) with its
//! man pages, shell completions, docs and systemd unit, as a .deb and as a
//! tarball of the same tree, in target/dist/. Nothing is downloaded: the
//! tools are dpkg-deb, tar, gzip and objdump.
//!
//! - stage.rs: the installed tree (usr/bin, usr/share/man, ...)
//! - glibc.rs: what the binary links against, and the oldest glibc it needs
//! - deb.rs: DEBIAN/control and md5sums, then `dpkg-deb --build`
//! - package.rs: the package's name and version

mod deb;
mod glibc;
mod package;
mod stage;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
pub(crate) use package::{NAME, VERSION};

use crate::util::workspace_root;

/// What `dist` produced.
pub(crate) struct Artifacts {
    pub deb: PathBuf,
    pub tarball: PathBuf,
    /// The packaged /usr/bin/schedlat, staged.
    pub binary: PathBuf,
}

/// Builds the package from target/release/schedlat, which must be built.
pub(crate) fn run() -> Result<Artifacts> {
    // That build has no eBPF object: a package of it could not trace.
    if std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        bail!("AYA_BUILD_SKIP is set: the release binary would have no eBPF object; unset it");
    }
    let dist = workspace_root().join("target/dist");
    let root = dist.join("root");
    let _ = fs::remove_dir_all(&root);
    let binary = workspace_root().join("target/release/schedlat");
    let linkage = glibc::check(&binary)?;
    eprintln!(
        "dist: {} needs glibc {} or newer (checked: at most {}), links {}",
        binary.display(),
        linkage.glibc,
        glibc::OLDEST_SUPPORTED,
        linkage.needed.join(", ")
    );
    stage::tree(&binary, &root)?;

    let stem = format!("{NAME}-{VERSION}-{}-linux-gnu", std::env::consts::ARCH);
    let tarball = dist.join(format!("{stem}.tar.gz"));
    // The tarball first, before DEBIAN/ is added to the same tree.
    tar(&root, &stem, &tarball)?;
    let deb = deb::build(&root, &linkage, &dist)?;
    for path in [&deb, &tarball] {
        eprintln!(
            "dist: {} ({:.1} MiB)",
            path.display(),
            fs::metadata(path)?.len() as f64 / (1 << 20) as f64
        );
    }
    Ok(Artifacts {
        deb,
        tarball,
        binary: root.join("usr/bin/schedlat"),
    })
}

/// `stem/usr/...`: unpack with `tar -xzf FILE --strip-components=1 -C /`.
fn tar(root: &Path, stem: &str, out: &Path) -> Result<()> {
    let status = Command::new("tar")
        .args([
            "--create",
            "--gzip",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
        ])
        .args(["--sort=name", "--mtime=@0"])
        .arg(format!("--transform=s,^\\.,{stem},"))
        .arg("--file")
        .arg(out)
        .arg("--directory")
        .arg(root)
        .arg(".")
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar failed ({status})");
    }
    Ok(())
}
