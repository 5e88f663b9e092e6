//! `schedlat top` in a real terminal: tmux runs it under a known load,
//! capture-pane reads the screen, send-keys presses the keys (root).

mod common;

use std::{
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root, workload};

/// A detached tmux session running a shell; killed when dropped.
struct Tmux(String);

impl Tmux {
    fn start() -> Tmux {
        let name = format!("schedlat-top-{}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "100",
                "-y",
                "30",
                "sh",
            ])
            .status()
            .expect("tmux (Debian package tmux) runs");
        assert!(ok.success(), "tmux new-session failed");
        Tmux(name)
    }

    fn keys(&self, keys: &[&str]) {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &self.0])
            .args(keys)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits up to 15 s for the screen to satisfy `ok`.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {what}; the screen:\n{screen}"
            );
            thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// A histogram row with a non-zero count: `  16 -> 31   : 42   |███|`.
fn has_nonzero_row(screen: &str) -> bool {
    screen.lines().any(|l| {
        l.split_once(" : ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
            && l.contains("->")
    })
}

#[test]
fn live_view_shows_counts_toggles_and_restores_the_terminal() {
    require_root();
    let _hogs = workload::Hogs::start(workload::workload_cpu(), 2);
    let tmux = Tmux::start();
    tmux.keys(&[&format!("{SCHEDLAT} top; echo EXIT=$?"), "Enter"]);
    let screen = tmux.wait_for("a histogram with counts", |s| {
        s.contains("usecs") && has_nonzero_row(s)
    });
    assert!(
        screen.contains("hook tp_btf") && screen.contains("p99"),
        "{screen}"
    );
    assert!(screen.contains("q quit"), "{screen}");

    tmux.keys(&["c"]);
    tmux.wait_for("the cumulative view", |s| {
        s.contains("run queue latency, cumulative")
    });
    tmux.keys(&["?"]);
    tmux.wait_for("the help", |s| s.contains("this help"));
    tmux.keys(&["?"]);

    tmux.keys(&["q"]);
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
    // Restored: the shell echoes and runs what is typed, on the main screen.
    tmux.keys(&["echo ok-$((40+2))", "Enter"]);
    tmux.wait_for("a working shell", |s| s.contains("ok-42"));
}

#[test]
fn sigterm_restores_the_terminal_too() {
    require_root();
    let tmux = Tmux::start();
    let pidfile = std::env::temp_dir().join(format!("schedlat-top-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    // In the foreground (a background job may not own the terminal); the
    // shell writes the pid that `exec` hands to schedlat.
    let command = format!(
        "sh -c 'echo $$ > {}; exec {SCHEDLAT} top'; echo EXIT=$?",
        pidfile.display()
    );
    tmux.keys(&[&command, "Enter"]);
    tmux.wait_for("the live view", |s| s.contains("q quit"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signalling the schedlat this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
    let _ = std::fs::remove_file(&pidfile);
    tmux.keys(&["echo ok-$((40+2))", "Enter"]);
    tmux.wait_for("a working shell", |s| s.contains("ok-42"));
}

#[test]
fn refuses_without_a_terminal() {
    require_root();
    let (status, _, err) = common::run_schedlat(&["top"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("--json"),
        "{err}"
    );
}
