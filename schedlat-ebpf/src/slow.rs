//! The slow mode: each wait of at least Compute.slow_ns goes to userspace as it
//! happens, with its victim, its culprit and the run-queue length, through a
//! ring buffer (runqslower's job, with context). Only waits over the
//! threshold touch the buffer; a reserve that fails (buffer full, reader
//! behind) is counted, never silent.
//!
//! In the stacks programs (`slow --stacks`) each event also carries the
//! holder's stacks, taken here and nowhere else: only waits over the
//! threshold pay for the walk; the other programs have none of this code.
//! Those programs also keep each CPU's last runs (RUNS), a few stores per
//! switch, so that an event can say who ran during a wait that was passed
//! over, and for how long, not only who held the CPU at its end.

use aya_ebpf::{
    bindings::BPF_F_USER_STACK,
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task_btf, bpf_get_task_stack,
        bpf_probe_read_kernel_buf,
    },
    macros::map,
    maps::{Array, PerCpuArray, RingBuf, StackTrace},
    programs::{BtfTracePointContext, tracing::StackIdContext},
};
use schedlat_common::{
    victims::{NO_WAKER, STACK_FRAMES, SlowEvent, SlowStacks},
    workload::SwitchRing,
};

use crate::{
    bpf::{cpu, now},
    memory::TaskPtr,
    victims::counters,
    wait::Ended,
    workload::record_run,
};

/// The bytes of a ring of runs, copied whole into each event.
const RUN_BYTES: usize = size_of::<SwitchRing>();

/// Default size; the loader sets it (one page when the mode is off). Must be
/// a power-of-two multiple of the page size.
#[map]
static SLOW_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Per TID, the waker of its latest sched_wakeup (`slow --stacks`): the
/// waker's TID in the high half, its stack's id in WAKER_STACKS in the
/// low (NO_WAKER: not kept). Sized from pid_max by the loader with
/// --stacks, one entry otherwise.
#[map]
static WAKERS: Array<u64> = Array::with_max_entries(1, 0);

/// The wakers' kernel stacks, each kept once (bpf_get_stackid hashes
/// them). Without BPF_F_REUSE_STACKID a stack whose bucket holds another
/// is not kept (-EEXIST), rather than overwriting one a pending wait
/// points to: a wait may lose its waker's stack, never get another's.
#[map]
static WAKER_STACKS: StackTrace = StackTrace::with_max_entries(1, 0);

/// Per CPU, its last runs by TID (`--stacks`): written at every switch by
/// the stacks programs alone, copied into each slow event whole.
#[map]
static RUNS: PerCpuArray<SwitchRing> = PerCpuArray::with_max_entries(1, 0);

/// Every switch, in the stacks programs: `prev` (TID `prev_tid`) held
/// this CPU from the previous switch until now, whether or not the switch
/// ends a measured wait (a filtered-out task's run and the idle task's
/// are time others waited through).
///
/// A global function (external linkage), never inlined: the verifier
/// checks it once, on its own, rather than on every path of the switch
/// that reaches it (sched_switch_decision_stacks on 6.18: 1,774 verified
/// instructions without the runs, 1,950 with them inlined, 1,868 so).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn schedlat_run_at_switch(prev_tid: u64) -> u64 {
    let now = now();
    if let Some(ring) = RUNS.get_ptr_mut(0) {
        // SAFETY: per-CPU value; the sched tracepoints' programs do not
        // nest on a CPU.
        record_run(unsafe { &mut *ring }, prev_tid, now);
    }
    0
}

/// `tid` was just woken: keep who woke it (`current`) and from where.
#[inline(always)]
pub fn woken(ctx: &BtfTracePointContext, tid: u32) {
    let stack = match ctx.get_stackid(&WAKER_STACKS, 0) {
        Ok(id) => id as u32,
        Err(_) => NO_WAKER,
    };
    // The low half of pid_tgid is the TID of `current`.
    let waker = bpf_get_current_pid_tgid() as u32;
    if let Some(slot) = WAKERS.get_ptr_mut(tid) {
        // SAFETY: pointer into the map value, valid for this program run.
        unsafe { *slot = (u64::from(waker) << 32) | u64::from(stack) };
    }
}

/// The waker of the wait of `next` that just ended, if it began with a
/// sched_wakeup (how it began is in `ended`: the word per TID is the
/// latest wakeup's, which began the wait when the wait was a wakeup's).
#[inline(always)]
fn waker_of(next: TaskPtr, ended: Ended) -> (u32, u32) {
    if ended.began.index() != 0 {
        return (NO_WAKER, NO_WAKER);
    }
    match WAKERS.get(next.pid()) {
        Some(&w) if w != 0 => ((w >> 32) as u32, w as u32),
        _ => (NO_WAKER, NO_WAKER),
    }
}

