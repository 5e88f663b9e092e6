//! The holder's yield, as this kernel counts it (root: loads the programs):
//! a sleeper shares one CPU with a thread that loops on sched_yield(), then
//! with one that loops without yielding. The first holder leaves the CPU
//! by its own yield at most of the sleeper's switch-ins, the second never
//! does (decision.rs `in_yield`: the holder's saved system call number
//! at the switch).

use std::{
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use schedlat_common::{decision::HolderLeft, scope::Breakdown};

use crate::{
    collect::{
        key_intervals::KeyIntervals,
        live::{
            decision::{CPU, busy_ticks, gettid, pin},
            key_decision::load_by_tid,
        },
        tracer::Tracer,
    },
    histogram::KeyDecisionCounts,
};

/// For 1.5 s, a sleeper (1 ms sleeps) beside a holder on CPU, the holder
/// calling sched_yield() in its loop when `yields`: the sleeper's split,
/// and the CPU's busy ticks meanwhile.
fn sleeper_beside(tracer: &mut Tracer, yields: bool) -> (KeyDecisionCounts, u64) {
    let mut keys = KeyIntervals::<()>::new(Breakdown::Thread, tracer, true);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(3));
    let holder = {
        let (stop, ready) = (stop.clone(), ready.clone());
        thread::spawn(move || {
            pin(CPU);
            ready.wait();
            while !stop.load(Ordering::Relaxed) {
                if yields {
                    // SAFETY: no preconditions.
                    unsafe { libc::sched_yield() };
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = {
        let (stop, ready) = (stop.clone(), ready.clone());
        thread::spawn(move || {
            pin(CPU);
            tx.send(gettid()).unwrap();
            ready.wait();
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let sleeper_tid = u64::from(rx.recv().unwrap());
    keys.interval(tracer, |_| ()).unwrap();
    let busy_before = busy_ticks(CPU);
    ready.wait();
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    sleeper.join().unwrap();
    let busy = busy_ticks(CPU) - busy_before;
    let split = keys
        .interval(tracer, |reading| {
            (reading.active())
                .find(|(a, _)| a.key == sleeper_tid)
                .and_then(|(a, new)| a.waits(new).key_decision.clone())
        })
        .unwrap();
    holder.join().unwrap();
    let split = split.unwrap_or_else(|| panic!("the sleeper {sleeper_tid} has no split"));
    (split, busy)
}

#[test]
fn a_yielding_holder_is_told_from_a_preempted_one() {
    let Some(mut tracer) = load_by_tid() else {
        return;
    };
    let notes = tracer.notes.join("; ");
    assert!(
        !notes.contains("counts a holder that yielded as preempted"),
        "this kernel should tell yields at the switch (5.15+, x86-64 or arm64): {notes}"
    );
    let (d, busy) = sleeper_beside(&mut tracer, true);
    let context = format!("CPU {CPU} busy {busy} ticks of ~150 (the holder spins through it)");
    let (yielded, waits) = (d.held(HolderLeft::Yielded), d.waits());
    eprintln!("beside a yielder: {yielded} of {waits} waits ended by a yield: {d:?}");
    assert!(waits > 200, "{waits} waits of the sleeper ({context})");
    // The holder is in sched_yield() nearly all the time: the switch to the
    // woken sleeper is mostly its yield's (the rest are preemptions in the
    // instants between two calls, or other tasks holding the CPU).
    assert!(
        yielded * 2 > waits,
        "beside a yielder: {yielded} of {waits} waits ended by a yield ({context}): {d:?}"
    );

    let (d, busy) = sleeper_beside(&mut tracer, false);
    let context = format!("CPU {CPU} busy {busy} ticks of ~150");
    let (yielded, waits) = (d.held(HolderLeft::Yielded), d.waits());
    eprintln!("beside a loop: {yielded} of {waits} waits ended by a yield: {d:?}");
    assert!(waits > 200, "{waits} waits of the sleeper ({context})");
    // No yield of its own; a task of the machine's that yields while the
    // sleeper waits behind it may count one.
    assert!(
        yielded * 100 <= waits,
        "beside a plain loop: {yielded} of {waits} waits ended by a yield ({context}): {d:?}"
    );
}
