//! Reading kernel memory at offsets resolved at load time.

use aya_ebpf::programs::TracePointContext;

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

    /// `task->tgid` (the process id in userspace terms).
    #[inline(always)]
    pub fn tgid(self) -> u32 {
        self.read_u32(load(&globals::TASK_TGID_OFF))
    }

    /// Whether this task's waits are measured: the `-p` filter. The wait is
    /// attributed to the task that waits, read from its own task_struct,
    /// never to the task running the tracepoint (the waker, or prev).
    #[inline(always)]
    pub fn wanted(self) -> bool {
        let tgid = load(&globals::FILTER_TGID);
        tgid == 0 || u64::from(self.tgid()) == tgid
    }

    /// `task->__state` (`state` before 5.14); 0 is TASK_RUNNING. Before 5.14
    /// the field is a long: its low 32 bits still say whether it is 0.
    #[inline(always)]
    pub fn state(self) -> u32 {
        self.read_u32(load(&globals::TASK_STATE_OFF))
    }

    /// A direct load, not bpf_probe_read_kernel: tp_btf arguments are
    /// BTF-typed pointers, and the offset comes from a frozen read-only global,
    /// which the verifier treats as a known constant. So it checks the access
    /// against task_struct's BTF at load time and turns it into a plain load
    /// with an exception-table fixup (BPF_PROBE_MEM): no helper call.
    #[inline(always)]
    fn read_u32(self, offset: u64) -> u32 {
        // SAFETY: verified by the kernel as described above.
        unsafe { *(self.0.add(offset as usize) as *const u32) }
    }
}

/// Reads a field of a classic tracepoint record; 0 if the read fails.
///
/// A helper call rather than a direct context load: the verifier only allows
/// context loads whose offset is in the instruction itself ("dereference of
/// modified ctx ptr disallowed"), and ours arrives at load time.
#[inline(always)]
pub fn tp_read<T: Default>(ctx: &TracePointContext, offset: u64) -> T {
    // SAFETY: the offset comes from the tracepoint's own format file.
    unsafe { ctx.read_at::<T>(offset as usize).unwrap_or_default() }
}
