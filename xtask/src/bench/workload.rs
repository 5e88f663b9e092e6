//! The load: `perf bench sched pipe`, two processes ping-ponging a pipe.
//! Pinned to one CPU, every operation is a wakeup plus a context switch, the
//! events both tracers hook, so their per-event cost shows up as lost ops/s.

use std::{
    os::unix::process::ExitStatusExt,
    process::{Child, Command, Stdio},
};

use anyhow::{Context, Result, bail};

/// The load, started and stopped before its first instruction: a tracer
/// can be pointed at its PID (`schedlat -p`) before it runs. The PID is
/// the one `perf bench` runs as (a shell stops itself, then execs taskset,
/// which execs perf); perf forks the second process of the pipe.
pub(super) struct Load {
    child: Child,
    args: Vec<String>,
}

impl Load {
    /// The load pinned to `cpu`, stopped.
    pub(super) fn start(cpu: usize, loops: u64) -> Result<Load> {
        let args: Vec<String> = [
            "-c",
            &cpu.to_string(),
            "perf",
            "bench",
            "sched",
            "pipe",
            "-l",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([loops.to_string()])
        .collect();
        let child = Command::new("sh")
            .args(["-c", "kill -STOP $$; exec taskset \"$@\"", "sh"])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the load's shell")?;
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: pid is our unreaped child; WUNTRACED reports its stop
        // without reaping it.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if got != pid || !libc::WIFSTOPPED(status) {
            bail!(
                "the load's shell did not stop itself ({})",
                std::process::ExitStatus::from_raw(status)
            );
        }
        Ok(Load { child, args })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the load run to its end; its ops/s.
    pub(super) fn finish(self) -> Result<f64> {
        // SAFETY: signalling our own stopped, unreaped child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
        let out = self.child.wait_with_output().context(
            "running `taskset ... perf bench sched pipe` (are util-linux and linux-perf installed?)",
        )?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "`taskset {}` failed ({}): {}",
                self.args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        parse_ops_per_sec(&stdout)
            .with_context(|| format!("no `N ops/sec` line in perf's output:\n{stdout}"))
    }
}

/// Runs the load pinned to `cpu` and returns its ops/s.
pub(super) fn run(cpu: usize, loops: u64) -> Result<f64> {
    Load::start(cpu, loops)?.finish()
}

/// The pause before the system calls are counted.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(700);

/// What a system call costs a process on `cpu` while whatever is attached
/// stays attached: `perf bench syscall basic` (getppid() in a loop,
/// `loops` calls), the best of `runs` back to back (the least disturbed
/// by other work on the CPU), in ns per call. A tracer that enables a
/// syscall tracepoint sends every system call of every process through
/// the traced entry path: this is what other processes pay for it.
pub(super) fn syscall_ns(cpu: usize, loops: u64, runs: u32) -> Result<f64> {
    // The mode before this one has just exited: its maps are freed and
    // its RCU callbacks run for a while after, on every CPU. Measured
    // right away, the baseline (whose sample follows an exit directly)
    // read 212 ns against 174-206 for the traced modes, which had a
    // tracer's start-up in between.
    std::thread::sleep(SETTLE);
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        // SCHED_FIFO: perf times the calls by the wall clock, and a
        // fair-class run shares the CPU with whatever else runs there (on
        // this project's shared VM, best-of-five fair runs read 99 to 222
        // ns a call, SCHED_FIFO runs 98.6 to 99.4). The tracer's programs
        // are not in a system call's path unless it enables a syscall
        // tracepoint, which is what this measures.
        let args = [
            "-f".to_string(),
            "50".into(),
            "taskset".into(),
            "-c".into(),
            cpu.to_string(),
            "perf".into(),
            "bench".into(),
            "syscall".into(),
            "basic".into(),
            "-l".into(),
            loops.to_string(),
        ];
        let out = Command::new("chrt")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .context("running `chrt -f 50 taskset ... perf bench syscall basic`")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "`chrt {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let us = parse_usecs_per_op(&stdout)
            .with_context(|| format!("no `N usecs/op` line in perf's output:\n{stdout}"))?;
        best = best.min(us * 1e3);
    }
    Ok(best)
}

/// Finds perf's `       0.182035 usecs/op` line.
fn parse_usecs_per_op(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.trim().strip_suffix("usecs/op")?.trim().parse().ok())
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
        assert_eq!(parse_usecs_per_op(output), Some(4.999620));
        let syscalls = "# Running 'syscall/basic' benchmark:\n\
                        # Executed 2000000 getppid() calls\n     \
                        Total time: 0.364 [sec]\n\n       \
                        0.182035 usecs/op\n        \
                        5493449 ops/sec\n";
        assert_eq!(parse_usecs_per_op(syscalls), Some(0.182035));
    }
}
