//! The slow mode: each wait of at least Compute.slow_ns goes to userspace as it
//! happens, with its victim, its culprit and the run-queue length, through a
//! ring buffer (runqslower's job, with context). Only waits over the
//! threshold touch the buffer; a reserve that fails (buffer full, reader
//! behind) is counted, never silent.
//!
//! In the stacks programs (`slow --stacks`) each event also carries the
//! holder's stacks, taken here and nowhere else: only waits over the
//! threshold pay for the walk; the other programs have none of this code.

use aya_ebpf::{
    bindings::BPF_F_USER_STACK,
    helpers::{bpf_get_current_task_btf, bpf_get_task_stack},
    macros::map,
    maps::RingBuf,
};
use schedlat_common::victims::{STACK_FRAMES, SlowEvent, SlowStacks};

use crate::{bpf::cpu, memory::TaskPtr, victims::counters, wait::Ended};

/// Default size; the loader sets it (one page when the mode is off). Must be
/// a power-of-two multiple of the page size.
#[map]
static SLOW_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

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
    }
    entry.submit(0);
    true
}
