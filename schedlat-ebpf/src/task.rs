//! Reading kernel memory at offsets resolved at load time.

use aya_ebpf::{helpers::bpf_probe_read_kernel, programs::TracePointContext};

use crate::globals::{self, load};

/// A `struct task_struct *` handed to a tp_btf program.
#[derive(Clone, Copy)]
pub struct TaskPtr(*const u8);

impl TaskPtr {
    #[inline(always)]
    pub fn new(ptr: *const u8) -> Self {
        TaskPtr(ptr)
    }

    /// `task->pid` (the TID in userspace terms).
    #[inline(always)]
    pub fn pid(self) -> u32 {
        self.read_u32(load(&globals::TASK_PID_OFF))
    }

    /// `task->__state` (`state` before 5.14); 0 is TASK_RUNNING. Before 5.14
    /// the field is a long: its low 32 bits still say whether it is 0.
    #[inline(always)]
    pub fn state(self) -> u32 {
        self.read_u32(load(&globals::TASK_STATE_OFF))
    }

    #[inline(always)]
    fn read_u32(self, offset: u64) -> u32 {
        // SAFETY: bpf_probe_read_kernel tolerates any address; a failed read
        // yields 0, which both callers treat as "skip" (pid 0) or "running".
        unsafe { bpf_probe_read_kernel(self.0.add(offset as usize) as *const u32).unwrap_or(0) }
    }
}

/// Reads a field of a classic tracepoint record; 0 if the read fails.
#[inline(always)]
pub fn tp_read<T: Default>(ctx: &TracePointContext, offset: u64) -> T {
    // SAFETY: the offset comes from the tracepoint's own format file.
    unsafe { ctx.read_at::<T>(offset as usize).unwrap_or_default() }
}
