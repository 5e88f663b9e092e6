//! Root: `schedlat check`, the preflight. As root every mode loads,
//! attaches and detaches and nothing stays in the kernel; as uid 65534
//! (setpriv) without capabilities it fails with the fix and exit 1; with
//! CAP_BPF and CAP_PERFMON alone every tp_btf mode runs and classic
//! tracepoints need tracefs, as the report says. The JSON is
//! docs/json.md's `schedlat.check.v1`.

use std::{
    os::unix::fs::PermissionsExt,
    process::{Command, Output},
    thread,
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root};
use serde_json::Value;

use crate::common;

const MODES: [&str; 6] = [
    "histogram",
    "tracepoint",
    "per-process",
    "cgroups",
    "victims",
    "slow",
];

/// Every fact the report holds, in its order.
const CHECKS: [&str; 17] = [
    "kernel",
    "btf",
    "capabilities",
    "bpf",
    "ring-buffer",
    "lockdown",
    "memlock",
    "tracefs",
    "debugfs",
    "scheduler",
    "cgroups",
    "cgroup-root",
    "held-by",
    "queue-depth",
    "pid-namespace",
    "psi",
    "bpf-stats",
];

/// schedlat as uid 65534 with exactly `caps` (`+bpf,+perfmon`, or empty
/// for none), ambient so that they survive the exec.
fn as_nobody(caps: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if caps.is_empty() {
        cmd.arg("--inh-caps=-all");
    } else {
        cmd.args([
            format!("--inh-caps=-all,{caps}"),
            format!("--ambient-caps=-all,{caps}"),
        ]);
    }
    cmd.arg(SCHEDLAT)
        .args(args)
        .output()
        .expect("setpriv (util-linux) runs")
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn mode<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == name)
        .unwrap_or_else(|| panic!("no mode {name}: {report}"))
}

fn fact<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

/// Each fact is named, has a status, says what was found, and carries a
/// fix exactly when it is not ok.
fn assert_facts_are_whole(report: &Value) {
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = CHECKS
        .iter()
        .copied()
        // The ring buffer is probed only where maps can be made at all.
        .filter(|n| *n != "ring-buffer" || names.contains(n))
        .collect();
    assert_eq!(names, expected, "{report}");
    for c in report["checks"].as_array().unwrap() {
        let status = c["status"].as_str().unwrap();
        assert!(matches!(status, "ok" | "warn" | "fail"), "{c}");
        assert!(!c["found"].as_str().unwrap().is_empty(), "{c}");
        assert_eq!(c["fix"].is_string(), status != "ok", "{c}");
    }
}

/// Waits (bounded) for the kernel's BPF objects to settle: maps are freed
/// after an RCU grace period.
fn settled_objects() -> [Vec<u32>; 3] {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut before = common::bpf::objects();
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = common::bpf::objects();
        if now == before || Instant::now() > deadline {
            return now;
        }
        before = now;
    }
}

#[test]
fn as_root_every_mode_runs_and_nothing_stays_in_the_kernel() {
    if !require_root() {
        return;
    }
    let before = settled_objects();
    let all = MODES.join(",");
    let out = Command::new(SCHEDLAT)
        .args(["check", "--json", "--require", &all])
        .output()
        .unwrap();
    let report = report(&out);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["schema"], "schedlat.check.v1");
    assert_eq!(report["ready"], true);
    assert_eq!(report["required"], serde_json::json!(MODES));
    for name in MODES {
        let m = mode(&report, name);
        let hook = if name == "tracepoint" {
            "tracepoint"
        } else {
            "tp_btf"
        };
        assert_eq!(
            (&m["runs"], &m["hook"]),
            (&Value::from(true), &Value::from(hook)),
            "{m}"
        );
        assert!(m["error"].is_null() && m["needs"].is_string(), "{m}");
    }
    assert_facts_are_whole(&report);
    for name in ["capabilities", "bpf", "ring-buffer", "btf", "tracefs"] {
        assert_eq!(fact(&report, name)["status"], "ok", "{report}");
    }
    let left = settled_objects();
    let stayed: Vec<Vec<u32>> = left
        .iter()
        .zip(&before)
        .map(|(now, then)| {
            now.iter()
                .filter(|id| !then.contains(id))
                .copied()
                .collect()
        })
        .collect();
    assert!(
        stayed.iter().all(Vec::is_empty),
        "programs, maps, links left in the kernel by check: {stayed:?}"
    );

    // The text says the same.
    let out = Command::new(SCHEDLAT).arg("check").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ready: histogram can run here"), "{text}");
    for name in MODES {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(name) && l.contains("runs (")),
            "{name}: {text}"
        );
    }
}

