//! The kernel's field offsets the timer programs read: one read-only
//! global, `OFFSETS`, that the loader sets from the running kernel's BTF
//! before loading (Rust eBPF has no CO-RE relocations). aya freezes it, so
//! the verifier sees each field as a constant and checks each load against
//! the kernel's BTF.
//!
//! Both sides compile this file: the eBPF crate, and xtask through a
//! `#[path]` module (src/bench/reference/offsets.rs), so the layout the
//! loader writes is the one the programs read.

/// The global's symbol.
pub const SYMBOL: &str = "OFFSETS";

/// Byte offsets, u64 each (no padding). The decision's are 0 in the
/// `timer` object, which reads none of them.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Offsets {
    /// `task_struct.pid`
    pub pid: u64,
    /// `task_struct.se.cfs_rq`: the queue a task is on.
    pub se_cfs_rq: u64,
    /// `cfs_rq.rq`: its CPU's run queue.
    pub cfs_rq_rq: u64,
    /// `rq.curr`: the task running on that CPU.
    pub rq_curr: u64,
    /// `rq.nr_switches`: that CPU's context switches so far.
    pub rq_nr_switches: u64,
    /// `task_struct.thread_info.flags`: TIF_NEED_RESCHED among them.
    pub ti_flags: u64,
}

impl Offsets {
    /// Every field 0: the object's value until the loader sets it.
    pub const ZERO: Offsets = Offsets {
        pid: 0,
        se_cfs_rq: 0,
        cfs_rq_rq: 0,
        rq_curr: 0,
        rq_nr_switches: 0,
        ti_flags: 0,
    };
}
