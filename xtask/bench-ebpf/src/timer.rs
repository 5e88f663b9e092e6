//! The least timer, and with its decision map the least decision split on
//! top of it (xtask src/bench/reference/mod.rs says why each is a floor).
//!
//! A wakeup stores the clock at the woken task's slot of an array indexed
//! by thread id; a switch does the same for a preempted `prev`, and for
//! `next` reads its slot, clears it and adds one to its CPU's log2
//! histogram of the wait. No filter, no key, no check that a slot is
//! stale.
//!
//! With the decision, each enqueue (a wakeup, a preempted `prev`) also
//! keeps the need-resched bit of the running task on the queue's CPU
//! (`p->se.cfs_rq->rq->curr->thread_info.flags`, in the stamp's low bit)
//! and that run queue's switch count (`rq->nr_switches`, in a second array
//! by thread id); at the switch-in, the count again, the difference (the
//! pass-overs) added to a per-CPU sum in the histogram's last u64. No rule,
//! no holder, no classes.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    maps::{Array, PerCpuArray},
    programs::BtfTracePointContext,
};

use crate::{
    kernel::{Kptr, get},
    offsets::Offsets,
};

/// Log2 buckets of a wait in ns: 2^63 ns is ~292 years.
pub const SLOTS: usize = 64;
/// The per-CPU histogram: the buckets, then the decision's pass-over sum.
pub type Histogram = [u64; SLOTS + 1];
/// x86's TIF_NEED_RESCHED up to 6.17 (4 from 6.18): what is measured is
/// the read, which costs the same whichever bit is kept.
const NEED_RESCHED_BIT: u64 = 3;

/// A timer object's globals and maps; `switches` (the switch count at
/// each thread's enqueue) is the decision's, `None` in the plain timer, so
/// its code is not compiled in.
pub struct Timer {
    pub offsets: &'static Offsets,
    pub starts: &'static Array<u64>,
    pub histogram: &'static PerCpuArray<Histogram>,
    pub switches: Option<&'static Array<u64>>,
}

impl Timer {
    /// sched_wakeup, sched_wakeup_new (struct task_struct *p): p starts
    /// waiting.
    #[inline(always)]
    pub fn wakeup(&self, ctx: &BtfTracePointContext) {
        // The argument first: read after the call, the context would
        // have to be kept in a callee-saved register (a move).
        let task = Kptr::new(ctx.arg(0));
        self.enqueue(task, ktime());
    }

    /// sched_switch (bool preempt, struct task_struct *prev, struct
    /// task_struct *next, unsigned int prev_state): a prev still
    /// TASK_RUNNING (0) was preempted and starts waiting; next's wait ends.
    #[inline(always)]
    pub fn switch(&self, ctx: &BtfTracePointContext) {
        let now = ktime();
        // Read whole: the kernel zero-extends each argument into its u64
        // (CAST_TO_U64 in include/trace/bpf_probe.h), and read as a u32 it
        // costs two shifts on the generic BPF CPU.
        let prev_state: u64 = ctx.arg(3);
        if prev_state == 0 {
            self.enqueue(Kptr::new(ctx.arg(1)), now);
        }
        self.switch_in(Kptr::new(ctx.arg(2)), now);
    }

    #[inline(always)]
    fn enqueue(&self, task: Kptr, now: u64) {
        let pid = self.pid(task);
        let mut stamp = now;
        if let Some(switches) = self.switches {
            let rq = self.run_queue(task);
            let count: u64 = rq.read(get(&self.offsets.rq_nr_switches));
            let curr = rq.ptr(get(&self.offsets.rq_curr));
            let flags: u64 = curr.read(get(&self.offsets.ti_flags));
            stamp |= (flags >> NEED_RESCHED_BIT) & 1;
            store(switches, pid, count);
        }
        store(self.starts, pid, stamp);
    }

    #[inline(always)]
    fn switch_in(&self, task: Kptr, now: u64) {
        let pid = self.pid(task);
        let Some(start) = self.starts.get_ptr_mut(pid) else {
            return;
        };
        // SAFETY: an array slot, valid while the program runs; a racing
        // wakeup on another CPU may store to it, as in any such tool.
        let stamp = unsafe { *start };
        if stamp == 0 {
            return;
        }
        // SAFETY: as above.
        unsafe { *start = 0 };
        let wait = now.wrapping_sub(stamp);
        let pass_overs = match self.switches {
            Some(switches) => match switches.get(pid) {
                Some(&at) => {
                    let rq = self.run_queue(task);
                    rq.read::<u64>(get(&self.offsets.rq_nr_switches))
                        .wrapping_sub(at)
                }
                None => 0,
            },
            None => 0,
        };
        let slot = log2(wait);
        let Some(histogram) = self.histogram.get_ptr_mut(0) else {
            return;
        };
        // SAFETY: this CPU's copy, valid while the program runs; the sched
        // tracepoints' programs do not nest on a CPU.
        let histogram = unsafe { &mut *histogram };
        if self.switches.is_some() {
            histogram[SLOTS] = histogram[SLOTS].wrapping_add(pass_overs);
        }
        // SAFETY: log2 is masked under SLOTS (and the verifier checks
        // it); an index check would add a branch on the hot path.
        let bucket = unsafe { histogram.get_unchecked_mut(slot) };
        *bucket += 1;
    }

    #[inline(always)]
    fn pid(&self, task: Kptr) -> u32 {
        task.read(get(&self.offsets.pid))
    }

    /// `task->se.cfs_rq->rq`: the run queue of the CPU `task` is on.
    #[inline(always)]
    fn run_queue(&self, task: Kptr) -> Kptr {
        task.ptr(get(&self.offsets.se_cfs_rq))
            .ptr(get(&self.offsets.cfs_rq_rq))
    }
}

#[inline(always)]
fn ktime() -> u64 {
    // SAFETY: a helper with no arguments, allowed in tracing programs.
    unsafe { bpf_ktime_get_ns() }
}

/// `map[index] = value`, where the slot exists.
#[inline(always)]
fn store(map: &Array<u64>, index: u32, value: u64) {
    if let Some(slot) = map.get_ptr_mut(index) {
        // SAFETY: an array slot, valid while the program runs.
        unsafe { *slot = value };
    }
}

/// The bucket of `value`: floor(log2), 0 for 0 as runqlat's log2l. At
/// most 63. Without branches: LLVM expands the count of leading zeros
/// into shifts and a population count, straight-line code the verifier
/// walks once, where the binary search by shifts that runqlat writes is
/// six data-dependent branches, each a path to verify. The verifier
/// cannot bound the population count (a multiply), so the slot is masked,
/// read back through the stack first: LLVM knows the mask changes nothing
/// and would drop it (an empty inline asm would do without the stack, but
/// leaves a line_info entry the kernel refuses).
#[inline(always)]
fn log2(value: u64) -> usize {
    let slot = 63 - (value | 1).leading_zeros() as usize;
    // SAFETY: reading a local.
    unsafe { core::ptr::read_volatile(&slot) & (SLOTS - 1) }
}
