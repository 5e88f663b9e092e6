//! The guest's root file system: a cpio (newc) initramfs holding a static
//! busybox, /init, and schedlat's guest tests ([`GUEST_TESTS`]) with the
//! schedlat binary they run, all statically linked.
//!
//! The test binary runs schedlat from the absolute path cargo compiled into
//! it (`CARGO_BIN_EXE_schedlat`), so both binaries go into the initramfs at
//! their host paths.
//!
//! The schedlat at that path is the packaged one (`cargo xtask dist`'s
//! /usr/bin/schedlat, dynamically linked) with the host's glibc beside it,
//! so the kernels of the matrix run the binary users install. Only
//! `--inject-bad-offset` runs the static test build instead: its fault
//! injection is a feature the package does not have.

use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::fs::{PermissionsExt, symlink},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail, ensure};

use super::{elf, qemu::MARKER};
use crate::util::{shared_libraries, workspace_root};

const TARGET: &str = "x86_64-unknown-linux-gnu";
/// Where Debian's busybox-static installs it.
const BUSYBOX: &str = "/bin/busybox";

/// The test targets the guests run, in this order: the kernel-level
/// checks (tests/guest.rs), the cause split's scenarios (tests/causes.rs),
/// then the decision split's rules (tests/decision_matrix.rs).
pub(super) const GUEST_TESTS: [&str; 3] = ["guest", "causes", "decision_matrix"];

/// The packaged unit's tests, which the systemd guest runs (systemd.rs).
pub(super) const UNIT_TESTS: &str = "unit";

/// The guest binaries, at their host paths: the test executables (in
/// [`GUEST_TESTS`] order), the unit's tests, and schedlat.
pub(super) struct GuestBinaries {
    pub tests: Vec<PathBuf>,
    pub unit_tests: PathBuf,
    pub schedlat: PathBuf,
}

