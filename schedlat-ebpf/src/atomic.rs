//! Atomic adds on map values, written out in BPF assembly: the bpfel target
//! has no `core::sync::atomic` types, and LLVM only emits the fetching form
//! for BPF CPU v3 and up, while aya-build links for the generic CPU (no way
//! to pass `-C target-cpu`): there, `atomic_xadd` whose result is used is
//! refused ("Invalid usage of the XADD return value").

/// `*p += n`, atomically: BPF_XADD (BPF_ATOMIC | BPF_ADD), every kernel.
///
/// # Safety
/// `p` is an aligned u64 in a map value.
#[inline(always)]
pub unsafe fn add_u64(p: *mut u64, n: u64) {
    // SAFETY: as the caller promises.
    unsafe {
        core::arch::asm!(
            "lock *(u64 *)({p} + 0) += {n}",
            p = in(reg) p,
            n = in(reg) n,
        );
    }
}

/// `*p += n` on a u32, atomically (32-bit BPF_XADD, every kernel).
///
/// # Safety
/// `p` is an aligned u32 in a map value.
#[inline(always)]
pub unsafe fn add_u32(p: *mut u32, n: u32) {
    // SAFETY: as the caller promises.
    unsafe {
        core::arch::asm!(
            "lock *(u32 *)({p} + 0) += {n}",
            p = in(reg) p,
            n = in(reg) u64::from(n),
        );
    }
}

/// `*p += n`, atomically, returning the old value: BPF_ATOMIC | BPF_FETCH
/// (kernel 5.12+).
///
/// # Safety
/// `p` is an aligned u64 in a map value.
#[inline(always)]
pub unsafe fn fetch_add_u64(p: *mut u64, n: u64) -> u64 {
    let old: u64;
    // SAFETY: as the caller promises.
    unsafe {
        core::arch::asm!(
            "{old} = atomic_fetch_add((u64 *)({p} + 0), {old})",
            p = in(reg) p,
            old = inout(reg) n => old,
        );
    }
    old
}
