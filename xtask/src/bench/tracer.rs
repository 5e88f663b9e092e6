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
    sync::{
        Arc, Mutex,
        mpsc::{self, Receiver, RecvTimeoutError, Sender},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};

/// Time a tracer gets to print its banner after exec, and to exit after
/// SIGINT.
pub(super) const TRACER_TIMEOUT: Duration = Duration::from_secs(10);

/// The tracers the modes run.
pub(super) struct Tools {
    pub runqlat: PathBuf,
    pub schedlat: PathBuf,
    pub empty_cgroup: String,
}

/// Where a tracer says it is attached, and how: a line containing the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ready {
    /// runqlat's and schedlat's "Tracing run queue latency" banner.
    Stdout(&'static str),
    /// `serve` and `record --ring` announce themselves on stderr.
    Stderr(&'static str),
}

/// A tracer binary to benchmark.
pub(crate) struct Tool {
    pub name: &'static str,
    pub path: PathBuf,
    pub args: Vec<String>,
    pub ready: Ready,
    /// A line the tool prints at SIGINT when it reports (a histogram's
    /// header, the victims mode's culprits table); None: it reports nothing.
    pub report: Option<&'static str>,
}

impl Tool {
    pub(crate) fn new(
        name: &'static str,
        path: PathBuf,
        args: Vec<String>,
        ready: Ready,
        report: Option<&'static str>,
    ) -> Result<Self> {
        if !path.is_file() {
            bail!(
                "{name} not found at {} (run `cargo xtask setup` and a release build)",
                path.display()
            );
        }
        Ok(Self {
            name,
            path,
            args,
            ready,
            report,
        })
    }
}

/// What the tracer cost over its whole life: CPU from `wait4`, peak RSS
/// from its VmHWM just before it was stopped.
pub(super) struct Exit {
    pub cpu_secs: f64,
    pub max_rss_kib: u64,
}

pub(super) struct Tracer {
    name: &'static str,
    ready: Ready,
    report: Option<&'static str>,
    child: Child,
    /// Set once the process is reaped: from then on its pid may be reused,
    /// so Drop must not signal it.
    reaped: bool,
    spawned: Instant,
    /// Lines of both streams with the time they were read, from a reader
    /// thread each; the channel disconnects at EOF of both.
    lines: Receiver<Line>,
    /// stderr as a whole, kept for error messages.
    stderr: Arc<Mutex<String>>,
}

/// A line of the tracer's output.
struct Line {
    at: Instant,
    stderr: bool,
    text: String,
}

impl Tracer {
    /// Spawns `stdbuf -oL TOOL`, for both tools, for fairness: runqlat's
    /// printf is block-buffered on a pipe and its banner would only show at
    /// exit. stdbuf execs in place, so the child's pid and rusage are the
    /// tool's. The tracer is not pinned: it starts as a user would start it,
    /// free to use every CPU while loading (it sleeps during the load test).
    pub(super) fn spawn(tool: &Tool) -> Result<Self> {
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
        let text = Arc::new(Mutex::new(String::new()));
        read_lines(stdout, false, tx.clone(), None);
        read_lines(stderr, true, tx, Some(text.clone()));
        Ok(Self {
            name: tool.name,
            ready: tool.ready,
            report: tool.report,
            child,
            reaped: false,
            spawned,
            lines,
            stderr: text,
        })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Time from spawn to the banner line on stdout.
    pub(super) fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        let deadline = self.spawned + timeout;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) if self.is_ready(&line) => return Ok(line.at - self.spawned),
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

    fn is_ready(&self, line: &Line) -> bool {
        match self.ready {
            Ready::Stdout(text) => !line.stderr && line.text.contains(text),
            Ready::Stderr(text) => line.stderr && line.text.contains(text),
        }
    }

    /// The tracer's peak resident set so far (its VmHWM), in KiB.
    pub(super) fn peak_rss_kib(&mut self) -> Result<u64> {
        match vm_hwm_kib(self.pid()) {
            Ok(kib) => Ok(kib),
            Err(e) => Err(self.abort(&format!("has no readable VmHWM ({e:#})"))),
        }
    }

    /// SIGINT (both tools print their report and exit), drain the output to
    /// EOF, reap. A tracer that already ended by itself (`-p` whose target
    /// exited) is reaped the same way.
    pub(super) fn stop(mut self, timeout: Duration, max_rss_kib: u64) -> Result<Exit> {
        let deadline = Instant::now() + timeout;
        let pid = self.pid() as libc::pid_t;
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
                Ok(line) => {
                    reported |= self
                        .report
                        .is_some_and(|r| !line.stderr && line.text.contains(r));
                }
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
        if self.report.is_some() && !reported {
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

    /// The tracer's stderr, as far as it was read; whole once it exited.
    fn take_stderr(&mut self) -> String {
        // Give the reader thread a moment to take in the last lines.
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            match self.lines.try_recv() {
                Ok(_) => {}
                Err(mpsc::TryRecvError::Disconnected) => break,
                Err(mpsc::TryRecvError::Empty) => thread::sleep(Duration::from_millis(10)),
            }
        }
        let text = self.stderr.lock().map(|t| t.clone()).unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            "(empty)".into()
        } else {
            text.into()
        }
    }
}

/// Sends each line of `stream` to `tx`, and keeps stderr's in `keep`.
fn read_lines(
    stream: impl Read + Send + 'static,
    stderr: bool,
    tx: Sender<Line>,
    keep: Option<Arc<Mutex<String>>>,
) {
    thread::spawn(move || {
        for text in BufReader::new(stream).lines() {
            let Ok(text) = text else { break };
            if let Some(keep) = &keep
                && let Ok(mut all) = keep.lock()
            {
                all.push_str(&text);
                all.push('\n');
            }
            let line = Line {
                at: Instant::now(),
                stderr,
                text,
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
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
        let ready = Ready::Stdout("Tracing run queue latency");
        Tool::new("test tracer", path.into(), Vec::new(), ready, None).unwrap()
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