#[test]
fn without_capabilities_it_fails_with_the_fix_and_exit_1() {
    if !require_root() {
        return;
    }
    let out = as_nobody("", &["check", "--json"]);
    let report = report(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["ready"], false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("histogram cannot run here"), "{stderr}");
    assert_facts_are_whole(&report);
    let caps = fact(&report, "capabilities");
    assert_eq!(caps["status"], "fail", "{caps}");
    let fix = caps["fix"].as_str().unwrap();
    assert!(
        fix.contains("CAP_BPF") && fix.contains("CAP_PERFMON"),
        "{fix}"
    );
    assert!(
        caps["found"].as_str().unwrap().contains("uid 65534"),
        "{caps}"
    );
    for name in MODES {
        let m = mode(&report, name);
        assert_eq!(m["runs"], false, "{m}");
        assert!(m["error"].as_str().unwrap().contains("CAP_BPF"), "{m}");
        // The pointer to `schedlat check` is for the other commands.
        assert!(
            !m["error"].as_str().unwrap().contains("schedlat check"),
            "{m}"
        );
    }

    // The other commands point at check.
    let out = as_nobody("", &["1", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`schedlat check`"), "{stderr}");
}

#[test]
fn bpf_and_perfmon_alone_run_the_tp_btf_modes() {
    if !require_root() {
        return;
    }
    let btf_modes = "histogram,per-process,cgroups,victims,slow";
    let out = as_nobody(
        "+bpf,+perfmon",
        &["check", "--json", "--require", btf_modes],
    );
    let report = report(&out);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_facts_are_whole(&report);
    assert_eq!(fact(&report, "capabilities")["status"], "ok", "{report}");
    for name in btf_modes.split(',') {
        assert_eq!(mode(&report, name)["hook"], "tp_btf", "{report}");
    }
    // Classic tracepoints read tracefs, mode 0700 root by default: without
    // CAP_DAC_READ_SEARCH they cannot run, and check says so, with why.
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|d| std::fs::metadata(format!("{d}/events")).ok().map(|_| *d))
        .expect("tracefs is mounted");
    let searchable = std::fs::metadata(tracefs).unwrap().permissions().mode() & 0o001 != 0;
    let tp = mode(&report, "tracepoint");
    assert_eq!(tp["runs"], Value::from(searchable), "{tracefs}: {tp}");
    if !searchable {
        assert!(
            tp["error"]
                .as_str()
                .unwrap()
                .contains("CAP_DAC_READ_SEARCH"),
            "{tp}"
        );
        assert_eq!(fact(&report, "tracefs")["status"], "warn", "{report}");
        let out = as_nobody("+bpf,+perfmon", &["check", "--require", "tracepoint"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.contains("not ready: tracepoint"), "{text}");
    }
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    let out = Command::new(SCHEDLAT)
        .args(["check", "--require", "histogram,bogus"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("per-process"),
        "the modes are listed: {stderr}"
    );
}

/// Issue 48 item 13: inside a user namespace (`unshare -U`, a rootless
/// container) schedlat held every capability there, reported them present
/// and blamed an LSM for bpf()'s EPERM. The kernel checks BPF's
/// capabilities against the host's namespace; check says so now, and the
/// other commands too.
#[test]
fn in_a_user_namespace_the_capabilities_are_said_not_to_allow_bpf() {
    if !require_root() {
        return;
    }
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", SCHEDLAT, "check", "--json"])
        .output()
        .expect("unshare (util-linux) runs");
    let report = report(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_facts_are_whole(&report);
    let caps = fact(&report, "capabilities");
    assert_eq!(caps["status"], "fail", "{caps}");
    assert!(
        caps["found"]
            .as_str()
            .unwrap()
            .contains("in a user namespace other than the host's: they do not allow BPF"),
        "{caps}"
    );
    let bpf = fact(&report, "bpf");
    assert!(!bpf["fix"].as_str().unwrap_or("").contains("LSM"), "{bpf}");
    for name in MODES {
        let m = mode(&report, name);
        assert_eq!(m["runs"], false, "{m}");
        assert!(
            m["error"].as_str().unwrap().contains("user namespace"),
            "{m}"
        );
    }
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", SCHEDLAT, "1", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("user namespace other than the host's"),
        "{stderr}"
    );
}
