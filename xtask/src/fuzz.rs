//! `cargo xtask fuzz` (and the last step of `cargo xtask test`): the
//! libFuzzer targets of schedlat/fuzz/ (cargo fuzz, on the nightly
//! toolchain), built once with coverage instrumentation and overflow checks
//! on, then each run for a fixed number of inputs from a fixed seed over its
//! corpus (schedlat/fuzz/corpus/TARGET/, read only), so a CI result does not
//! depend on the machine's speed. What libFuzzer adds to the corpus goes to
//! target/fuzz/corpus/TARGET/, emptied first; a crash's input is saved under
//! target/fuzz/artifacts/TARGET/ and named in the error: it goes into the
//! corpus with the fix, as a regression case.

use std::{path::Path, process::Command, time::Instant};

use anyhow::{Context, Result, bail};

use crate::util::workspace_root;

/// Inputs each target runs in `cargo xtask test`, after its corpus. The
/// targets' speeds differ (7,000 to 180,000 inputs a second, release build
/// on a busy 2-core VM); this many take at most about 30 s each.
pub(crate) const RUNS: u64 = 200_000;

/// libFuzzer's seed: the same inputs on every run.
const SEED: &str = "1";

/// What `cargo fuzz` is told everywhere: where the crate is, where its
/// build goes, no sanitizer (the targets are safe Rust: ASan would find
/// nothing there and doubles the build and the runs), optimized with debug
/// assertions and overflow checks.
const BUILD_ARGS: [&str; 8] = [
    "--fuzz-dir",
    "schedlat/fuzz",
    "--target-dir",
    "target/fuzz",
    "--sanitizer",
    "none",
    "--release",
    "--debug-assertions",
];

fn cargo_fuzz(args: &[&str]) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo", "fuzz"])
        .args(args)
        .current_dir(workspace_root())
        // The targets need no eBPF object; building it under the fuzz
        // build's instrumentation flags would fail.
        .env("AYA_BUILD_SKIP", "1");
    cmd
}

/// The targets, as schedlat/fuzz/Cargo.toml lists them.
fn targets() -> Result<Vec<String>> {
    let out = cargo_fuzz(&["list", "--fuzz-dir", "schedlat/fuzz"])
        .output()
        .context(
            "running `cargo fuzz list` (is cargo-fuzz installed? `cargo xtask setup --test`)",
        )?;
    if !out.status.success() {
        bail!(
            "`cargo fuzz list` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// Builds every target, then runs `only` (all when empty) for `runs`
/// inputs each.
pub(crate) fn run(only: &[String], runs: u64) -> Result<()> {
    let started = Instant::now();
    let mut build = cargo_fuzz(&["build"]);
    build.args(BUILD_ARGS);
    let status = build.status().context("running `cargo fuzz build`")?;
    if !status.success() {
        bail!("`cargo fuzz build` failed ({status})");
    }
    eprintln!("fuzz: built in {:.0} s", started.elapsed().as_secs_f64());
    let all = targets()?;
    for name in only {
        if !all.contains(name) {
            bail!("no fuzz target `{name}`; there are: {}", all.join(", "));
        }
    }
    let root = workspace_root();
    let bin = root.join("target/fuzz/x86_64-unknown-linux-gnu/release");
    for name in all.iter().filter(|n| only.is_empty() || only.contains(n)) {
        run_one(&root, &bin.join(name), name, runs)?;
    }
    eprintln!(
        "fuzz: every target ran {runs} inputs without a failure ({:.0} s in all)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_one(root: &Path, bin: &Path, name: &str, runs: u64) -> Result<()> {
    let scratch = root.join("target/fuzz/corpus").join(name);
    let artifacts = root.join("target/fuzz/artifacts").join(name);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    std::fs::create_dir_all(&artifacts)?;
    let corpus = root.join("schedlat/fuzz/corpus").join(name);
    let started = Instant::now();
    let out = Command::new(bin)
        .arg(format!("-runs={runs}"))
        .arg(format!("-seed={SEED}"))
        // A hang or a memory blow-up is a failure too.
        .arg("-timeout=10")
        .arg("-rss_limit_mb=1024")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .arg(&scratch)
        .arg(&corpus)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let crash = log
            .lines()
            .find_map(|l| l.split("Test unit written to ").nth(1))
            .unwrap_or("(no input saved)");
        bail!(
            "fuzz target `{name}` failed ({}): input {crash}; add it to {} with the fix. Its last lines:\n{}",
            out.status,
            corpus.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let stat = |key: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(key))
            .map_or("?", |v| v.trim_start_matches(':').trim())
            .to_string()
    };
    eprintln!(
        "fuzz {name}: {} inputs in {:.1} s, {} coverage features, peak RSS {} MB",
        stat("stat::number_of_executed_units"),
        started.elapsed().as_secs_f64(),
        log.lines()
            .rev()
            .find_map(|l| l.split(" ft: ").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or("?"),
        stat("stat::peak_rss_mb"),
    );
    Ok(())
}
