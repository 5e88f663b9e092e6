//! The slow mode: each wait of at least Compute.slow_ns goes to userspace as it
//! happens, with its victim, its culprit and the run-queue length, through a
//! ring buffer (runqslower's job, with context). Only waits over the
//! threshold touch the buffer; a reserve that fails (buffer full, reader
//! behind) is counted, never silent.
//!
//! With `Compute.stacks` (`slow --stacks`) each event also carries the
//! holder's stacks, taken here and nowhere else: only waits over the
//! threshold pay for the walk, and with the flag off the verifier drops the
//! branch (a constant), so the other switches run what they ran before.

use aya_ebpf::{
    EbpfContext, bindings::BPF_F_USER_STACK, helpers::bpf_get_stack, macros::map, maps::RingBuf,
    programs::BtfTracePointContext,
};
use schedlat_common::victims::{STACK_FRAMES, SlowEvent, SlowStacks};

use crate::{
    bpf::cpu,
    config::{COMPUTE, get},
    memory::TaskPtr,
    victims::counters,
    wait::Ended,
};

/// Default size; the loader sets it (one page when the mode is off). Must be
/// a power-of-two multiple of the page size.
#[map]
static SLOW_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Sends the wait of `next` that a switch from `prev` just ended.
#[inline(always)]
pub fn emit(ctx: &BtfTracePointContext, prev: TaskPtr, next: TaskPtr, ended: Ended) {
    let event = SlowEvent {
        at_ns: ended.now,
        wait_ns: ended.wait_ns,
        cpu: cpu(),
        rq_len: next.rq_len(),
        victim: next.info(),
        culprit: prev.info(),
        decided: ended.decided,
    };
    let sent = if get(&COMPUTE.stacks) != 0 {
        with_stacks(ctx, event)
    } else {
        match SLOW_EVENTS.reserve::<SlowEvent>(0) {
            Some(mut entry) => {
                entry.write(event);
                entry.submit(0);
                true
            }
            None => false,
        }
    };
    if let Some(c) = counters() {
        match sent {
            true => c.slow_events += 1,
            false => c.slow_lost += 1,
        }
    }
}

/// The event with the stacks of `current`, the holder: at sched_switch the
/// kernel has not switched yet (kernel/sched/core.c __schedule() traces
/// before context_switch()). Written in place in the ring buffer: the
/// record (2 KiB) does not fit the program's 512-byte stack.
#[inline(always)]
fn with_stacks(ctx: &BtfTracePointContext, event: SlowEvent) -> bool {
    let Some(mut entry) = SLOW_EVENTS.reserve::<SlowStacks>(0) else {
        return false;
    };
    let record = entry.as_mut_ptr();
    const BYTES: u32 = (STACK_FRAMES * 8) as u32;
    // SAFETY: `record` points to the reserved record, ours until submit;
    // each field is written once before it; bpf_get_stack fills its buffer
    // whole (the frames, then zeros; zeros on an error).
    unsafe {
        core::ptr::addr_of_mut!((*record).event).write(event);
        let kernel = bpf_get_stack(
            ctx.as_ptr(),
            core::ptr::addr_of_mut!((*record).kernel).cast(),
            BYTES,
            0,
        );
        // From the registers the holder entered the kernel with (its
        // pt_regs): a task preempted in user space, or blocked in a system
        // call, still has them; a kernel thread has none (-EFAULT).
        let user = bpf_get_stack(
            ctx.as_ptr(),
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
