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
/// program (the switch's) dominates and the rest fit beside it.
const THREADS: usize = 2;

/// The tracepoint whose program verifies longest in every mode: the
/// switch carries the most code (the wait's end, the cause and decision
/// splits' switch-in side, the victims tables). On 6.18 with the decision
/// split, 13,560 verified instructions against 2,292 for the wakeup.
const LONGEST: &str = "sched_switch";

/// Loads each `(program, name, tracepoint)` against `btf`, and returns each
/// load's result in the order given. The longest (`LONGEST`) is taken
/// first and the rest in the order given: the start-up waits for the
/// last load to end, and with the switch queued third (its place in the
/// attach order) it began only when the wakeup_new program's load ended
/// on the other thread, which then added to the wait.
pub(super) fn load_all(
    programs: Vec<(&mut BtfTracePoint, &'static str, &'static str)>,
    btf: &aya::Btf,
) -> Vec<Result<(), ProgramError>> {
    let times = load_times::wanted();
    let count = programs.len();
    const ONCE: &str = "load_order lists each index once";
    let order = load_order(programs.iter().map(|&(_, _, tracepoint)| tracepoint));
    let mut programs: Vec<_> = programs.into_iter().map(Some).collect();
    let ordered: Vec<_> = order
        .into_iter()
        .map(|i| (i, programs[i].take().expect(ONCE)))
        .collect();
    let queue = Mutex::new(ordered.into_iter());
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

/// The indexes of `tracepoints` in the order to load them: `LONGEST`'s
/// first, the others as given.
fn load_order<'a>(tracepoints: impl Iterator<Item = &'a str>) -> Vec<usize> {
    let mut order: Vec<(usize, &str)> = tracepoints.enumerate().collect();
    // A stable sort: only the longest moves.
    order.sort_by_key(|&(_, tracepoint)| tracepoint != LONGEST);
    order.into_iter().map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_loads_first_and_the_rest_keep_their_order() {
        let attach_order = [
            "sched_wakeup",
            "sched_wakeup_new",
            "sched_switch",
            "sched_process_exit",
            "cgroup_mkdir",
        ];
        assert_eq!(load_order(attach_order.into_iter()), [2, 0, 1, 3, 4]);
    }

    #[test]
    fn without_a_switch_the_order_is_the_one_given() {
        let order = load_order(["sched_wakeup", "sched_waking"].into_iter());
        assert_eq!(order, [0, 1]);
    }
}
