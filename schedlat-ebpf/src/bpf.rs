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

/// The branch-free decisions (schedlat_common::flat says why).
pub use schedlat_common::flat::{equal, select};

/// `x & mask`, with the mask applied after anything LLVM knows of `x`:
/// it otherwise moves a mask into the branches of a select() (`(a & m) ^
/// b` for `(a ^ b) & m`), and verifiers before 5.13 track no bounds
/// through XOR ("math between map_value pointer and register with
/// unbounded min value", found by `cargo xtask vm-test` on 5.10).
#[inline(always)]
pub fn masked(x: u64, mask: u64) -> u64 {
    barrier_var(x as usize) as u64 & mask
}
