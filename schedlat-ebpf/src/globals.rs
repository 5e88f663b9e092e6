//! Read-only globals the loader sets before loading (`EbpfLoader::
//! override_global`). They live in `.rodata`, which aya freezes, so the
//! verifier sees them as constants. Names must match `schedlat_common::names`.

/// Nanoseconds per histogram unit: 1000 (usecs) or 1000000 (msecs, `-m`).
#[unsafe(no_mangle)]
pub static UNIT_NS: u64 = 1000;

// task_struct offsets for the btf hook mode; 0 until the loader sets them.
#[unsafe(no_mangle)]
pub static TASK_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_STATE_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TASK_TGID_OFF: u64 = 0;

/// Only waits of this process (tgid) are measured; 0 = every process.
#[unsafe(no_mangle)]
pub static FILTER_TGID: u64 = 0;

// Classic tracepoint record offsets for the tp hook mode.
#[unsafe(no_mangle)]
pub static TP_SWITCH_PREV_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_SWITCH_PREV_STATE_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_SWITCH_NEXT_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_WAKEUP_PID_OFF: u64 = 0;
#[unsafe(no_mangle)]
pub static TP_EXIT_PID_OFF: u64 = 0;
/// Mask of the real state bits in the classic record's prev_state.
#[unsafe(no_mangle)]
pub static TP_STATE_MASK: u64 = 0xff;

/// Reads a global through a volatile load so the compiler cannot fold the
/// compile-time placeholder into the code.
#[inline(always)]
pub fn load(global: &'static u64) -> u64 {
    // SAFETY: a valid, aligned reference to a static.
    unsafe { core::ptr::read_volatile(global) }
}
