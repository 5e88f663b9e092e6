//! Reading kernel memory at offsets resolved at load time.

use aya_ebpf::programs::TracePointContext;
use schedlat_common::victims::{RQ_LEN_UNKNOWN, TaskInfo};

use crate::{
    globals::{self, load},
    scope,
};

/// A `struct task_struct *` handed to a tp_btf program.
#[derive(Clone, Copy)]
pub struct TaskPtr(BtfPtr);

impl TaskPtr {
    #[inline(always)]
    pub fn new(ptr: *const u8) -> Self {
        TaskPtr(BtfPtr(ptr))
    }

    /// The raw pointer, to follow fields other modules know (scope.rs).
    #[inline(always)]
    pub fn btf(self) -> BtfPtr {
        self.0
    }

    /// `task->pid` (the TID in userspace terms).
    #[inline(always)]
    pub fn pid(self) -> u32 {
        self.0.read_u32(load(&globals::TASK_PID_OFF))
    }

    /// `task->tgid` (the process id in userspace terms).
    #[inline(always)]
    pub fn tgid(self) -> u32 {
        self.0.read_u32(load(&globals::TASK_TGID_OFF))
    }

    /// Whether this task's waits are measured: the filters `-p`, `-t`,
    /// `--comm`, `-c` (scope.rs), all of which must hold. The wait is
    /// attributed to the task that waits, read from its own task_struct,
    /// never to the task running the tracepoint (the waker, or prev). Each
    /// filter that is off is a constant the verifier removes.
    #[inline(always)]
    pub fn wanted(self) -> bool {
        let tgid = load(&globals::FILTER_TGID);
        if tgid != 0 && u64::from(self.tgid()) != tgid {
            return false;
        }
        let tid = load(&globals::FILTER_TID);
        if tid != 0 && u64::from(self.pid()) != tid {
            return false;
        }
        if load(&globals::FILTER_COMM) != 0 && !self.comm_is_filter() {
            return false;
        }
        let cgroup = load(&globals::FILTER_CGROUP_ID);
        cgroup == 0 || scope::in_cgroup(self, cgroup)
    }

    #[inline(always)]
    fn comm_is_filter(self) -> bool {
        let comm = load(&globals::TASK_COMM_OFF);
        self.0.read_u64(comm) == load(&globals::FILTER_COMM_LO)
            && self.0.read_u64(comm + 8) == load(&globals::FILTER_COMM_HI)
    }

    /// `task->__state` (`state` before 5.14); 0 is TASK_RUNNING. Before 5.14
    /// the field is a long: its low 32 bits still say whether it is 0.
    #[inline(always)]
    pub fn state(self) -> u32 {
        self.0.read_u32(load(&globals::TASK_STATE_OFF))
    }

    /// `task->comm`. char[16]: two 8-byte loads, both inside the array,
    /// which is all the verifier asks of a load from a BTF-typed pointer
    /// (kernel/bpf/btf.c btf_struct_walk()).
    #[inline(always)]
    pub fn comm(self) -> [u8; 16] {
        let comm = load(&globals::TASK_COMM_OFF);
        let lo = self.0.read_u64(comm).to_ne_bytes();
        let hi = self.0.read_u64(comm + 8).to_ne_bytes();
        let mut name = [0u8; 16];
        name[..8].copy_from_slice(&lo);
        name[8..].copy_from_slice(&hi);
        name
    }

    /// Identity and scheduling parameters, for the victims and slow modes.
    #[inline(always)]
    pub fn info(self) -> TaskInfo {
        TaskInfo {
            tid: self.pid(),
            tgid: self.tgid(),
            comm: self.comm(),
            policy: self.0.read_u32(load(&globals::TASK_POLICY_OFF)),
            static_prio: self.0.read_u32(load(&globals::TASK_STATIC_PRIO_OFF)),
            rt_priority: self.0.read_u32(load(&globals::TASK_RT_PRIORITY_OFF)),
            _pad: 0,
        }
    }

    /// `rq->nr_running` of the CPU this task is queued on, through
    /// task->se.cfs_rq->rq (every task's se.cfs_rq is kept pointing at its
    /// CPU's run queue, whatever its class: kernel/sched/sched.h
    /// set_task_rq()). Each step is a checked BTF load: a NULL pointer on the
    /// way reads as 0 rather than faulting.
    #[inline(always)]
    pub fn rq_len(self) -> u32 {
        if load(&globals::RQ_LEN) == 0 {
            return RQ_LEN_UNKNOWN;
        }
        let cfs_rq = self.0.read_ptr(load(&globals::TASK_CFS_RQ_OFF));
        let rq = cfs_rq.read_ptr(load(&globals::CFS_RQ_RQ_OFF));
        rq.read_u32(load(&globals::RQ_NR_RUNNING_OFF))
    }
}

/// A BTF-typed kernel pointer: a tp_btf argument, or a pointer field loaded
/// from one (the verifier types those too, and checks each load against the
/// pointee's BTF).
#[derive(Clone, Copy)]
pub struct BtfPtr(*const u8);

impl BtfPtr {
    #[inline(always)]
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }

    /// The pointer field at `offset`. A NULL pointer on the way reads as 0
    /// (the load's exception fixup) rather than faulting.
    #[inline(always)]
    pub fn read_ptr(self, offset: u64) -> BtfPtr {
        BtfPtr(self.read_u64(offset) as *const u8)
    }

    /// The address of the field at `offset` (a load-time constant), to pass
    /// to bpf_probe_read_kernel.
    #[inline(always)]
    pub fn addr(self, offset: u64) -> u64 {
        self.0 as u64 + offset
    }

    /// A direct load, not bpf_probe_read_kernel: tp_btf arguments are
    /// BTF-typed pointers, and the offset comes from a frozen read-only global,
    /// which the verifier treats as a known constant. So it checks the access
    /// against task_struct's BTF at load time and turns it into a plain load
    /// with an exception-table fixup (BPF_PROBE_MEM): no helper call.
    #[inline(always)]
    pub fn read_u32(self, offset: u64) -> u32 {
        // SAFETY: verified by the kernel as described above.
        unsafe { *(self.0.add(offset as usize) as *const u32) }
    }

    /// As `read_u32`. Volatile, so that it stays one 8-byte load: comm need
    /// not be 8-byte aligned, which BPF loads from kernel memory allow.
    #[inline(always)]
    pub fn read_u64(self, offset: u64) -> u64 {
        // SAFETY: as read_u32.
        unsafe { core::ptr::read_volatile(self.0.add(offset as usize) as *const u64) }
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
