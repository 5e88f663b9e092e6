//! Root: tasks that name themselves to attack the terminal (issue 29 item
//! 7). A task named with ESC cleared root's screen, hid its own row
//! (`ESC[8m`) or forged lines ("FAKE 1 waits") in victims, slow and
//! diagnose. Text output shows such names escaped as ps does; JSON keeps
//! them exactly.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::{SCHEDLAT, require_root, workload::workload_cpu};

use crate::common;

const SCREEN_CLEAR: &str = "\u{1b}[2J\u{1b}[8m";
const FORGED: &str = "x\nFAKE 1 waits";

/// A process pinned to `cpu` that names itself `name` (prctl
/// PR_SET_NAME) and then busy-loops (`hog`) or sleeps 1 ms at a time, for
/// at most `secs`.
fn named(cpu: usize, name: &str, hog: bool, secs: u64) -> Child {
    let script = r#"
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
until = time.time() + float(sys.argv[3])
while time.time() < until:
    if sys.argv[2] == "hog":
        pass
    else:
        time.sleep(0.001)
"#;
    Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            "/usr/bin/python3",
            "-c",
            script,
            name,
        ])
        .arg(if hog { "hog" } else { "sleep" })
        .arg(secs.to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset and python3 run")
}

fn run(args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["--preserve-status", "-s", "INT", "6", SCHEDLAT])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn assert_escaped(what: &str, text: &str) {
    assert!(
        !text.contains('\u{1b}'),
        "{what}: an ESC reached the terminal:\n{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("FAKE")),
        "{what}: a forged line:\n{text}"
    );
}

#[test]
fn hostile_task_names_reach_every_text_renderer_escaped() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let mut tasks = vec![
        named(cpu, SCREEN_CLEAR, true, 40),
        named(cpu, FORGED, false, 40),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let victims = run(&["victims", "--top", "0", "2", "1"]);
    assert_escaped("victims", &victims);
    assert!(
        victims.contains("?[2J?[8m") && victims.contains("x?FAKE 1 waits"),
        "victims shows neither name:\n{victims}"
    );
    let slow = run(&["slow", "--threshold", "200us"]);
    assert_escaped("slow", &slow);
    assert!(slow.contains("?[2J?[8m"), "slow shows no hog:\n{slow}");
    let sleeper = tasks[1].id().to_string();
    let diagnose = run(&["diagnose", "-p", &sleeper, "-d", "2"]);
    assert_escaped("diagnose", &diagnose);
    // JSON: the exact names.
    let json = run(&["victims", "--top", "0", "--json", "2", "1"]);
    let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    let names: Vec<&str> = v["victims"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["comm"].as_str())
        .collect();
    assert!(names.contains(&FORGED), "{names:?}");
    for t in &mut tasks {
        let _ = t.kill();
        let _ = t.wait();
    }
}

/// Issue 48 item 9: a live cgroup whose path is over 4 KiB (PATH_MAX) was
/// shown as "(removed, id N)" or by the kernel's record of it, cut at
/// 1,023 bytes and shown as if whole: the walk of the hierarchy went by
/// path and could not stat or list it (ENAMETOOLONG). It walks by
/// descriptor now: the cgroup is named whole.
#[test]
fn a_cgroup_deeper_than_path_max_is_named_whole() {
    if !require_root() {
        return;
    }
    use common::cgroup::{TestCgroup, v1_cpu_root, v2_root};
    // The hierarchy --cgroups follows: the cpu controller's.
    let v2 = v2_root();
    let v2_cpu = std::fs::read_to_string(v2.join("cgroup.subtree_control"))
        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"));
    let root = if v2_cpu {
        v2
    } else {
        v1_cpu_root().expect("a cpu controller")
    };
    let top = TestCgroup::new(&root, "deep");
    // 18 levels of 240 bytes: about 4,350 bytes below the test's cgroup.
    let script = r#"
import os, sys, time
top, levels, secs, ready = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
for i in range(levels):
    name = ("%02d" % i) + "d" * 238
    os.mkdir(name, dir_fd=fds[-1])
    fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
procs = os.open("cgroup.procs", os.O_WRONLY, dir_fd=fds[-1])
os.write(procs, str(os.getpid()).encode())
open(ready, "w").close()
until = time.time() + secs
while time.time() < until:
    pass
# Back to the top, then the levels removed, deepest first.
os.write(os.open("cgroup.procs", os.O_WRONLY, dir_fd=fds[0]), str(os.getpid()).encode())
for i in reversed(range(levels)):
    name = ("%02d" % i) + "d" * 238
    for _ in range(100):
        try:
            os.rmdir(name, dir_fd=fds[i])
            break
        except OSError:
            time.sleep(0.02)
"#;
    let ready = std::env::temp_dir().join(format!("schedlat-deep-{}", std::process::id()));
    let _ = std::fs::remove_file(&ready);
    let mut hog = Command::new("/usr/bin/python3")
        .args(["-c", script, &top.path(), "18", "6"])
        .arg(&ready)
        .spawn()
        .expect("python3 runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the deep cgroup was not made"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new(SCHEDLAT)
        .args(["--cgroups", "2", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = hog.wait();
    let _ = std::fs::remove_file(&ready);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let deepest = format!("17{}", "d".repeat(238));
    let whole: String = (0..18)
        .map(|i| format!("/{i:02}{}", "d".repeat(238)))
        .collect();
    let want = format!("cgroup = {}{whole}", top.rel);
    assert!(want.len() > 4096 + 9);
    let row = text
        .lines()
        .find(|l| l.contains(&deepest))
        .unwrap_or_else(|| panic!("no row names the deepest cgroup: {text}"));
    assert!(
        row.contains(&want) && !row.contains("removed"),
        "the row is not the whole path: {row}"
    );
    drop(top);
}
