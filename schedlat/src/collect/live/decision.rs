//! The decision split as this kernel counts it (root: loads the programs),
//! on scenarios whose answer is known from their construction: a real-time
//! sleeper beside a fair hog is granted the CPU by every wakeup, a
//! SCHED_BATCH sleeper never asks for it, a sleeper alone wakes onto an
//! idle CPU. Each prints what the verifier took and the counts.

use std::{
    thread,
    time::{Duration, Instant},
};

use schedlat_common::{
    causes::Cause,
    decision::{DECISIONS, Decision, HOLDERS, HolderLeft, Outcome, PASSES, Pass},
};

use crate::{
    collect::{
        live::decision_trace::{Trace, TracedWaits, waits_of},
        tracer::Tracer,
    },
    histogram::{CauseCounts, DecisionCounts},
    kernel::{
        filter::{Filter, FilterSpec},
        hook::HookChoice,
        loader::KernelSources,
        modes::Modes,
    },
};

/// CPU the scenarios run on (the second, away from CPU 0's housekeeping).
pub(super) const CPU: usize = 1;

/// Loaded for the thread `tid` alone; None (skipped) when not root, which
/// CI=true makes a failure.
fn load_for(tid: u32) -> Option<Tracer> {
    let spec = FilterSpec {
        tid: Some(tid),
        ..FilterSpec::default()
    };
    let tracer = load(&spec, &Modes::HISTOGRAM)?;
    eprintln!("{:?}", tracer.decision);
    Some(tracer)
}

/// Loaded with `modes` for the waits `spec` filters; None (skipped) when
/// not root, which CI=true makes a failure. Prints what the verifier took.
pub(super) fn load(spec: &FilterSpec, modes: &Modes) -> Option<Tracer> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "CI=true: this test loads eBPF programs and must run as root"
        );
        eprintln!("skipped: loads eBPF programs, needs root");
        return None;
    }
    let filter = Filter::resolve(spec).unwrap();
    let started = Instant::now();
    let tracer = Tracer::load_modes(
        HookChoice::Btf,
        &KernelSources::default(),
        1000,
        &filter,
        modes,
    )
    .expect("the programs load and attach");
    eprintln!("loaded and attached in {:?}", started.elapsed());
    for &(program, _) in &tracer.programs {
        if let Some(Ok(info)) = tracer.ebpf.program(program).map(|p| p.info()) {
            eprintln!(
                "  {program}: verified_insns {:?}",
                info.verified_instruction_count()
            );
        }
    }
    Some(tracer)
}

pub(super) fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A thread pinned to `cpu` that spins until `until`: a CPU-bound loop
/// for the sleepers of these tests to wait behind.
fn spin_on(cpu: usize, until: Instant) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        pin(cpu);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    })
}

pub(super) fn set_policy(policy: libc::c_int, priority: libc::c_int) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: the calling thread, a valid parameter.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    assert_eq!(
        rc,
        0,
        "sched_setscheduler: {}",
        std::io::Error::last_os_error()
    );
}

pub(super) fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() as u32 }
}

