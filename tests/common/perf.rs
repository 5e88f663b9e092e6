//! `perf sched record` + `perf sched latency`, the reference the victims
//! mode is checked against: perf writes every scheduler event to a file and
//! computes per-task waits afterwards; schedlat computes them in the kernel.

use std::{
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// A system-wide `perf sched record` into a file of its own. Killed if
/// dropped while running.
pub(crate) struct PerfSched {
    child: Child,
    file: PathBuf,
}

impl PerfSched {
    /// Starts recording and returns once perf has written its file header
    /// (its events are enabled by then).
    pub(crate) fn start(dir: &Path) -> PerfSched {
        let file = dir.join("perf-sched.data");
        // `-e sched:sched_wakeup`: perf sched record takes sched_waking when
        // the kernel has it, which `perf sched latency` before 6.5 (Debian's
        // 6.1) does not read: it would see only preemptions and first runs.
        // With sched_wakeup recorded too, it starts each wait where schedlat
        // does.
        let child = Command::new("perf")
            .args(["sched", "record", "-e", "sched:sched_wakeup", "-o"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("perf (linux-perf) runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&file).map_or(true, |m| m.len() == 0) {
            assert!(Instant::now() < deadline, "perf sched record wrote nothing");
            thread::sleep(Duration::from_millis(20));
        }
        // The header comes first; give the ring buffers a moment more.
        thread::sleep(Duration::from_millis(500));
        PerfSched { child, file }
    }

    /// SIGINT (perf finishes its file), then `perf sched latency -p`.
    pub(crate) fn stop(mut self) -> PerfLatency {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().expect("perf exits");
        // perf record finishes its file, then re-raises the signal.
        assert!(
            status.success() || status.signal() == Some(libc::SIGINT),
            "perf record: {status}"
        );
        let mut record_err = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut record_err);
        }
        let out = Command::new("perf")
            .args(["sched", "latency", "-p", "-i"])
            .arg(&self.file)
            .output()
            .expect("perf sched latency runs");
        let latency_err = String::from_utf8_lossy(&out.stderr);
        PerfLatency {
            tasks: parse_latency(&String::from_utf8_lossy(&out.stdout)),
            // "Processed N events and lost M chunks!", "lost N samples".
            lost_events: [record_err.as_str(), &latency_err]
                .iter()
                .any(|t| t.to_lowercase().contains("lost")),
        }
    }
}

impl Drop for PerfSched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// What `perf sched latency` made of the recording.
#[derive(Debug)]
pub(crate) struct PerfLatency {
    pub tasks: Vec<PerfTask>,
    /// perf's buffers overflowed under load: it missed events, and so waits
    /// (a task whose wakeup it lost is not waiting, to perf).
    pub lost_events: bool,
}

/// One row of `perf sched latency -p`: delays are perf's, in ns, at its
/// printed resolution (1 us).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PerfTask {
    pub comm: String,
    pub tid: u32,
    /// perf's "Switches": waits it measured (plus one zero-length wait for a
    /// task first seen being switched in).
    pub switches: u64,
    pub avg_ns: u64,
    pub max_ns: u64,
}

/// Rows like `  comm:1234  |  1.234 ms |  56 | avg: 0.123 ms | max: 3.456 ms | ...`.
pub(crate) fn parse_latency(text: &str) -> Vec<PerfTask> {
    let ms = |field: &str, label: &str| -> Option<u64> {
        let v: f64 = field
            .trim()
            .strip_prefix(label)?
            .trim()
            .strip_suffix("ms")?
            .trim()
            .parse()
            .ok()?;
        Some((v * 1e6).round() as u64)
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            if fields.len() < 5 {
                return None;
            }
            let (comm, tid) = fields[0].trim().rsplit_once(':')?;
            Some(PerfTask {
                comm: comm.to_string(),
                tid: tid.parse().ok()?,
                switches: fields[2].trim().parse().ok()?,
                avg_ns: ms(fields[3], "avg:")?,
                max_ns: ms(fields[4], "max:")?,
            })
        })
        .collect()
}

/// A system-wide `perf record` of sched_switch and sched_wakeup with
/// nanosecond times, for tests that rebuild who ran on a CPU when.
/// Killed if dropped while running.
pub(crate) struct SchedTrace {
    child: Child,
    file: PathBuf,
}

/// One event of a [`SchedTrace`]: a switch on `cpu` from `prev` (still
/// runnable when `prev_runnable`) to `next`, or a wakeup of `pid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchedEvent {
    Switch {
        at_ns: u64,
        cpu: usize,
        prev: u32,
        prev_runnable: bool,
        next: u32,
    },
    Wakeup {
        at_ns: u64,
        pid: u32,
    },
}

