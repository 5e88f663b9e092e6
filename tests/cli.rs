//! Command-line errors: each gives a reason and exit status 2 before any
//! kernel work, so these run without root.

mod common;

use common::run_schedlat;

fn assert_usage_error(args: &[&str], expect: &str) {
    let (status, stdout, stderr) = run_schedlat(args);
    assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?} printed to stdout: {stdout}");
    assert!(
        stderr.contains(expect),
        "{args:?}: expected `{expect}` in: {stderr}"
    );
}

#[test]
fn unknown_option() {
    assert_usage_error(&["--frobnicate"], "unexpected argument '--frobnicate'");
}

#[test]
fn interval_zero() {
    assert_usage_error(&["0"], "must be at least 1");
}

#[test]
fn non_numeric_count() {
    assert_usage_error(&["1", "many"], "`many` is not a whole number");
}

#[test]
fn unknown_hook_mode() {
    assert_usage_error(&["--hook", "kprobe"], "possible values: auto, btf, tp");
}

#[test]
fn help_teaches_the_measurement_and_exit_codes() {
    let (status, stdout, _) = run_schedlat(&["--help"]);
    assert!(status.success());
    for needle in [
        "INTERVAL",
        "COUNT",
        "--milliseconds",
        "--timestamp",
        "--json",
        "--hook",
        "Exit status",
    ] {
        assert!(stdout.contains(needle), "--help lacks {needle}:\n{stdout}");
    }
}

/// Issue 4: every filter and breakdown option is explained in one line of
/// `-h` (clap wraps at 100 columns without a terminal).
#[test]
fn scope_options_are_explained_in_one_line_each() {
    let (status, stdout, _) = run_schedlat(&["-h"]);
    assert!(status.success());
    let lines: Vec<&str> = stdout.lines().collect();
    for flag in [
        "--pid <PID>",
        "--tid <TID>",
        "--cgroup <PATH>",
        "--comm <NAME>",
        "--cpu <LIST>",
        "--pids",
        "--tids",
        "--pidnss",
        "--cgroups",
        "--cpus",
        "--top <N>",
    ] {
        let i = lines
            .iter()
            .position(|l| l.contains(flag))
            .unwrap_or_else(|| panic!("-h lacks {flag}:\n{stdout}"));
        let text = lines[i].split(flag).nth(1).unwrap().trim();
        assert!(text.len() > 15, "{flag} has no explanation: {}", lines[i]);
        let next = lines.get(i + 1).copied().unwrap_or("").trim_start();
        assert!(
            next.is_empty() || next.starts_with('-') || next.ends_with(':'),
            "{flag} takes more than one line:\n{}\n{}",
            lines[i],
            lines[i + 1]
        );
    }
}

/// Issue 18: an INTERVAL beyond what the clock can add used to abort
/// ("overflow when adding duration to instant"); it is a usage error now.
#[test]
fn interval_too_long() {
    assert_usage_error(&["9223372036854775807"], "must be at most");
    assert_usage_error(&["victims", "9223372036854775807"], "must be at most");
    assert_usage_error(
        &["record", "-o", "/dev/null", "18446744073709551615"],
        "must be at most",
    );
}

/// One interval without waits, as `schedlat --json` writes it.
const EMPTY_RECORDING: &str = r#"{"schema":"schedlat.histogram.v1","hook":"tp_btf","unit":"usecs","time_unix_ns":0,"interval_ns":1000000000,"last":true,"count":0,"sum_ns":0,"mean_ns":null,"dropped":{"untracked_tid":0},"discarded":{"negative_delta":0},"percentiles":null,"shape":null,"buckets":[],"log2":[]}
"#;

/// Runs schedlat with stdout and stderr sent to the given files.
fn run_redirected(args: &[&str], stdout: &str, stderr: &str) -> std::process::Output {
    let open = |path: &str| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    std::process::Command::new(env!("CARGO_BIN_EXE_schedlat"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(open(stdout))
        .stderr(open(stderr))
        .output()
        .expect("schedlat runs")
}

/// Issue 18: a report that cannot be written (a full disk: /dev/full) is an
/// error with a message and status 1, never a panic and never success.
#[test]
fn a_failed_stdout_write_is_an_error() {
    let dir = std::env::temp_dir().join(format!("schedlat-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recording = dir.join("empty.json");
    std::fs::write(&recording, EMPTY_RECORDING).unwrap();
    let path = recording.to_str().unwrap();
    let err = dir.join("stderr");
    std::fs::write(&err, "").unwrap();
    let out = run_redirected(&["compare", path, path], "/dev/full", err.to_str().unwrap());
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("writing to stdout") && stderr.contains("No space left"),
        "{stderr}"
    );
    // The same comparison to a reader does succeed.
    let (status, stdout, stderr) = run_schedlat(&["compare", path, path]);
    assert!(status.success(), "{stderr}");
    assert!(!stdout.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 18: when stderr cannot be written, the error still ends the run
/// with its status (1), without a panic (101) or an abort (134).
#[test]
fn a_failed_stderr_write_never_panics() {
    let out = run_redirected(
        &["compare", "/nonexistent/before", "/nonexistent/after"],
        "/dev/null",
        "/dev/full",
    );
    assert_eq!(out.status.code(), Some(1));
    // And a usage error keeps its status 2.
    let out = run_redirected(&["0"], "/dev/null", "/dev/full");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn recorder_arguments_are_checked() {
    assert_usage_error(&["record", "--ring", "0s"], "must be at least 1s");
    assert_usage_error(&["record", "--ring", "2d"], "is not a duration");
    assert_usage_error(
        &["record", "--ring", "5m", "--trigger", "p98>1ms"],
        "p50, p90, p99",
    );
    assert_usage_error(&["record", "--ring", "5m", "--trigger", "p99"], "p99>5ms");
    assert_usage_error(
        &["record", "--ring", "5m", "-o", "x"],
        "cannot be used with",
    );
    // Without --ring, record still needs its file and duration.
    assert_usage_error(&["record"], "required");
}

#[test]
fn replay_refuses_what_is_not_a_dump() {
    let dir = std::env::temp_dir().join(format!("schedlat-cli-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("dump.jsonl");
    std::fs::write(&file, "{\"type\":\"interval\"}\n").unwrap();
    let (status, _, stderr) = run_schedlat(&["replay", dir.to_str().unwrap()]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not a schedlat JSON object") || stderr.contains("dump.jsonl:1"),
        "{stderr}"
    );
    let (status, _, stderr) = run_schedlat(&["replay", "/nonexistent/dump"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read /nonexistent/dump/dump.jsonl")
            || stderr.contains("cannot read /nonexistent/dump"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
