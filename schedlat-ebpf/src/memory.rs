//! Reading kernel memory at offsets resolved at load time: task_struct
//! fields, the chains from a task to its cgroup, PID namespace and run
//! queue, and classic tracepoint records. Nothing here decides anything.

use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_probe_read_kernel, bpf_task_pt_regs},
    programs::TracePointContext,
};
use schedlat_common::victims::{RQ_LEN_UNKNOWN, TaskInfo};

use crate::{
    bpf::{untrusted_cgroup, untrusted_task},
    config::{CAUSE, CGROUP, DECISION, PIDNS, RQ, TASK, get},
};

/// A `struct task_struct *` handed to a tp_btf program, with the pointer
/// fields `with_links` read already.
#[derive(Clone, Copy)]
pub struct TaskPtr(BtfPtr, Links);

/// `task->se.cfs_rq`, the task's scheduler group (`sched_group`) and
/// `task->flags`, when read up front.
#[derive(Clone, Copy, Default)]
struct Links {
    cfs_rq: Option<BtfPtr>,
    group: Option<u64>,
    flags: Option<u32>,
}

impl TaskPtr {
    /// A tp_btf program's task argument (BtfPtr::arg: its pointer fields
    /// read through the untrusted cast).
    #[inline(always)]
    pub fn arg(ptr: *const u8) -> Self {
        TaskPtr(BtfPtr::arg(ptr, untrusted_task(ptr)), Links::default())
    }

    /// Reads `task->se.cfs_rq` (when `cfs_rq`), the scheduler group and
    /// `task->flags` (when `group`) now, once, for `cfs_rq()`,
    /// `sched_group()` and `flags()` to return.
    ///
    /// Loading a pointer field from a tp_btf argument (a trusted pointer)
    /// makes the verifier look up `<struct>__safe_trusted`, `..._or_null`,
    /// `__safe_rcu` and `..._or_null` in the kernel's BTF, each a scan by
    /// name over every type (kernel/bpf/verifier.c
    /// check_ptr_to_btf_access()), on every path it walks to that load:
    /// about 1 ms a load on 6.18. Read where sched_switch's paths branch,
    /// these loads cost 19 ms of its load time; read here, before any
    /// branch, each is verified once. Where the kernel can cast (6.2+),
    /// they are read through the untrusted cast and cost no scans at all
    /// (BtfPtr); read here still, each is verified once on the kernels that
    /// cannot. At run time they are loads of fields next to those the
    /// switch reads anyway.
    ///
    /// `task->flags` is a scalar, but both splits read prev's (PF_IDLE,
    /// PF_KTHREAD: causes.rs held_by, decision.rs switched_in) on paths
    /// that had branched apart: read there, each path verified its own
    /// load and the bits taken from it (sched_switch with the decision
    /// split 13,716 verified instructions on 6.18; read here, 13,560; --no-decision 5,445 -> 5,262).
    #[inline(always)]
    pub fn with_links(self, cfs_rq: bool, group: bool) -> Self {
        let links = Links {
            cfs_rq: cfs_rq.then(|| self.0.read_ptr(get(&RQ.task_cfs_rq))),
            group: group.then(|| self.read_group()),
            flags: group.then(|| self.0.read_u32(get(&CAUSE.task_flags))),
        };
        TaskPtr(self.0, links)
    }

    /// `with_links`, with the fields read through `same`: another pointer
    /// to this task, loaded from kernel memory (`rq->curr`) rather than
    /// handed to the program. The verifier loads a pointer field from such
    /// a pointer without the scans by name that `with_links` describes
    /// (kernel/bpf/verifier.c check_ptr_to_btf_access(): the trust lookups
    /// are made only for a trusted or RCU pointer). At run time, one load
    /// more (`same` itself).
    #[inline(always)]
    pub fn with_links_through(self, same: TaskPtr, cfs_rq: bool, group: bool) -> Self {
        TaskPtr(self.0, same.with_links(cfs_rq, group).1)
    }

