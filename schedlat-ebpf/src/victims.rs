//! The victims mode's tables: per task that waited (victim), and per task
//! that held the CPU when a wait ended (culprit: the `prev` of the switch
//! that ended it). docs/victims.md says what the attribution means.
//!
//! Rows live in arrays, not hash maps: a wait costs two array lookups to
//! find a row, not two hash lookups (this runs on every switch that ends a
//! measured wait, so it must cost no more than the histogram). A task's row
//! index for the current interval is cached in a per-TID slot array, tagged
//! with the interval; a task's first wait in an interval takes the next free
//! row with one atomic add. When the rows are used up the wait is counted as
//! overflow, never dropped silently.
//!
//! Each row array has two halves, picked by the low bit of EPOCH: the
//! programs fill one while userspace drains the other, so every interval
//! starts empty (exact per-interval maxima) and a task that exits keeps its
//! row until its interval is reported.
//!
//! Rows are updated without atomics: a task is switched in (victim) or out
//! (culprit) on one CPU at a time, under that CPU's run-queue lock, so two
//! updates of one row never overlap. Every CPU's idle task is pid 0, so idle
//! culprits get a row per CPU, reserved at the start of each half.
//!
//! A culprit is also charged by time (`held_ns`, the one field added
//! atomically): each CPU keeps its last runs with their tasks' culprit
//! rows (CULPRIT_RUNS, written at every switch), and the switch that ends
//! a wait walks them back to the wait's start, charging each run's task
//! its time on the CPU inside the wait, as the pairs do per cgroup
//! (workload.rs). The last holder alone is wrong for CPU-bound waiters: a
//! sleeper that runs a few microseconds per millisecond ends most of its
//! CPU-bound neighbours' waits. Its row's `held_ns` can be added by walks
//! on every CPU it ran on, hence atomic.

use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};
use schedlat_common::{
    causes::Cause,
    decision::Decided,
    flat::{min, select},
    victims::{ModeCounters, ROW_DECISIONS, ROW_HOLDERS, ROW_OUTCOMES, RowSlot, WaitStats},
    workload::{RING_SWITCHES, SwitchRing},
};

use crate::{
    atomic,
    bpf::{barrier_var, cpu, masked, now},
    config::{COMPUTE, get},
    memory::TaskPtr,
    wait::{EPOCH, Ended},
    workload::{overlap, record_run, run_back, running_since},
};

/// Per TID: its row in the current interval (START's sizing: pid_max). The
/// loader sizes all of these maps; 1 entry each when the mode is off.
#[map]
static VICTIM_SLOTS: Array<RowSlot> = Array::with_max_entries(1, 0);
#[map]
static CULPRIT_SLOTS: Array<RowSlot> = Array::with_max_entries(1, 0);

/// 2 x MAX_TASKS rows: half 0, then half 1.
#[map]
static VICTIM_ROWS: Array<WaitStats> = Array::with_max_entries(1, 0);
/// 2 x (IDLE_ROWS + MAX_TASKS) rows: per half, one row per CPU's idle task,
/// then the allocated ones.
#[map]
static CULPRIT_ROWS: Array<WaitStats> = Array::with_max_entries(1, 0);

/// Rows taken per half: victims 0, 1, culprits 0, 1. Userspace zeroes a
/// half's count once it has drained it.
#[map]
static ROWS_USED: Array<u64> = Array::with_max_entries(4, 0);

/// Per CPU, its last runs, each with its task's culprit row: a record's
/// `holder` is the interval's epoch (high half) and the row's index in
/// CULPRIT_ROWS (low half); NO_ROW when the task had none (the table was
/// full).
#[map]
static CULPRIT_RUNS: PerCpuArray<SwitchRing> = PerCpuArray::with_max_entries(1, 0);

/// A run whose task had no culprit row: its time is unapportioned.
const NO_ROW: u64 = u32::MAX as u64;

/// Overflow and slow-event counters, per CPU, cumulative.
#[map]
static MODE_COUNTERS: PerCpuArray<ModeCounters> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub fn counters() -> Option<&'static mut ModeCounters> {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest on
    // a CPU (they run with the run-queue lock held, interrupts off).
    MODE_COUNTERS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// Charges the wait of `next` that a switch from `prev` just ended: to
/// `next`'s victim row, to `prev`'s culprit row (the last holder), and by
/// time to the culprit rows of the tasks that ran on this CPU during it.
/// Returns what `switched` needs of it: prev's culprit row (its index, or
/// NO_ROW), the epoch and the switch's time.
#[inline(always)]
pub fn charge(prev: TaskPtr, next: TaskPtr, ended: Ended) -> Run {
    let cpu = cpu();
    let epoch = EPOCH.get(0).copied().unwrap_or(0);
    let half = epoch & 1;
    match victim_row(ended.next_tid, epoch, half) {
        Some((row, fresh)) => update(row, fresh, next, prev, ended, cpu),
        None => bump(|c| c.victims_overflow += 1),
    }
    let prev_row = match culprit_row(ended.prev_tid, cpu, epoch, half) {
        Some((row, fresh, index)) => {
            update(row, fresh, prev, next, ended, cpu);
            u64::from(index)
        }
        None => {
            bump(|c| c.culprits_overflow += 1);
            NO_ROW
        }
    };
    // A preempted task queued on another CPU while it waited: this CPU's
    // runs are not what it waited through (the pairs' rule, workload.rs).
    let moved = ended.migrated && ended.began.index() == Cause::Preempted as usize;
    schedlat_culprits_at_switch(
        prev_row,
        u64::from(epoch),
        ended.wait_ns,
        ended.now,
        u64::from(moved),
    );
    Run {
        row: prev_row,
        epoch,
        now: ended.now,
    }
}

