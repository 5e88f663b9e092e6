//! The slow mode: each wait of at least Compute.slow_ns goes to userspace as it
//! happens, with its victim, its culprit and the run-queue length, through a
//! ring buffer (runqslower's job, with context). Only waits over the
//! threshold touch the buffer; a reserve that fails (buffer full, reader
//! behind) is counted, never silent.

use aya_ebpf::{macros::map, maps::RingBuf};
use schedlat_common::victims::SlowEvent;

use crate::{bpf::cpu, memory::TaskPtr, victims::counters, wait::Ended};

/// Default size; the loader sets it (one page when the mode is off). Must be
/// a power-of-two multiple of the page size.
#[map]
static SLOW_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Sends the wait of `next` that a switch from `prev` just ended.
#[inline(always)]
pub fn emit(prev: TaskPtr, next: TaskPtr, ended: Ended) {
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