    /// `task->pid` (the TID in userspace terms).
    #[inline(always)]
    pub fn pid(self) -> u32 {
        self.0.read_u32(get(&TASK.pid))
    }

    /// `task->tgid` (the process id in userspace terms).
    #[inline(always)]
    pub fn tgid(self) -> u32 {
        self.0.read_u32(get(&TASK.tgid))
    }

    /// `task->__state` (`state` before 5.14); 0 is TASK_RUNNING. Before 5.14
    /// the field is a long: its low 32 bits still say whether it is 0.
    #[inline(always)]
    pub fn state(self) -> u32 {
        self.0.read_u32(get(&TASK.state))
    }

    /// Word `i` (0 or 1) of `task->comm`, as the `--comm` filter compares.
    #[inline(always)]
    pub fn comm_word(self, i: u64) -> u64 {
        self.0.read_u64(get(&TASK.comm) + 8 * i)
    }

    /// `task->comm`. char[16]: two 8-byte loads, both inside the array,
    /// which is all the verifier asks of a load from a BTF-typed pointer
    /// (kernel/bpf/btf.c btf_struct_walk()).
    #[inline(always)]
    pub fn comm(self) -> [u8; 16] {
        let lo = self.comm_word(0).to_ne_bytes();
        let hi = self.comm_word(1).to_ne_bytes();
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
            policy: self.policy(),
            static_prio: self.0.read_u32(get(&TASK.static_prio)),
            rt_priority: self.0.read_u32(get(&TASK.rt_priority)),
            _pad: 0,
        }
    }

    /// The runnable tasks of the CPU this task is queued on
    /// ([`Rq::nr_running`]), through
    /// task->se.cfs_rq->rq (every task's se.cfs_rq is kept pointing at its
    /// CPU's run queue, whatever its class: kernel/sched/sched.h
    /// set_task_rq()). Each step is a checked BTF load: a NULL pointer on the
    /// way reads as 0 rather than faulting.
    #[inline(always)]
    pub fn rq_len(self) -> u32 {
        if get(&RQ.resolved) == 0 {
            return RQ_LEN_UNKNOWN;
        }
        self.cfs_rq().rq().nr_running()
    }

    /// `task->se.cfs_rq`: the CFS queue of its group on its CPU (valid
    /// only when `RQ.resolved`).
    #[inline(always)]
    pub fn cfs_rq(self) -> CfsRq {
        CfsRq(
            self.1
                .cfs_rq
                .unwrap_or_else(|| self.0.read_ptr(get(&RQ.task_cfs_rq))),
        )
    }

    /// `task->policy`: FIFO 1, RR 2, DEADLINE 6 outrank the others.
    #[inline(always)]
    pub fn policy(self) -> u32 {
        self.0.read_u32(get(&TASK.policy))
    }

    /// `task->flags` (PF_KTHREAD...).
    #[inline(always)]
    pub fn flags(self) -> u32 {
        self.1
            .flags
            .unwrap_or_else(|| self.0.read_u32(get(&CAUSE.task_flags)))
    }

    /// The system call number in the user registers the kernel keeps for
    /// the task (`task_pt_regs()`, through bpf_task_pt_regs(), 5.15+;
    /// DecisionOffsets `regs_syscall`), low 32 bits: the call it is in,
    /// or -1 after an interrupt from user space. The helper takes the
    /// trusted argument, not its cast.
    #[inline(always)]
    pub fn syscall_nr(self) -> u64 {
        // SAFETY: the helper reads the task's stack page address only.
        let regs = unsafe { bpf_task_pt_regs(self.0.fields as *mut task_struct) };
        u64::from(BtfPtr::loaded(regs as *const u8).read_u32(get(&DECISION.regs_syscall)))
    }

    /// `task->thread_info.flags`: the TIF bits (need-resched among them).
    #[inline(always)]
    pub fn ti_flags(self) -> u64 {
        self.0.read_u64(get(&DECISION.task_ti_flags))
    }

    /// Whether the task is in the sched_ext class (its `scx.flags` state
    /// is SCX_TASK_ENABLED); false where the kernel has no sched_ext
    /// (`ext_state_mask` 0: the load is dead code).
    #[inline(always)]
    pub fn in_ext(self) -> bool {
        let mask = get(&DECISION.ext_state_mask);
        mask != 0
            && u64::from(self.0.read_u32(get(&DECISION.task_scx_flags))) & mask
                == get(&DECISION.ext_enabled)
    }

    /// `&task->se`: the task's own scheduling entity.
    #[inline(always)]
    pub fn se(self) -> Se {
        Se(self.0.member(get(&DECISION.task_se)))
    }

    /// The group the CPU scheduler puts the task in, as a number to
    /// compare (CauseOffsets: `task->sched_task_group` where the kernel
    /// has it).
    #[inline(always)]
    pub fn sched_group(self) -> u64 {
        self.1.group.unwrap_or_else(|| self.read_group())
    }

    /// `sched_group` read now: one pointer load, two where the group is a
    /// css of the task's css_set (a kernel without sched_task_group).
    #[inline(always)]
    fn read_group(self) -> u64 {
        let at = get(&CAUSE.task_group);
        if get(&CAUSE.group_in_cset) == 0 {
            return self.0.read_ptr_bits(at);
        }
        self.0.read_ptr(at).read_ptr_bits(get(&CAUSE.cset_group))
    }

    /// The task's css in the hierarchy the loader chose:
    /// `task->cgroups->dfl_cgrp` (cgroup v2; its `self` css is at offset 0,
    /// which the loader checks, so css offsets apply to it) or
    /// `task->cgroups->subsys[id]` (a v1 controller).
    #[inline(always)]
    pub fn css(self) -> Css {
        let cset = self.0.read_ptr(get(&CGROUP.task_cgroups));
        Css(cset.read_ptr(get(&CGROUP.cset_css)))
    }

    /// The inode number of the task's active PID namespace (what `ls -l
    /// /proc/PID/ns/pid` shows): `task->thread_pid->numbers[level].ns->
    /// ns.inum`, as libbpf-tools runqlat's `--pidnss`. The array index is
    /// not a load-time constant, and 6.1's verifier refuses variable
    /// arithmetic on a BTF pointer (found by `cargo xtask vm-test`), so the
    /// `struct pid` address is read as a plain number and the rest goes
    /// through bpf_probe_read_kernel. 0 when a read fails.
    #[inline(always)]
    pub fn pid_namespace(self) -> u64 {
        let thread_pid = get(&PIDNS.task_thread_pid);
        let level = u64::from(self.0.read_ptr(thread_pid).read_u32(get(&PIDNS.pid_level)));
        let Some(pid) = probe_read::<u64>(self.0.addr(thread_pid)) else {
            return 0;
        };
        let upid = pid + get(&PIDNS.pid_numbers) + level * get(&PIDNS.upid_size);
        let Some(ns) = probe_read::<u64>(upid + get(&PIDNS.upid_ns)) else {
            return 0;
        };
        probe_read::<u32>(ns + get(&PIDNS.pidns_inum)).map_or(0, u64::from)
    }
}

