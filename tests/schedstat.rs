//! schedlat against the kernel's own accounting of run-queue waits, by kind
//! of wait (root). `/proc/PID/task/TID/schedstat` field 2 (run_delay) adds,
//! per switch-in, `rq_clock(rq)` at the switch minus `rq_clock(rq)` at the
//! enqueue (kernel/sched/stats.h, sched_info_arrive/sched_info_enqueue).
//! The run-queue clock is a cached value, updated by update_rq_clock(); and
//! when a wakeup preempts the running task (the idle task included: it
//! counts as queued), wakeup_preempt() asks the next __schedule() to skip
//! that update (rq_clock_skip_update()). The switch that follows then reads
//! the clock as it was at the wakeup, and run_delay records ~0 for that
//! wait: the time from the wakeup to the switch is not in it. Waits that
//! end otherwise (a slice ends at a tick, the running task blocks) read a
//! fresh clock and are counted in full.
//!
//! So the two kinds of waits are told apart here, in one process traced
//! with `-L` (one histogram per thread):
//! - two busy threads sharing a CPU: every wait is a preemption at a slice
//!   end, and run_delay matches schedlat (ratio ~1.00);
//! - a SCHED_FIFO thread that sleeps 2 ms at a time: each wakeup preempts
//!   whatever runs on its CPU (a normal task or idle), so run_delay misses
//!   nearly all of its waiting while it counts the same switch-ins;
//! - a normal thread that sleeps 2 ms at a time (the case of a report with
//!   eBPF/schedstat at 229% to 1400%): on an idle or lightly loaded CPU most
//!   of its wakeups preempt too, so schedlat sees more than run_delay. It
//!   starts once the FIFO thread is done: a preempted wait is the one case
//!   where the skipped update makes run_delay count more (its enqueue is
//!   stamped with the clock of the preempting wakeup, before the switch).

use std::{
    collections::HashMap,
    fs,
    sync::{Arc, Barrier, mpsc},
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::other_cpu,
    parse_json_lines, require_root,
    workload::{make_current_thread_fifo, pin_current_thread, workload_cpu},
};

use crate::common;

