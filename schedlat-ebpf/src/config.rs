//! The kernel configuration (schedlat_common::kconfig): one read-only global
//! per concern, set by the loader before the programs load. aya freezes
//! `.rodata`, so the verifier sees every field as a constant: the code
//! behind a field that is 0 is dead, and it removes it.

use schedlat_common::kernel_global;

kernel_global!(TASK: TaskOffsets);
kernel_global!(RQ: RqOffsets);
kernel_global!(CGROUP: CgroupOffsets);
kernel_global!(PIDNS: PidnsOffsets);
kernel_global!(TP: TpOffsets);
kernel_global!(FILTER: TaskFilter);
kernel_global!(COMPUTE: Compute);
kernel_global!(CAUSE: CauseOffsets);
kernel_global!(DECISION: DecisionOffsets);

/// One field of a global (`get(&TASK.pid)`), through a volatile load so
/// the compiler cannot fold the zeroed placeholder into the code; the
/// verifier then folds the loaded constant instead.
#[inline(always)]
pub fn get<T: Copy>(field: &'static T) -> T {
    // SAFETY: a valid, aligned reference into a static.
    unsafe { core::ptr::read_volatile(field) }
}

/// Word `i` of the `--cpu` mask, 0 beyond it.
#[inline(always)]
pub fn cpu_mask_word(i: usize) -> u64 {
    FILTER.cpu_mask.get(i).map_or(0, get)
}
