//! A tracer process (runqlat or schedlat) under measurement: spawn, wait for
//! its banner, stop with SIGINT, reap with rusage. Killed on drop unless it
//! was reaped, so an error anywhere never leaves a tracer attached.
//!
//! Peak RSS is the tracer's VmHWM, read just before SIGINT, not rusage's
//! ru_maxrss: Linux folds the RSS high-water mark of the memory a process
//! had before exec into ru_maxrss, and a child spawned with vfork (as
//! Command does) had its parent's, so ru_maxrss never reads below this
//! harness's own peak.

use std::{
    io::{BufRead, BufReader, Read},
    os::unix::process::ExitStatusExt,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};

/// Both tools print this once their programs are attached.
const BANNER: &str = "Tracing run queue latency";

/// A tracer binary to benchmark.
pub struct Tool {
    pub name: &'static str,
    pub path: PathBuf,
    /// Arguments (`victims` for schedlat's victims mode).
    pub args: Vec<&'static str>,
    /// A line the tool prints at SIGINT when it reports (a histogram's
    /// header, the victims mode's culprits table).
    pub report_marker: &'static str,
}

impl Tool {
    pub fn new(name: &'static str, path: PathBuf) -> Result<Self> {
        if !path.is_file() {
            bail!(
                "{name} not found at {} (run `cargo xtask setup` and a release build)",
                path.display()
            );
        }
        Ok(Self {
            name,
            path,
            args: Vec::new(),
            report_marker: "distribution",
        })
    }

    /// The same binary run as `path ARGS`, reporting `marker` at SIGINT.
    pub fn with_args(
        mut self,
        name: &'static str,
        args: &[&'static str],
        marker: &'static str,
    ) -> Self {
        self.name = name;
        self.args = args.to_vec();
        self.report_marker = marker;
        self
    }
}

/// What the tracer cost over its whole life: CPU from `wait4`, peak RSS
/// from its VmHWM just before it was stopped.
pub struct Exit {
    pub cpu_secs: f64,
    pub max_rss_kib: u64,
}

pub struct Tracer {
    name: &'static str,
    report_marker: &'static str,
    child: Child,
    /// Set once the process is reaped: from then on its pid may be reused,
    /// so Drop must not signal it.
    reaped: bool,
    spawned: Instant,
    /// stdout lines with the time they were read, from a reader thread; the
    /// channel disconnects at EOF.
    lines: Receiver<(Instant, String)>,
    stderr: Option<JoinHandle<String>>,
}

impl Tracer {
    /// Spawns `stdbuf -oL TOOL`, for both tools, for fairness: runqlat's
    /// printf is block-buffered on a pipe and its banner would only show at
    /// exit. stdbuf execs in place, so the child's pid and rusage are the
    /// tool's. The tracer is not pinned: it starts as a user would start it,
    /// free to use every CPU while loading (it sleeps during the load test).
    pub fn spawn(tool: &Tool) -> Result<Self> {
        let spawned = Instant::now();
        let mut child = Command::new("stdbuf")
            .arg("-oL")
            .arg(&tool.path)
            .args(&tool.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning {}", tool.path.display()))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");

        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        Ok(Self {
            name: tool.name,
            report_marker: tool.report_marker,
            child,
            reaped: false,
            spawned,
            lines,
            stderr: Some(stderr),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Time from spawn to the banner line on stdout.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        let deadline = self.spawned + timeout;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok((at, line)) if line.contains(BANNER) => return Ok(at - self.spawned),
                // A tool that prints without pause never lets recv time out:
                // the deadline is checked here too.
                Ok(_) if Instant::now() < deadline => {}
                Ok(_) | Err(RecvTimeoutError::Timeout) => {
                    return Err(self.abort(&format!("was not ready within {timeout:?}")));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.abort("exited before it was ready"));
                }
            }
        }
    }

