//! Root integration tests: load schedlat's real eBPF object into the running
//! kernel, drive workloads whose waits are known by construction, and check
//! what schedlat reports, in both hook modes, and against libbpf-tools
//! runqlat on the same workload at the same time.

use std::time::Duration;

use common::{
    SCHEDLAT, TracerProcess, cpu::CpuTimes, parse_json_lines, parse_log2_rows, require_root,
    slot_count, total, workload,
};

use crate::common;

const HOLD: Duration = Duration::from_millis(3);
const GAP: Duration = Duration::from_millis(2);
const ROUNDS: u32 = 200;

/// Every victim wakeup in `fifo_blocker_fifo_victim` waits HOLD = 3 ms: in
/// runqlat's log2 usecs view that is the 2048 -> 4095 slot, and in the fine
/// buckets it lies between 3.0 and 3.5 ms (the switch itself takes
/// microseconds): the buckets from the one holding 3.0 ms ([2816, 3071] us)
/// to the one holding 3.5 ms ([3328, 3583] us). The victim is SCHED_FIFO
/// too, below the blocker, so that it runs as soon as the hold ends: a
/// normal victim then competes with whatever else runs on the CPU, and
/// beside a busy loop there 56 and 103 of its 200 waits were in the slot,
/// the rest longer.
///
/// tp_btf can filter to this test process, which keeps other tasks' waits
/// out; classic tracepoints measure the whole system, where every task the
/// blocker preempts on the workload CPU waits a hold too: beside a busy
/// loop there, about as many as the victim (358 waits in the slot for 200
/// rounds). So the tracepoint run has a reference beside it, a tp_btf
/// tracer of the whole system attached before it and detached after it:
/// the same waits, measured by the mode the btf test checks; the
/// tracepoint run may count what that one counts, and no more.
fn check_fifo_blocker_waits(hook: &str) {
    if !require_root() {
        return;
    }
    let me = std::process::id().to_string();
    let mut args = vec!["--json", "--hook", hook];
    if hook == "btf" {
        args.extend(["-p", &me]);
    }
    let reference =
        (hook == "tp").then(|| TracerProcess::start(SCHEDLAT, &["--json", "--hook", "btf"]));
    let tracer = TracerProcess::start(SCHEDLAT, &args);
    let cpus = CpuTimes::now();
    workload::fifo_blocker_fifo_victim(workload::workload_cpu(), HOLD, GAP, ROUNDS);
    let busy = cpus.busy_since();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat exited with {status}");
    let reference = reference.map(|t| {
        let (status, lines) = t.stop_with(libc::SIGINT);
        assert!(status.success(), "the reference exited with {status}");
        parse_json_lines(&lines)
            .pop()
            .expect("the reference's interval")
    });
    let records = parse_json_lines(&lines);
    assert_eq!(records.len(), 1, "one final interval: {lines:?}");
    let r = &records[0];
    assert_eq!(
        r["hook"],
        if hook == "btf" {
            "tp_btf"
        } else {
            "tracepoint"
        }
    );
    assert_eq!(r["last"], true);

    let rounds = u64::from(ROUNDS);
    // Other tasks woken on that CPU during a hold also wait: allow a little.
    let noise = rounds / 10 + 10;
    let in_slot = |r: &serde_json::Value| {
        r["log2"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["low"] == 2048)
            .map_or(0, |s| s["count"].as_u64().unwrap())
    };
    // Nothing in the workload waits longer than a hold; only noise can.
    let longer = |r: &serde_json::Value| -> u64 {
        r["log2"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["low"].as_u64().unwrap() >= 4096)
            .map(|s| s["count"].as_u64().unwrap())
            .sum()
    };
    let slot = in_slot(r);
    let (most, longest) = reference.as_ref().map_or((rounds, 0), |whole| {
        (in_slot(whole).max(rounds), longer(whole))
    });
    let seen = reference.as_ref().map_or(String::new(), |_| {
        format!(
            "; the tp_btf reference of the whole system: {most} in the slot, {longest} over 4 ms"
        )
    });
    assert!(
        slot >= rounds * 95 / 100 && slot <= most + noise,
        "{hook}: expected {rounds} to {most} waits in 2048..4095 us, got {slot} ({busy}{seen}): {r}"
    );
    let precise: u64 = r["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["low_ns"].as_u64().unwrap() >= 2_816_000)
        .filter(|b| b["high_ns"].as_u64().is_some_and(|h| h <= 3_583_999))
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert!(
        precise >= rounds * 90 / 100,
        "{hook}: expected >= 90% of {rounds} waits within 3.0..3.5 ms, got {precise} ({busy}): {r}"
    );
    let longer = longer(r);
    assert!(
        longer <= longest + noise,
        "{hook}: {longer} waits over 4 ms ({busy}{seen}): {r}"
    );
    assert_eq!(r["discarded"]["negative_delta"], 0);
    assert_eq!(r["dropped"]["untracked_tid"], 0);
}

#[test]
fn btf_mode_puts_known_waits_in_their_bucket() {
    check_fifo_blocker_waits("btf");
}

#[test]
fn tracepoint_mode_puts_known_waits_in_their_bucket() {
    check_fifo_blocker_waits("tp");
}

/// schedlat and runqlat attached at the same time see the same events:
/// totals and the distribution agree. The workload's waits are built to sit
/// in the middle of their slots (SCHED_FIFO holds of 190 us, 750 us and
/// 3 ms: slots 128-255 us, 512-1023 us and 2048-4095 us), because the two
/// tools cannot agree to the microsecond: their programs run one after the
/// other on each tracepoint, so each wait is measured shorter by the tool
/// that stamps last at the wakeup and first at the switch, by the other's
/// run time (~0.1-1 us). Waits of a few microseconds (the system's own, here)
/// therefore cross the 2 and 4 us slot boundaries in one tool and not the
/// other.
///
/// With tp_btf both tools filter to this test process (`-p`, which runqlat
/// applies correctly: to the woken task and to prev), so neither counts the
/// rest of the system, nor what happens while the other one starts. Classic
/// tracepoints cannot filter by process, so that run is system wide and
/// allows for the waits schedlat counts while runqlat is still starting
/// (~30 ms of the system's wakeups): 200 more.
///
/// Tolerances: totals and every slot from 32 us up, 2% of the total plus 10
/// waits (the rare task preempted on its way to sleep, which runqlat drops
/// and schedlat counts); below 32 us, the cumulative count up to each slot,
/// 5% of the total plus 20 waits. The two tools' programs run one after
/// the other on each event, schedlat's first (attached first): its wakeup
/// stamp is earlier by its wakeup program's run, its switch stamp by its
/// switch program's, which runs longer, so runqlat's wait is that much
/// longer and a cluster of the blocker's own waits at 16 us crosses the
/// boundary in runqlat only (a rehearsal: 16-31 us schedlat 170, runqlat
/// 210, and up to 31 us 316 against 313).
fn check_agrees_with_runqlat(hook: &str, milliseconds: bool) {
    if !require_root() {
        return;
    }
    let me = std::process::id().to_string();
    let filtered = hook == "btf";
    let mut args = vec!["--hook", hook];
    let mut runqlat_args = vec![];
    if filtered {
        args.extend(["-p", &me]);
        runqlat_args.extend(["-p", &me]);
    }
    if milliseconds {
        args.push("-m");
        runqlat_args.push("-m");
    }
    let ours = TracerProcess::start(SCHEDLAT, &args);
    let theirs = TracerProcess::start("/usr/sbin/runqlat", &runqlat_args);
    let cpu = workload::workload_cpu();
    for hold_us in [190, 750, 3000] {
        workload::fifo_blocker(cpu, Duration::from_micros(hold_us), GAP, 100);
    }
    // Stop both at once.
    // SAFETY: signalling our own children.
    unsafe {
        libc::kill(ours.pid(), libc::SIGINT);
        libc::kill(theirs.pid(), libc::SIGINT);
    }
    let (status, our_lines) = ours.finish();
    assert!(status.success());
    let (_, their_lines) = theirs.finish();
    let (a, b) = (parse_log2_rows(&our_lines), parse_log2_rows(&their_lines));
    let (ta, tb) = (total(&a), total(&b));
    assert!(tb >= 300, "runqlat saw the workload: {their_lines:?}");
    eprintln!("{hook} (ms={milliseconds}): schedlat {ta} waits, runqlat {tb} waits");
    let startup = if filtered { 0 } else { 200 };
    let tolerance = |n: u64| n / 50 + 10 + startup;
    assert!(
        ta.abs_diff(tb) <= tolerance(tb),
        "{hook}: totals differ: schedlat {ta}, runqlat {tb}\nschedlat:\n{}\nrunqlat:\n{}",
        our_lines.join("\n"),
        their_lines.join("\n")
    );
    let below = |rows: &[common::Slot], high: u64| -> u64 {
        rows.iter()
            .filter(|s| s.high <= high)
            .map(|s| s.count)
            .sum()
    };
    let fine_limit = if milliseconds { 0 } else { 31 };
    for slot in a.iter().chain(&b).filter(|s| s.high <= fine_limit) {
        let (x, y) = (below(&a, slot.high), below(&b, slot.high));
        assert!(
            x.abs_diff(y) <= tb / 20 + 20 + startup,
            "{hook}: waits up to {} us: schedlat {x}, runqlat {y}\nschedlat:\n{}\nrunqlat:\n{}",
            slot.high,
            our_lines.join("\n"),
            their_lines.join("\n")
        );
    }
    for slot in a.iter().chain(&b).filter(|s| s.high > fine_limit) {
        let (x, y) = (slot_count(&a, slot.low), slot_count(&b, slot.low));
        assert!(
            x.abs_diff(y) <= tolerance(tb),
            "{hook}: slot {}..{}: schedlat {x}, runqlat {y}\nschedlat:\n{}\nrunqlat:\n{}",
            slot.low,
            slot.high,
            our_lines.join("\n"),
            their_lines.join("\n")
        );
    }
    // The same layout: same header line.
    let header = |lines: &[String]| lines.iter().find(|l| l.contains("distribution")).cloned();
    assert_eq!(header(&our_lines), header(&their_lines));
}

#[test]
fn btf_mode_agrees_with_runqlat() {
    check_agrees_with_runqlat("btf", false);
}

#[test]
fn tracepoint_mode_agrees_with_runqlat() {
    check_agrees_with_runqlat("tp", false);
}

#[test]
fn milliseconds_agree_with_runqlat() {
    check_agrees_with_runqlat("btf", true);
}

#[test]
fn interval_and_count_print_count_reports_then_exit() {
    if !require_root() {
        return;
    }
    let tracer = TracerProcess::start(SCHEDLAT, &["-v", "-T", "1", "2"]);
    let (status, lines) = tracer.finish();
    assert!(status.success());
    let summaries = lines.iter().filter(|l| l.starts_with("total ")).count();
    assert_eq!(summaries, 2, "{lines:?}");
    // -T: an HH:MM:SS line before each histogram.
    let stamps = lines
        .iter()
        .filter(|l| l.len() == 8 && l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':')
        .count();
    assert_eq!(stamps, 2, "{lines:?}");
}

/// SIGINT and SIGTERM both end the run with the final histogram printed.
#[test]
fn signals_flush_the_final_histogram() {
    if !require_root() {
        return;
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let tracer = TracerProcess::start(SCHEDLAT, &["-v"]);
        workload::ping_pong(workload::workload_cpu(), 2_000);
        let (status, lines) = tracer.stop_with(signal);
        assert!(status.success(), "signal {signal}: {status}");
        let rows = parse_log2_rows(&lines);
        assert!(total(&rows) >= 2_000, "signal {signal}: {lines:?}");
        let summary = lines.iter().find(|l| l.starts_with("total ")).unwrap();
        assert!(
            summary.contains("dropped 0") && summary.contains("discarded"),
            "{summary}"
        );
    }
}

/// A closed stdout (`schedlat 1 | head -1`) ends schedlat cleanly, status 0.
#[test]
fn closed_stdout_ends_the_run_cleanly() {
    use std::io::BufRead;
    if !require_root() {
        return;
    }
    let mut child = std::process::Command::new(SCHEDLAT)
        .arg("1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Read the banner, then close the pipe, as `head -1` does.
    let mut banner = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.starts_with(common::BANNER), "{banner}");
    // schedlat finds out at its next report, a second later.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "schedlat kept running after its reader left"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn explicit_missing_btf_is_a_clear_error() {
    if !require_root() {
        return;
    }
    for hook in ["btf", "auto"] {
        let (status, _, err) =
            common::run_schedlat(&["--hook", hook, "--btf", "/nonexistent/vmlinux", "1", "1"]);
        assert_eq!(status.code(), Some(1), "{hook}: {err}");
        // Issue 19: a path the user gave that is not there is a typo, not
        // a kernel built without BTF.
        assert!(
            err.contains("BTF file /nonexistent/vmlinux does not exist"),
            "{err}"
        );
        assert!(!err.contains("CONFIG_DEBUG_INFO_BTF"), "{err}");
        assert!(
            err.contains("leave it out"),
            "says what to do instead: {err}"
        );
    }
}

#[test]
fn unreadable_tracefs_is_a_clear_error() {
    if !require_root() {
        return;
    }
    let (status, _, err) =
        common::run_schedlat(&["--hook", "tp", "--tracefs", "/nonexistent", "1", "1"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("/nonexistent/events/sched/sched_switch/format") && err.contains("tracefs"),
        "{err}"
    );
}

#[test]
fn auto_mode_falls_back_to_tracepoints_without_btf() {
    if !require_root() {
        return;
    }
    // Simulate a kernel without BTF through the environment override.
    let out = std::process::Command::new(SCHEDLAT)
        .args(["--json", "1", "1"])
        .env("SCHEDLAT_BTF", "/nonexistent/vmlinux")
        .output()
        .unwrap();
    // An explicit BTF path must exist, even in auto mode: a clear error.
    assert_eq!(out.status.code(), Some(1));
    // Without any override, auto picks tp_btf on this kernel (it has BTF).
    let (status, stdout, err) = common::run_schedlat(&["--json", "1", "1"]);
    assert!(status.success(), "{err}");
    assert!(err.contains("hook mode tp_btf"), "{err}");
    let v = parse_json_lines(&[stdout.trim().to_string()]);
    assert_eq!(v[0]["hook"], "tp_btf");
}

#[test]
fn without_privileges_says_what_is_needed() {
    if !require_root() {
        return;
    }
    // setpriv (util-linux) drops to nobody with no capabilities.
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(SCHEDLAT)
        .args(["1", "1"])
        .output()
        .expect("setpriv (util-linux) runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CAP_BPF") && err.contains("root"), "{err}");
}

/// Issue 19: `--cpu` alone reads as a sentence ("only waits of ending on
/// CPUs 0" before).
#[test]
fn a_cpu_filter_is_announced_as_a_sentence() {
    if !require_root() {
        return;
    }
    let (status, _, err) = common::run_schedlat(&["--cpu", "0", "1", "1"]);
    assert!(status.success(), "{err}");
    assert!(
        err.contains("schedlat: only waits that end on CPUs 0\n"),
        "{err}"
    );
}