/// prev's run as `charge` found it, so that `switched` reads none of it
/// again (a helper call for the time, a map lookup for the epoch and the
/// row).
#[derive(Clone, Copy)]
pub struct Run {
    row: u64,
    epoch: u32,
    now: u64,
}

/// Every switch: `prev` held this CPU from the previous switch until now,
/// kept with its culprit row for the walks of the waits that end later:
/// as `charge` found it, else taken now if it has none this interval.
/// After `charge`, whose walk counts prev's run up to this switch itself.
#[inline(always)]
pub fn switched(prev: TaskPtr, charged: Option<Run>) {
    let run = match charged {
        Some(run) => run,
        None => {
            let epoch = EPOCH.get(0).copied().unwrap_or(0);
            Run {
                row: row_of_run(prev, epoch),
                epoch,
                now: now(),
            }
        }
    };
    if let Some(ring) = CULPRIT_RUNS.get_ptr_mut(0) {
        let holder = (u64::from(run.epoch) << 32) | run.row;
        // SAFETY: per-CPU value; the sched tracepoints' programs do not
        // nest on a CPU.
        record_run(unsafe { &mut *ring }, holder, run.now);
    }
}

/// The culprit row of `prev`, which ended no wait at this switch: taken
/// now if it has none this interval (its identity written at once).
#[inline(always)]
fn row_of_run(prev: TaskPtr, epoch: u32) -> u64 {
    let (tid, cpu) = (prev.pid(), cpu());
    match culprit_row(tid, cpu, epoch, epoch & 1) {
        Some((row, fresh, index)) => {
            // Its CPU too: the idle tasks' rows are told apart by it.
            if fresh {
                *row = WaitStats {
                    task: prev.info(),
                    max_cpu: cpu,
                    ..WaitStats::default()
                };
            }
            u64::from(index)
        }
        None => NO_ROW,
    }
}

/// The walk: from the switch back, each run's time on this CPU inside the
/// wait `[now - wait, now]` added to its task's `held_ns`; prev's run since
/// the last recorded switch to `prev_row`. What no run of this interval
/// reaches (or all of it, when `moved`) is counted unapportioned. A global
/// function, never inlined: the verifier checks its loop once, on its own
/// (workload.rs schedlat_pairs_at_switch says the same of its own).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_culprits_at_switch(
    prev_row: u64,
    epoch: u64,
    wait: u64,
    now: u64,
    moved: u64,
) -> u64 {
    let began = now.wrapping_sub(wait);
    let mut left = wait;
    if moved == 0
        && let Some(ring) = CULPRIT_RUNS.get_ptr(0)
    {
        // SAFETY: per-CPU value, no nesting.
        let ring = unsafe { &*ring };
        let newest = ring.next;
        // prev's run, from the last recorded switch (none yet: no run).
        let since = running_since(ring, now);
        let ran = min(overlap(since, now, began), left);
        left -= held(prev_row, ran);
        for k in 0..RING_SWITCHES as u64 {
            if left == 0 {
                break;
            }
            let Some(r) = run_back(ring, newest, k) else {
                break;
            };
            // A record not written yet (k >= newest) is all zeros: no run.
            // One of the previous interval: its row is userspace's now.
            let ran = min(overlap(r.since, r.until, began), left);
            let ours = select(u64::from(r.holder >> 32 == epoch), ran, 0);
            if ours != 0 {
                left -= held(r.holder & NO_ROW, ours);
            }
        }
    }
    if left != 0 {
        bump(|c| c.culprits_unapportioned_ns += left);
    }
    0
}

/// Adds `ns` to the culprit row at `index` of CULPRIT_ROWS (none at
/// NO_ROW: beyond the array); the time charged (0 without a row).
#[inline(always)]
fn held(index: u64, ns: u64) -> u64 {
    let Some(row) = CULPRIT_ROWS.get_ptr_mut(index as u32) else {
        return 0;
    };
    // SAFETY: an aligned u64 in a map value; walks on other CPUs add to it
    // too (the module comment).
    unsafe { atomic::add_u64(&raw mut (*row).held_ns, ns) };
    ns
}

