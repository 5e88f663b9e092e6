//! Builds the eBPF object (schedlat-ebpf, for bpfel-unknown-none) with
//! aya-build and leaves it in OUT_DIR for `include_bytes_aligned!`, without
//! its DWARF (`strip_debug`).
//!
//! With `AYA_BUILD_SKIP=1` no eBPF toolchain is needed: an empty object is
//! written instead, the userspace logic and its unit tests still build, and
//! the binary says at run time that it was built without its eBPF object.
//!
//! aya-build relays every line of the eBPF sub-build (cargo's `Compiling`
//! lines included) as a `cargo:warning`, some forty lines on every build.
//! Its stdout is captured here instead: cargo's own directives pass through,
//! and the sub-build's lines are shown only when they matter (it failed, or
//! the compiler warned about the eBPF code), or when asked for with
//! `SCHEDLAT_BUILD_VERBOSE=1` (`cargo xtask build -v`). They always go to
//! this script's stderr, which `cargo build -vv` shows, and to
//! OUT_DIR/ebpf-build.log.

use std::{
    env,
    fs::{self, File},
    io::{Read, Seek, Write},
    os::fd::AsRawFd,
    path::PathBuf,
};

use anyhow::Context as _;
use aya_build::{Package, Toolchain};

const VERBOSE: &str = "SCHEDLAT_BUILD_VERBOSE";

fn main() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let object = out_dir.join("schedlat");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let ebpf = Package {
        name: "schedlat-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../schedlat-ebpf"),
        ..Default::default()
    };
    if skip {
        // aya-build returns early and prints a warning (worth seeing: this
        // binary cannot trace); leave a placeholder.
        fs::write(&object, []).context("writing placeholder eBPF object")?;
        return aya_build::build_ebpf([ebpf], Toolchain::default());
    }
    println!("cargo:rerun-if-env-changed={VERBOSE}");
    let verbose = env::var(VERBOSE).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let log_path = out_dir.join("ebpf-build.log");
    let (result, captured) = with_stdout_captured(&log_path, || {
        aya_build::build_ebpf([ebpf], Toolchain::default())
    })?;
    let mut relayed = Vec::new();
    for line in captured.lines() {
        match line.strip_prefix("cargo:warning=") {
            Some(text) => relayed.push(text),
            // rerun-if-changed and the like: cargo needs them.
            None => println!("{line}"),
        }
    }
    let compiler_warned = relayed.iter().any(|l| l.starts_with("warning"));
    let show = verbose || result.is_err() || compiler_warned;
    let mut stderr = std::io::stderr().lock();
    for text in &relayed {
        if show {
            println!("cargo:warning={text}");
        }
        // Shown by cargo on failure and with -vv.
        let _ = writeln!(stderr, "{text}");
    }
    result?;
    strip_debug(&object)
}

/// Drops the object's DWARF: the `.debug_*` sections and the relocation
/// sections that point into them. bpf-linker leaves it beside the BTF it
/// makes from it, and aya reads none of it (programs, maps, BTF and
/// BTF.ext are what it loads) but parses all of it: every section's
/// relocations are collected when the object is read, the debug
/// sections' too. Loading the object is what sets the start's peak RSS.
fn strip_debug(path: &std::path::Path) -> anyhow::Result<()> {
    use object::build::elf::{Builder, SectionData};
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut builder = Builder::read(&*data).context("reading the eBPF object as ELF")?;
    let debug: Vec<_> = (builder.sections.iter())
        .filter(|s| s.name.starts_with(b".debug"))
        .map(|s| s.id())
        .collect();
    // And each relocation section into one of them (`.rel.debug_info` and
    // the like): its sh_info names the section it applies to.
    for section in &mut builder.sections {
        let into_debug = section.sh_info_section.is_some_and(|s| debug.contains(&s));
        if debug.contains(&section.id()) || into_debug {
            section.delete = true;
        }
    }
    // The symbols of the deleted sections, and relocations through them.
    builder.delete_orphans();
    // LLVM writes the section names into the symbols' string table; the
    // writer keeps them in a table of their own.
    if !(builder.sections.iter()).any(|s| matches!(s.data, SectionData::SectionString)) {
        let names = builder.sections.add();
        names.name = ".shstrtab".into();
        names.sh_type = object::elf::SHT_STRTAB;
        names.sh_addralign = 1;
        names.data = SectionData::SectionString;
    }
    let mut stripped = Vec::with_capacity(data.len());
    builder
        .write(&mut stripped)
        .context("writing the eBPF object without its DWARF")?;
    fs::write(path, stripped).with_context(|| format!("writing {}", path.display()))
}

/// Runs `f` with file descriptor 1 (where aya-build's `println!`s go)
/// pointed at `path`, then restores it and returns what was written. A
/// file, not a pipe: nothing has to drain it while `f` runs.
fn with_stdout_captured<T>(
    path: &std::path::Path,
    f: impl FnOnce() -> T,
) -> anyhow::Result<(T, String)> {
    let mut file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::stdout().flush()?;
    // SAFETY: dup of a descriptor every process has.
    let saved = unsafe { libc::dup(1) };
    anyhow::ensure!(saved >= 0, "dup(1) failed");
    // SAFETY: both descriptors are open (the file lives to the end of this
    // function); stdout was flushed above, so nothing buffered goes astray.
    unsafe { libc::dup2(file.as_raw_fd(), 1) };
    let value = f();
    let _ = std::io::stdout().flush();
    // SAFETY: `saved` is the original fd 1, open since the dup above; it
    // goes back to 1 and its copy is closed once.
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    let mut captured = String::new();
    file.rewind()?;
    file.read_to_string(&mut captured)?;
    Ok((value, captured))
}
