//! The load: `perf bench sched pipe`, two processes ping-ponging a pipe.
//! Pinned to one CPU, every operation is a wakeup plus a context switch, the
//! events both tracers hook, so their per-event cost shows up as lost ops/s.

use std::process::Command;

use anyhow::{Context, Result, bail};

/// Runs the load pinned to `cpu` and returns its ops/s.
pub fn run(cpu: usize, loops: u64) -> Result<f64> {
    let (cpu, loops) = (cpu.to_string(), loops.to_string());
    let args = ["-c", &cpu, "perf", "bench", "sched", "pipe", "-l", &loops];
    let out = Command::new("taskset").args(args).output().context(
        "running `taskset ... perf bench sched pipe` (are util-linux and linux-perf installed?)",
    )?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "`taskset {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_ops_per_sec(&stdout)
        .with_context(|| format!("no `N ops/sec` line in perf's output:\n{stdout}"))
}

/// Finds perf's `         162074 ops/sec` line.
fn parse_ops_per_sec(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.trim().strip_suffix("ops/sec")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_output() {
        let output = "# Running 'sched/pipe' benchmark:\n\
                      # Executed 50000 pipe operations between two processes\n\n     \
                      Total time: 0.249 [sec]\n\n       \
                      4.999620 usecs/op\n         \
                      200015 ops/sec\n";
        assert_eq!(parse_ops_per_sec(output), Some(200015.0));
        assert_eq!(parse_ops_per_sec("garbage\n"), None);
    }
}
