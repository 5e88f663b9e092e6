//! The split as this kernel counts it (root: loads the programs). Every
//! measured wait is in exactly one class of each split, whatever the hook
//! mode; what a mode cannot see is counted as unknown, never guessed.
//! The scenario tests (tests/) check what each class shows under a known
//! load; these check the kernel's bookkeeping, and print what the
//! verifier took for each program.

use std::{
    thread,
    time::{Duration, Instant},
};

use schedlat_common::causes::{Cause, DEPTH, HELD_BY, PLACEMENT};

use crate::{
    collect::tracer::Tracer,
    histogram::CauseCounts,
    kernel::{
        filter::{Filter, FilterSpec},
        hook::HookChoice,
        loader::KernelSources,
        modes::{Keyed, Modes},
    },
};

/// Loads in `hook` with `modes`, for the whole system; None (skipped, said
/// on stderr) when not root, which CI=true makes a failure.
pub(super) fn load(hook: HookChoice, modes: &Modes) -> Option<Tracer> {
    load_filtered(hook, modes, &Filter::default())
}

/// [`load`] for the tasks `filter` keeps.
fn load_filtered(hook: HookChoice, modes: &Modes, filter: &Filter) -> Option<Tracer> {
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
    let started = Instant::now();
    let sources = KernelSources::default();
    let tracer = Tracer::load_modes(hook, &sources, 1000, filter, modes)
        .expect("the programs load and attach");
    eprintln!("{hook:?}: loaded and attached in {:?}", started.elapsed());
    for &(program, _) in &tracer.programs {
        let info = tracer.ebpf.program(program).map(|p| p.info());
        if let Some(Ok(info)) = info {
            eprintln!(
                "  {program}: verified_insns {:?}",
                info.verified_instruction_count()
            );
        }
    }
    Some(tracer)
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Two spinning threads and a 1 ms sleeper on CPU 0 for `duration`:
/// preemptions, wakeups behind a queue, the idle task rarely.
fn contend(duration: Duration) {
    let spin = |_| {
        thread::spawn(move || {
            pin(0);
            let end = Instant::now() + duration;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
        })
    };
    let hogs: Vec<_> = (0..2).map(spin).collect();
    let sleeper = thread::spawn(move || {
        pin(0);
        let end = Instant::now() + duration;
        while Instant::now() < end {
            thread::sleep(Duration::from_millis(1));
        }
    });
    for t in hogs {
        t.join().unwrap();
    }
    sleeper.join().unwrap();
}

fn sum(c: &CauseCounts, classes: &[Cause]) -> u64 {
    classes.iter().map(|&k| c.count[k as usize]).sum()
}

/// Each split adds up to the waits. The per-CPU values are copied while
/// the programs run, so one read can catch a wait half counted: a few
/// waits of slack.
fn assert_every_split_counts_every_wait(c: &CauseCounts) {
    let waits = c.waits();
    let near = |n: u64, what: &str| {
        assert!(
            n.abs_diff(waits) <= 4 + waits / 1000,
            "{what} {n} vs {waits} waits: {c:?}"
        );
    };
    near(sum(c, &PLACEMENT), "placement");
    near(sum(c, &HELD_BY), "held by");
    near(sum(c, &DEPTH), "depth");
    let histogram: u64 = c.buckets[Cause::Woken as usize..=Cause::Preempted as usize]
        .iter()
        .flatten()
        .sum();
    near(histogram, "kinds' histograms");
    assert!(sum(c, &[Cause::CrossLlc]) <= c.count[Cause::Migrated as usize] + 4);
    assert!(c.overlap_waits <= waits + 4);
    for (i, &ns) in c.overlap_ns.iter().enumerate() {
        assert!(
            ns <= c.overlap_wait_ns,
            "overlap {i}: {ns} > {}",
            c.overlap_wait_ns
        );
    }
}

fn show(c: &CauseCounts) {
    let names = [
        "woken",
        "new",
        "preempted",
        "same_cpu",
        "migrated",
        "placement?",
        "cross_llc",
        "cross_node",
        "higher",
        "kernel",
        "idle",
        "same_cg",
        "other_cg",
        "held?",
        "d0",
        "d1",
        "d2",
        "d3-4",
        "d5-8",
        "d9+",
        "depth?",
    ];
    let line: Vec<String> = names
        .iter()
        .zip(&c.count)
        .zip(&c.sum_ns)
        .map(|((n, c), s)| format!("{n} {c} ({} us)", s / 1000))
        .collect();
    eprintln!("{}", line.join(", "));
    eprintln!(
        "overlaps: {} waits, {} us; steal {} irq {} throttled {} ns; {:?}",
        c.overlap_waits,
        c.overlap_wait_ns / 1000,
        c.overlap_ns[0],
        c.overlap_ns[1],
        c.overlap_ns[2],
        c.measurable
    );
}

fn split_during(tracer: &Tracer, duration: Duration) -> CauseCounts {
    let before = tracer.read_causes().unwrap().expect("the split is on");
    contend(duration);
    let after = tracer.read_causes().unwrap().unwrap();
    let d = after.since(&before);
    show(&d);
    d
}

#[test]
fn btf_mode_splits_every_wait_and_sees_the_queue() {
    // This process only: a machine whose other tasks wake often onto idle
    // CPUs (a monitoring agent) would add depth-0 waits of its own.
    let this_process = Filter::resolve(&FilterSpec {
        pid: Some(std::process::id()),
        ..FilterSpec::default()
    })
    .unwrap();
    let Some(tracer) = load_filtered(HookChoice::Btf, &Modes::HISTOGRAM, &this_process) else {
        return;
    };
    let m = tracer.measurable.unwrap();
    assert!(m.held_by && m.queue_depth, "{m:?}");
    let c = split_during(&tracer, Duration::from_millis(1500));
    assert!(c.waits() > 200, "{c:?}");
    assert_every_split_counts_every_wait(&c);
    // Spinning threads sharing a CPU are preempted; the sleeper is woken.
    assert!(c.count[Cause::Preempted as usize] > 50, "{c:?}");
    assert!(c.count[Cause::Woken as usize] > 50, "{c:?}");
    assert_eq!(c.count[Cause::HeldByUnknown as usize], 0);
    // Three runnable threads on CPU 0: a wait is queued behind one or
    // two others at least (more when other tasks share the CPU).
    assert!(c.count[Cause::Depth0 as usize] < c.waits() / 10, "{c:?}");
    assert!(c.count[Cause::DepthUnknown as usize] == 0, "{c:?}");
    // The same-CPU waits (most of them: the threads are pinned) carry
    // their overlaps when the kernel has any of the accounting.
    if m.irq || m.steal || m.throttled {
        assert!(c.overlap_waits > 0, "{c:?}");
    }
    // The totals agree with the histogram's.
    let waits = tracer.read_waits().unwrap();
    let split = waits.causes.as_ref().unwrap().waits();
    assert!(split.abs_diff(waits.count()) <= 4 + waits.count() / 1000);
}

#[test]
fn tracepoint_mode_splits_every_wait_and_knows_what_it_cannot_see() {
    let Some(tracer) = load(HookChoice::Tp, &Modes::HISTOGRAM) else {
        return;
    };
    let m = tracer.measurable.unwrap();
    assert!(
        !m.held_by && !m.queue_depth && !m.irq && !m.steal && !m.throttled,
        "{m:?}"
    );
    let c = split_during(&tracer, Duration::from_millis(1000));
    assert!(c.waits() > 200, "{c:?}");
    assert_every_split_counts_every_wait(&c);
    assert!(c.count[Cause::Preempted as usize] > 50, "{c:?}");
    // Who held the CPU and the depth need task pointers.
    assert_eq!(c.count[Cause::HeldByUnknown as usize], sum(&c, &HELD_BY));
    assert_eq!(c.count[Cause::DepthUnknown as usize], sum(&c, &DEPTH));
    assert_eq!(c.overlap_waits, 0);
}

#[test]
fn breakdown_keys_carry_their_split() {
    let keyed = Keyed {
        by: schedlat_common::scope::Breakdown::Cpu,
        max_keys: 64,
    };
    let Some(tracer) = load(HookChoice::Btf, &Modes::histogram(Some(keyed))) else {
        return;
    };
    contend(Duration::from_millis(800));
    let keys = tracer.read_keyed().unwrap();
    let m = tracer.measurable;
    let mut total = CauseCounts::zero(m.unwrap(), false);
    let mut waits = 0u64;
    for (_, stats) in &keys {
        let w = crate::collect::key_intervals::waits_of(stats, m);
        waits += w.count();
        total.merge(w.causes.as_ref().unwrap());
    }
    show(&total);
    assert!(waits > 200);
    // Keys are read one at a time while waits go on: some slack.
    assert!(
        total.waits().abs_diff(waits) <= 20 + waits / 100,
        "{} vs {waits}",
        total.waits()
    );
    assert!(total.count[Cause::Preempted as usize] > 50);
}

#[test]
fn victims_rows_count_how_waits_began() {
    let Some(mut tracer) = load(HookChoice::Btf, &Modes::victims(256)) else {
        return;
    };
    // The victims mode loads the cause split's state only for the decision
    // split of each row (as `slow` does): with one, without the other.
    assert_eq!(tracer.measurable.is_some(), tracer.decision.is_some());
    let mut collector = crate::collect::victims::Collector::start(&mut tracer, 256).unwrap();
    contend(Duration::from_millis(800));
    let interval = collector.end_interval(&mut tracer).unwrap();
    let mut kinds = [0u64; 3];
    let (mut count, mut migrated) = (0, 0);
    for row in &interval.victims {
        for (k, n) in kinds.iter_mut().zip(row.kinds) {
            *k += u64::from(n);
        }
        count += row.count;
        migrated += u64::from(row.migrated);
        assert_eq!(
            row.kinds.iter().map(|&n| u64::from(n)).sum::<u64>(),
            row.count
        );
    }
    eprintln!("victims: {count} waits, kinds {kinds:?}, migrated {migrated}");
    assert!(kinds[Cause::Preempted as usize] > 50 && kinds[Cause::Woken as usize] > 50);
    assert!(migrated <= count);
}