/// A `struct cfs_rq *`.
#[derive(Clone, Copy)]
pub struct CfsRq(BtfPtr);

impl CfsRq {
    /// `cfs_rq->rq`: the CPU's run queue.
    #[inline(always)]
    pub fn rq(self) -> Rq {
        Rq(self.0.read_ptr(get(&RQ.cfs_rq_rq)))
    }

    /// `cfs_rq->tg->cfs_bandwidth.throttled_time`: ns the task group's
    /// queues spent throttled, summed over CPUs, added at each unthrottle.
    #[inline(always)]
    pub fn group_throttled_ns(self) -> u64 {
        let tg = self.0.read_ptr(get(&CAUSE.cfs_rq_tg));
        tg.read_u64(get(&CAUSE.tg_throttled_time))
    }
}

/// A `struct rq *`: one CPU's run queue.
#[derive(Clone, Copy)]
pub struct Rq(BtfPtr);

impl Rq {
    /// `rq->clock_task`, the clock `se->exec_start` is on (EEVDF kernels).
    #[inline(always)]
    pub fn clock_task(self) -> u64 {
        self.0.read_u64(get(&DECISION.rq_clock_task))
    }

    /// Runnable tasks on it, the running one included: `rq->nr_running`,
    /// less the tasks that blocked and that delayed dequeue keeps queued
    /// (counted in it until picked) where this kernel counts them
    /// (RqOffsets::delayed, a constant: the verifier keeps one arm).
    #[inline(always)]
    pub fn nr_running(self) -> u32 {
        let queued = self.0.read_u32(get(&RQ.rq_nr_running));
        let delayed = match get(&RQ.delayed) {
            1 => self
                .0
                .read_u32(get(&RQ.cfs_counter_a))
                .saturating_sub(self.0.read_u32(get(&RQ.cfs_counter_b))),
            2 => self.0.read_u32(get(&RQ.cfs_counter_a)),
            _ => 0,
        };
        queued.saturating_sub(delayed)
    }

