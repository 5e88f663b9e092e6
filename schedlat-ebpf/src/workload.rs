//! The workload views: the neighbour-pair table (per pair of cgroups,
//! the time the first's tasks waited while a task of the second held the
//! CPU) and the names of cgroups sent at their creation. Both off unless
//! the loader says: the first is only in the sched_switch programs with
//! pairs (main.rs, names::BTF_PAIRS_PROGRAMS), the second's cgroup_mkdir
//! program is attached only when cgroups are named.
//!
//! Compute.pairs is checked as well, although those programs are only
//! loaded with it on: the opaque check keeps LLVM from spreading the code
//! below into the switch's paths (without it, sched_switch_decision_pairs
//! took 27,538 verified instructions on 6.18, with it 15,812; the victims'
//! 61,827 against 32,313).
//!
//! A wait is charged by time, not to the last task on the CPU: each CPU
//! keeps its last RING_SWITCHES runs (who held it, from when to when) in
//! SWITCHES, written at every switch, and the switch-in that ends a wait
//! walks them back to the wait's start, charging each holder its time on
//! the CPU inside the wait. The last holder alone is right on a flat run
//! queue and wrong under group scheduling and for CPU-bound waiters: a
//! sleeper that runs a few microseconds per millisecond ends most of its
//! CPU-bound neighbours' waits, and was charged with them whole.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_probe_read_kernel_str_bytes,
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
};
use schedlat_common::{
    decision::{Decided, Decision, Pass},
    flat::{above, min, nonzero, select},
    start,
    workload::{
        HOLDER_IDLE, HOLDER_UNAPPORTIONED, HOLDER_WAITED, NameHeader, NameRecord, PairKey,
        PairStats, RING_SWITCHES, ShareKey, SwitchRecord, SwitchRing, WorkloadCounters,
    },
};

use crate::{
    atomic,
    bpf::{barrier_var, cpu, now},
    config::{CGROUP, COMPUTE, DECISION, get},
    decision,
    memory::{CgroupPtr, TaskPtr},
};

/// Pairs, cumulative since load; sized by the loader (`--max-pairs`), 1
/// entry when off. Userspace deletes the pairs of cgroups that are gone.
#[map]
static PAIRS: HashMap<PairKey, PairStats> = HashMap::with_max_entries(1, 0);

/// The second role's pairs (`count_share`), sized as PAIRS.
#[map]
static SHARES: HashMap<ShareKey, PairStats> = HashMap::with_max_entries(1, 0);

/// Per CPU, its last runs (schedlat_common::workload::SwitchRing): 400
/// bytes a CPU, written only with pairs on.
#[map]
static SWITCHES: PerCpuArray<SwitchRing> = PerCpuArray::with_max_entries(1, 0);

#[map]
static WORKLOAD_COUNTERS: PerCpuArray<WorkloadCounters> = PerCpuArray::with_max_entries(1, 0);

/// Name records (schedlat_common::workload::NameHeader + path); the
/// loader sizes it (one page when cgroups are not named).
#[map]
static CGROUP_NAMES: RingBuf = RingBuf::with_byte_size(4096, 0);

/// Where a name record is built: 1 KiB of path is too big for the
/// 512-byte stack.
#[map]
static NAME_SCRATCH: PerCpuArray<NameRecord> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn counters() -> Option<&'static mut WorkloadCounters> {
    // SAFETY: per-CPU value; the sched tracepoints' programs do not nest
    // on a CPU.
    WORKLOAD_COUNTERS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// The pair key of a task that held a CPU: its cgroup, or HOLDER_IDLE
/// for an idle task (pid 0).
#[inline(always)]
fn holder_of(task: TaskPtr, tid: u32) -> u64 {
    match tid {
        0 => HOLDER_IDLE,
        _ => task.css().cgroup_id(),
    }
}

