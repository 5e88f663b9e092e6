//! `cargo xtask setup`: each step checks first and acts only when needed, so
//! a ready machine is done in about a second. A step that cannot act (not
//! root, no apt) says what the user must do instead.
//!
//! Three tiers, installed by the command that needs them: `run()` what
//! building and running schedlat needs (every command), `test_tools()` the
//! references and loads of `cargo xtask test` and `bench`, `vm_tools()` QEMU
//! for `cargo xtask vm-test`. A user who only runs schedlat gets no
//! Prometheus service, stress-ng or QEMU.

use std::{path::Path, process::Command, time::Instant};

use anyhow::{Context, Result, bail};

use crate::util::{is_root, run_visible, succeeds};

/// The LLVM that the nightly toolchain's rustc uses: bpf-linker must link
/// against the same major version.
const LLVM_MAJOR: &str = "22";
/// Debian packages the tests and the benchmark use: the runqlat anchor,
/// perf (bench load), taskset and setpriv (pinned and unprivileged
/// workloads), and prometheus (the server and promtool that check
/// `schedlat serve`, tests/serve.rs).
const TEST_PACKAGES: [&str; 23] = [
    "libbpf-tools",
    "linux-perf",
    "util-linux",
    "prometheus",
    // `schedlat top`'s end-to-end test drives it in a real terminal,
    "tmux",
    // under `stress-ng --cpu 4` (tests/top.rs).
    "stress-ng",
    // tests/dist.rs: the package's man pages rendered with `man -l`,
    "man-db",
    // the binary's glibc symbol versions read with `objdump -T`,
    "binutils",
    // and its systemd unit checked with `systemd-analyze verify`.
    "systemd",
    "dpkg",
    // The monitoring mixin's renderer (tests/mixin.rs).
    "jsonnet",
    // tests/image.rs: the OCI image run by podman, with runc (crun refuses
    // this VM's hybrid cgroup layout), its file capabilities read with
    // getcap, and the seccomp profile made with jq as docs/deploy.md shows.
    "podman",
    "runc",
    "libcap2-bin",
    "jq",
    // and by containerd (`ctr run --seccomp`: Kubernetes' RuntimeDefault
    // on most clusters).
    "containerd",
    // tests/containers.rs: the static busybox of its containers' image.
    "busybox-static",
    // tests/dumpdir.rs: a recorder's wall clock frozen or stepped back
    // (libfaketime's preload), the rest of the machine's untouched.
    "faketime",
    // cyclictest, for the seed case of `cargo xtask bench --seed`
    // (docs/decision.md).
    "rt-tests",
    // tests/web.rs and tests/snapshot.rs: the HTTP client of the endpoint
    // tests, and the certificates (a CA, the server's, clients') that
    // serve's TLS and client authentication are tested with.
    "curl",
    "openssl",
    // The bench's application row: Debian's nginx serving wrk.
    "nginx",
    "wrk",
];

