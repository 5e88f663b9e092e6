//! Loading (verifying) the tp_btf programs on two threads.
//!
//! Verification is most of schedlat's start-up: on 6.18 the decision
//! split's wakeup and switch programs take tens of milliseconds each in
//! BPF_PROG_LOAD, one after the other. A privileged loader's verifier
//! runs take no global lock (kernel/bpf/verifier.c holds bpf_verifier_lock
//! only for unprivileged loads), so two programs verify at once on two
//! CPUs. Attaching stays in the caller, in the original order, so what
//! starts measuring first is unchanged.

use std::sync::Mutex;

use aya::programs::{BtfTracePoint, ProgramError};

use super::load_times;

/// Threads that verify at once: more than two buys little, since one
/// program (the wakeup's) dominates and the rest fit beside it.
const THREADS: usize = 2;

/// Loads each `(program, name, tracepoint)` against `btf`, and returns each
/// load's result in the order given. Workers take the next program in that
/// order, so the longest (listed first) starts at once.
pub(super) fn load_all(
    programs: Vec<(&mut BtfTracePoint, &'static str, &'static str)>,
    btf: &aya::Btf,
) -> Vec<Result<(), ProgramError>> {
    let times = load_times::wanted();
    let count = programs.len();
    let queue = Mutex::new(programs.into_iter().enumerate());
    let results: Mutex<Vec<Option<Result<(), ProgramError>>>> =
        Mutex::new((0..count).map(|_| None).collect());
    let work = || {
        loop {
            // The lock is held only to take the next program, never
            // across a load.
            let next = queue.lock().expect("no worker panics holding it").next();
            let Some((i, (prog, name, tracepoint))) = next else {
                return;
            };
            let started = load_times::Started::now();
            let result = prog.load(tracepoint, btf);
            load_times::report(times, name, started, &result, || prog.info());
            results.lock().expect("no worker panics holding it")[i] = Some(result);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..THREADS.min(count) {
            scope.spawn(work);
        }
        work();
    });
    results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every program taken from the queue was loaded"))
        .collect()
}