    /// SIGINT (both tools print their histogram and exit), drain stdout to
    /// EOF, reap.
    pub fn stop(mut self, timeout: Duration) -> Result<Exit> {
        let deadline = Instant::now() + timeout;
        let pid = self.pid() as libc::pid_t;
        let max_rss_kib = match vm_hwm_kib(self.pid()) {
            Ok(kib) => kib,
            Err(e) => return Err(self.abort(&format!("has no readable VmHWM ({e:#})"))),
        };
        // SAFETY: kill has no memory preconditions; the child is not reaped
        // yet, so the pid is still ours.
        if unsafe { libc::kill(pid, libc::SIGINT) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(self.abort(&format!("could not be sent SIGINT ({e})")));
        }
        let mut reported = false;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok((_, line)) => reported |= line.contains(self.report_marker),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.abort(&format!("did not exit within {timeout:?} of SIGINT")));
                }
            }
        }
        let Some((status, usage)) = self.reap_until(deadline)? else {
            return Err(self.abort(&format!(
                "closed stdout but did not exit within {timeout:?}"
            )));
        };
        if !status.success() {
            let stderr = self.take_stderr();
            bail!("{} failed on SIGINT ({status}): {stderr}", self.name);
        }
        if !reported {
            eprintln!("bench: warning: {} printed no report on SIGINT", self.name);
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Ok(Exit {
            cpu_secs: secs(usage.ru_utime) + secs(usage.ru_stime),
            max_rss_kib,
        })
    }

    /// Polls wait4 until the child exits (Some) or the deadline (None).
    /// wait4 rather than Child::wait: it also gives the rusage.
    fn reap_until(&mut self, deadline: Instant) -> Result<Option<(ExitStatus, libc::rusage)>> {
        let pid = self.pid() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: all-zero is a valid rusage.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to locals; pid is our unreaped child.
            let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if got == pid {
                self.reaped = true;
                return Ok(Some((ExitStatus::from_raw(status), usage)));
            }
            if got < 0 {
                let e = std::io::Error::last_os_error();
                return Err(anyhow!("wait4 on {} (pid {pid}): {e}", self.name));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills and reaps the tracer; an error that says what went wrong, with
    /// the tracer's exit status and stderr.
    fn abort(&mut self, what: &str) -> anyhow::Error {
        let status = self.kill();
        let status = status.map_or_else(|| "status unknown".into(), |s| s.to_string());
        let stderr = self.take_stderr();
        anyhow!("{} {what} ({status}); its stderr:\n{stderr}", self.name)
    }

    fn kill(&mut self) -> Option<ExitStatus> {
        if self.reaped {
            return None;
        }
        let _ = self.child.kill();
        self.reaped = true;
        self.child.wait().ok()
    }

    /// The tracer's stderr; call only once it has exited (else this blocks).
    fn take_stderr(&mut self) -> String {
        let text = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            "(empty)".into()
        } else {
            text.into()
        }
    }
}

/// The peak resident set of `pid` since its exec, in KiB.
fn vm_hwm_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .with_context(|| format!("no VmHWM in {path}"))
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn tool(path: &str) -> Tool {
        Tool::new("test tracer", path.into()).unwrap()
    }

    #[test]
    fn early_exit_is_an_error() {
        let mut tracer = Tracer::spawn(&tool("/bin/false")).unwrap();
        let e = tracer.wait_ready(Duration::from_secs(10)).unwrap_err();
        assert!(e.to_string().contains("exited before it was ready"), "{e}");
    }

    #[test]
    fn no_banner_in_time_kills_it() {
        // `yes` prints forever, never the banner.
        let mut tracer = Tracer::spawn(&tool("/usr/bin/yes")).unwrap();
        let pid = tracer.pid();
        let e = tracer.wait_ready(Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("was not ready within"), "{e}");
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "still running or unreaped"
        );
    }

    #[test]
    fn peak_rss_is_the_tracers_own() {
        // A child of a process with a large RSS: its ru_maxrss would carry
        // the parent's, its VmHWM does not.
        let ballast = vec![1u8; 64 << 20];
        std::hint::black_box(&ballast);
        let tracer = Tracer::spawn(&tool("/usr/bin/yes")).unwrap();
        thread::sleep(Duration::from_millis(100));
        let kib = vm_hwm_kib(tracer.pid()).unwrap();
        assert!(kib > 0 && kib < 32 << 10, "{kib} KiB");
    }

    #[test]
    fn drop_kills_and_reaps() {
        let tracer = Tracer::spawn(&tool("/usr/bin/yes")).unwrap();
        let pid = tracer.pid();
        drop(tracer);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "still running or unreaped"
        );
    }
}