/// Builds the [`GUEST_TESTS`] and schedlat, statically linked, in their own
/// target directory (other flags would otherwise rebuild the normal one).
pub(super) fn build(fault_injection: bool) -> Result<GuestBinaries> {
    let target_dir = workspace_root().join("target/vm/build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["test", "--package", "schedlat", "--no-run"]);
    for test in GUEST_TESTS.iter().chain([&UNIT_TESTS]) {
        cmd.args(["--test", test]);
    }
    cmd.args([
        "--target",
        TARGET,
        "--message-format",
        "json-render-diagnostics",
    ])
    .arg("--target-dir")
    .arg(&target_dir)
    .current_dir(workspace_root())
    // Target-specific flags, so build scripts and proc macros (host
    // code, loaded by the compiler) stay dynamic. glibc's libc.a makes
    // the static link.
    .env(
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
        "-C target-feature=+crt-static",
    )
    // No debug info: the initramfs stays small and quick to load.
    .env("CARGO_PROFILE_DEV_DEBUG", "0")
    .stdout(Stdio::piped());
    if fault_injection {
        cmd.args(["--features", "fault-injection"]);
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot run {cargo}"))?;
    let mut tests: Vec<Option<PathBuf>> = vec![None; GUEST_TESTS.len()];
    let mut schedlat = None;
    let mut unit_tests = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let message: serde_json::Value = serde_json::from_str(&line?).unwrap_or_default();
        let Some(exe) = message["executable"].as_str() else {
            continue;
        };
        let kinds = message["target"]["kind"].to_string();
        let name = message["target"]["name"].as_str().unwrap_or_default();
        if kinds.contains("\"test\"")
            && let Some(i) = GUEST_TESTS.iter().position(|t| *t == name)
        {
            tests[i] = Some(PathBuf::from(exe));
        } else if kinds.contains("\"test\"") && name == UNIT_TESTS {
            unit_tests = Some(PathBuf::from(exe));
        } else if name == "schedlat" && kinds.contains("\"bin\"") {
            schedlat = Some(PathBuf::from(exe));
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("building the guest tests failed ({status})");
    }
    let tests = tests
        .into_iter()
        .zip(GUEST_TESTS)
        .map(|(exe, name)| exe.with_context(|| format!("cargo reported no {name} test executable")))
        .collect::<Result<Vec<_>>>()?;
    let binaries = GuestBinaries {
        tests,
        unit_tests: unit_tests.context("cargo reported no unit test executable")?,
        schedlat: schedlat.context("cargo reported no schedlat executable")?,
    };
    for path in binaries
        .tests
        .iter()
        .chain([&binaries.unit_tests, &binaries.schedlat])
    {
        ensure!(
            elf::is_static(&fs::read(path)?),
            "{} is not statically linked (is glibc's libc.a, package libc6-dev, installed?)",
            path.display()
        );
    }
    Ok(binaries)
}

/// Writes the initramfs to `out`, staging its tree under `stage`. A guest
/// still running after `watchdog` reports itself hung (see init_script).
/// With `packaged`, that binary replaces the static schedlat, its shared
/// libraries (from `ldd`) go in at their host paths, and /init points the
/// dynamic loader at their directories.
pub(super) fn pack(
    binaries: &GuestBinaries,
    packaged: Option<&Path>,
    configs: &[(&str, &Path)],
    stage: &Path,
    out: &Path,
    watchdog: Duration,
) -> Result<()> {
    let _ = fs::remove_dir_all(stage);
    for dir in ["bin", "dev", "proc", "sys", "tmp"] {
        fs::create_dir_all(stage.join(dir))?;
    }
    let busybox = fs::read(BUSYBOX).with_context(|| format!("reading {BUSYBOX}"))?;
    ensure!(
        elf::is_static(&busybox),
        "{BUSYBOX} is not static: install busybox-static (`apt-get install busybox-static`)"
    );
    install(stage, Path::new("/bin/busybox"), &busybox)?;
    symlink("busybox", stage.join("bin/sh"))?;
    for tests in &binaries.tests {
        install(stage, tests, &fs::read(tests)?)?;
    }
    // Each kernel's configuration where Debian's 7.x packages put it (and
    // schedlat looks): /usr/lib/modules/RELEASE/config.
    for (release, config) in configs {
        let at = Path::new("/usr/lib/modules").join(release).join("config");
        install(stage, &at, &fs::read(config)?)?;
    }
    let mut library_dirs = Vec::new();
    match packaged {
        Some(binary) => {
            install(stage, &binaries.schedlat, &fs::read(binary)?)?;
            for library in shared_libraries(binary)? {
                install(stage, &library, &fs::read(&library)?)?;
                let dir = library.parent().expect("a file has a parent").to_path_buf();
                if !library_dirs.contains(&dir) {
                    library_dirs.push(dir);
                }
            }
        }
        None => install(stage, &binaries.schedlat, &fs::read(&binaries.schedlat)?)?,
    }
    let library_path = library_dirs
        .iter()
        .map(|d| d.to_string_lossy())
        .collect::<Vec<_>>()
        .join(":");
    let init = init_script(&binaries.tests, &library_path, watchdog.as_secs());
    install(stage, Path::new("/init"), init.as_bytes())?;
    cpio(stage, out, true)
}

/// Copies `bytes` to `stage` + `path`, executable.
fn install(stage: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let dest = stage.join(path.strip_prefix("/").unwrap_or(path));
    fs::create_dir_all(dest.parent().expect("a file has a parent"))?;
    fs::write(&dest, bytes)?;
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// /init: mount what schedlat and later tests need, run the guest tests,
/// print the result marker on the console, power off. Any step that fails
/// reports FAIL with the step, so a broken guest never passes silently; a
/// hung one lists its processes and where in the kernel they wait, which
/// the host's timeout alone could not tell.
fn init_script(tests: &[PathBuf], library_path: &str, watchdog_secs: u64) -> String {
    // Every binary runs, also after one fails, so a guest reports all its
    // failures at once.
    let run_tests: String = tests
        .iter()
        .map(|t| {
            format!(
                "{} --test-threads=1 --show-output || status=$?\n",
                t.display()
            )
        })
        .collect();
    format!(
        r#"#!/bin/sh
# Generated by `cargo xtask vm-test` (xtask/src/vm/initramfs.rs).
/bin/busybox --install -s /bin
export PATH=/bin
# The packaged schedlat's glibc, at its host paths (there is no ld.so.cache).
export LD_LIBRARY_PATH={library_path}
fail() {{ echo "{MARKER} FAIL $*"; poweroff -f; }}
mount -t proc proc /proc || fail "mount proc"
mount -t sysfs sysfs /sys || fail "mount sysfs"
mount -t devtmpfs devtmpfs /dev || fail "mount devtmpfs"
mount -t tracefs tracefs /sys/kernel/tracing || fail "mount tracefs"
mount -t bpf bpf /sys/fs/bpf || fail "mount bpffs"
# debugfs, as on most machines without lockdown: the live base slice,
# the scheduler features and the preemption model schedlat reports (the
# host's lockdown refuses it, so its tests read the other sources).
mount -t debugfs debugfs /sys/kernel/debug || echo "schedlat-vm: no debugfs"
# A pure cgroup v2 hierarchy with the cpu controller, as on most production
# machines (the host here has cgroup v1 plus a v2 side mount).
mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "mount cgroup2"
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control || fail "enable the cgroup v2 cpu controller"
(
    sleep {watchdog_secs}
    echo "schedlat-vm: still running after {watchdog_secs} s; user tasks and their kernel stacks:"
    for t in /proc/[0-9]*/task/[0-9]*; do
        cmd=$(tr '\0' ' ' < $t/cmdline)
        [ -n "$cmd" ] || continue
        echo "$t [$(cat $t/comm)] $cmd wchan=$(cat $t/wchan)"
        cat $t/stack
    done
    fail "guest tests still running after {watchdog_secs} s (hung?)"
) &
echo "schedlat-vm: kernel $(uname -r), running the guest tests"
cd /
# --show-output: what each passing test measured (its eprintln! lines)
# reaches the console log too, not only a failure's.
status=0
{run_tests}if [ "$status" = 0 ]; then
    echo "{MARKER} PASS"
else
    echo "{MARKER} FAIL guest tests exited with status $status"
fi
poweroff -f
"#
    )
}

/// `cpio -o -H newc` over the staged tree; with `owned_by_root` every
/// entry is owned by root (-R 0:0), so no root is needed to build it,
/// else each keeps its owner.
pub(super) fn cpio(stage: &Path, out: &Path, owned_by_root: bool) -> Result<()> {
    let mut entries = Vec::new();
    walk(stage, stage, &mut entries)?;
    let mut child = Command::new("cpio")
        .args(["--quiet", "-o", "-H", "newc"])
        .args(if owned_by_root {
            &["-R", "0:0"][..]
        } else {
            &[]
        })
        .current_dir(stage)
        .stdin(Stdio::piped())
        .stdout(fs::File::create(out)?)
        .spawn()
        .context("cannot run cpio (apt-get install cpio)")?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(entries.join("\n").as_bytes())?;
    let status = child.wait()?;
    ensure!(status.success(), "cpio failed ({status})");
    Ok(())
}

/// Paths under `dir`, relative to `root`, parents before children.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    let mut children: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    children.sort();
    for path in children {
        let relative = path.strip_prefix(root).expect("under root");
        out.push(relative.to_string_lossy().into_owned());
        if fs::symlink_metadata(&path)?.is_dir() {
            walk(root, &path, out)?;
        }
    }
    Ok(())
}