impl SchedTrace {
    /// Starts recording; returns once perf has written its header.
    pub(crate) fn start(dir: &Path) -> SchedTrace {
        let file = dir.join("perf-switches.data");
        let child = Command::new("perf")
            .args(["record", "-a", "-e", "sched:sched_switch"])
            .args(["-e", "sched:sched_wakeup", "-o"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("perf (linux-perf) runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&file).map_or(true, |m| m.len() == 0) {
            assert!(Instant::now() < deadline, "perf record wrote nothing");
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(500));
        SchedTrace { child, file }
    }

    /// SIGINT (perf finishes its file), then its events in time order.
    pub(crate) fn stop(mut self) -> Vec<SchedEvent> {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let out = Command::new("perf")
            .args(["script", "--ns", "-F", "cpu,time,event,trace", "-i"])
            .arg(&self.file)
            .output()
            .expect("perf script runs");
        parse_sched_script(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for SchedTrace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// `perf script -F cpu,time,event,trace` lines: `[001] 12.345678901:
/// sched:sched_switch: prev_comm=.. prev_pid=1 prev_prio=120 prev_state=R
/// ==> next_comm=.. next_pid=2 next_prio=120`, `... sched:sched_wakeup:
/// comm=.. pid=3 prio=120 target_cpu=001`. A comm may hold spaces: the
/// fields are read from the end of each side.
pub(crate) fn parse_sched_script(text: &str) -> Vec<SchedEvent> {
    let field = |words: &[&str], name: &str| -> Option<String> {
        words
            .iter()
            .rev()
            .find_map(|w| w.strip_prefix(name).map(str::to_string))
    };
    text.lines()
        .filter_map(|line| {
            let (head, rest) = line.split_once("]")?;
            let cpu = head.trim().trim_start_matches('[').parse().ok()?;
            let (time, rest) = rest.split_once(": ")?;
            let (secs, frac) = time.trim().split_once('.')?;
            let at_ns = secs.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()?;
            if let Some(trace) = rest.strip_prefix("sched:sched_switch: ") {
                let (prev, next) = trace.split_once(" ==> ")?;
                let prev: Vec<&str> = prev.split_whitespace().collect();
                let next: Vec<&str> = next.split_whitespace().collect();
                let state = field(&prev, "prev_state=")?;
                Some(SchedEvent::Switch {
                    at_ns,
                    cpu,
                    prev: field(&prev, "prev_pid=")?.parse().ok()?,
                    prev_runnable: state.starts_with('R'),
                    next: field(&next, "next_pid=")?.parse().ok()?,
                })
            } else {
                let trace = rest.strip_prefix("sched:sched_wakeup: ")?;
                let words: Vec<&str> = trace.split_whitespace().collect();
                Some(SchedEvent::Wakeup {
                    at_ns,
                    pid: field(&words, "pid=")?.parse().ok()?,
                })
            }
        })
        .collect()
}

/// From `events`, the waits of `pid` on `cpu` (from its wakeup, or its
/// switch-out still runnable, to its switch-in there): per task that ran
/// on `cpu` during them, its time inside them (ns), over the last `reach`
/// runs before each switch-in at most (the run it ends included), as
/// schedlat's record of a CPU's recent runs reaches; and the time of the
/// waits beyond that reach.
pub(crate) fn ran_during_waits(
    events: &[SchedEvent],
    pid: u32,
    cpu: usize,
    reach: usize,
) -> (std::collections::HashMap<u32, u64>, u64) {
    let mut ran = std::collections::HashMap::new();
    let mut beyond = 0;
    // The CPU's runs, newest last: (since, until, task).
    let mut runs = std::collections::VecDeque::<(u64, u64, u32)>::new();
    let (mut waiting_since, mut running, mut since) = (None::<u64>, None::<u32>, 0);
    for event in events {
        match *event {
            SchedEvent::Wakeup { at_ns, pid: p } if p == pid => {
                waiting_since.get_or_insert(at_ns);
            }
            SchedEvent::Switch {
                at_ns,
                cpu: c,
                prev,
                prev_runnable,
                next,
            } if c == cpu => {
                if let Some(holder) = running {
                    runs.push_back((since, at_ns, holder));
                    if runs.len() > reach {
                        runs.pop_front();
                    }
                }
                if let (true, Some(start)) = (next == pid, waiting_since) {
                    let mut left = at_ns.saturating_sub(start);
                    for &(from, until, holder) in runs.iter().rev() {
                        let part = until.saturating_sub(from.max(start)).min(left);
                        *ran.entry(holder).or_default() += part;
                        left -= part;
                        if left == 0 {
                            break;
                        }
                    }
                    beyond += left;
                }
                if next == pid {
                    waiting_since = None;
                }
                if prev == pid && prev_runnable {
                    waiting_since = Some(at_ns);
                }
                (running, since) = (Some(next), at_ns);
            }
            _ => {}
        }
    }
    (ran, beyond)
}
