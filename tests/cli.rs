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
