//! Clippy for the eBPF crates on their own target: part of `cargo xtask
//! test`'s lint step, and `cargo xtask clippy-ebpf` on its own.
//!
//! The workspace's `cargo clippy` skips schedlat-ebpf and the bench's
//! reference programs (xtask/bench-ebpf): neither is a default member, as
//! they only build for bpfel-unknown-none, with nightly and core built from
//! source, as aya-build does. Nothing is linked, so no bpf-linker is
//! needed; warnings are errors.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::workspace_root;

/// The arguments after `rustup run nightly cargo`; CI can run the same by
/// hand: `cargo +nightly clippy -p schedlat-ebpf -p bench-ebpf --target
/// bpfel-unknown-none -Z build-std=core --release -- -D warnings`.
const ARGS: [&str; 12] = [
    "clippy",
    "--package",
    "schedlat-ebpf",
    "--package",
    "bench-ebpf",
    "--target",
    "bpfel-unknown-none",
    "-Z",
    "build-std=core",
    "--release",
    "--",
    "-Dwarnings",
];

pub(crate) fn run() -> Result<()> {
    // `cargo xtask` runs under the stable toolchain, whose cargo and rustc
    // would otherwise be inherited through these variables.
    let status = Command::new("rustup")
        .args(["run", "nightly", "cargo"])
        .args(ARGS)
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .current_dir(workspace_root())
        .status()
        .context("running rustup run nightly cargo clippy (is rustup installed?)")?;
    if !status.success() {
        bail!("clippy on the eBPF crates failed ({status})");
    }
    Ok(())
}