/// The busy time of CPU `cpu` (user+nice+system+irq+softirq, in ticks)
/// from /proc/stat, to say how busy it was in a failure message.
pub(super) fn busy_ticks(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = format!("cpu{cpu} ");
    stat.lines()
        .find(|l| l.starts_with(&name))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(7)
                .enumerate()
                .filter(|&(i, _)| i != 3 && i != 4)
                .filter_map(|(_, v)| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// The thread's own CPU time.
pub(super) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The worker's loop until `end`: computes `work` of its own CPU time,
/// then sleeps `sleep` (each wakeup a wait to measure).
pub(super) fn work_and_sleep(work: Duration, sleep: Duration, end: Instant) {
    while Instant::now() < end {
        let until = thread_cpu() + work;
        while thread_cpu() < until {
            std::hint::spin_loop();
        }
        thread::sleep(sleep);
    }
}

/// Runs a sleeper thread (set up by `setup` on CPU, sleeping `sleep` per
/// loop for `duration`; computing `work` of CPU time before each sleep) beside `hogs` fair busy loops on the same CPU,
/// traced alone; the split of its waits, and CPU's busy ticks meanwhile.
fn sleeper_beside_hogs(
    hogs: usize,
    (work, sleep): (Duration, Duration),
    duration: Duration,
    setup: impl FnOnce() + Send + 'static,
) -> Option<Run> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let sleeper = thread::spawn(move || {
        pin(CPU);
        setup();
        tx.send(gettid()).unwrap();
        if go_rx.recv().is_err() {
            return;
        }
        work_and_sleep(work, sleep, Instant::now() + duration);
    });
    let tid = rx.recv().unwrap();
    let tracer = load_for(tid)?;
    let hog_end = Instant::now() + duration + Duration::from_millis(200);
    let hogs: Vec<_> = (0..hogs).map(|_| spin_on(CPU, hog_end)).collect();
    thread::sleep(Duration::from_millis(100));
    let trace = Trace::start(CPU);
    let before = tracer.read_decision().unwrap().expect("the split is on");
    let causes_before = tracer
        .read_causes()
        .unwrap()
        .expect("the cause split is on");
    let busy_before = busy_ticks(CPU);
    go_tx.send(()).unwrap();
    sleeper.join().unwrap();
    let d = tracer.read_decision().unwrap().unwrap().since(&before);
    let causes = tracer.read_causes().unwrap().unwrap().since(&causes_before);
    let traced = trace.as_ref().map(|t| waits_of(&t.stop(), tid));
    let busy = busy_ticks(CPU) - busy_before;
    for h in hogs {
        h.join().unwrap();
    }
    show(&d);
    assert_every_split_counts_every_wait(&d);
    Some(Run {
        d,
        busy,
        causes,
        traced,
    })
}

/// One scenario's split, CPU's busy ticks meanwhile, the cause split of
/// the same waits, and the kernel's trace of them (None when tracefs
/// refused).
struct Run {
    d: DecisionCounts,
    busy: u64,
    causes: CauseCounts,
    traced: Option<TracedWaits>,
}

fn show(d: &DecisionCounts) {
    let mut cells = Vec::new();
    for decision in DECISIONS {
        for pass in PASSES {
            let n = d.cell(decision, pass);
            if n != 0 {
                cells.push(format!("{decision:?}/{pass:?} {n}"));
            }
        }
    }
    eprintln!("cells: {}", cells.join(", "));
    let holders: Vec<String> = HOLDERS
        .iter()
        .map(|&h| format!("{h:?} {}", d.holder_count[h as usize]))
        .collect();
    eprintln!(
        "holders: {}; passes {}; predicted {} waits, {} us vs {} us actual, {} beyond; share {:?}",
        holders.join(", "),
        d.passes,
        d.predicted_waits,
        d.predicted_ns / 1000,
        d.predicted_actual_ns / 1000,
        d.beyond_prediction,
        d.mean_share()
    );
}

/// Each split adds up to the waits, and so do the outcomes' histograms
/// (a few waits of slack: per-CPU values are copied while programs run).
fn assert_every_split_counts_every_wait(d: &DecisionCounts) {
    let waits = d.waits();
    let near = |n: u64, what: &str| {
        assert!(n.abs_diff(waits) <= 4, "{what} {n} vs {waits} waits: {d:?}");
    };
    near(d.holder_waits(), "holders");
    near(d.all_between(0, u64::MAX), "outcomes");
}

/// The wakeups that asked for the CPU (at once, lazily, or already asked).
fn asked(d: &DecisionCounts) -> u64 {
    [
        Decision::Requested,
        Decision::SliceEnded,
        Decision::Pending,
        Decision::Lazy,
    ]
    .iter()
    .map(|&c| d.decided(c))
    .sum()
}

#[test]
fn a_real_time_sleeper_beside_a_fair_hog_is_granted_by_every_wakeup() {
    let setup = || set_policy(libc::SCHED_FIFO, 10);
    let Some(Run { d, busy, .. }) = sleeper_beside_hogs(
        1,
        (Duration::ZERO, Duration::from_millis(1)),
        Duration::from_secs(1),
        setup,
    ) else {
        return;
    };
    let waits = d.waits();
    assert!(waits > 300, "{waits} waits");
    // The RT class preempts the fair one at every wakeup
    // (kernel/sched/core.c wakeup_preempt()): the bit is set for the hog.
    let granted = asked(&d);
    assert!(
        granted * 100 >= waits * 90,
        "requested {granted} of {waits} (CPU {CPU} busy {busy} ticks): {d:?}"
    );
    assert_eq!(d.passed(Pass::Zero), waits, "{d:?}");
    let immediate = d.outcome_between(Outcome::Granted, 0, u64::MAX);
    assert!(
        immediate * 100 >= waits * 90,
        "granted at once {immediate} of {waits}"
    );
}

/// The other side of that case: the fair loop, traced alone, loses its
/// CPU to the real-time sleeper at every wakeup. Each of its waits is a
/// preemption by a higher class, counted `other_class` (as a wakeup
/// declined for that class is), not `not_wakeup` (a fair preemption).
#[test]
fn a_fair_loop_preempted_by_a_real_time_sleeper_waits_for_that_class() {
    let (tx, rx) = std::sync::mpsc::channel();
    let end = Instant::now() + Duration::from_millis(1300);
    let fair = thread::spawn(move || {
        pin(CPU);
        tx.send(gettid()).unwrap();
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    });
    let tid = rx.recv().unwrap();
    let Some(tracer) = load_for(tid) else {
        fair.join().unwrap();
        return;
    };
    let before = tracer.read_decision().unwrap().expect("the split is on");
    let busy_before = busy_ticks(CPU);
    let sleeper = thread::spawn(move || {
        pin(CPU);
        set_policy(libc::SCHED_FIFO, 10);
        let stop = Instant::now() + Duration::from_secs(1);
        while Instant::now() < stop {
            thread::sleep(Duration::from_millis(1));
        }
    });
    sleeper.join().unwrap();
    let d = tracer.read_decision().unwrap().unwrap().since(&before);
    let busy = busy_ticks(CPU) - busy_before;
    fair.join().unwrap();
    show(&d);
    assert_every_split_counts_every_wait(&d);
    let waits = d.waits();
    let other = d.decided(Decision::OtherClass);
    // Fair kernel threads on the CPU (kworkers, ksoftirqd) preempt it too:
    // those are `not_wakeup`.
    assert!(
        waits > 300 && other * 100 >= waits * 80,
        "other_class {other} of {waits} waits, not_wakeup {} (CPU {CPU} busy {busy} ticks in the second): {d:?}",
        d.decided(Decision::NotWakeup)
    );
}

#[test]
fn a_batch_sleeper_never_asks_for_the_cpu() {
    let setup = || set_policy(libc::SCHED_BATCH, 0);
    let Some(Run { d, busy, .. }) = sleeper_beside_hogs(
        1,
        (Duration::ZERO, Duration::from_millis(1)),
        Duration::from_secs(1),
        setup,
    ) else {
        return;
    };
    let waits = d.waits();
    // Passed over behind the hog for most of the second: few loops.
    assert!(waits > 40, "{waits} waits");
    // A BATCH wakee never preempts (check_preempt_wakeup_fair() returns
    // before the pick): a wakeup that left the bit unset names that gate.
    // Some do find the bit set by their own wakeup (measured: 300 of 477
    // on 6.18, 113 of them with the holder's deadline just renewed): the
    // enqueue's update_curr(), not the preemption check; not asserted on
    // until the split tells every such case apart.
    let declined = d.declined();
    let gate = d.decided(Decision::PolicyGate);
    assert!(
        declined > 20 && gate * 100 >= declined * 95,
        "not requested {declined}, policy gate {gate}, of {waits} (CPU {CPU} busy {busy} ticks): \
         {d:?}"
    );
}

#[test]
fn a_sleeper_alone_wakes_onto_an_idle_cpu() {
    let Some(Run {
        d, busy, causes, ..
    }) = sleeper_beside_hogs(
        0,
        (Duration::ZERO, Duration::from_millis(2)),
        Duration::from_secs(1),
        || {},
    )
    else {
        return;
    };
    let waits = d.waits();
    assert!(waits > 100, "{waits} waits");
    // Woken onto the idle task, the wait ends with the idle task switched
    // out: the two counts agree whatever else keeps the CPU busy.
    let idle = d.decided(Decision::Idle);
    let held_by_idle = causes.count[Cause::HeldByIdle as usize];
    assert!(
        idle.abs_diff(held_by_idle) <= 3 + idle.max(held_by_idle) / 10,
        "idle at the wakeup {idle}, idle task switched out {held_by_idle}, of {waits} \
         (CPU {CPU} busy {busy} of 100 ticks)"
    );
    // The idle task switched out is the idle holder (PF_IDLE at the
    // switch, as the cause split reads it), never a runnable one: it
    // leaves with state 0 and no preempt, which once read as preempted.
    let held_idle = d.holder_count[HolderLeft::Idle as usize];
    assert!(
        held_idle.abs_diff(held_by_idle) <= 3 + held_idle.max(held_by_idle) / 10,
        "idle holder {held_idle}, idle task switched out {held_by_idle}, of {waits} \
         (CPU {CPU} busy {busy} of 100 ticks)"
    );
    let runnable = d.holder_count[HolderLeft::Preempted as usize]
        + d.holder_count[HolderLeft::SliceEnded as usize];
    // On a CPU mostly idle, most wakeups find it so, and few waits end
    // behind a task that stays runnable (only what else ran on the CPU).
    if busy < 50 {
        assert!(
            idle * 100 >= waits * 60,
            "idle {idle} of {waits} (CPU {CPU} busy {busy} of 100 ticks)"
        );
        assert!(
            runnable <= 3 + waits / 10 && held_idle * 100 >= waits * 60,
            "holders preempted or slice ended {runnable}, idle {held_idle}, of {waits} \
             (CPU {CPU} busy {busy} of 100 ticks): {d:?}"
        );
    }
}

/// The worker of docs/decision.md: 0.8 ms of CPU, then 0.5 ms of sleep,
/// beside three busy loops on its CPU. It asks for 62% of the CPU against
/// a fair share of 25%, so EEVDF mostly finds it not eligible: its long
/// waits are declined or passed over, its short ones granted at once.
#[test]
fn the_worker_case_splits_into_granted_and_declined_modes() {
    let Some(Run {
        d, busy, traced, ..
    }) = sleeper_beside_hogs(
        3,
        (Duration::from_micros(800), Duration::from_micros(500)),
        Duration::from_secs(3),
        || {},
    )
    else {
        return;
    };
    const MS: u64 = 1_000_000;
    let long = d.all_between(MS, u64::MAX);
    let long_declined = d.outcome_between(Outcome::Declined, MS, u64::MAX)
        + d.outcome_between(Outcome::PassedOver, MS, u64::MAX);
    // Wakeups only: a preempted wait (n/a, in Other) did not ask.
    let short = d.all_between(0, 50_000) - d.outcome_between(Outcome::Other, 0, 50_000);
    let short_granted = d.outcome_between(Outcome::Granted, 0, 50_000);
    assert!(
        long > 50 && short > 20,
        "{long} waits over 1 ms, {short} under 50 us: {d:?}"
    );
    assert!(
        long_declined * 100 >= long * 90,
        "over 1 ms: {long_declined} of {long} declined or passed over (CPU {CPU} busy {busy} of 300 ticks)"
    );
    assert!(
        short_granted * 100 >= short * 90,
        "under 50 us: {short_granted} of {short} granted at once (CPU {CPU} busy {busy} of 300 ticks)"
    );
    // Beside hogs that never sleep, the CPU is never idle: the holder the
    // worker waited behind left still runnable (preempted or its slice
    // ended), hardly ever the idle task. Others that run on the CPU and
    // sleep are `blocked` holders (measured on a busy 2-CPU host: 162
    // blocked, 137 preempted, 221 slice ended, 0 idle of 522; with the
    // other CPU building too, 400 blocked, 255 runnable, 0 idle of 656).
    let held = |h: HolderLeft| d.holder_count[h as usize];
    let (runnable, held_idle) = (
        held(HolderLeft::Preempted) + held(HolderLeft::SliceEnded),
        held(HolderLeft::Idle),
    );
    assert!(
        runnable * 5 >= d.waits() && held_idle <= 3 + d.waits() / 20,
        "holders preempted or slice ended {runnable}, idle {held_idle}, of {} waits \
         (CPU {CPU} busy {busy} of 300 ticks): {d:?}",
        d.waits()
    );
    // A declined wakeup has its rule named.
    let declined = d.declined();
    let named = declined - d.decided(Decision::RuleUnknown);
    assert!(named * 100 >= declined * 90, "{named} of {declined}: {d:?}");
    // The kernel's own trace of the same window agrees, wakeup by wakeup
    // class: the need-resched flag at sched_wakeup, the switches to
    // others before the worker ran.
    if let Some(traced) = traced {
        assert_agrees_with_the_trace(&d, &traced);
    }
}

/// schedlat's wakeups by asked / not asked and pass-overs 0, 1, 2, 3+
/// against the trace's flag set / clear and switches before the task ran,
/// each cell within 5% of the traced waits plus 3
/// (`TracedWaits::disagreement`).
fn assert_agrees_with_the_trace(d: &DecisionCounts, traced: &TracedWaits) {
    let passes = [Pass::Zero, Pass::One, Pass::Two, Pass::ThreePlus];
    let row = |asked: bool| -> [u64; 4] {
        passes.map(|p| {
            DECISIONS
                .iter()
                .filter(|c| {
                    if asked {
                        c.asked() || matches!(c, Decision::Pending | Decision::Idle)
                    } else {
                        c.declined()
                    }
                })
                .map(|&c| d.cell(c, p))
                .sum()
        })
    };
    let (set, clear) = (row(true), row(false));
    if let Some(said) = traced.disagreement(set, clear) {
        panic!("{said}");
    }
}

/// The seed case in small (docs/decision.md, `late`): a 1 ms sleeper
/// (SCHED_OTHER) beside six busy loops on one CPU for 4 s, with the
/// kernel's trace of that CPU (sched_wakeup, sched_switch and the timers'
/// expiries). The waits the trace shows as "need-resched set at the
/// wakeup, no switch to another task, the tick, then the switch to the
/// sleeper" are the ones schedlat counts `late`, within 10% + 5 (the two
/// see the same waits; a tick right before a prompt switch, or a slice
/// that ran out in the microseconds between the wakeup and a prompt
/// switch, can read differently); the granted ones are prompt (p90 under
/// 100 us).
#[test]
fn a_request_the_tick_answered_is_late_and_granted_waits_are_prompt() {
    use crate::collect::live::decision_trace::traced_waits;
    const HOGS: usize = 6;
    const SECS: u64 = 4;
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let sleeper = thread::spawn(move || {
        pin(CPU);
        tx.send(gettid()).unwrap();
        if go_rx.recv().is_err() {
            return;
        }
        let end = Instant::now() + Duration::from_secs(SECS);
        while Instant::now() < end {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let tid = rx.recv().unwrap();
    let Some(tracer) = load_for(tid) else {
        return;
    };
    let hog_end = Instant::now() + Duration::from_secs(SECS) + Duration::from_millis(300);
    let hogs: Vec<_> = (0..HOGS).map(|_| spin_on(CPU, hog_end)).collect();
    // The other CPU busy too, as in the seed case (other builds on both
    // CPUs): with CPU 0 idle the re-pick was rarer (6 of 4,433 wakeups
    // against 181 of 6,034 in two runs of cyclictest beside six loops).
    let other = spin_on(0, hog_end);
    thread::sleep(Duration::from_millis(100));
    let Some(trace) = Trace::start_with_ticks(CPU) else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "CI=true: tracefs refused an instance with the timer events this test reads"
        );
        eprintln!("skipped: tracefs refused an instance with the timer events");
        go_tx.send(()).unwrap();
        sleeper.join().unwrap();
        return;
    };
    let before = tracer.read_decision().unwrap().expect("the split is on");
    let busy_before = (busy_ticks(0), busy_ticks(CPU));
    let own_before = own_cpu_ticks();
    go_tx.send(()).unwrap();
    sleeper.join().unwrap();
    let d = tracer.read_decision().unwrap().unwrap().since(&before);
    let text = trace.stop();
    let busy = (
        busy_ticks(0) - busy_before.0,
        busy_ticks(CPU) - busy_before.1,
    );
    let own = own_cpu_ticks() - own_before;
    for h in hogs {
        h.join().unwrap();
    }
    other.join().unwrap();
    show(&d);
    assert_every_split_counts_every_wait(&d);
    let traced = traced_waits(&text, tid);
    let late_traced = traced.iter().filter(|w| w.late()).count() as u64;
    let prompt_traced = traced.iter().filter(|w| w.prompt()).count() as u64;
    let repicked = traced
        .iter()
        .filter(|w| w.late() && w.flag_at_tick == Some(false))
        .count();
    let late_slow = traced
        .iter()
        .filter(|w| w.late() && w.wait_ns >= 1_000_000)
        .count();
    let late = d.outcome_between(Outcome::Late, 0, u64::MAX);
    let granted = d.outcome_between(Outcome::Granted, 0, u64::MAX);
    let granted_fast = d.outcome_between(Outcome::Granted, 0, 100_000);
    let late_fast = d.outcome_between(Outcome::Late, 0, 100_000);
    // How busy the machine was besides this test: ticks of each CPU
    // (1 per 4 ms at HZ 250) and the ones this process took.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let context = format!(
        "CPU 0 busy {} and CPU {CPU} {} of {} clock ticks each, this process {own} (its loops fill both); loadavg {}",
        busy.0,
        busy.1,
        SECS * 100,
        load.trim()
    );
    eprintln!(
        "traced: {} waits, {late_traced} late (flag set, no pass-over, a tick before the switch; \
         {repicked} with the flag clear at that tick, {late_slow} of 1 ms or more), {prompt_traced} prompt; \
         schedlat: late {late} ({late_fast} under 100 us), granted {granted} ({granted_fast} under 100 us); {context}",
        traced.len()
    );
    // `late` is the re-pick: the flag set at the wakeup and clear at the
    // tick before the switch. A wait whose flag is still set at that tick
    // is a short wait that a tick happened to fall into (a CI run: 11 such
    // of 3,275, none of 1 ms or more, and no re-pick). How often the
    // kernel re-picks varies from run to run (165 of about 3,000 waits in
    // one, 0 of 3,275 in another, on the same machine): where it did not
    // happen, what is checked is that schedlat counts no `late` the trace
    // does not show.
    let slack = 5 + repicked as u64 / 10;
    assert!(
        late.abs_diff(repicked as u64) <= slack,
        "schedlat counted {late} late, the trace shows {repicked} re-picks (slack {slack}; {context}): {d:?}"
    );
    if repicked < 20 {
        eprintln!(
            "the re-pick occurred {repicked} times in this run ({context}): checked that schedlat counts no late wait the trace does not show"
        );
    }
    assert!(
        granted > 0 && granted_fast * 10 >= granted * 9,
        "granted p90 not under 100 us: {granted_fast} of {granted} ({context})"
    );
}

/// This process's CPU time in ticks (utime + stime of /proc/self/stat).
fn own_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}
