//! `cargo xtask <command>`: everything schedlat needs besides `cargo build`.
//!
//! - `setup`: make this machine able to build and test schedlat (idempotent).
//! - `build`: build the release binary (the eBPF object is embedded).
//! - `run -- ARGS`: setup, build, then run schedlat with ARGS.
//! - `test`: setup, then every test tier that this machine can run.
//! - `bench`: schedlat against libbpf-tools runqlat on a context-switch load.
//! - `vm-test`: the kernel-level checks inside QEMU, on other kernels.

mod bench;
mod setup;
mod util;
mod vm;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "schedlat's build and test orchestration"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what building and testing schedlat needs (nightly rust-src,
    /// bpf-linker against LLVM 22, libbpf-tools, perf) and mount tracefs.
    /// Fast when everything is already there.
    Setup,
    /// Build the release binary (target/release/schedlat).
    Build,
    /// Setup, build, then run schedlat as root with the given arguments.
    Run {
        /// Arguments for schedlat, after `--` (e.g. `cargo xtask run -- 5 1`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Setup, then run all tests: host unit tests and the root integration
    /// tests that load the eBPF object on this kernel.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compare schedlat with libbpf-tools runqlat on `perf bench sched pipe`:
    /// overhead, BPF ns per event, time to attach, CPU and RSS (root).
    Bench(bench::Options),
    /// (internal) The bench's background threads, in their own process.
    #[command(hide = true)]
    BenchSleepers {
        threads: usize,
        cpu: usize,
        /// One process per sleeper instead of one thread each.
        #[arg(long)]
        processes: bool,
    },
    /// (internal) Parse the kernel BTF as aya's loader does, then exit.
    #[command(hide = true)]
    BenchBtfFloor,
    /// Boot other kernels (Debian 6.1, 6.1 PREEMPT_RT, 6.12) in QEMU and run
    /// schedlat's kernel-level checks (tests/guest.rs) inside each.
    VmTest(vm::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup => setup::run(),
        Command::Build => build_release(),
        Command::Run { args } => run(&args),
        Command::Test { args } => test(&args),
        Command::BenchSleepers {
            threads,
            cpu,
            processes,
        } => bench::sleepers::serve(threads, cpu, processes),
        Command::BenchBtfFloor => bench::floor::parse_once(),
        Command::Bench(opts) => setup::run()
            .and_then(|()| build_release())
            .and_then(|()| bench::run(&opts)),
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

fn build_release() -> Result<()> {
    util::cargo(&["build", "--release", "--package", "schedlat"])
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
/// rustfmt.toml says (nightly rustfmt, for its import grouping), and clippy
/// clean with the workspace lints on the userspace crates, warnings denied.
/// (The eBPF crate builds for the bpf target only; it is linted there.)
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
    ])
}

fn test(args: &[String]) -> Result<()> {
    setup::run()?;
    lint()?;
    util::require_root("the integration tests load eBPF programs into this kernel")?;
    // One test at a time: the kernel tests share the scheduler and the CPUs
    // their workloads pin to.
    // The default members: every crate but schedlat-ebpf (bpf target only).
    let mut cmd = vec!["test"];
    cmd.extend(args.iter().map(String::as_str));
    if !args.iter().any(|a| a == "--") {
        cmd.push("--");
    }
    cmd.push("--test-threads=1");
    util::cargo(&cmd)
}