/// Sends the wait of `next` that a switch from `prev` just ended.
#[inline(always)]
pub fn emit<const S: bool>(prev: TaskPtr, next: TaskPtr, ended: Ended) {
    // `S`: the stacks programs (main.rs says why they are programs of their
    // own). The stacks need no argument of the program (bpf_get_task_stack
    // of `current`): the context, held from the start to here, took
    // registers the whole switch was using.
    if S {
        let sent = with_stacks(prev, next, ended);
        if let Some(c) = counters() {
            match sent {
                true => c.slow_events += 1,
                false => c.slow_lost += 1,
            }
        }
        return;
    }
    let Some(mut entry) = SLOW_EVENTS.reserve::<SlowEvent>(0) else {
        if let Some(c) = counters() {
            c.slow_lost += 1;
        }
        return;
    };
    entry.write(SlowEvent {
        at_ns: ended.now,
        wait_ns: ended.wait_ns,
        cpu: cpu(),
        rq_len: next.rq_len(),
        victim: next.info(),
        culprit: prev.info(),
        decided: ended.decided,
    });
    entry.submit(0);
    if let Some(c) = counters() {
        c.slow_events += 1;
    }
}

/// The event with the stacks of `current`, the holder: at sched_switch the
/// kernel has not switched yet (kernel/sched/core.c __schedule() traces
/// before context_switch()). Written in place in the ring buffer: the
/// record (2 KiB) does not fit the program's 512-byte stack.
#[inline(always)]
fn with_stacks(prev: TaskPtr, next: TaskPtr, ended: Ended) -> bool {
    // The reserve first, as the plain event does: nothing is read for a
    // record the buffer has no room for.
    let Some(mut entry) = SLOW_EVENTS.reserve::<SlowStacks>(0) else {
        return false;
    };
    let event = SlowEvent {
        at_ns: ended.now,
        wait_ns: ended.wait_ns,
        cpu: cpu(),
        rq_len: next.rq_len(),
        victim: next.info(),
        culprit: prev.info(),
        decided: ended.decided,
    };
    let record = entry.as_mut_ptr();
    const BYTES: u32 = (STACK_FRAMES * 8) as u32;
    // SAFETY: `record` points to the reserved record, ours until submit;
    // each field is written once before it; bpf_get_task_stack fills its
    // buffer whole (the frames, then zeros; zeros on an error). The task
    // is bpf_get_current_task_btf's, a pointer the verifier trusts.
    unsafe {
        core::ptr::addr_of_mut!((*record).event).write(event);
        let holder = bpf_get_current_task_btf();
        // For `current` the kernel walks its own stack from here
        // (stack_trace_save_tsk): the tracing frames, the scheduler's,
        // then the holder's.
        let kernel = bpf_get_task_stack(
            holder,
            core::ptr::addr_of_mut!((*record).kernel).cast(),
            BYTES,
            0,
        );
        // From the registers the holder entered the kernel with (its
        // pt_regs): a task preempted in user space, or blocked in a system
        // call, still has them; a kernel thread has none (-EFAULT).
        let user = bpf_get_task_stack(
            holder,
            core::ptr::addr_of_mut!((*record).user).cast(),
            BYTES,
            u64::from(BPF_F_USER_STACK),
        );
        core::ptr::addr_of_mut!((*record).kernel_bytes).write(kernel as i32);
        core::ptr::addr_of_mut!((*record).user_bytes).write(user as i32);
        let (waker_tid, waker_stack) = waker_of(next, ended);
        core::ptr::addr_of_mut!((*record).waker_tid).write(waker_tid);
        core::ptr::addr_of_mut!((*record).waker_stack).write(waker_stack);
        // Queued elsewhere: a preempted task (began index 2, as
        // causes::BEGAN orders them) that ended on another CPU.
        let elsewhere = ended.began.index() == 2 && ended.migrated;
        core::ptr::addr_of_mut!((*record).queued_elsewhere).write(u32::from(elsewhere));
        core::ptr::addr_of_mut!((*record)._pad).write(0);
        // The ring in one copy (one helper call, no loop for the
        // verifier). A failed read says no run was written (zeroing the
        // whole ring, 98 stores, cost 4,000 verified instructions).
        let runs = core::ptr::addr_of_mut!((*record).runs);
        let copied = match RUNS.get_ptr(0) {
            Some(ring) => {
                let into = core::slice::from_raw_parts_mut(runs.cast::<u8>(), RUN_BYTES);
                bpf_probe_read_kernel_buf(ring.cast::<u8>(), into).is_ok()
            }
            None => false,
        };
        if !copied {
            core::ptr::addr_of_mut!((*runs).next).write(0);
        }
    }
    entry.submit(0);
    true
}
