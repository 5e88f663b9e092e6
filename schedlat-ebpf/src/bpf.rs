//! Thin wrappers of BPF helpers, and the verifier's needs.

use aya_ebpf::helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns};
use schedlat_common::cast::Struct;

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

/// `ptr`, a tp_btf argument, as an untrusted pointer to a `task_struct`
/// where the loader rewrites the mark into `bpf_rdonly_cast`
/// (schedlat_common::cast says why and how), as it was elsewhere.
#[inline(always)]
pub fn untrusted_task(ptr: *const u8) -> *const u8 {
    untrusted::<{ Struct::Task.mark() }>(ptr)
}

/// The same for a `struct cgroup`.
#[inline(always)]
pub fn untrusted_cgroup(ptr: *const u8) -> *const u8 {
    untrusted::<{ Struct::Cgroup.mark() }>(ptr)
}

/// The mark `MARK` on `ptr`. At run time, two register moves either way.
#[inline(always)]
fn untrusted<const MARK: i32>(ptr: *const u8) -> *const u8 {
    let out: *const u8;
    // SAFETY: register moves, or the kfunc that only retypes r1: nothing
    // is read or written. r1-r5 are declared clobbered as a call's are.
    unsafe {
        core::arch::asm!(
            "r0 = {mark}",
            "r0 = r1",
            mark = const MARK,
            inlateout("r1") ptr => _,
            lateout("r0") out,
            lateout("r2") _,
            lateout("r3") _,
            lateout("r4") _,
            lateout("r5") _,
        );
    }
    out
}
