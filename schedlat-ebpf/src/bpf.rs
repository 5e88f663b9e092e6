//! Thin wrappers of BPF helpers, and the verifier's needs.

use aya_ebpf::helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns};

/// Monotonic clock shared by all CPUs.
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: helper without arguments.
    unsafe { bpf_ktime_get_ns() }
}

/// The CPU this program runs on.
#[inline(always)]
pub fn cpu() -> u32 {
    // SAFETY: helper without arguments.
    unsafe { bpf_get_smp_processor_id() }
}

/// Makes LLVM bounds-check the index itself rather than a value it was
/// derived from, which older verifiers (6.1) cannot relate to it: "math
/// between map_value pointer and register with unbounded min value" (found
/// by `cargo xtask vm-test`). The same trick as libbpf's barrier_var().
#[inline(always)]
pub fn barrier_var(index: usize) -> usize {
    // SAFETY: reading a local.
    unsafe { core::ptr::read_volatile(&index) }
}