    /// `rq->curr`: the task running on this CPU.
    #[inline(always)]
    pub fn curr(self) -> TaskPtr {
        TaskPtr(self.0.read_ptr(get(&DECISION.rq_curr)), Links::default())
    }

    /// `rq->nr_switches`: context switches on this CPU since boot,
    /// counted before sched_switch fires (kernel/sched/core.c
    /// __schedule()).
    #[inline(always)]
    pub fn nr_switches(self) -> u64 {
        self.0.read_u64(get(&DECISION.rq_nr_switches))
    }

    /// `rq->cpu`.
    #[inline(always)]
    pub fn cpu(self) -> u32 {
        self.0.read_u32(get(&CAUSE.rq_cpu))
    }

    /// `rq->prev_steal_time_rq`: steal time the rq clock has left out.
    #[inline(always)]
    pub fn steal_ns(self) -> u64 {
        self.0.read_u64(get(&CAUSE.rq_steal))
    }

    /// `rq->prev_irq_time`: IRQ time the rq clock has left out.
    #[inline(always)]
    pub fn irq_ns(self) -> u64 {
        self.0.read_u64(get(&CAUSE.rq_irq))
    }
}

/// A `struct sched_entity *`: a task's own (inside its task_struct) or a
/// group's (`se->parent`).
#[derive(Clone, Copy)]
pub struct Se(BtfPtr);

impl Se {
    /// `se->load.weight`, scaled down to NICE_0 = 1024 (64-bit kernels
    /// keep 10 more bits: scale_load_down()).
    #[inline(always)]
    pub fn weight(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_weight)) >> 10
    }

    #[inline(always)]
    pub fn vruntime(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_vruntime))
    }

    /// `se->exec_start`: when its queue last accounted its run time.
    #[inline(always)]
    pub fn exec_start(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_exec_start))
    }

    /// `se->deadline` (EEVDF).
    #[inline(always)]
    pub fn deadline(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_deadline))
    }

    /// `se->vlag`, or `se->vprot` (the same union, 6.17+).
    #[inline(always)]
    pub fn vlag(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_vlag))
    }

    #[inline(always)]
    pub fn slice(self) -> u64 {
        self.0.read_u64(get(&DECISION.se_slice))
    }

    /// `se->on_rq` (an unsigned char).
    #[inline(always)]
    pub fn on_rq(self) -> bool {
        self.0.read_u8(get(&DECISION.se_on_rq)) != 0
    }

    /// `se->depth`: 0 for an entity of the root queue.
    #[inline(always)]
    pub fn depth(self) -> u32 {
        self.0.read_u32(get(&DECISION.se_depth))
    }

    /// `se->parent`: the group's entity one level up (NULL at the root).
    #[inline(always)]
    pub fn parent(self) -> Se {
        Se(self.0.read_ptr(get(&DECISION.se_parent)))
    }

    /// `se->cfs_rq` as a number, to compare queues.
    #[inline(always)]
    pub fn queue_addr(self) -> u64 {
        self.0.read_ptr_bits(get(&DECISION.se_cfs_rq))
    }

    /// `se->cfs_rq`: the queue it is on.
    #[inline(always)]
    pub fn cfs_rq(self) -> CfsRq {
        CfsRq(self.0.read_ptr(get(&DECISION.se_cfs_rq)))
    }

    /// A group entity's group, as its css: `&se->my_q->tg->css` (the cpu
    /// controller's css of the group's cgroup).
    #[inline(always)]
    pub fn group_css(self) -> Css {
        let tg = (self.0.read_ptr(get(&DECISION.se_my_q))).read_ptr(get(&DECISION.cfs_rq_tg));
        Css(tg.member(get(&DECISION.tg_css)))
    }
}

