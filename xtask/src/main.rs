//! `cargo xtask <command>`: everything schedlat needs besides `cargo build`.
//!
//! - `setup`: make this machine able to build schedlat (idempotent);
//!   `--test` / `--vm` add the tools of the tests and of vm-test.
//! - `build`: build the release binary (the eBPF object is embedded).
//! - `run -- ARGS`: setup, build, then run schedlat with ARGS.
//! - `dist`: build, then the .deb and tarball in target/dist/.
//! - `image`: dist, then an OCI image of the package in target/dist/.
//! - `test`: setup with the test tools, dist, then every test tier that
//!   this machine can run.
//! - `bench`: schedlat against libbpf-tools runqlat on a context-switch load;
//!   `bench-docs`: the docs' cost figures rewritten from a bench run's JSON.
//! - `vm-test`: the kernel-level checks inside QEMU, on other kernels.
//! - `clippy-ebpf`: clippy for the eBPF crates (schedlat's, the bench's)
//!   on their own target.
//! - `fuzz`: the libFuzzer targets (also the last step of `test`).

mod apt;
mod bench;
mod clippy_ebpf;
mod dist;
mod fuzz;
mod image;
mod prometheus3;
mod setup;
mod steps;
mod util;
mod vm;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use util::build_release;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "schedlat's build and test orchestration"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Show the eBPF sub-build's output even when it succeeds
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Install what building and running schedlat needs (nightly rust-src,
    /// bpf-linker against LLVM 22) and mount tracefs. Fast when everything
    /// is already there.
    Setup {
        /// Also the tools of `cargo xtask test` and `bench` (libbpf-tools,
        /// perf, prometheus, stress-ng, tmux, ...)
        #[arg(long)]
        test: bool,
        /// Also the tools of `cargo xtask vm-test` (QEMU, busybox, cpio)
        #[arg(long)]
        vm: bool,
    },
    /// Setup, then build the release binary (target/release/schedlat).
    Build,
    /// Setup, build, then package: target/dist/ gets a .deb and a tarball
    /// with the binary, man pages, shell completions, docs and a systemd
    /// unit for `schedlat serve`.
    Dist,
    /// Setup, build, dist, then an OCI image of the package
    /// (target/dist/schedlat-VERSION-ARCH-oci.tar; `podman load -i FILE`),
    /// assembled offline: no registry, no container engine.
    Image,
    /// Setup, build, then run schedlat as root with the given arguments.
    Run {
        /// Arguments for schedlat, after `--` (e.g. `cargo xtask run -- 5 1`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Setup (with the test tools), build the package (`dist`), then run all
    /// tests: host unit tests and the root integration tests that load the
    /// eBPF object on this kernel, the package's among them; then the
    /// libFuzzer targets (`fuzz`).
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compare schedlat with libbpf-tools runqlat on `perf bench sched pipe`:
    /// overhead, BPF ns per event, time to attach, CPU and RSS (root).
    Bench(bench::Options),
    /// Rewrite the cost figures in README.md and docs/ (the parts between
    /// `<!-- bench:NAME -->` markers) from a bench run's JSON, by default
    /// docs/bench.json (written by `cargo xtask bench --json docs/bench.json`).
    BenchDocs {
        /// Change nothing; fail when a page differs from what the JSON gives
        #[arg(long)]
        check: bool,
        /// The bench run's JSON
        #[arg(long, value_name = "PATH")]
        from: Option<std::path::PathBuf>,
    },
    /// (internal) The bench's background threads, in their own process.
    #[command(hide = true)]
    BenchSleepers {
        threads: usize,
        cpu: usize,
        /// One process per sleeper instead of one thread each.
        #[arg(long)]
        processes: bool,
        /// The processes wake only when their process group gets SIGUSR1.
        #[arg(long, requires = "processes")]
        idle: bool,
    },
    /// (internal) Parse the kernel BTF as aya's loader does, then exit.
    #[command(hide = true)]
    BenchBtfFloor,
    /// (internal) Attach tp_btf programs that return at once (the bench's
    /// `noop` mode, the hooks' floor) until SIGINT; built first from
    /// xtask/bench-ebpf unless --prebuilt.
    #[command(hide = true)]
    BenchNoop {
        /// The least timer instead (the bench's `timer` mode).
        #[arg(long)]
        timer: bool,
        /// With --timer: and the least decision split (`timer-decision`).
        #[arg(long, requires = "timer")]
        decision: bool,
        /// Load the objects the bench built, without building them first.
        #[arg(long)]
        prebuilt: bool,
    },
    /// Clippy for the eBPF crates (schedlat's, the bench's reference
    /// programs) on their own target (bpfel-unknown-none, nightly, core
    /// from source), warnings as errors. Needs `cargo xtask
    /// setup`'s nightly rust-src.
    ClippyEbpf,
    /// Build the libFuzzer targets (schedlat/fuzz/, cargo fuzz on nightly,
    /// overflow checks on) and run each over its corpus for a fixed number
    /// of inputs from a fixed seed; the last step of `test`.
    Fuzz {
        /// Targets to run (default: all; `cargo fuzz list --fuzz-dir
        /// schedlat/fuzz` lists them)
        targets: Vec<String>,
        /// Inputs per target, after its corpus
        #[arg(long, default_value_t = fuzz::RUNS)]
        runs: u64,
    },
    /// Boot other kernels (Debian 5.10, 6.1, 6.12, unstable's 7.x and its
    /// PREEMPT_RT build) in QEMU and run schedlat's kernel-level checks (tests/guest.rs)
    /// inside each.
    VmTest(vm::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.verbose {
        // Read by schedlat/build.rs; inherited by every cargo we run.
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("SCHEDLAT_BUILD_VERBOSE", "1") };
    }
    let result = match cli.command {
        Command::Setup { test, vm } => setup_tiers(test, vm),
        Command::Build => setup::run().and_then(|()| build_release()),
        Command::Dist => setup::run()
            .and_then(|()| build_release())
            .and_then(|()| dist::run().map(drop)),
        Command::Image => setup::run()
            .and_then(|()| build_release())
            .and_then(|()| dist::run())
            .and_then(|artifacts| image::build(&artifacts).map(drop)),
        Command::Run { args } => run(&args),
        Command::Test { args } => test(&args),
        Command::BenchSleepers {
            threads,
            cpu,
            processes,
            idle,
        } => bench::sleepers::serve(threads, cpu, processes, idle),
        Command::BenchBtfFloor => bench::floor::parse_once(),
        Command::BenchNoop {
            timer,
            decision,
            prebuilt,
        } => {
            let programs = match (timer, decision) {
                (false, _) => bench::reference::Programs::Noop,
                (true, false) => bench::reference::Programs::Timer,
                (true, true) => bench::reference::Programs::TimerDecision,
            };
            bench::reference::run(programs, prebuilt)
        }
        Command::BenchDocs { check, from } => bench::docs::run(check, from.as_deref()),
        Command::Bench(opts) => setup::test_tools()
            .and_then(|()| build_release())
            .and_then(|()| bench::run(&opts)),
        Command::ClippyEbpf => clippy_ebpf::run(),
        Command::Fuzz { targets, runs } => {
            setup::test_tools().and_then(|()| fuzz::run(&targets, runs))
        }
        Command::VmTest(opts) => vm::run(&opts),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn setup_tiers(test: bool, vm: bool) -> Result<()> {
    if test {
        setup::test_tools()?;
    } else {
        setup::run()?;
    }
    if vm {
        setup::vm_tools()?;
    }
    Ok(())
}

fn run(args: &[String]) -> Result<()> {
    setup::run()?;
    build_release()?;
    util::require_root("schedlat loads eBPF programs")?;
    let status = std::process::Command::new(util::workspace_root().join("target/release/schedlat"))
        .args(args)
        .status()?;
    // Pass schedlat's own exit status on (2 = bad arguments, 1 = refused).
    std::process::exit(status.code().unwrap_or(1));
}

/// The habits the tests hold the code to before running it: formatted as
/// rustfmt.toml says (nightly rustfmt, for its import grouping), clippy
/// clean with the workspace lints on the userspace crates, warnings denied,
/// and every intra-doc link of their comments resolving (rustdoc, private
/// items included: the library's modules are private). The eBPF crates
/// build for the bpf target only and are linted there (`clippy_ebpf`).
fn lint() -> Result<()> {
    let status = std::process::Command::new("rustup")
        .args(["run", "nightly", "cargo", "fmt", "--all", "--check"])
        .current_dir(util::workspace_root())
        .status()?;
    if !status.success() {
        anyhow::bail!("not formatted: run `cargo +nightly fmt --all`");
    }
    util::cargo(&[
        "clippy",
        "--package",
        "schedlat",
        "--package",
        "schedlat-common",
        "--package",
        "xtask",
        "--all-targets",
        "--",
        "--deny",
        "warnings",
    ])?;
    util::cargo_with_env(
        &[
            "doc",
            "--no-deps",
            "--document-private-items",
            "--package",
            "schedlat",
            "--package",
            "schedlat-common",
        ],
        &[("RUSTDOCFLAGS", "--deny rustdoc::broken_intra_doc_links")],
    )?;
    clippy_ebpf::run()
}

fn test(args: &[String]) -> Result<()> {
    let mut steps = steps::Steps::new("test");
    steps.run("setup", setup::test_tools)?;
    steps.run("lint", lint)?;
    util::require_root("the integration tests load eBPF programs into this kernel")?;
    // tests/dist.rs checks the package; built here, once, rather than by a
    // cargo nested in the test run.
    steps.run("release", build_release)?;
    let artifacts = steps.run("dist", dist::run)?;
    // tests/image.rs runs the image.
    let image = steps.run("image", || image::build(&artifacts))?;
    // SAFETY: single-threaded here; inherited by cargo and the tests.
    unsafe {
        std::env::set_var("SCHEDLAT_DIST_DEB", &artifacts.deb);
        std::env::set_var("SCHEDLAT_DIST_TARBALL", &artifacts.tarball);
        std::env::set_var("SCHEDLAT_DIST_IMAGE", &image);
    }
    // One test at a time: the kernel tests share the scheduler and the CPUs
    // their workloads pin to.
    // The default members: every crate but schedlat-ebpf (bpf target only).
    let mut cmd = vec!["test"];
    cmd.extend(args.iter().map(String::as_str));
    if !args.iter().any(|a| a == "--") {
        cmd.push("--");
    }
    cmd.push("--test-threads=1");
    // No backtraces: a failed assertion's message names its file and line,
    // and the fifteen lines of a backtrace after it would push the message
    // itself out of the tail a CI log keeps.
    let env = [("RUST_BACKTRACE", "0")];
    steps.run("cargo test", || util::cargo_with_env(&cmd, &env))?;
    // The fuzz targets' search (cargo test ran only their seeds); a
    // filtered run (a test name given) is after something else and skips it.
    if args.is_empty() {
        steps.run("fuzz", || fuzz::run(&[], fuzz::RUNS))?;
    } else {
        eprintln!(
            "xtask: test arguments given: the libFuzzer runs are skipped (`cargo xtask fuzz` runs them)"
        );
    }
    Ok(())
}