/// What building and running schedlat needs: the eBPF toolchain and tracefs.
/// `cargo xtask setup`, `build`, `run` and `dist` stop here.
pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    step(
        "nightly toolchain with rust-src (builds the eBPF object)",
        nightly_rust_src,
    )?;
    step("bpf-linker built against LLVM 22", bpf_linker)?;
    step("tracefs mounted", tracefs)?;
    eprintln!("setup: ready in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `run()`, then the tools only `cargo xtask test` and `bench` use: a
/// user who only builds and runs schedlat never gets them.
pub(crate) fn test_tools() -> Result<()> {
    run()?;
    step(
        "nightly rustfmt and stable clippy (the test command checks both)",
        lint_tools,
    )?;
    step("packages for tests and bench", || {
        apt_install(&TEST_PACKAGES)
    })?;
    step("cargo-fuzz (the libFuzzer targets, on nightly)", cargo_fuzz)?;
    step(
        "Python readers of the recorder's dumps (tests/readers)",
        python_readers,
    )?;
    step(
        "Prometheus 3.x beside 2.x (Debian unstable's binaries, in target/tools)",
        prometheus_3,
    )?;
    step(
        "Kubernetes manifest validators (tests/deploy)",
        manifest_validators,
    )
}

/// Prometheus and promtool 3.x (prometheus3.rs), once.
fn prometheus_3() -> Result<Outcome> {
    if crate::prometheus3::present() {
        return Ok(Outcome::Present);
    }
    crate::prometheus3::install()?;
    Ok(Outcome::Installed)
}

fn step(what: &str, f: impl FnOnce() -> Result<Outcome>) -> Result<()> {
    match f().with_context(|| format!("setup step `{what}`"))? {
        Outcome::Present => eprintln!("setup: {what}: ok"),
        Outcome::Installed => eprintln!("setup: {what}: installed"),
    }
    Ok(())
}

enum Outcome {
    Present,
    Installed,
}

fn nightly_rust_src() -> Result<Outcome> {
    let sysroot = Command::new("rustc")
        .args(["+nightly", "--print", "sysroot"])
        .output()
        .context("running `rustc +nightly` (is rustup installed?)")?;
    if !sysroot.status.success() {
        eprintln!("setup: installing the nightly toolchain");
        run_visible(
            "rustup",
            &["toolchain", "install", "nightly", "--profile", "minimal"],
        )
        .context("no nightly toolchain; install one with `rustup toolchain install nightly`")?;
    } else {
        let root = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
        if Path::new(&root)
            .join("lib/rustlib/src/rust/library/core")
            .is_dir()
        {
            return Ok(Outcome::Present);
        }
    }
    eprintln!("setup: adding rust-src to nightly");
    run_visible(
        "rustup",
        &["component", "add", "rust-src", "--toolchain", "nightly"],
    )?;
    Ok(Outcome::Installed)
}

/// rustfmt.toml's import grouping needs nightly rustfmt; clippy runs on the
/// default (stable) toolchain.
fn lint_tools() -> Result<Outcome> {
    let fmt = succeeds("rustup", &["run", "nightly", "rustfmt", "--version"]);
    let clippy = succeeds("cargo", &["clippy", "--version"]);
    if fmt && clippy {
        return Ok(Outcome::Present);
    }
    if !fmt {
        run_visible(
            "rustup",
            &["component", "add", "rustfmt", "--toolchain", "nightly"],
        )?;
    }
    if !clippy {
        run_visible("rustup", &["component", "add", "clippy"])?;
    }
    Ok(Outcome::Installed)
}

fn bpf_linker() -> Result<Outcome> {
    if succeeds("bpf-linker", &["--version"]) {
        return Ok(Outcome::Present);
    }
    let llvm_dev = format!("llvm-{LLVM_MAJOR}-dev");
    apt_install(&[llvm_dev.as_str()])?;
    eprintln!("setup: building bpf-linker against LLVM {LLVM_MAJOR} (about 2 minutes)");
    // Without LLVM_PREFIX its build finds Debian's default llvm-config (14).
    let status = Command::new("cargo")
        .args(["install", "bpf-linker", "--locked", "--no-default-features"])
        .args(["--features", &format!("llvm-{LLVM_MAJOR}")])
        .env("LLVM_PREFIX", format!("/usr/lib/llvm-{LLVM_MAJOR}"))
        .status()
        .context("running cargo install bpf-linker")?;
    if !status.success() {
        bail!("`cargo install bpf-linker` failed ({status})");
    }
    if !succeeds("bpf-linker", &["--version"]) {
        bail!("bpf-linker was installed but is not on PATH: add ~/.cargo/bin to PATH");
    }
    Ok(Outcome::Installed)
}

/// `cargo fuzz` from crates.io (about a minute to build, once).
fn cargo_fuzz() -> Result<Outcome> {
    if succeeds("rustup", &["run", "nightly", "cargo", "fuzz", "--version"]) {
        return Ok(Outcome::Present);
    }
    eprintln!("setup: building cargo-fuzz (about a minute)");
    run_visible("cargo", &["install", "cargo-fuzz", "--locked"])?;
    if !succeeds("rustup", &["run", "nightly", "cargo", "fuzz", "--version"]) {
        bail!("cargo-fuzz was installed but `cargo fuzz` does not run: add ~/.cargo/bin to PATH");
    }
    Ok(Outcome::Installed)
}

fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn apt_install(packages: &[&str]) -> Result<Outcome> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(Outcome::Present);
    }
    let list = missing.join(" ");
    if !is_root() {
        bail!(
            "missing Debian packages: run `sudo apt-get update && sudo apt-get install -y {list}`"
        );
    }
    if !succeeds("apt-get", &["--version"]) {
        bail!(
            "missing packages {list} and no apt-get here: install them with your package manager"
        );
    }
    eprintln!("setup: apt-get install {list}");
    run_visible("apt-get", &["update", "-qq"])?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(&missing);
    let status = Command::new("apt-get")
        .args(&args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?;
    if !status.success() {
        bail!("`apt-get install {list}` failed ({status})");
    }
    Ok(Outcome::Installed)
}