/// Every switch, with pairs on: `prev` held this CPU from the previous
/// switch until now. Recorded whether or not the switch ends a measured
/// wait (an idle CPU's runs and a filtered-out task's runs are time that
/// others waited through), after the switch's own wait is charged
/// (`count_pair` charges prev's run up to the switch itself).
///
/// main.rs calls it after the measurement, with a clock of its own: read
/// before the measurement with its clock, the code around it changed
/// shape and the histogram's sched_switch, without pairs, went from
/// 10,652 to 13,744 verified instructions on 6.18.
#[inline(always)]
pub fn switched(prev: TaskPtr) {
    if get(&COMPUTE.pairs) == 0 {
        return;
    }
    let holder = holder_of(prev, prev.pid());
    let now = now();
    let Some(ring) = SWITCHES.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: per-CPU value, no nesting (counters()).
    record_run(unsafe { &mut *ring }, holder, now);
}

/// Adds to a CPU's ring of runs (the pairs' here, the slow stacks' in
/// slow.rs) that `holder` held it from the last switch until `now`.
#[inline(always)]
pub fn record_run(ring: &mut SwitchRing, holder: u64, now: u64) {
    // The first switch since load has no start: a run of no length, which
    // no wait reaches back over.
    let since = match ring.last_at {
        0 => now,
        at => at,
    };
    let i = barrier_var(ring.next as usize) & (RING_SWITCHES - 1);
    if let Some(r) = ring.records.get_mut(i) {
        *r = SwitchRecord {
            since,
            until: now,
            holder,
        };
    }
    ring.next += 1;
    ring.last_at = now;
}

/// When the run in progress on this CPU began: the last recorded switch
/// (none yet: `now`, a run of no length).
#[inline(always)]
pub fn running_since(ring: &SwitchRing, now: u64) -> u64 {
    select(nonzero(ring.last_at), ring.last_at, now)
}

/// The run `k + 1` places back from `newest` (`ring.next`, read once by
/// the walk), among the last RING_SWITCHES. A record not written yet is
/// all zeros: no run.
#[inline(always)]
pub fn run_back(ring: &SwitchRing, newest: u64, k: u64) -> Option<&SwitchRecord> {
    let i = barrier_var(newest.wrapping_sub(k + 1) as usize) & (RING_SWITCHES - 1);
    ring.records.get(i)
}

/// Charges the wait of `next` that a switch from `prev` (TID `prev_tid`)
/// just ended (`word` its start word, `wait` its length, `now` the
/// switch) to the holders of this CPU during it: prev, since the last
/// recorded switch, then the recorded runs. A wait that was queued on
/// another CPU (a preempted task was queued on the CPU its word names) is
/// unapportioned whole: this CPU's runs are not what it waited through.
/// The task pointers are None in the tp hook mode, which the loader
/// refuses with pairs.
///
/// wait.rs calls it as soon as the wait is known, before the histogram's
/// and the split's branches: called after them, each of their paths went
/// through this code again (sched_switch with --cgroups took 35,918
/// verified instructions and 141 ms to load, against 11,614 and 48 ms
/// without pairs).
#[inline(always)]
pub fn count_pair(
    (prev, prev_tid): (Option<TaskPtr>, u32),
    next: Option<TaskPtr>,
    (word, wait, now): (u64, u64, u64),
) {
    if get(&COMPUTE.pairs) == 0 {
        return;
    }
    let (Some(prev), Some(next)) = (prev, next) else {
        return;
    };
    let holder = holder_of(prev, prev_tid);
    let victim = next.css().cgroup_id();
    let last = start::last_cpu_plus_one(word);
    let preempted = start::kind_bits(word) == start::Kind::Preempted as u64;
    let moved = preempted && last != 0 && last != u64::from(cpu()) + 1;
    schedlat_pairs_at_switch(victim, holder, wait, now, u64::from(moved));
}

