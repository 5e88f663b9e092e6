//! Building the reference programs' objects (xtask/bench-ebpf, one object
//! per mode) for the bpf target.
//!
//! On demand, never in a build script: xtask itself must build on a fresh
//! machine before `cargo xtask setup` has installed bpf-linker. The bench
//! builds them once before its rounds (no build runs beside a
//! measurement); `cargo xtask bench-noop` by hand builds them first.
//!
//! cargo is invoked as aya-build invokes it for schedlat-ebpf
//! (schedlat/build.rs): the nightly toolchain, core built from source,
//! release, aya-build's RUSTFLAGS (the target arch cfg, full debug info,
//! BTF from bpf-linker); into a target directory of its own, so that
//! neither these flags nor the workspace's builds invalidate the other's
//! artifacts.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::util::{nightly_cargo, workspace_root};

const PACKAGE: &str = "bench-ebpf";
const TARGET: &str = "bpfel-unknown-none";

/// The target directory of these builds.
fn target_dir() -> PathBuf {
    workspace_root().join("target/bench-ebpf")
}

/// Where the objects are: one file per bin, named as its bench mode.
pub(crate) fn dir() -> PathBuf {
    target_dir().join(TARGET).join("release")
}

/// Builds the objects (cargo's usual no-op when they are up to date) and
/// returns `dir()`.
pub(crate) fn build() -> Result<PathBuf> {
    // aya-build's flags, `\x1f`-separated as CARGO_ENCODED_RUSTFLAGS
    // wants; the arch is the host's (xtask's own), as aya-build takes
    // the host build's.
    let rustflags = [
        format!("--cfg=bpf_target_arch=\"{}\"", std::env::consts::ARCH),
        "-Cdebuginfo=2".into(),
        "-Clink-arg=--btf".into(),
    ]
    .join("\x1f");
    let status = nightly_cargo()
        .args(["build", "--quiet"])
        .args(["--package", PACKAGE, "--bins", "--release"])
        .args(["--target", TARGET, "-Z", "build-std=core", "--target-dir"])
        .arg(target_dir())
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .status()
        .context("running rustup run nightly cargo build (is rustup installed?)")?;
    if !status.success() {
        bail!(
            "building the bench's reference programs ({PACKAGE}) failed ({status}); \
             `cargo xtask setup` installs what it needs"
        );
    }
    Ok(dir())
}