/// The HdrHistogram and protobuf packages (and protoc, from grpcio-tools)
/// that read the recorder's .hlog and Perfetto dumps in tests/recorder.rs,
/// opentelemetry-proto for the OTLP receiver of tests/otlp.rs, and
/// prometheus-client's OpenMetrics parser for tests/exemplars.rs: readers
/// schedlat did not write. Installed from PyPI only when missing.
fn python_readers() -> Result<Outcome> {
    const IMPORTS: &str = "import hdrh.log, google.protobuf, grpc_tools.protoc, opentelemetry.proto.collector.metrics.v1.metrics_service_pb2, prometheus_client.openmetrics.parser";
    if succeeds("python3", &["-c", IMPORTS]) {
        return Ok(Outcome::Present);
    }
    if !succeeds("python3", &["-m", "pip", "--version"]) {
        bail!("python3 with pip is needed for the recorder's tests: `apt-get install python3-pip`");
    }
    let requirements = crate::util::workspace_root().join("tests/readers/requirements.txt");
    pip_install(&requirements)?;
    if !succeeds("python3", &["-c", IMPORTS]) {
        bail!(
            "installed {}, but python3 still cannot `{IMPORTS}`",
            requirements.display()
        );
    }
    Ok(Outcome::Installed)
}

/// kubernetes-validate (PyPI) for the core kinds, and prometheus-operator's
/// CRD schema (npm) for the ServiceMonitor, with tests/deploy's script in
/// target/npm/deploy (an ES module resolves its packages from its own
/// directory). Each installed only when missing.
fn manifest_validators() -> Result<Outcome> {
    let repo = crate::util::workspace_root();
    let npm_dir = repo.join("target/npm/deploy");
    let python = succeeds("kubernetes-validate", &["--version"])
        && succeeds("python3", &["-c", "import yaml"]);
    let package = std::fs::read(repo.join("tests/deploy/package.json"))?;
    let npm = npm_dir
        .join("node_modules/@kubernetes-models/prometheus-operator")
        .is_dir()
        && std::fs::read(npm_dir.join("package.json")).is_ok_and(|p| p == package);
    // The script is copied every time: it is part of the test.
    std::fs::create_dir_all(&npm_dir)?;
    std::fs::copy(
        repo.join("tests/deploy/servicemonitor.mjs"),
        npm_dir.join("servicemonitor.mjs"),
    )?;
    if python && npm {
        return Ok(Outcome::Present);
    }
    if !python {
        pip_install(&repo.join("tests/deploy/requirements.txt"))?;
    }
    if !npm {
        std::fs::write(npm_dir.join("package.json"), &package)?;
        eprintln!("setup: npm install in {}", npm_dir.display());
        let status = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund"])
            .current_dir(&npm_dir)
            .status()
            .context("running npm (Debian package npm, or Node.js)")?;
        if !status.success() {
            bail!("npm install in {} failed ({status})", npm_dir.display());
        }
    }
    Ok(Outcome::Installed)
}

/// `pip install -r requirements` with this machine's python3.
fn pip_install(requirements: &Path) -> Result<()> {
    let requirements = requirements.to_string_lossy();
    eprintln!("setup: pip install -r {requirements}");
    run_visible(
        "python3",
        &[
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            &requirements,
        ],
    )
}

fn tracefs() -> Result<Outcome> {
    if Path::new("/sys/kernel/tracing/events").is_dir() {
        return Ok(Outcome::Present);
    }
    if !is_root() {
        bail!("tracefs is not mounted: run `sudo mount -t tracefs nodev /sys/kernel/tracing`");
    }
    run_visible("mount", &["-t", "tracefs", "nodev", "/sys/kernel/tracing"])?;
    Ok(Outcome::Installed)
}

/// Debian packages only `cargo xtask vm-test` needs: QEMU, a static busybox
/// for the guest's /init, cpio to pack the initramfs, and debootstrap for
/// the systemd guest's Debian root file system.
const VM_PACKAGES: [&str; 4] = ["qemu-system-x86", "busybox-static", "cpio", "debootstrap"];

/// vm-test's tools, installed when vm-test runs rather than by `setup`,
/// which stays quick for everyone else.
pub(crate) fn vm_tools() -> Result<()> {
    step(
        "packages for vm-test (QEMU, busybox, cpio, debootstrap)",
        || apt_install(&VM_PACKAGES),
    )
}
