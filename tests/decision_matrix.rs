//! Root: the decision split's rules (docs/decision.md) on scenarios whose
//! answer follows from the scheduler's code, on every kernel: here with the
//! other root tests, and inside QEMU on 5.10, 6.1, 6.12, 7.x and 7.x-rt (`cargo
//! xtask vm-test`). Under the VM's emulation every wait is inflated, so the
//! checks are on which rule the kernel applied, and on latency only as a
//! before/after comparison within one run.
//!
//! - a SCHED_BATCH sleeper beside a fair loop is declined by the policy
//!   gate (check_preempt_wakeup_fair() returns before any pick);
//! - a sleeper alone wakes onto an idle CPU;
//! - a worker beside fair loops is declined by the kernel's own fair rule:
//!   EEVDF's (protected, not eligible, later deadline) from 6.6, the wakeup
//!   granularity before, where what CFS cannot give (the prediction, the
//!   share) is null and said so;
//! - on 6.12+, a sleeper given a short custom slice (sched_setattr's
//!   sched_runtime) beside loops whose slices RUN_TO_PARITY protects is
//!   never declined as protected (PREEMPT_SHORT), and mostly asks; where
//!   the CPU is not emulated, protection declined it before, and its p99
//!   drops (`compare` says improved);
//! - on PREEMPT_RT a timer's wakeups run in the ktimers thread (SCHED_FIFO)
//!   on the sleeper's CPU: the rule met there is `other_class`;
//! - every report says the kernel's context (the live base slice, HZ, the
//!   preemption model: `rt` on PREEMPT_RT).

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, TracerProcess,
    cpu::CpuTimes,
    decision_names::DECLINED_RULES,
    kernel::{emulated, kernel_release, kernel_version, set_custom_slice},
    kernel_trace::{Trace, TracedWaits, waits_of},
    parse_json_lines, require_root, run_schedlat, workload,
};
use serde_json::Value;

/// A thread named `name` on the workload CPU that computes `work` of its
/// own CPU time and sleeps `sleep`, over and over, beside `hogs` spinning
/// threads on the same CPU; everything stops when dropped.
struct Scenario {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    tid: u32,
}

