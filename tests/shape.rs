//! Root tests of the shape verdict and of `compare` on the real kernel:
//! scenarios built in the test, measured with `-p` on this test process so
//! that only the scenario's own waits count.

mod common;

use std::time::Duration;

use common::{SCHEDLAT, TracerProcess, cpu::CpuTimes, parse_json_lines, require_root, workload};

/// Runs `scenario` while schedlat measures this process; returns the JSON
/// object of the whole run, and how busy the CPUs were meanwhile: the
/// verdicts assume that the scenario's CPU runs little else, so every
/// failure message says how far that held.
fn measure(scenario: impl FnOnce()) -> (serde_json::Value, String) {
    assert!(require_root(), "callers check require_root() first");
    let me = std::process::id().to_string();
    let tracer = TracerProcess::start(SCHEDLAT, &["--json", "-p", &me]);
    let cpus = CpuTimes::now();
    scenario();
    let busy = cpus.busy_since();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat: {status}");
    let r = parse_json_lines(&lines).pop().expect("one JSON object");
    (r, busy)
}

fn verdict(r: &serde_json::Value) -> &str {
    r["shape"]["verdict"].as_str().unwrap()
}

const PERIOD: Duration = Duration::from_millis(1);

#[test]
fn a_sleeper_on_an_idle_cpu_is_healthy() {
    if !require_root() {
        return;
    }
    let (r, busy) = measure(|| workload::sleeper(workload::workload_cpu(), PERIOD, 1500));
    assert!(r["count"].as_u64().unwrap() >= 1000, "{r} ({busy})");
    assert_eq!(verdict(&r), "healthy", "{} ({busy})", r["shape"]["summary"]);
}

/// The sleeper-and-hogs scenario: a 1 ms sleeper sharing its CPU with 6 CPU hogs. Under EEVDF
/// most wakeups preempt a hog at once, but some wait for a hog's whole slice:
/// from the sleeper's point of view that is a long tail.
#[test]
fn a_sleeper_sharing_a_cpu_with_hogs_is_a_long_tail() {
    if !require_root() {
        return;
    }
    let cpu = workload::workload_cpu();
    let (r, busy) = measure(|| {
        let _hogs = workload::Hogs::start(cpu, 6);
        workload::sleeper(cpu, PERIOD, 2000);
    });
    assert_eq!(
        verdict(&r),
        "long-tail",
        "{} ({busy})",
        r["shape"]["summary"]
    );
    let p = &r["percentiles"];
    assert!(p["p50_ns"].as_u64().unwrap() < 100_000, "{r} ({busy})");
}

/// Threads that all want the CPU all the time each wait for the others'
/// slices: the whole distribution sits at slice scale.
#[test]
fn threads_contending_for_one_cpu_are_a_shifted_mean() {
    if !require_root() {
        return;
    }
    let (r, busy) =
        measure(|| workload::spinning_threads(workload::workload_cpu(), 4, Duration::from_secs(2)));
    assert_eq!(
        verdict(&r),
        "shifted-mean",
        "{} ({busy})",
        r["shape"]["summary"]
    );
}

/// The last step of the diagnosis (docs/architecture.md): move the hogs off the sleeper's CPU and
/// re-measure; `compare` must call it an improvement, with a lower p99.
#[test]
fn compare_reports_moving_the_hogs_away_as_an_improvement() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (before, after) = (dir.join("before.json"), dir.join("after.json"));
    let cpu = workload::workload_cpu();
    let other = if cpu == 0 { 1 } else { 0 };
    let mut busy = Vec::new();
    for (file, hog_cpu) in [(&before, cpu), (&after, other)] {
        let (r, during) = measure(|| {
            let _hogs = workload::Hogs::start(hog_cpu, 6);
            workload::sleeper(cpu, PERIOD, 2000);
        });
        std::fs::write(file, format!("{r}\n")).unwrap();
        busy.push(during);
    }
    let (status, out, err) = common::run_schedlat(&[
        "compare",
        "--json",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // With the hogs on the other CPU the sleeper's CPU is quiet but for the
    // rest of the machine's tasks: the messages say how busy each run was.
    let busy = format!("before {}; after {}", busy[0], busy[1]);
    assert_eq!(v["change"], "improved", "{v} ({busy})");
    let p99 = |side: &str| v[side]["percentiles"]["p99_ns"].as_u64().unwrap();
    assert!(
        p99("after") < p99("before") / 2,
        "p99 {} -> {} ({busy}, sleeper on CPU {cpu})",
        p99("before"),
        p99("after")
    );
    // The text form says so too.
    let (_, text, _) =
        common::run_schedlat(&["compare", before.to_str().unwrap(), after.to_str().unwrap()]);
    assert!(text.contains("change: improved"), "{text}");
    assert!(text.contains("before") && text.contains("p99"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_histogram_mode_prints_percentiles_and_a_verdict() {
    if !require_root() {
        return;
    }
    let tracer = TracerProcess::start(SCHEDLAT, &[]);
    workload::ping_pong(workload::workload_cpu(), 2_000);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success());
    let p = lines
        .iter()
        .find(|l| l.starts_with("p50 "))
        .expect("percentile line");
    assert!(p.contains("p99.9") && p.contains("max"), "{p}");
    let s = lines
        .iter()
        .find(|l| l.starts_with("shape: "))
        .expect("shape line");
    assert!(s.contains("base slice"), "{s}");
}

#[test]
fn a_missing_pid_is_a_clear_error() {
    if !require_root() {
        return;
    }
    let (status, _, err) = common::run_schedlat(&["-p", "4999999", "1", "1"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("no process with PID 4999999"), "{err}");
    let (status, _, err) = common::run_schedlat(&["-p", "1", "--hook", "tp", "1", "1"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("-p needs the tp_btf hook mode"), "{err}");
}

/// A target that exits ends the run, with its waits so far reported.
#[test]
fn the_run_ends_when_the_target_exits() {
    if !require_root() {
        return;
    }
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            "i=0; while [ $i -lt 300 ]; do sleep 0.005; i=$((i+1)); done",
        ])
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let tracer = TracerProcess::start(SCHEDLAT, &["--json", "-p", &pid]);
    child.wait().unwrap();
    let (status, lines) = tracer.finish();
    assert!(status.success());
    let r = parse_json_lines(&lines).pop().expect("the final report");
    assert_eq!(r["last"], true);
}