/// The walk: from the switch back, each holder's time on this CPU inside
/// the wait `[now - wait, now]`, consecutive runs of one holder charged at
/// once; what the ring does not reach (or all of it, when moved) is
/// charged to HOLDER_UNAPPORTIONED. The charges add up to the wait
/// exactly: the runs tile the CPU's time.
///
/// A global function (external linkage), never inlined: the verifier
/// checks its bounded loop once, on its own, not once per path of
/// sched_switch that reaches it (decision.rs schedlat_decision_at_switch
/// says the same of its own).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_pairs_at_switch(
    victim: u64,
    prev: u64,
    wait: u64,
    now: u64,
    moved: u64,
) -> u64 {
    let began = now.wrapping_sub(wait);
    // The wait's tag: its end and CPU (bpf_ktime_get_ns is below 2^52 for
    // 52 days of uptime; a tag that repeats only counts a wait once more).
    let tag = now ^ (u64::from(cpu()) << 52);
    let mut left = wait;
    let mut full = 0;
    if moved == 0
        && let Some(ring) = SWITCHES.get_ptr(0)
    {
        // SAFETY: per-CPU value, no nesting (counters()).
        let ring = unsafe { &*ring };
        let newest = ring.next;
        // prev's run, from the last recorded switch (none yet: no run).
        let since = running_since(ring, now);
        let ran = min(overlap(since, now, began), left);
        let (mut holder, mut held) = (prev, ran);
        left -= ran;
        // Branch-free but for the loop's end and the charge (flat.rs): with
        // branches for the overlap and the cap, each run took the verifier
        // about 850 instructions (16 runs: 10.7k).
        for k in 0..RING_SWITCHES as u64 {
            if left == 0 {
                break;
            }
            let Some(r) = run_back(ring, newest, k) else {
                break;
            };
            // A record not written yet (k >= newest) is all zeros: no run.
            let ran = min(overlap(r.since, r.until, began), left);
            if r.holder != holder && held != 0 {
                full |= schedlat_pair_charge(victim, holder, held, wait, tag);
                held = 0;
            }
            holder = r.holder;
            held += ran;
            left -= ran;
        }
        if held != 0 {
            full |= schedlat_pair_charge(victim, holder, held, wait, tag);
        }
    }
    if left != 0 {
        full |= schedlat_pair_charge(victim, HOLDER_UNAPPORTIONED, left, wait, tag);
    }
    if full != 0
        && let Some(c) = counters()
    {
        c.pairs_overflow += 1;
    }
    0
}

/// The time of the run `[since, until]` at or after `began`, all below
/// 2^63, without a branch.
#[inline(always)]
pub fn overlap(since: u64, until: u64, began: u64) -> u64 {
    let from = select(above(since, began), since, began);
    select(above(until, from), until.wrapping_sub(from), 0)
}

/// The second role of the pairs (docs/containers.md): a wait whose wakeup
/// the fair class declined as not eligible, with a later deadline or
/// behind the holder's protected slice, or that was passed over (its
/// `Decided` word), ended by a fair holder whose hierarchy meets the
/// waiter's at a queue above the waiter's own (decision.rs `group_met`):
/// there the entity of a group the waiter is in lost to the holder's
/// because its tasks had used its share of the CPU. A protected slice
/// counts: the holder's side won it at that queue's last pick, where the
/// waiter's group lost if it was queued (if it was not, its tasks ran
/// little in the window before the wait, and little is charged). In the
/// kubelet case of tests/charges.rs web-1 waits because batch-7 used the
/// node group's share whether the root loop's slice was protected at
/// the wakeup or not; which of the two a wait was is the machine's
/// timing. The wait is charged also to the tasks that ran on this CPU
/// just before it, by their time on the CPU in a window as long as the
/// wait before its start, keyed by that group's cgroup (SHARES). Which of
/// them are in that group, and which are the waiter's own, is userspace's
/// to tell (it knows the hierarchy); the kernel has only the runs'
/// cgroups.
///
/// Called after the decision with the switch's tasks, the wait's
/// `Decided` word (0: the split is off), its length and its end.
#[inline(always)]
pub fn count_share(
    (prev, prev_tid): (Option<TaskPtr>, u32),
    next: Option<TaskPtr>,
    decided: u64,
    (wait, now): (u64, u64),
) {
    if get(&COMPUTE.pairs) == 0 || get(&DECISION.se_my_q) == 0 {
        return;
    }
    // Lost at a fair queue: not eligible there, a later deadline, the
    // holder's protected slice, or passed over (a rule of another kind,
    // another class or a policy, says nothing of the waiter's group's
    // share).
    let d = Decided(decided);
    let rule = d.decision_index();
    // Pass::One..=Pass::ThreePlus (Outcome::PassedOver), one compare.
    let passed_over = d.pass_index().wrapping_sub(Pass::One as u64) <= 2;
    // Decision::NotEligible..=Decision::Protected, one compare.
    const _: () = assert!(
        Decision::LaterDeadline as u64 == Decision::NotEligible as u64 + 1
            && Decision::Protected as u64 == Decision::NotEligible as u64 + 2
    );
    let lost = passed_over || rule.wrapping_sub(Decision::NotEligible as u64) <= 2;
    let (Some(prev), Some(next)) = (prev, next) else {
        return;
    };
    if decided & Decided::MEASURED == 0 || !lost || prev_tid == 0 {
        return;
    }
    let Some(lost) = decision::group_met(next, prev) else {
        return;
    };
    let parent = lost.group_css().cgroup_id();
    let victim = next.css().cgroup_id();
    let prev = holder_of(prev, prev_tid);
    schedlat_share_at_switch(victim, parent, prev, wait, now);
}

