//! Clippy for the eBPF crates on their own target: part of `cargo xtask
//! test`'s lint step, and `cargo xtask clippy-ebpf` on its own.
//!
//! The workspace's `cargo clippy` skips schedlat-ebpf and the bench's
//! reference programs (xtask/bench-ebpf): neither is a default member, as
//! they only build for bpfel-unknown-none, with nightly and core built from
//! source, as aya-build does. Nothing is linked, so no bpf-linker is
//! needed; warnings are errors.

use anyhow::{Context, Result, bail};

use crate::util::nightly_cargo;

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
    let status = nightly_cargo()
        .args(ARGS)
        .status()
        .context("running rustup run nightly cargo clippy (is rustup installed?)")?;
    if !status.success() {
        bail!("clippy on the eBPF crates failed ({status})");
    }
    Ok(())
}
