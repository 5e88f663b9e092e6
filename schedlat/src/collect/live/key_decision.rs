//! The decision split per breakdown key, as this kernel counts it (root:
//! loads the programs): with `--tids`, a SCHED_FIFO sleeper and a fair
//! worker beside busy loops on one CPU are two keys of one reading, the
//! sleeper granted the CPU by its wakeups and the worker passed over or
//! declined in its long waits (the whole system's split of the same
//! scenarios: decision.rs).

use std::{
    sync::{Arc, Barrier},
    thread,
    time::{Duration, Instant},
};

use schedlat_common::{
    decision::{Decision, Outcome, Pass},
    scope::Breakdown,
};

use crate::{
    collect::{
        key_intervals::KeyIntervals,
        live::decision::{CPU, busy_ticks, gettid, load, pin, set_policy, work_and_sleep},
        tracer::Tracer,
    },
    histogram::{KeyDecisionCounts, Waits},
    kernel::{
        filter::FilterSpec,
        modes::{Keyed, Modes},
    },
};

/// This process's threads, keyed by TID; None (skipped) when not root,
/// which CI=true makes a failure.
pub(super) fn load_by_tid() -> Option<Tracer> {
    let spec = FilterSpec {
        pid: Some(std::process::id()),
        ..FilterSpec::default()
    };
    let keyed = Keyed {
        by: Breakdown::Thread,
        max_keys: 256,
    };
    let tracer = load(&spec, &Modes::histogram(Some(keyed)))?;
    assert!(tracer.decision.is_some(), "the decision split is on");
    Some(tracer)
}

/// A thread on CPU that computes `work` of CPU time and sleeps `sleep`,
/// until `end`, once every thread is ready (`ready`); sends its TID with
/// whether it is the FIFO one (the two sleepers start in either order).
fn sleeper(
    (work, sleep): (Duration, Duration),
    fifo: bool,
    ready: Arc<Barrier>,
    tid: std::sync::mpsc::Sender<(bool, u32)>,
    run_for: Duration,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        pin(CPU);
        if fifo {
            set_policy(libc::SCHED_FIFO, 10);
        }
        tid.send((fifo, gettid())).unwrap();
        ready.wait();
        work_and_sleep(work, sleep, Instant::now() + run_for);
    })
}

/// A key's waits of the reading, with their decision split.
fn split_of(keys: &[(u64, Waits)], tid: u32) -> (&Waits, &KeyDecisionCounts) {
    let (_, waits) = keys
        .iter()
        .find(|(k, _)| *k == u64::from(tid))
        .unwrap_or_else(|| panic!("thread {tid} has no key among {} keys", keys.len()));
    let split = waits.key_decision.as_ref().expect("a split per key");
    (waits, split)
}

#[test]
fn a_granted_sleeper_and_a_passed_over_worker_are_told_apart_per_key() {
    let Some(mut tracer) = load_by_tid() else {
        return;
    };
    let mut keys = KeyIntervals::<()>::new(Breakdown::Thread, &tracer, true);
    let run_for = Duration::from_secs(3);
    let ready = Arc::new(Barrier::new(3 + 1 + 1 + 1));
    let (tx, rx) = std::sync::mpsc::channel();
    let hog_end = Instant::now() + run_for + Duration::from_millis(500);
    let hogs: Vec<_> = (0..3)
        .map(|_| {
            let ready = ready.clone();
            thread::spawn(move || {
                pin(CPU);
                ready.wait();
                while Instant::now() < hog_end {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let ms = Duration::from_millis;
    let us = Duration::from_micros;
    let fifo = sleeper(
        (Duration::ZERO, ms(1)),
        true,
        ready.clone(),
        tx.clone(),
        run_for,
    );
    let worker = sleeper((us(800), us(500)), false, ready.clone(), tx, run_for);
    let started = [rx.recv().unwrap(), rx.recv().unwrap()];
    let tid_of = |fifo: bool| started.iter().find(|s| s.0 == fifo).unwrap().1;
    let (fifo_tid, worker_tid) = (tid_of(true), tid_of(false));
    // The first reading: what every key waited before the run.
    keys.interval(&mut tracer, |_| ()).unwrap();
    let busy_before = busy_ticks(CPU);
    ready.wait();
    fifo.join().unwrap();
    worker.join().unwrap();
    let busy = busy_ticks(CPU) - busy_before;
    let read = keys
        .interval(&mut tracer, |reading| {
            (reading.active())
                .map(|(a, new)| (a.key, a.waits(new)))
                .collect::<Vec<_>>()
        })
        .unwrap();
    for h in hogs {
        h.join().unwrap();
    }
    let context = format!("CPU {CPU} busy {busy} ticks of ~300");

    // The SCHED_FIFO sleeper: the RT class preempts the fair hogs at every
    // wakeup (kernel/sched/core.c wakeup_preempt()), and nothing else of
    // its class runs there: asked, never passed over.
    let (waits, d) = split_of(&read, fifo_tid);
    eprintln!("FIFO sleeper {fifo_tid}: {} waits, {d:?}", waits.count());
    let woken = d.waits() - d.decided(Decision::NotWakeup) - d.decided(Decision::Unknown);
    let asked = [
        Decision::Requested,
        Decision::SliceEnded,
        Decision::Pending,
        Decision::Lazy,
    ]
    .iter()
    .map(|&c| d.decided(c))
    .sum::<u64>();
    assert!(
        woken > 300,
        "{woken} wakeups of the FIFO sleeper ({context})"
    );
    assert!(
        asked * 100 >= woken * 90,
        "FIFO sleeper: {asked} of {woken} wakeups asked ({context}): {d:?}"
    );
    assert!(
        d.passed(Pass::Zero) * 100 >= d.waits() * 95,
        "FIFO sleeper passed over: {d:?} ({context})"
    );

    // The worker asks for 62% of the CPU against a fair share of 25%: its
    // waits of 1 ms or more are declined or passed over.
    let (waits, d) = split_of(&read, worker_tid);
    eprintln!("worker {worker_tid}: {} waits, {d:?}", waits.count());
    let slow = d.slow();
    let slow_declined = d.outcome_slow(Outcome::Declined) + d.outcome_slow(Outcome::PassedOver);
    assert!(
        slow > 50,
        "{slow} waits of the worker over 1 ms ({context}): {d:?}"
    );
    assert!(
        slow_declined * 100 >= slow * 90,
        "worker: {slow_declined} of {slow} waits over 1 ms declined or passed over ({context}): \
         {d:?}"
    );
    assert!(
        d.passed(Pass::ThreePlus) > 0 && d.declined() > 0,
        "worker: {d:?}"
    );

    // Every key's split counts the key's waits (a wait or two apart: the
    // two maps are read one after the other while the programs run).
    for (key, waits) in &read {
        let d = waits.key_decision.as_ref().unwrap();
        assert!(
            d.waits().abs_diff(waits.count()) <= 4,
            "key {key}: {} waits, its split {}: {d:?}",
            waits.count(),
            d.waits()
        );
        let outcomes: u64 = schedlat_common::decision::OUTCOMES
            .iter()
            .map(|&o| d.outcome(o))
            .sum();
        assert_eq!(outcomes, d.waits(), "key {key}: {d:?}");
    }
}
