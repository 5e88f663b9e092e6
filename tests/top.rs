//! `schedlat top` in a real terminal: tmux runs it under a known load
//! (`stress-ng --cpu 4`, the "done when"), capture-pane reads the
//! screen, send-keys presses the keys (root).

use std::{
    os::unix::process::CommandExt,
    process::{Child, Command, Stdio},
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root};

use crate::common;

/// `stress-ng --cpu 4`: four CPU hogs (comm `stress-ng-cpu`) on this
/// 2-CPU machine, in a process group of their own, killed when dropped
/// (a failing test too), and ending by themselves after a minute anyway.
/// One test at a time runs it.
struct StressNg {
    child: Child,
    /// Held while the load runs.
    _turn: MutexGuard<'static, ()>,
}

static ONE_LOAD: Mutex<()> = Mutex::new(());

impl StressNg {
    fn start() -> StressNg {
        // A test that failed holding it poisons it; the load is gone anyway.
        let turn = ONE_LOAD.lock().unwrap_or_else(|e| e.into_inner());
        let child = Command::new("stress-ng")
            .args(["--cpu", "4", "--timeout", "60s", "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("stress-ng runs (Debian package stress-ng; `cargo xtask setup` installs it)");
        StressNg { child, _turn: turn }
    }
}

impl Drop for StressNg {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A detached tmux session running a shell; killed when dropped.
struct Tmux(String);

impl Tmux {
    fn start() -> Tmux {
        Tmux::sized(80, 24)
    }

    fn sized(width: u16, height: u16) -> Tmux {
        // Tests run in parallel: one session each.
        static SESSIONS: AtomicUsize = AtomicUsize::new(0);
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        let name = format!("schedlat-top-{}-{n}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
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

/// The shape verdict: `long-tail: median ...` and the like.
fn has_verdict(screen: &str) -> bool {
    let verdicts = [
        "healthy",
        "long-tail",
        "shifted-mean",
        "bimodal",
        "insufficient-data",
    ];
    screen
        .lines()
        .any(|l| verdicts.iter().any(|v| l.starts_with(&format!("{v}: "))))
}

/// A victims panel row of a stress-ng worker: comm, TID, waits, ...
fn has_stress_ng_row(screen: &str) -> bool {
    screen.lines().any(|l| {
        let mut fields = l.split_whitespace();
        fields.next().is_some_and(|c| c.starts_with("stress-ng"))
            && fields.next().is_some_and(|t| t.parse::<u32>().is_ok())
            && fields
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0)
    })
}

#[test]
fn live_view_under_stress_ng_shows_counts_verdict_victims_and_restores_the_terminal() {
    if !require_root() {
        return;
    }
    let _load = StressNg::start();
    let tmux = Tmux::start();
    tmux.keys(&[&format!("{SCHEDLAT} top; echo EXIT=$?"), "Enter"]);
    let screen = tmux.wait_for("histogram counts, a verdict and a stress-ng victim", |s| {
        s.contains("usecs") && has_nonzero_row(s) && has_verdict(s) && has_stress_ng_row(s)
    });
    assert!(
        screen.contains("hook tp_btf") && screen.contains("p99"),
        "{screen}"
    );
    assert!(screen.contains("q quit"), "{screen}");
    assert!(
        screen.contains("victims by total wait") && screen.contains("CULPRIT "),
        "{screen}"
    );
    assert!(
        screen.contains("dropped 0") && screen.contains("discarded 0") && screen.contains("BPF "),
        "{screen}"
    );

    tmux.keys(&["s"]);
    tmux.wait_for("the victims sorted by their longest wait", |s| {
        s.contains("victims by longest wait")
    });

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

/// Issue 19's mix: a sleeper beside four CPU hogs on one CPU (waits of a
/// few microseconds, and waits of a slice and more), in the children's own
/// process groups, killed when dropped.
struct SleeperAndHogs(Vec<Child>);

impl SleeperAndHogs {
    fn start() -> SleeperAndHogs {
        let cpu = common::workload::workload_cpu();
        let mut children: Vec<Child> = (0..4)
            .map(|_| common::cgroup::pinned_sh(cpu, common::cgroup::HOG))
            .collect();
        children.push(common::cgroup::pinned_sh(cpu, common::cgroup::SLEEPER));
        SleeperAndHogs(children)
    }
}

impl Drop for SleeperAndHogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The histogram rows whose marks (after the bar) include `mark`.
fn marked_row<'a>(screen: &'a str, mark: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        l.contains(" -> ")
            && l.rsplit('|')
                .next()
                .is_some_and(|m| m.trim().split(',').any(|m| m == mark))
    })
}

/// The verdict, from its first line to the cause split's line (or the
/// victims panel's title).
fn verdict_text(screen: &str) -> Option<String> {
    let verdicts = ["healthy: ", "long-tail: ", "shifted-mean: ", "bimodal: "];
    let lines: Vec<&str> = screen.lines().collect();
    let first = lines
        .iter()
        .position(|l| verdicts.iter().any(|v| l.starts_with(v)))?;
    let text: Vec<&str> = lines[first..]
        .iter()
        .take_while(|l| {
            !l.starts_with("causes") && !l.contains(" victims ") && !l.contains("p99 per interval")
        })
        .map(|l| l.trim())
        .collect();
    Some(text.join(" "))
}

/// Issue 19: at 80x24 and 120x40 under a sleeper + hogs mix, the rows
/// from p50 to p99.9 and every mode the verdict names are on screen (empty
/// and sparse rows fold; none is cut), and the verdict is whole.
#[test]
fn the_tail_and_the_whole_verdict_stay_on_screen_at_80x24_and_120x40() {
    if !require_root() {
        return;
    }
    let _turn = ONE_LOAD.lock().unwrap_or_else(|e| e.into_inner());
    let _load = SleeperAndHogs::start();
    for (width, height) in [(80, 24), (120, 40)] {
        let tmux = Tmux::sized(width, height);
        // Cumulative: enough waits for p99.9 and a verdict on any host.
        tmux.keys(&[&format!("{SCHEDLAT} top; echo EXIT=$?"), "Enter"]);
        tmux.wait_for("the live view", |s| s.contains("q quit"));
        tmux.keys(&["c"]);
        let screen = tmux.wait_for("a verdict on the histogram with p50 and p99.9 rows", |s| {
            verdict_text(s).is_some_and(|v| !v.starts_with("insufficient"))
                && marked_row(s, "p50").is_some()
                && marked_row(s, "p99.9").is_some()
        });
        assert!(
            !screen.contains("rows cut") && !screen.contains("above"),
            "{width}x{height}: rows cut:\n{screen}"
        );
        let verdict = verdict_text(&screen).unwrap();
        // Whole: it ends with the slice's source, closed.
        assert!(
            verdict.contains("base slice") && verdict.ends_with(')'),
            "{width}x{height}: verdict cut: {verdict}\n{screen}"
        );
        // Issue 15: the split of the same waits, under the verdict (the
        // hogs preempt each other, the sleeper is woken).
        assert!(
            screen.contains("causes (waits/time): woken ") && screen.contains("preempted "),
            "{width}x{height}: no cause split:\n{screen}"
        );
        for mark in ["p50", "p90", "p99", "p99.9"] {
            assert!(
                marked_row(&screen, mark).is_some(),
                "{width}x{height} {mark}:\n{screen}"
            );
        }
        if verdict.starts_with("bimodal") {
            for mark in ["fast mode", "slow mode"] {
                assert!(
                    marked_row(&screen, mark).is_some(),
                    "{width}x{height} {mark}:\n{screen}"
                );
            }
        }
        // The culprit rule is said where the culprits are: HELD, their
        // time on the CPU inside the waits, and the waits they ended.
        assert!(
            screen.contains("CULPRIT             TID    HELD    ENDED    TOTAL      MAX"),
            "{screen}"
        );
        tmux.keys(&["q"]);
        tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
    }
}

#[test]
fn classic_tracepoints_show_the_histogram_and_why_there_are_no_victims() {
    if !require_root() {
        return;
    }
    let _load = StressNg::start();
    let tmux = Tmux::start();
    tmux.keys(&[&format!("{SCHEDLAT} top --hook tp; echo EXIT=$?"), "Enter"]);
    let screen = tmux.wait_for("a histogram with counts", |s| {
        s.contains("usecs") && has_nonzero_row(s) && has_verdict(s)
    });
    assert!(screen.contains("hook tracepoint"), "{screen}");
    assert!(
        screen.contains("victims and culprits unavailable: they need the tp_btf hook mode"),
        "{screen}"
    );
    tmux.keys(&["q"]);
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
}

#[test]
fn sigterm_restores_the_terminal_too() {
    if !require_root() {
        return;
    }
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
    if !require_root() {
        return;
    }
    let (status, _, err) = common::run_schedlat(&["top"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("--json"),
        "{err}"
    );
}

/// Issue 28: `timeout` without `--foreground`, not run from the prompt (here
/// from `sh -c`, as in a script), runs its command in a process group of its
/// own, in the background of the terminal: a live view there sat stopped
/// (SIGTTIN) on a blank screen until the timeout. It says so and exits 1 at
/// once instead.
#[test]
fn a_background_job_is_told_so_instead_of_stopping() {
    if !require_root() {
        return;
    }
    let tmux = Tmux::start();
    // Before, the screen stayed blank until the timeout (EXIT=124): past
    // wait_for's 15 s.
    tmux.keys(&[
        &format!("sh -c 'timeout 60 {SCHEDLAT} top'; echo EXIT=$?"),
        "Enter",
    ]);
    let screen = tmux.wait_for("the exit status", |s| {
        s.lines().any(|l| l.starts_with("EXIT="))
    });
    assert!(screen.contains("EXIT=1"), "{screen}");
    // The message wraps at the pane's width, inside words.
    let said: String = screen.lines().map(str::trim_end).collect();
    assert!(
        said.contains("runs in the background") && said.contains("timeout --foreground"),
        "{screen}"
    );
    // The same under `timeout --foreground` draws the view.
    tmux.keys(&["clear", "Enter"]);
    tmux.keys(&[
        &format!("sh -c 'timeout --foreground 60 {SCHEDLAT} top'; echo EXIT=$?"),
        "Enter",
    ]);
    tmux.wait_for("the live view", |s| s.contains("q quit"));
    tmux.keys(&["q"]);
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
}

/// Issue 25: on a Kubernetes-like node (tests/common/kube_node.rs), a
/// sleeper in pod shop/web-1's container and two hogs in jobs/batch-7's on
/// one CPU: in a wide terminal each task row names its container, and
/// `--pairs --by container` shows who waited behind whom by container.
#[test]
fn top_names_the_containers_and_who_waited_behind_whom() {
    use common::{
        cgroup::{v1_cpu_root, v2_root},
        cpu::CpuTimes,
        kube_node::{KubeNode, load},
    };
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&v1_cpu_root().unwrap_or_else(v2_root));
    let _load = load(&node);
    let cpus = CpuTimes::now();
    let tmux = Tmux::sized(160, 50);
    tmux.keys(&[
        &format!("{SCHEDLAT} top --pairs --by container; echo EXIT=$?"),
        "Enter",
    ]);
    let hog = "container jobs/batch-7/cruncher";
    let screen = tmux.wait_for("a hog's row naming its container, and the pairs", |s| {
        s.contains("WORKLOAD")
            && s.lines().any(|l| l.trim_end().ends_with(hog))
            && s.contains("waiting container <- container that held the CPU")
            && s.lines().any(|l| {
                l.contains("jobs/batch-7/cruncher <- ") || l.contains("<- jobs/batch-7/cruncher")
            })
    });
    tmux.keys(&["q"]);
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
    assert!(
        !screen.contains("cri-containerd-"),
        "names, not paths ({}):\n{screen}",
        cpus.busy_since()
    );
}

/// The kubelet case (docs/containers.md, "The share of a group"): web-1's
/// sleeper beside batch-7's two loops and a loop in the root cgroup, all
/// on one CPU. Below who held the CPU, the panel names batch-7 as having
/// used the share of the node's group, which web-1's wakeups lost with.
#[test]
fn top_names_the_pod_that_used_the_shared_groups_share() {
    use common::{
        cgroup::{HOG, pinned_sh},
        cpu::CpuTimes,
        kube_node::{KubeNode, keyed_root, load},
    };
    if !require_root() {
        return;
    }
    let root = keyed_root();
    let node = KubeNode::new(&root);
    node.enable_cpu(&[&node.web.dir, &node.batch.dir]);
    let mut load = load(&node);
    let root_loop = pinned_sh(common::workload::workload_cpu(), HOG);
    std::fs::write(root.join("cgroup.procs"), root_loop.id().to_string()).expect("to the root");
    load.0.push(root_loop);
    let cpus = CpuTimes::now();
    // Tall enough for the pairs' part of the panel (a third, or what the
    // tasks' tables leave) to hold a row of each of its tables and the
    // sentence.
    let tmux = Tmux::sized(220, 64);
    tmux.keys(&[
        &format!("{SCHEDLAT} top --pairs --by container; echo EXIT=$?"),
        "Enter",
    ]);
    let group = node.path()[root.to_string_lossy().len()..].to_string();
    let used = format!("shop/web-1/nginx <- jobs/batch-7/cruncher (of {group})");
    // And the sentence naming both roles under them.
    let told = format!("because jobs/batch-7/cruncher had used {group}'s share of the CPU.");
    // And where the pods' wakeups lost: the node's group or one under it
    // (the batch pod's CRI-O tree, /kubepods, on the run this was written
    // against).
    let decided = |l: &str| {
        ["shop/web-1/nginx (at ", "jobs/batch-7/cruncher (at "]
            .iter()
            .any(|pod| l.contains(&format!("{pod}{group}")))
    };
    let screen = tmux.wait_for(
        "the second role naming batch-7, a level a pod lost at, and the roles told",
        |s| {
            s.contains("that had used the share of a group it is in")
                && s.lines().any(|l| l.trim_end().ends_with(&used))
                && s.contains("whose wakeups lost above its own queue")
                && s.lines().any(decided)
                && (s.lines()).any(|l| {
                    l.starts_with("shop/web-1/nginx waited behind ")
                        && l.trim_end().ends_with(&told)
                })
        },
    );
    tmux.keys(&["q"]);
    tmux.wait_for("exit status 0", |s| s.contains("EXIT=0"));
    assert!(
        !screen.contains("cri-containerd-"),
        "names, not paths ({}):\n{screen}",
        cpus.busy_since()
    );
}
