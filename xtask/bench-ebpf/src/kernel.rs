//! Loads from the kernel's structures: the offsets of the `OFFSETS` global
//! (offsets.rs), and the fields at them through a tp_btf pointer.

/// One field of the offsets global (`get(&OFFSETS.pid)`), through a
/// volatile load so that the compiler cannot fold the zeroed placeholder
/// into the code; the verifier folds the frozen value instead.
#[inline(always)]
pub fn get(field: &'static u64) -> u64 {
    // SAFETY: a valid, aligned reference into a static.
    unsafe { core::ptr::read_volatile(field) }
}

/// A kernel pointer a tp_btf program was given (a `task_struct *`) or
/// loaded through one: the verifier checks each load through it against
/// the kernel's BTF type at that offset.
#[derive(Clone, Copy)]
#[must_use]
pub struct Kptr(*const u8);

impl Kptr {
    #[inline(always)]
    pub fn new(ptr: *const u8) -> Self {
        Kptr(ptr)
    }

    /// The `T` at `offset` bytes.
    #[inline(always)]
    pub fn read<T: Copy>(self, offset: u64) -> T {
        // SAFETY: a tp_btf load the verifier checks against the BTF type
        // of the pointer; one that faults reads 0 (BPF_PROBE_MEM).
        unsafe { core::ptr::read_volatile(self.0.wrapping_add(offset as usize).cast::<T>()) }
    }

    /// The pointer at `offset` bytes.
    #[inline(always)]
    pub fn ptr(self, offset: u64) -> Kptr {
        Kptr(self.read(offset))
    }
}
