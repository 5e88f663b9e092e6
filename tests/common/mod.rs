//! Helpers for the integration tests: running schedlat and runqlat as real
//! processes, parsing what they print, and workloads whose waits are known
//! in advance.
#![allow(dead_code, reason = "each test binary uses its own subset")]

pub(crate) mod bpf;
pub(crate) mod cgroup;
pub(crate) mod container;
pub(crate) mod cpu;
pub(crate) mod decision_names;
pub(crate) mod exposition;
pub(crate) mod http;
pub(crate) mod kernel;
pub(crate) mod kernel_trace;
pub(crate) mod kube;
pub(crate) mod kube_node;
pub(crate) mod perf;
pub(crate) mod pki;
pub(crate) mod prometheus;
pub(crate) mod sched_ext;
pub(crate) mod serve;
pub(crate) mod sleeper;
pub(crate) mod workload;

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, ChildStdout, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

pub(crate) const SCHEDLAT: &str = env!("CARGO_BIN_EXE_schedlat");
pub(crate) const BANNER: &str = "Tracing run queue latency... Hit Ctrl-C to end.";
/// How long a tracer may take to print its banner (attached).
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);

/// A field of /proc/PID/status (`name` with its colon, e.g. `CapEff:`),
/// trimmed; empty when absent.
pub(crate) fn status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_default()
        .to_string()
}

/// These tests load eBPF programs into the running kernel, which needs root.
/// Not root: the test says so on stderr and is skipped (false), except
/// under CI=true, where not being root is a failure: CI must run them.
pub(crate) fn require_root() -> bool {
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "CI=true: this test loads eBPF programs into the running kernel and must run as root: `sudo -E cargo xtask test`"
    );
    eprintln!(
        "skipped: this test loads eBPF programs into the running kernel and needs root (`sudo -E cargo xtask test`)"
    );
    false
}

/// A tracer process (schedlat or runqlat) that has printed its banner, i.e.
/// whose programs are attached. Killed if dropped while running.
pub(crate) struct TracerProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub stderr: Option<std::process::ChildStderr>,
}

impl TracerProcess {
    /// Starts `program args` and waits until it is attached. With
    /// `banner_on_stderr` (schedlat --json), the banner is looked for there.
    pub(crate) fn start(program: &str, args: &[&str]) -> TracerProcess {
        Self::start_with_env(program, args, &[])
    }

    /// [`TracerProcess::start`] with `env` added to the tracer's environment.
    pub(crate) fn start_with_env(
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> TracerProcess {
        let mut cmd = if program == SCHEDLAT {
            Command::new(program)
        } else {
            // runqlat's printf is block-buffered on a pipe.
            let mut c = Command::new("stdbuf");
            c.arg("-oL").arg(program);
            c
        };
        let mut child = cmd
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let json = args.contains(&"--json");
        let (tx, lines) = mpsc::channel();
        let ready = mpsc::channel::<()>();
        let mut stderr = child.stderr.take();
        // In JSON mode the banner goes to stderr (stdout is pure JSON): read
        // it there, keeping the lines to show if schedlat fails instead.
        let stderr_seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if json {
            let err = stderr.take().unwrap();
            let ready_tx = ready.0.clone();
            let seen = std::sync::Arc::clone(&stderr_seen);
            thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if line.contains(BANNER) {
                        let _ = ready_tx.send(());
                    }
                    let mut seen = seen.lock().unwrap();
                    seen.push_str(&line);
                    seen.push('\n');
                }
            });
        }
        let out: ChildStdout = child.stdout.take().unwrap();
        let ready_tx = ready.0;
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains(BANNER) {
                    let _ = ready_tx.send(());
                    continue;
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut tracer = TracerProcess {
            child,
            lines,
            stderr,
        };
        // Generous: under the VM tests' emulation, a breakdown takes ~16 s
        // to load on 5.10 (its verifier is slower); here it takes well
        // under a second.
        if ready.1.recv_timeout(ATTACH_TIMEOUT).is_err() {
            let _ = tracer.child.kill();
            let _ = tracer.child.wait();
            let mut err = stderr_seen.lock().unwrap().clone();
            if let Some(mut e) = tracer.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!(
                "{program} {args:?} did not attach within {} s; stderr: {err}",
                ATTACH_TIMEOUT.as_secs()
            );
        }
        tracer
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` and returns (exit status, stdout lines after the banner).
    pub(crate) fn stop_with(self, signal: i32) -> (std::process::ExitStatus, Vec<String>) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), signal) };
        self.finish()
    }

    /// Waits for exit (bounded) and collects stdout.
    pub(crate) fn finish(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "tracer did not exit within 20 s");
            thread::sleep(Duration::from_millis(20));
        };
        let lines = self.lines.try_iter().collect::<Vec<_>>();
        // The reader thread may still be draining the pipe.
        let mut rest: Vec<String> = self.lines.iter().collect();
        let mut all = lines;
        all.append(&mut rest);
        (status, all)
    }
}

impl Drop for TracerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A row of a libbpf-tools log2 table: `low -> high : count |***|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

/// Parses every table row in `lines` (runqlat's or schedlat's text output).
pub(crate) fn parse_log2_rows(lines: &[String]) -> Vec<Slot> {
    lines
        .iter()
        .filter_map(|line| {
            let (range, rest) = line.split_once(" : ")?;
            let (low, high) = range.split_once("->")?;
            let count = rest.split_whitespace().next()?;
            Some(Slot {
                low: low.trim().parse().ok()?,
                high: high.trim().parse().ok()?,
                count: count.parse().ok()?,
            })
        })
        .collect()
}

/// Count in the log2 slot that starts at `low`, 0 if absent.
pub(crate) fn slot_count(rows: &[Slot], low: u64) -> u64 {
    rows.iter().find(|s| s.low == low).map_or(0, |s| s.count)
}

pub(crate) fn total(rows: &[Slot]) -> u64 {
    rows.iter().map(|s| s.count).sum()
}

/// Parses schedlat --json output lines into values.
pub(crate) fn parse_json_lines(lines: &[String]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l}: {e}")))
        .collect()
}

/// Runs schedlat to completion with `args` and returns (status, stdout, stderr).
pub(crate) fn run_schedlat(args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let out = Command::new(SCHEDLAT)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("schedlat runs");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