/// Adds the wait `ended` to the row of `task`, whose other side is `other`
/// (the culprit of a victim's wait, the victim of a culprit's).
///
/// A row takes the task's identity and class at its first wait in the
/// interval and at its longest; its comm at every wait (a thread names
/// itself after its first run, a process can exec: `perf sched latency`
/// shows the latest comm too). Reading the rest of task_struct only then
/// keeps the common case to two loads per task.
#[inline(always)]
fn update(row: &mut WaitStats, fresh: bool, task: TaskPtr, other: TaskPtr, ended: Ended, cpu: u32) {
    let wait = ended.wait_ns;
    if fresh {
        *row = WaitStats {
            task: task.info(),
            ..WaitStats::default()
        };
    } else {
        row.task.comm = task.comm();
    }
    row.count += 1;
    row.total_ns += wait;
    if let Some(n) = row.kinds.get_mut(barrier_var(ended.began.index())) {
        *n += 1;
    }
    if ended.migrated {
        row.migrated += 1;
    }
    // The decision split's programs only (0 otherwise: dropped at build).
    let d = Decided(ended.decided);
    if d.measured() {
        let decision = masked(d.decision_index(), ROW_DECISIONS as u64 - 1) as usize;
        let outcome = d.outcome_index();
        let outcome = masked(outcome, ROW_OUTCOMES as u64 - 1) as usize;
        row.decisions[decision] += 1;
        row.outcomes[outcome] += 1;
        row.holders[masked(d.holder_index(), ROW_HOLDERS as u64 - 1) as usize] += 1;
        row.passes = row.passes.wrapping_add(d.passes() as u32);
    }
    if wait > row.max_ns {
        row.max_ns = wait;
        row.max_at_ns = ended.now;
        row.max_cpu = cpu;
        row.max_other = other.info();
        row.task = task.info();
    }
}

/// `tid`'s victim row in this interval, and whether it was just taken.
#[inline(always)]
fn victim_row(tid: u32, epoch: u32, half: u32) -> Option<(&'static mut WaitStats, bool)> {
    let max = get(&COMPUTE.max_tasks);
    let (index, fresh) = slot(&VICTIM_SLOTS, tid, epoch, half, max)?;
    let row = VICTIM_ROWS.get_ptr_mut(half * max as u32 + index)?;
    // SAFETY: a map value, valid for this program run; no other CPU updates
    // this row meanwhile (module comment).
    Some((unsafe { &mut *row }, fresh))
}

/// The culprit row of `tid` switched out on `cpu`, whether it was just
/// taken, and its index in CULPRIT_ROWS: idle tasks (pid 0) have the
/// reserved row of their CPU, zeroed by userspace after each drain (fresh
/// again when it counts nothing).
#[inline(always)]
fn culprit_row(
    tid: u32,
    cpu: u32,
    epoch: u32,
    half: u32,
) -> Option<(&'static mut WaitStats, bool, u32)> {
    let max = get(&COMPUTE.max_tasks);
    let idle = get(&COMPUTE.idle_rows);
    let base = half * (idle + max) as u32;
    if tid == 0 {
        if u64::from(cpu) >= idle {
            return None;
        }
        let index = base + cpu;
        let row = CULPRIT_ROWS.get_ptr_mut(index)?;
        // SAFETY: as in victim_row.
        let row = unsafe { &mut *row };
        let fresh = row.count == 0 && row.held_ns == 0;
        return Some((row, fresh, index));
    }
    let (index, fresh) = slot(&CULPRIT_SLOTS, tid, epoch, 2 + half, max)?;
    let index = base + idle as u32 + index;
    let row = CULPRIT_ROWS.get_ptr_mut(index)?;
    // SAFETY: as in victim_row.
    Some((unsafe { &mut *row }, fresh, index))
}

/// The row index of `tid` in this interval from its slot, or the next free
/// one of counter `used` (taken now: `fresh`). None when the rows are used
/// up, or the TID is beyond the slot array (pid_max raised after load).
#[inline(always)]
fn slot(slots: &Array<RowSlot>, tid: u32, epoch: u32, used: u32, max: u64) -> Option<(u32, bool)> {
    let slot = slots.get_ptr_mut(tid)?;
    // 0 means "never used": the tag is the epoch plus one.
    let tag = epoch.wrapping_add(1);
    // SAFETY: a map value, valid for this program run; only the CPU that
    // switches this task touches its slot.
    let slot = unsafe { &mut *slot };
    if slot.tag == tag {
        return Some((slot.index, false));
    }
    let counter = ROWS_USED.get_ptr_mut(used)?;
    // Rows are shared by all CPUs: the one allocation per task and interval
    // is an atomic add (BPF_ATOMIC | BPF_FETCH, kernel 5.12+).
    // SAFETY: an aligned u64 in a map value.
    let index = unsafe { atomic::fetch_add_u64(counter, 1) };
    if index >= max {
        return None;
    }
    *slot = RowSlot {
        tag,
        index: index as u32,
    };
    Some((index as u32, true))
}

#[inline(always)]
fn bump(f: impl FnOnce(&mut ModeCounters)) {
    if let Some(c) = counters() {
        f(c);
    }
}
