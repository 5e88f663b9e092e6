//! Root: tasks that name themselves to attack the terminal (issue 29 item
//! 7). A task named with ESC cleared root's screen, hid its own row
//! (`ESC[8m`) or forged lines ("FAKE 1 waits") in victims, slow and
//! diagnose. Text output shows such names escaped as ps does; JSON keeps
//! them exactly.

mod common;

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::{SCHEDLAT, require_root, workload::workload_cpu};

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