/// The share walk: each run on this CPU in `[began - wait, began]` (the
/// wait began at `began = now - wait`), newest first, charged to the
/// triple (`victim`, its holder, `parent`: a ShareKey) by its time inside that window;
/// consecutive runs of one holder at once; and the wait itself to
/// (`victim`, HOLDER_WAITED, `parent`): where it was decided. `prev` holds the run in
/// progress, from the last recorded switch (it may have begun before the
/// wait). Global, as the pairs walk.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_share_at_switch(
    victim: u64,
    parent: u64,
    prev: u64,
    wait: u64,
    now: u64,
) -> u64 {
    let Some(ring) = SWITCHES.get_ptr(0) else {
        return 0;
    };
    // SAFETY: per-CPU value, no nesting (counters()).
    let ring = unsafe { &*ring };
    let began = now.wrapping_sub(wait);
    let from = began.saturating_sub(wait);
    let tag = now ^ (u64::from(cpu()) << 52);
    let newest = ring.next;
    let mut full = 0;
    let since = running_since(ring, now);
    let (mut holder, mut held) = (prev, window_overlap((since, now), (from, began)));
    for k in 0..RING_SWITCHES as u64 {
        let Some(r) = run_back(ring, newest, k) else {
            break;
        };
        // Runs wholly inside the wait or before the window give nothing
        // (no branch: each one doubled the verifier's paths).
        let ran = window_overlap((r.since, r.until), (from, began));
        if r.holder != holder && held != 0 {
            full |= schedlat_share_charge(victim, holder, parent, held, tag);
            held = 0;
        }
        holder = r.holder;
        held += ran;
    }
    if held != 0 {
        full |= schedlat_share_charge(victim, holder, parent, held, tag);
    }
    // The wait itself, at the level it was decided at.
    full |= schedlat_share_charge(victim, HOLDER_WAITED, parent, wait, tag);
    if full != 0
        && let Some(c) = counters()
    {
        c.shares_overflow += 1;
    }
    0
}

/// The time of the run `[since, until]` inside `[from, to]`, without a
/// branch (all below 2^63).
#[inline(always)]
fn window_overlap((since, until): (u64, u64), (from, to): (u64, u64)) -> u64 {
    let start = select(above(since, from), since, from);
    let end = select(above(until, to), to, until);
    select(above(end, start), end.wrapping_sub(start), 0)
}