impl CfsRq {
    /// The queue's weighted key sum (`avg_vruntime`, `sum_w_vruntime`):
    /// the queued entities' (vruntime - zero point) x weight.
    #[inline(always)]
    pub fn key_sum(self) -> i64 {
        self.0.read_u64(get(&DECISION.cfs_key_sum)) as i64
    }

    /// The queued entities' weight (`avg_load`, `sum_weight`).
    #[inline(always)]
    pub fn weight_sum(self) -> u64 {
        self.0.read_u64(get(&DECISION.cfs_weight_sum))
    }

    /// The keys' zero point (`min_vruntime`, `zero_vruntime`).
    #[inline(always)]
    pub fn zero(self) -> u64 {
        self.0.read_u64(get(&DECISION.cfs_zero))
    }

    /// The queue's address, to compare with an entity's `queue_addr`.
    #[inline(always)]
    pub fn addr(self) -> u64 {
        self.0.addr(0)
    }
}

/// A `struct cgroup_subsys_state *`, or NULL.
#[derive(Clone, Copy)]
pub struct Css(BtfPtr);

impl Css {
    #[inline(always)]
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }

    /// `css->cgroup->kn->id`: the inode number of the cgroup's directory.
    #[inline(always)]
    pub fn cgroup_id(self) -> u64 {
        let cgroup = self.0.read_ptr(get(&CGROUP.css_cgroup));
        let kn = cgroup.read_ptr(get(&CGROUP.cgroup_kn));
        kn.read_u64(get(&CGROUP.kn_id))
    }

    /// `css->parent`: NULL at the root.
    #[inline(always)]
    pub fn parent(self) -> Css {
        Css(self.0.read_ptr(get(&CGROUP.css_parent)))
    }
}

/// A `struct cgroup *` (cgroup_mkdir's argument).
#[derive(Clone, Copy)]
pub struct CgroupPtr(BtfPtr);

impl CgroupPtr {
    /// cgroup_mkdir's argument, untrusted as `TaskPtr::arg`'s.
    #[inline(always)]
    pub fn arg(ptr: *const u8) -> Self {
        CgroupPtr(BtfPtr::arg(ptr, untrusted_cgroup(ptr)))
    }

    /// `cgrp->kn->id`: the inode number of its directory.
    #[inline(always)]
    pub fn id(self) -> u64 {
        let kn = self.0.read_ptr(get(&CGROUP.cgroup_kn));
        kn.read_u64(get(&CGROUP.kn_id))
    }

    /// `cgrp->root->hierarchy_id`: its hierarchy, as /proc/PID/cgroup
    /// numbers them (0 for cgroup v2).
    #[inline(always)]
    pub fn hierarchy_id(self) -> u64 {
        let root = self.0.read_ptr(get(&CGROUP.cgroup_root));
        u64::from(root.read_u32(get(&CGROUP.root_hierarchy_id)))
    }
}

