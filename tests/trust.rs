//! Root: regressions for runs that once gave a wrong answer without a word
//! (issue 18): a reused PID taken for the target, an unreadable tracefs
//! reported as unmounted.

use std::{
    io::Read,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root};

use crate::common;

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("1000")
        .spawn()
        .expect("sleep runs")
}

/// Waits (bounded) for `child` to exit; None if it is still running.
fn exited_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Makes the next process created get PID `pid` (kernel.ns_last_pid),
/// retrying while other processes on the machine take it first.
fn sleeper_with_pid(pid: u32) -> Option<Child> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
        let mut child = sleeper();
        if child.id() == pid {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

/// Defect 5: the target exits and its PID goes to a new process within the
/// 500 ms watch. Before, schedlat kept measuring the newcomer under the old
/// target's name; now the start time tells them apart and the run ends.
#[test]
fn a_reused_pid_ends_the_run() {
    if !require_root() {
        return;
    }
    let mut target = sleeper();
    let pid = target.id();
    let mut tracer = Command::new(SCHEDLAT)
        .args(["-p", &pid.to_string(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Attached once the banner is on stderr (--json).
    let mut stderr = tracer.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(seen.clone());
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while !seen.contains(common::BANNER) {
        assert!(Instant::now() < deadline, "schedlat did not attach: {seen}");
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(100)) {
            seen = s;
        }
    }
    target.kill().unwrap();
    target.wait().unwrap();
    let Some(mut newcomer) = sleeper_with_pid(pid) else {
        let _ = tracer.kill();
        panic!("could not give PID {pid} to a new process (ns_last_pid)");
    };
    let status = exited_within(&mut tracer, Duration::from_secs(5));
    let _ = newcomer.kill();
    let _ = newcomer.wait();
    if status.is_none() {
        let _ = tracer.kill();
        let _ = tracer.wait();
        panic!("schedlat kept measuring the newcomer that got PID {pid}");
    }
    while let Ok(s) = rx.recv_timeout(Duration::from_millis(200)) {
        seen = s;
    }
    assert!(status.unwrap().success(), "{seen}");
    assert!(seen.contains(&format!("process {pid} exited")), "{seen}");
}

/// Runs schedlat as user nobody with only CAP_BPF and CAP_PERFMON.
fn run_with_bpf_caps(args: &[&str]) -> (Option<i32>, String) {
    // nobody must be able to run the binary: copy it out of the build tree.
    let bin = std::env::temp_dir().join(format!("schedlat-caps-{}", std::process::id()));
    std::fs::copy(SCHEDLAT, &bin).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+bpf,+perfmon",
            "--ambient-caps=+bpf,+perfmon",
        ])
        .arg(&bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("setpriv runs");
    let _ = std::fs::remove_file(&bin);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Defect 9: tracefs mounted with mode 0700 (as /sys/kernel/tracing is by
/// default) was reported as "not mounted, mount it". Now the missing
/// capability is named, and a run on tp_btf says nothing about tracefs.
#[test]
fn an_unreadable_tracefs_names_the_missing_capability() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-tracefs-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events/sched")).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let d = dir.to_str().unwrap();
    let (code, stderr) = run_with_bpf_caps(&["--hook", "tp", "--tracefs", d, "1", "1"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("CAP_DAC_READ_SEARCH"), "{stderr}");
    assert!(!stderr.contains("not mounted"), "{stderr}");

    let (code, stderr) = run_with_bpf_caps(&["--tracefs", d, "1", "1"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("hook mode tp_btf"), "{stderr}");
    assert!(!stderr.contains("tracepoints unavailable"), "{stderr}");
}