impl Scenario {
    fn start(
        name: &str,
        hogs: usize,
        (work, sleep): (Duration, Duration),
        setup: impl FnOnce() + Send + 'static,
    ) -> Scenario {
        let cpu = workload::workload_cpu();
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads: Vec<JoinHandle<()>> = (0..hogs)
            .map(|_| {
                let stop = stop.clone();
                thread::spawn(move || {
                    workload::pin_current_thread(cpu);
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let (tx, rx) = mpsc::channel();
        let running = stop.clone();
        let sleeper = thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                workload::pin_current_thread(cpu);
                setup();
                // SAFETY: no arguments.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                while !running.load(Ordering::Relaxed) {
                    let until = workload::thread_cpu() + work;
                    while workload::thread_cpu() < until {
                        std::hint::spin_loop();
                    }
                    thread::sleep(sleep);
                }
            })
            .unwrap();
        threads.push(sleeper);
        let tid = rx.recv().unwrap();
        // The loops and the sleeper settle into their steady state.
        thread::sleep(Duration::from_millis(200));
        Scenario { stop, threads, tid }
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// This process's CPU time, all its threads (getrusage(RUSAGE_SELF)).
fn process_cpu() -> Duration {
    // SAFETY: a zeroed rusage is a valid one to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `schedlat --json -t TID` for `duration`: its one interval.
fn traced(tid: u32, duration: Duration) -> Value {
    let tracer = start_tracing(tid);
    thread::sleep(duration);
    last_interval(tracer)
}

/// [`traced`], with the kernel's own trace of the workload CPU over the
/// same window: the thread's waits as the trace shows them. The trace is
/// set up first and switched on once schedlat is attached, and off just
/// before schedlat's last read, so the two windows differ by a write to
/// tracefs and a signal's delivery. Every kernel of the matrix mounts
/// tracefs; a run that cannot trace fails under CI.
fn traced_beside_the_kernels_trace(tid: u32, duration: Duration) -> (Value, Option<TracedWaits>) {
    let trace = Trace::prepare(workload::workload_cpu(), false);
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        trace.is_some() || !ci,
        "CI=true: tracefs refused an instance on {}",
        kernel_release()
    );
    let tracer = start_tracing(tid);
    let trace = trace.filter(Trace::on);
    thread::sleep(duration);
    if let Some(t) = &trace {
        t.off();
    }
    let interval = last_interval(tracer);
    (interval, trace.map(|t| waits_of(&t.text(), tid)))
}

fn start_tracing(tid: u32) -> TracerProcess {
    TracerProcess::start(SCHEDLAT, &["--json", "-t", &tid.to_string()])
}

/// Stops `tracer` as Ctrl-C does: its last interval.
fn last_interval(tracer: TracerProcess) -> Value {
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(
        status.success(),
        "schedlat on {}: {status}",
        kernel_release()
    );
    parse_json_lines(&lines)
        .pop()
        .unwrap_or_else(|| panic!("no interval: {}", lines.join("\n")))
}

/// The interval's decision object, which must be there on every kernel of
/// the matrix (tp_btf and BTF).
fn decision(interval: &Value) -> &Value {
    let d = &interval["decision"];
    assert!(
        d.is_object(),
        "no decision split on {}: {interval}",
        kernel_release()
    );
    d
}

fn count(d: &Value, class: &str) -> u64 {
    d["decisions"][class]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no decisions.{class}: {d}"))
}

/// The wakeups that asked for the CPU (at once, lazily, or already asked).
fn asked(d: &Value) -> u64 {
    ["requested", "slice_ended", "pending", "lazy"]
        .iter()
        .map(|c| count(d, c))
        .sum()
}

const EEVDF_RULES: [&str; 3] = ["protected", "not_eligible", "later_deadline"];

fn declined(d: &Value) -> u64 {
    DECLINED_RULES.iter().map(|r| count(d, r)).sum()
}

/// The rules that declined any wakeup, with their counts.
fn rules_seen(d: &Value) -> Vec<(&'static str, u64)> {
    DECLINED_RULES
        .iter()
        .map(|&r| (r, count(d, r)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn set_policy(policy: libc::c_int) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: the calling thread, a valid parameter.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    assert_eq!(
        rc,
        0,
        "sched_setscheduler: {}",
        std::io::Error::last_os_error()
    );
}

/// A SCHED_BATCH wakee never preempts (check_preempt_wakeup_fair(), and
/// check_preempt_wakeup() on CFS, return before comparing): a wakeup that
/// left the need-resched bit unset names the policy gate.
#[test]
fn a_batch_sleeper_is_declined_by_the_policy_gate() {
    if !require_root() {
        return;
    }
    let busy = CpuTimes::now();
    let case = Scenario::start(
        "decision-batch",
        1,
        (Duration::ZERO, Duration::from_millis(1)),
        || set_policy(libc::SCHED_BATCH),
    );
    let interval = traced(case.tid, Duration::from_secs(2));
    drop(case);
    let d = decision(&interval);
    let (declined, gate) = (declined(d), count(d, "policy_gate"));
    // On PREEMPT_RT the ktimers thread held the CPU at each wakeup
    // (measured on 6.1-rt: 849 of 849 declined wakeups other_class).
    let gate = if common::kernel::preempt_rt() {
        count(d, "other_class")
    } else {
        gate
    };
    eprintln!(
        "{}: batch sleeper: {} waits, asked {}, declined {declined} ({:?}) ({})",
        kernel_release(),
        d["waits"],
        asked(d),
        rules_seen(d),
        busy.busy_since()
    );
    assert!(
        declined >= 20 && gate * 100 >= declined * 95,
        "{}: not requested {declined}, policy gate (other class on PREEMPT_RT) {gate} ({})",
        kernel_release(),
        busy.busy_since()
    );
}

/// Woken onto a CPU with nothing else to run, the wakee finds the idle
/// task there: `idle`, and the wait ends with the idle task switched out
/// (the cause split's `held_by.idle`), whatever else runs on the machine.
#[test]
fn a_sleeper_alone_wakes_onto_an_idle_cpu() {
    if !require_root() {
        return;
    }
    let busy = CpuTimes::now();
    let case = Scenario::start(
        "decision-idle",
        0,
        (Duration::ZERO, Duration::from_millis(2)),
        || {},
    );
    let interval = traced(case.tid, Duration::from_secs(1));
    drop(case);
    let d = decision(&interval);
    let waits = d["waits"].as_u64().unwrap();
    let idle = count(d, "idle");
    let held_by_idle = interval["causes"]["held_by"]["idle"]["count"]
        .as_u64()
        .unwrap();
    let cpu_busy = busy
        .shares_since()
        .get(workload::workload_cpu())
        .map_or(0, |s| (s * 100.0) as u64);
    eprintln!(
        "{}: lone sleeper: {waits} waits, idle {idle}, idle task switched out {held_by_idle} ({})",
        kernel_release(),
        busy.busy_since()
    );
    assert!(waits >= 100, "{waits} waits ({})", busy.busy_since());
    assert!(
        idle.abs_diff(held_by_idle) <= 3 + idle.max(held_by_idle) / 10,
        "idle at the wakeup {idle}, idle task switched out {held_by_idle}, of {waits} ({})",
        busy.busy_since()
    );
    // On a CPU mostly idle, most wakeups find it so; not on PREEMPT_RT,
    // where the timer's wakeup runs in the ktimers thread on that CPU
    // (measured on 6.1-rt: 0 of 358 idle, and 0 idle task switched out).
    if cpu_busy < 50 && !common::kernel::preempt_rt() {
        assert!(
            idle * 100 >= waits * 60,
            "idle {idle} of {waits} ({})",
            busy.busy_since()
        );
    }
}

/// The worker of docs/decision.md (0.8 ms of CPU, 0.5 ms of sleep) beside
/// two fair loops: many of its wakeups do not preempt, and the rule named
/// is this kernel's. EEVDF (6.6+): its rules only, with the prediction
/// and the share; CFS: the wakeup granularity only, and the prediction and
/// share null, as the text says.
#[test]
fn the_rule_that_declines_a_fair_wakeup_is_this_kernels() {
    if !require_root() {
        return;
    }
    let busy = CpuTimes::now();
    let case = Scenario::start(
        "decision-worker",
        2,
        (Duration::from_micros(800), Duration::from_micros(500)),
        || {},
    );
    let tid = case.tid.to_string();
    let (interval, kernel_trace) =
        traced_beside_the_kernels_trace(case.tid, Duration::from_secs(3));
    // The text report of the same case: its decision block and the
    // kernel's context, on every kernel.
    let (status, text, stderr) = run_schedlat(&["-v", "-t", &tid, "2", "1"]);
    drop(case);
    assert!(status.success(), "{stderr}");
    let d = decision(&interval);
    let declined = declined(d);
    let kernel = &d["kernel"];
    eprintln!(
        "{}: worker: {} waits, asked {}, declined {declined} ({:?}), kernel {kernel}, predicted {}, share {} ({})",
        kernel_release(),
        d["waits"],
        asked(d),
        rules_seen(d),
        d["predicted"],
        d["share"],
        busy.busy_since()
    );
    let report: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("decision:") || l.starts_with("  ") && !l.contains('|'))
        .collect();
    eprintln!(
        "{}: the text report's lines:\n{}",
        kernel_release(),
        report.join("\n")
    );
    assert!(
        declined >= 10,
        "{}: only {declined} declined wakeups ({})",
        kernel_release(),
        busy.busy_since()
    );
    if common::kernel::preempt_rt() {
        // The ktimers thread held the CPU at the wakeups (6.1-rt: 590 of
        // 590 other_class, 7.2-rt: 897 of 897): no fair rule was consulted.
        assert_eq!(
            kernel["rules"],
            if kernel_version() >= (6, 6) {
                "eevdf"
            } else {
                "cfs"
            },
            "{kernel}"
        );
        let other = count(d, "other_class");
        assert!(
            other * 100 >= declined * 95,
            "{}: other_class {other} of {declined} declined: {:?}",
            kernel_release(),
            rules_seen(d)
        );
        if kernel_version() < (6, 6) {
            assert!(d["predicted"].is_null() && d["share"].is_null(), "{d}");
        }
    } else if kernel_version() >= (6, 6) {
        assert_eq!(kernel["rules"], "eevdf", "{kernel}");
        let eevdf: u64 = EEVDF_RULES.iter().map(|r| count(d, r)).sum();
        assert!(
            eevdf * 100 >= declined * 95 && count(d, "wakeup_granularity") == 0,
            "{}: EEVDF rules {eevdf} of {declined} declined: {:?}",
            kernel_release(),
            rules_seen(d)
        );
        assert!(
            d["predicted"]["waits"].as_u64() > Some(0),
            "{}",
            d["predicted"]
        );
        assert!(d["share"]["mean"].as_f64().is_some(), "{}", d["share"]);
    } else {
        assert_eq!(kernel["rules"], "cfs", "{kernel}");
        assert!(kernel["protection"].is_null(), "{kernel}");
        let gran = count(d, "wakeup_granularity");
        assert!(
            gran * 100 >= declined * 95 && EEVDF_RULES.iter().all(|r| count(d, r) == 0),
            "{}: wakeup_granularity {gran} of {declined} declined: {:?}",
            kernel_release(),
            rules_seen(d)
        );
        // What the CFS rule cannot give is null, not 0, and the text says so.
        assert!(d["predicted"].is_null(), "{}", d["predicted"]);
        assert!(d["share"].is_null(), "{}", d["share"]);
        assert!(
            text.contains("no prediction nor fair share on CFS"),
            "no CFS note in: {text}"
        );
    }
    assert!(text.contains("decision: "), "no decision block: {text}");
    // The kernel's own trace of the same window agrees, wakeup by wakeup
    // class: a need-resched bit (full or lazy) set at sched_wakeup or not,
    // and the switches to others before the worker ran.
    if let Some(traced) = kernel_trace {
        agrees_with_the_trace(d, &traced);
    }
}

/// schedlat's wakeups by asked / not asked and pass-overs 0, 1, 2, 3+
/// against the trace's bit set / clear and switches before the task ran
/// (`TracedWaits::disagreement`). A wakeup onto the idle task or with the
/// bit already set counts as set.
fn agrees_with_the_trace(d: &Value, traced: &TracedWaits) {
    const PASSES: [&str; 4] = ["0", "1", "2", "3+"];
    const SET: [&str; 5] = ["requested", "slice_ended", "pending", "lazy", "idle"];
    let (mut set, mut clear) = ([0u64; 4], [0u64; 4]);
    for cell in d["table"].as_array().expect("the table") {
        let (Some(class), Some(pass)) = (cell["decision"].as_str(), cell["pass_overs"].as_str())
        else {
            continue;
        };
        let Some(i) = PASSES.iter().position(|&p| p == pass) else {
            continue;
        };
        let n = cell["count"].as_u64().unwrap_or(0);
        if SET.contains(&class) {
            set[i] += n;
        } else if DECLINED_RULES.contains(&class) {
            clear[i] += n;
        }
    }
    let total: u64 = traced.flag_set.iter().chain(&traced.flag_clear).sum();
    assert!(total >= 50, "{}: {total} traced wakeups", kernel_release());
    if let Some(said) = traced.disagreement(set, clear) {
        panic!("{}: {said}", kernel_release());
    }
}

/// Every report says the kernel's context: the release, the base slice
/// and where it was read, HZ, and the preemption model (`rt` on a
/// PREEMPT_RT build).
#[test]
fn the_report_says_the_kernels_scheduling_context() {
    if !require_root() {
        return;
    }
    let (status, text, stderr) = run_schedlat(&["-v", "1", "1"]);
    assert!(status.success(), "{stderr}");
    let context: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("kernel: "))
        .take(3)
        .collect();
    eprintln!("{}:\n{}", kernel_release(), context.join("\n"));
    let first = context
        .first()
        .unwrap_or_else(|| panic!("no kernel line: {text}"));
    assert!(first.contains(&kernel_release()), "{first}");
    assert!(first.contains("base slice"), "{first}");
    let (status, json, stderr) = run_schedlat(&["--json", "1", "1"]);
    assert!(status.success(), "{stderr}");
    let interval = parse_json_lines(&json.lines().map(String::from).collect::<Vec<_>>())
        .pop()
        .expect("an interval");
    let k = &interval["kernel_context"];
    eprintln!("{}: kernel_context {k}", kernel_release());
    let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
    if version.contains("PREEMPT_RT") {
        assert_eq!(k["preemption"]["model"], "rt", "{k}");
        assert!(first.contains("preemption rt"), "{first}");
    }
    // EEVDF kernels print se.slice in /proc/PID/sched: the slice is live.
    if kernel_version() >= (6, 6) {
        assert_eq!(k["base_slice"]["live"], true, "{k}");
    }
    // Where the kernel's configuration is published, HZ and the bound.
    if k["hz"].is_u64() && k["base_slice"]["live"] == true {
        assert!(k["design_bound_ns"].is_u64(), "{k}");
    }
}

/// 6.12+: a sleeper whose custom slice (100 us) is shorter than the
/// loops' base slice is not held off by their protected slice
/// (PREEMPT_SHORT, kernel/sched/fair.c check_preempt_wakeup_fair()): no
/// wakeup of it is declined as `protected` once the slice is set, and
/// most ask for the CPU. The same thread is recorded before and after the
/// change and `compare`d.
///
/// Where the CPU is not emulated, the latency too. Beside six loops a
/// sleeper that sleeps 300 us is declined as `protected` on a few to a
/// fifth of its wakeups (RUN_TO_PARITY guards only a running loop that is
/// still eligible: beside one or two loops the sleeper's own lag keeps the
/// loop ineligible and protection declines almost nothing), and each
/// such wait lasts to the tick after the loop's slice ends, up to 4 ms at
/// HZ 250: those waits make the p99. With the short slice they preempt
/// at once. Measured on the 2-CPU 6.18 VM (3 s each side, 4 runs on a
/// quiet CPU): protected 4.1-23% of the wakeups and every declined one,
/// p99 3.61-3.66 ms; after, protected 0, requested 75-76%, p99 17.5-35.8
/// us, `compare` improved (docs/decision.md has more loops and fewer).
#[test]
fn a_short_custom_slice_ends_the_wait_a_protected_slice_made() {
    if !require_root() {
        return;
    }
    if kernel_version() < (6, 12) {
        eprintln!(
            "{}: no custom slice for the fair class before 6.12 (sched_runtime is ignored there); \
             the rule test above checks this kernel's rule",
            kernel_release()
        );
        return;
    }
    let busy = CpuTimes::now();
    let case = Scenario::start(
        "decision-slice",
        6,
        (Duration::ZERO, Duration::from_micros(300)),
        || {},
    );
    let dir = std::env::temp_dir().join(format!("schedlat-slice-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let record = |name: &str| {
        let path = dir.join(name);
        let tid = case.tid.to_string();
        let (status, _, stderr) =
            run_schedlat(&["record", "-o", path.to_str().unwrap(), "-t", &tid, "3"]);
        assert!(status.success(), "record: {stderr}");
        let text = std::fs::read_to_string(&path).unwrap();
        let last = parse_json_lines(&text.lines().map(String::from).collect::<Vec<_>>())
            .pop()
            .expect("a recorded interval");
        (path, last)
    };
    let started = Instant::now();
    let ours = process_cpu();
    let (before, base) = record("base.json");
    set_custom_slice(case.tid, 100_000);
    let (after, short) = record("short.json");
    // The loops fill the workload CPU: what they did not get of it, other
    // tasks took (the test's other threads barely run).
    let others = 1.0 - (process_cpu() - ours).as_secs_f64() / started.elapsed().as_secs_f64();
    drop(case);
    let (status, out, stderr) = run_schedlat(&[
        "compare",
        "--json",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    assert!(status.success(), "compare: {stderr}");
    let c: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let _ = std::fs::remove_dir_all(&dir);
    let (d0, d1) = (decision(&base), decision(&short));
    let waits = |d: &Value| d["waits"].as_u64().unwrap_or(0).max(1) as f64;
    let share = |d: &Value| asked(d) as f64 / waits(d);
    let p99 = |side: &Value| side["percentiles"]["p99_ns"].as_u64().unwrap_or(0);
    let passed_over = |d: &Value| d["outcomes"]["passed_over"]["count"].as_u64().unwrap_or(0);
    let seen = format!(
        "{}: sleeper beside 6 loops in {:?}: {} -> {} wakeups, asked {:.0}% -> {:.0}%, \
         requested {} -> {} (declined {:?} -> {:?}; passed over {} -> {}); p99 {} -> {} ns, \
         compare {} ({}; other tasks took {:.1}% of the workload CPU)",
        kernel_release(),
        started.elapsed(),
        waits(d0),
        waits(d1),
        share(d0) * 100.0,
        share(d1) * 100.0,
        count(d0, "requested"),
        count(d1, "requested"),
        rules_seen(d0),
        rules_seen(d1),
        passed_over(d0),
        passed_over(d1),
        p99(&c["before"]),
        p99(&c["after"]),
        c["change"],
        busy.busy_since(),
        others.max(0.0) * 100.0
    );
    eprintln!("{seen}");
    // PREEMPT_RT: a timer's wakeups are done by the ktimers thread
    // (SCHED_FIFO) on the sleeper's CPU, so no fair rule, and no slice,
    // decides them: every wakeup not asked is `other_class`, before the
    // slice and after.
    if common::kernel::preempt_rt() {
        for d in [d0, d1] {
            assert_eq!(
                count(d, "other_class"),
                declined(d),
                "{}, PREEMPT_RT: {seen}",
                kernel_release()
            );
        }
        return;
    }
    // The kernel honoured the slice (the programs read it from se.slice):
    // the loop's slice no longer protects it from this wakee, and most of
    // its wakeups ask for the CPU.
    assert_eq!(count(d1, "protected"), 0, "{}: {d1}", kernel_release());
    assert!(
        share(d1) >= 0.6,
        "{}: with a 100 us slice {:.0}% of wakeups asked ({})",
        kernel_release(),
        share(d1) * 100.0,
        busy.busy_since()
    );
    // The share asked is not made worse beyond what two samples of a few
    // hundred wakeups vary by: 5 points plus three standard errors of the
    // difference (a 6.12 guest went 95% -> 90% with no protected decline
    // left, just past a bare 5 points).
    let (p0, p1) = (share(d0), share(d1));
    let se = (p0 * (1.0 - p0) / waits(d0) + p1 * (1.0 - p1) / waits(d1)).sqrt();
    assert!(
        p1 + 0.05 + 3.0 * se >= p0,
        "{}: asked {:.1}% of {} wakeups -> {:.1}% of {}, a drop over 5 points + 3 standard errors \
         ({:.1} points) ({})",
        kernel_release(),
        p0 * 100.0,
        waits(d0),
        p1 * 100.0,
        waits(d1),
        3.0 * se * 100.0,
        busy.busy_since()
    );
    // The rest needs the scheduler's own timing. Under QEMU's TCG (the
    // guests of `cargo xtask vm-test` on a host without KVM) emulation sets
    // the waits: in the 6.12 guest a sleeper beside two loops asked 98% of
    // the time before and after its slice was set and p99 went 6.5 -> 16.3
    // ms ("regressed"); which wakeups find a loop mid-slice depends on the
    // same timing.
    if let Some(why) = emulated() {
        eprintln!(
            "{}: the before state and the latency are not checked: {why}; \
             emulation, not the scheduler, sets the waits",
            kernel_release()
        );
        return;
    }
    // Before: protection is what declines this sleeper, often enough to
    // make its p99. Measured: protected 4.1-23% of 2,500-6,000 wakeups and
    // 99.6-100% of those declined on a quiet CPU; with others on the
    // workload CPU as little as 2.05% (17% of it taken), and still 100%.
    // Required: 1.5% (half as much again as the 1% a p99 needs) and 90%.
    let protected = count(d0, "protected");
    assert!(
        protected as f64 >= 0.015 * waits(d0) && protected as f64 >= 0.9 * declined(d0) as f64,
        "before the slice, protected {protected} of {} wakeups (at least 1.5% expected) and of {} \
         declined (at least 90%): the loops' protection is not what holds this sleeper back \
         here\n{seen}",
        waits(d0),
        declined(d0)
    );
    // After: the wakeups that were declined ask and are granted
    // (`requested`; the others mostly find a loop's slice ended). Measured
    // 75-77%; at least half.
    assert!(
        count(d1, "requested") as f64 > 0.5 * waits(d1),
        "with a 100 us slice, requested {} of {} wakeups (over half expected)\n{seen}",
        count(d1, "requested"),
        waits(d1)
    );
    // The latency: the protected waits (to the next tick, ms) were the p99
    // and are gone. Measured on a quiet CPU p99 3.61-3.66 ms -> 17.5-35.8 us
    // (100-200x), `compare` improved in every run; what remains past 1 ms
    // after is 0.5-0.8% of waits (a loop picked at a tick with an earlier
    // deadline, kworkers), under the 1% that would make it the p99. With
    // cargo builds on both CPUs other cgroups pass the sleeper over on 1-13%
    // of its waits either side, and that sets both p99s: 5 runs went from
    // 3.6-7.8 ms to 0.28-0.90 of it, improved every time. Required: improved,
    // and the p99 down by a quarter at least (4 of those 5 pass), which a
    // slice without effect does not pass (on a quiet CPU the p99 before is
    // the tick's, 3.61-3.66 ms run to run). Or the share of waits of half
    // a slice or more (compare's tail test) down by a third at least: two
    // quiet rehearsals left 1.2-1.4% of the waits passed over by the loops
    // at a tick after (88 and 98 of ~7,000), the p99 among them (3.60 ->
    // 3.05 and 3.55 -> 3.08 ms) while that share went 3.67% -> 1.15% and
    // 2.56% -> 1.31%; a slice without effect leaves the protected waits,
    // and the share, where they were.
    let tail = &c["tail_test"];
    let share = |side: &str| tail[side].as_f64().unwrap_or(f64::NAN);
    let tail_cut = share("share_after") * 3.0 <= share("share_before") * 2.0;
    // And what the slice is for: no wakeup is declined as protected any
    // more (168-224 of ~6,500 before, none after, in those runs).
    assert!(
        count(d1, "protected") as f64 <= 0.1 * protected as f64,
        "with a 100 us slice, still {} wakeups declined as protected (of {protected} before)\n{seen}",
        count(d1, "protected")
    );
    assert!(
        c["change"] == "improved" && (p99(&c["after"]) * 4 <= p99(&c["before"]) * 3 || tail_cut),
        "with a 100 us slice the p99 should drop by a quarter at least (or the share of \
         waits of half a slice or more by a third) and compare say improved; waits passed over are others taking the CPU (past the few percent \
         measured with builds on both CPUs, the test cannot see the slice's effect)\n{seen}\n{out}"
    );
}