/// Adds `ns` to the second role's pair (`victim`, `user`, `group`) (no
/// maximum: a share charge has no wait of its own); 1 when the full
/// table had no room for a new pair. The idle CPU used no group's share:
/// not charged (its entries would only take the table's room). Global.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_share_charge(
    victim: u64,
    user: u64,
    group: u64,
    ns: u64,
    tag: u64,
) -> u64 {
    if user == HOLDER_IDLE {
        return 0;
    }
    let key = ShareKey {
        victim,
        user,
        group,
    };
    charge(&SHARES, &key, (ns, 0), tag)
}

/// Adds `ns` of the wait `wait` (tagged `tag`) to the pair (`victim`,
/// `holder`); 1 when the full table had no room for a new pair (its time
/// counted as overflow), else 0. Global, as the walk.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_pair_charge(
    victim: u64,
    holder: u64,
    ns: u64,
    wait: u64,
    tag: u64,
) -> u64 {
    let full = charge(&PAIRS, &PairKey { victim, holder }, (ns, wait), tag);
    if full != 0
        && let Some(c) = counters()
    {
        c.pairs_overflow_ns += ns;
    }
    full
}

/// Adds `ns` to `key`'s pair in `table`, `wait` to its maximum; the tag
/// counts a wait once however many charges it makes. 1 when the full
/// table had no room for a new pair.
#[inline(always)]
fn charge<K>(table: &HashMap<K, PairStats>, key: &K, (ns, wait): (u64, u64), tag: u64) -> u64 {
    let Some(stats) = pair_stats(table, key) else {
        return 1;
    };
    // SAFETY: a map value, valid for this program run; other CPUs update
    // it too: count and sum are atomic adds.
    unsafe {
        let last = &raw mut (*stats).tag;
        if core::ptr::read_volatile(last) != tag {
            core::ptr::write_volatile(last, tag);
            atomic::add_u64(&mut (*stats).count, 1);
        }
        atomic::add_u64(&mut (*stats).sum_ns, ns);
        let max = &raw mut (*stats).max_ns;
        if wait > core::ptr::read_volatile(max) {
            core::ptr::write_volatile(max, wait);
        }
    }
    0
}

/// The pair's entry, inserted zeroed at its first wait (BPF_NOEXIST: of
/// two CPUs inserting it at once, the second finds the first's).
#[inline(always)]
fn pair_stats<K>(table: &HashMap<K, PairStats>, key: &K) -> Option<*mut PairStats> {
    if let Some(p) = table.get_ptr_mut(key) {
        return Some(p);
    }
    let _ = table.insert(key, PairStats::default(), u64::from(BPF_NOEXIST));
    table.get_ptr_mut(key)
}

/// A cgroup was just made, `path` its path from its hierarchy's root:
/// sends its id and path if it is in the hierarchy the cgroup chain reads,
/// so userspace can name it even if it is gone before its waits are shown.
/// A record the ring buffer has no room for is counted.
#[inline(always)]
pub fn created(cgroup: CgroupPtr, path: *const u8) {
    if cgroup.hierarchy_id() != get(&CGROUP.hierarchy_id) {
        return;
    }
    let Some(record) = NAME_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: per-CPU value, no nesting (counters()).
    let record = unsafe { &mut *record };
    // SAFETY: the tracepoint's path argument is a kernel string.
    let len = match unsafe { bpf_probe_read_kernel_str_bytes(path, &mut record.path) } {
        Ok(bytes) => bytes.len(),
        Err(_) => return,
    };
    record.header = NameHeader {
        id: cgroup.id(),
        len: len as u64,
    };
    let size = size_of::<NameHeader>() + len;
    let Some(bytes) = record_bytes(record, size) else {
        return;
    };
    if CGROUP_NAMES.output::<[u8]>(bytes, 0).is_err()
        && let Some(c) = counters()
    {
        c.names_lost += 1;
    }
}

/// The first `size` bytes of `record`, when that many are in it.
#[inline(always)]
fn record_bytes(record: &NameRecord, size: usize) -> Option<&[u8]> {
    if size > size_of::<NameRecord>() {
        return None;
    }
    // SAFETY: `size` bytes from the start of the record are inside it.
    Some(unsafe { core::slice::from_raw_parts((record as *const NameRecord).cast::<u8>(), size) })
}
