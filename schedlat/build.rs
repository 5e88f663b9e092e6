//! Builds the eBPF object (schedlat-ebpf, for bpfel-unknown-none) with
//! aya-build and leaves it in OUT_DIR for `include_bytes_aligned!`.
//!
//! With `AYA_BUILD_SKIP=1` no eBPF toolchain is needed: an empty object is
//! written instead, the userspace logic and its unit tests still build, and
//! the binary says at run time that it was built without its eBPF object.

use std::{env, fs, path::PathBuf};

use anyhow::Context as _;
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let object = out_dir.join("schedlat");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        // aya-build returns early and prints a warning; leave a placeholder.
        fs::write(&object, []).context("writing placeholder eBPF object")?;
    }
    let ebpf = Package {
        name: "schedlat-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../schedlat-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], Toolchain::default())
}