/// (run_delay ns, switch-ins) of one thread of this process.
fn schedstat(tid: u32) -> (u64, u64) {
    let text = fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    let f: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    (f[1], f[2])
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn spin_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// One thread of the workload: what it is, and both sides' numbers.
struct Measured {
    name: &'static str,
    ebpf_count: u64,
    ebpf_ns: u64,
    run_delay_ns: u64,
    switch_ins: u64,
}

impl Measured {
    fn ratio(&self) -> f64 {
        self.ebpf_ns as f64 / self.run_delay_ns.max(1) as f64
    }
}

#[test]
fn run_delay_misses_the_wakeup_to_switch_time_of_preempting_wakeups() {
    if !require_root() {
        return;
    }
    let (busy_cpu, sleep_cpu) = (workload_cpu(), other_cpu());
    assert_ne!(busy_cpu, sleep_cpu, "needs two CPUs");
    const SLEEPS: u32 = 400;
    // Each thread: wait at the barrier (so schedstat is read before any of
    // the workload runs), work, report, then block until the end.
    let start = Arc::new(Barrier::new(5));
    let (tid_tx, tid_rx) = mpsc::channel::<(&'static str, u32)>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let end_rx = Arc::new(std::sync::Mutex::new(end_rx));
    let mut handles = Vec::new();
    let spawn = |name: &'static str, cpu: usize, fifo: bool, work: Box<dyn FnOnce() + Send>| {
        let (start, tid_tx, done_tx, end_rx) = (
            Arc::clone(&start),
            tid_tx.clone(),
            done_tx.clone(),
            Arc::clone(&end_rx),
        );
        thread::spawn(move || {
            pin_current_thread(cpu);
            // Above the FIFO 50 blockers other root tests use: each
            // wakeup preempts at once.
            if fifo {
                make_current_thread_fifo(80);
            }
            tid_tx.send((name, gettid())).unwrap();
            start.wait();
            work();
            done_tx.send(()).unwrap();
            let _ = end_rx.lock().unwrap().recv();
        })
    };
    for name in ["busy-a", "busy-b"] {
        handles.push(spawn(
            name,
            busy_cpu,
            false,
            Box::new(|| spin_for(Duration::from_millis(1500))),
        ));
    }
    let sleeps = || {
        for _ in 0..SLEEPS {
            thread::sleep(Duration::from_millis(2));
        }
    };
    // The two sleepers share a CPU but take turns: were the FIFO thread to
    // wake while the normal sleeper runs, it would preempt it, and the
    // switch's skipped clock update would date that preempted wait from
    // the FIFO wakeup, so run_delay would count more than the wait.
    let (fifo_done_tx, fifo_done_rx) = mpsc::channel::<()>();
    handles.push(spawn(
        "fifo-sleeper",
        sleep_cpu,
        true,
        Box::new(move || {
            sleeps();
            fifo_done_tx.send(()).unwrap();
        }),
    ));
    handles.push(spawn(
        "sleeper",
        sleep_cpu,
        false,
        Box::new(move || {
            fifo_done_rx.recv().unwrap();
            sleeps();
        }),
    ));
    drop(done_tx);
    let tids: HashMap<&'static str, u32> = (0..4).map(|_| tid_rx.recv().unwrap()).collect();

    let me = std::process::id().to_string();
    let tracer = TracerProcess::start(SCHEDLAT, &["-p", &me, "-L", "--json"]);
    let before: HashMap<&str, (u64, u64)> = tids.iter().map(|(n, t)| (*n, schedstat(*t))).collect();
    start.wait();
    for _ in 0..4 {
        done_rx.recv().unwrap();
    }
    // Every thread is blocked now: no wait in flight at the reads.
    thread::sleep(Duration::from_millis(50));
    let after: HashMap<&str, (u64, u64)> = tids.iter().map(|(n, t)| (*n, schedstat(*t))).collect();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    drop(end_tx);
    for h in handles {
        h.join().unwrap();
    }
    assert!(status.success(), "schedlat exited with {status}");
    let interval = parse_json_lines(&lines).pop().expect("an interval");
    let keys = interval["breakdown"]["keys"].as_array().expect("keys");
    let measured: Vec<Measured> = ["busy-a", "busy-b", "fifo-sleeper", "sleeper"]
        .into_iter()
        .map(|name| {
            let key = keys
                .iter()
                .find(|k| k["key"].as_u64() == Some(u64::from(tids[name])))
                .unwrap_or_else(|| panic!("no key for {name} ({}): {interval}", tids[name]));
            Measured {
                name,
                ebpf_count: key["count"].as_u64().unwrap(),
                ebpf_ns: key["sum_ns"].as_u64().unwrap(),
                run_delay_ns: after[name].0 - before[name].0,
                switch_ins: after[name].1 - before[name].1,
            }
        })
        .collect();
    for m in &measured {
        eprintln!(
            "{:<13} schedlat {:>5} waits {:>12} ns | schedstat {:>5} switch-ins run_delay {:>12} ns | ratio {:.2}",
            m.name,
            m.ebpf_count,
            m.ebpf_ns,
            m.switch_ins,
            m.run_delay_ns,
            m.ratio()
        );
    }
    let [busy_a, busy_b, fifo, sleeper] = &measured[..] else {
        unreachable!()
    };
    // Preempted busy threads: the same waits, the same time (the two clocks
    // stamp a few microseconds apart per wait).
    for busy in [busy_a, busy_b] {
        assert!(
            busy.run_delay_ns > 100_000_000,
            "{}: two spinners on one CPU for 1.5 s must wait: {} ns",
            busy.name,
            busy.run_delay_ns
        );
        assert!(
            (0.95..=1.05).contains(&busy.ratio()),
            "{}: schedlat {} ns vs run_delay {} ns",
            busy.name,
            busy.ebpf_ns,
            busy.run_delay_ns
        );
    }
    // The sleepers: both sides count (nearly) every wakeup (schedlat may
    // miss the first, enqueued just before the tracer was reading)...
    for m in [fifo, sleeper] {
        assert!(
            m.ebpf_count >= u64::from(SLEEPS) * 9 / 10 && m.switch_ins >= u64::from(SLEEPS),
            "{}: {} waits, {} switch-ins for {SLEEPS} sleeps",
            m.name,
            m.ebpf_count,
            m.switch_ins
        );
        assert!(
            m.ebpf_count.abs_diff(m.switch_ins) <= m.switch_ins / 10 + 5,
            "{}: schedlat counts {} waits, schedstat {} switch-ins",
            m.name,
            m.ebpf_count,
            m.switch_ins
        );
    }
    // ... but run_delay misses most of the time from its wakeups to its
    // switches: every one of them preempted.
    assert!(
        fifo.ebpf_ns > 0 && fifo.run_delay_ns * 3 < fifo.ebpf_ns,
        "fifo-sleeper: run_delay {} ns should miss most of schedlat's {} ns",
        fifo.run_delay_ns,
        fifo.ebpf_ns
    );
    // The normal sleeper: its share of preempting wakeups depends on the
    // machine's load, so run_delay counts at most what schedlat does, plus
    // one thing: when another task's wakeup (from outside the test too: a
    // CI run under a monitoring agent's wakeups counted 45% more) preempts
    // the sleeper, the switch's skipped clock update dates its preempted
    // wait from that wakeup. That adds at most one preempting wakeup's
    // wakeup-to-switch time per switch-in, which the FIFO sleeper's waits
    // measure on this machine; twice their mean bounds it.
    let preempting_wakeup_ns = fifo.ebpf_ns / fifo.ebpf_count.max(1);
    let stale_clock_ns = sleeper.switch_ins * preempting_wakeup_ns * 2;
    assert!(
        sleeper.ebpf_ns as f64 + stale_clock_ns as f64 >= sleeper.run_delay_ns as f64 * 0.95,
        "sleeper: schedlat {} ns + {stale_clock_ns} ns of stale clocks < run_delay {} ns",
        sleeper.ebpf_ns,
        sleeper.run_delay_ns
    );
}