/// A BTF-typed kernel pointer: a tp_btf argument, or a pointer field loaded
/// from one (the verifier types those too, and checks each load against the
/// pointee's BTF).
///
/// Held twice, the same address typed two ways, because the verifier
/// treats loads from a trusted pointer (a tp_btf argument) in two ways:
/// - a scalar field is a plain load; from an untrusted pointer it would be
///   a BPF_PROBE_MEM load, which the x86 JIT guards with a compare and a
///   branch (measured: 5-8 ns more per switch with every argument read
///   untrusted);
/// - a pointer field makes the verifier scan the kernel's BTF by name
///   four times (schedlat_common::cast), at each path that reaches it;
///   from an untrusted pointer, none.
///
/// So `fields` reads scalars and `links` reads pointers. For an argument,
/// `fields` is the argument and `links` its cast (the same value where the
/// loader did not rewrite the mark); for a pointer loaded from memory,
/// neither trusted nor cast, both are the one pointer, which LLVM keeps in
/// one register.
#[derive(Clone, Copy)]
struct BtfPtr {
    fields: *const u8,
    links: *const u8,
}

impl BtfPtr {
    /// A tp_btf argument and its untrusted cast.
    #[inline(always)]
    fn arg(trusted: *const u8, untrusted: *const u8) -> Self {
        BtfPtr {
            fields: trusted,
            links: untrusted,
        }
    }

    /// A pointer loaded from kernel memory.
    #[inline(always)]
    fn loaded(ptr: *const u8) -> Self {
        BtfPtr {
            fields: ptr,
            links: ptr,
        }
    }

    #[inline(always)]
    fn is_null(self) -> bool {
        self.fields.is_null()
    }

    /// The pointer field at `offset`. A NULL pointer on the way reads as 0
    /// (the load's exception fixup) rather than faulting.
    #[inline(always)]
    fn read_ptr(self, offset: u64) -> BtfPtr {
        BtfPtr::loaded(self.read_ptr_bits(offset) as *const u8)
    }

    /// The pointer field at `offset` as a number (to compare or to tell
    /// apart), read through `links` as `read_ptr` is: to the verifier an
    /// 8-byte load of a pointer member is a pointer load whatever the
    /// program does with it.
    #[inline(always)]
    fn read_ptr_bits(self, offset: u64) -> u64 {
        // SAFETY: as read_u32, through `links`.
        unsafe { core::ptr::read_volatile(self.links.add(offset as usize).cast::<u64>()) }
    }

    /// The struct embedded at `offset` (`&task->se`), both ways.
    #[inline(always)]
    fn member(self, offset: u64) -> BtfPtr {
        BtfPtr {
            fields: self.fields.wrapping_add(offset as usize),
            links: self.links.wrapping_add(offset as usize),
        }
    }

    /// The address of the field at `offset` (a load-time constant), to pass
    /// to bpf_probe_read_kernel.
    #[inline(always)]
    fn addr(self, offset: u64) -> u64 {
        self.fields as u64 + offset
    }

    /// A direct load of a scalar field, not bpf_probe_read_kernel: tp_btf
    /// arguments are BTF-typed pointers, and the offset comes from a frozen
    /// read-only global, which the verifier treats as a known constant. So
    /// it checks the access against the struct's BTF at load time and keeps
    /// a plain load (from a trusted argument) or one with an exception-table
    /// fixup (BPF_PROBE_MEM, from any other pointer): no helper call.
    #[inline(always)]
    fn read_u32(self, offset: u64) -> u32 {
        // SAFETY: verified by the kernel as described above.
        unsafe { *self.fields.add(offset as usize).cast::<u32>() }
    }

    /// As `read_u32`, one byte (a load may not pass its member's end).
    #[inline(always)]
    fn read_u8(self, offset: u64) -> u8 {
        // SAFETY: as read_u32.
        unsafe { *self.fields.add(offset as usize) }
    }

    /// As `read_u32`. Volatile, so that it stays one 8-byte load: comm need
    /// not be 8-byte aligned, which BPF loads from kernel memory allow.
    #[inline(always)]
    fn read_u64(self, offset: u64) -> u64 {
        // SAFETY: as read_u32.
        unsafe { core::ptr::read_volatile(self.fields.add(offset as usize).cast::<u64>()) }
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

#[inline(always)]
fn probe_read<T>(addr: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel checks the address and fails cleanly.
    unsafe { bpf_probe_read_kernel(addr as *const T).ok() }
}
