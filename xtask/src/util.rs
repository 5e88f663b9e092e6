//! Small process helpers shared by the xtask commands.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail, ensure};

pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs cargo (the one that runs us) in the workspace root.
pub(crate) fn cargo(args: &[&str]) -> Result<()> {
    cargo_with_env(args, &[])
}

/// Builds the release binary, target/release/schedlat (the eBPF object
/// embedded): the one the package holds, the VMs run and bench measures.
pub(crate) fn build_release() -> Result<()> {
    cargo(&["build", "--release", "--package", "schedlat"])
}

/// As `cargo`, with extra environment variables.
pub(crate) fn cargo_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("running {cargo} {}", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// True when `cmd args` runs and exits 0 (output discarded).
/// `rustup run nightly cargo`, in the workspace, for the eBPF crates
/// (build-std needs nightly). `cargo xtask` runs under the stable
/// toolchain, whose cargo and rustc would otherwise be inherited through
/// these variables.
pub(crate) fn nightly_cargo() -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo"])
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .current_dir(workspace_root());
    cmd
}

pub(crate) fn succeeds(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a command, streaming its output; fails with its status.
pub(crate) fn run_visible(cmd: &str, args: &[&str]) -> Result<()> {
    let status = Command::new(cmd)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {cmd}"))?;
    if !status.success() {
        bail!("`{cmd} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn require_root(why: &str) -> Result<()> {
    if !is_root() {
        bail!("{why}: run as root (e.g. `sudo -E cargo xtask ...`)");
    }
    Ok(())
}

/// The absolute paths of what `binary` loads, its interpreter included,
/// from `ldd` (`libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)`).
pub(crate) fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("cannot run ldd")?;
    ensure!(
        out.status.success(),
        "ldd {} failed: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let libraries: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let path = line.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect();
    ensure!(
        libraries
            .iter()
            .any(|l| l.to_string_lossy().contains("libc.so")),
        "ldd found no libc for {}",
        binary.display()
    );
    Ok(libraries)
}

/// stdout of a command that must succeed.
pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command for its effect; its chatter is shown only if it fails.
pub(crate) fn run_quiet(cmd: &mut Command) -> Result<()> {
    output(cmd).map(drop)
}
