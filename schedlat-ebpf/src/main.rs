//! schedlat's eBPF programs: time every wait on a run queue, from the moment
//! a task becomes runnable to the moment it is switched in, and add it to a
//! per-CPU histogram. Nothing here formats or logs: the hot path is one array
//! write per enqueue and one array read/write plus one per-CPU update per
//! switch-in.
//!
//! The victims and slow modes (tp_btf only) also charge each wait to its
//! task and to the task that held the CPU (victims.rs), or send it to
//! userspace when over a threshold (slow.rs): a sched_switch program of its
//! own for the first, read-only globals for the second.
//!
//! Modules, lowest first; each imports only from those above it:
//! - atomic, bpf: atomic adds in BPF assembly; helper wrappers.
//! - config: the loader-set read-only globals (schedlat_common::kconfig).
//! - memory: kernel memory reads at those offsets (task_struct and chains).
//! - filter: which waits are measured.
//! - keying: the breakdown histograms.
//! - causes: the cause split of each wait.
//! - decision: the scheduler's decision of each wait (its switch-in side
//!   a global function, verified once).
//! - workload: the neighbour-pair table (each CPU's recent runs, and each
//!   ended wait charged to those that ran during it), and the names of
//!   cgroups at their creation.
//! - wait: the measurement itself, and the total histogram.
//! - victims, slow: the modes that use each ended wait (slow counts its
//!   events in victims' counters).
//!
//! docs/architecture.md ("Before you edit the hot path") gives the rules
//! that keep the programs cheap to run and to verify, each with the
//! measurement behind it.
//!
//! Two hook modes carry the same logic:
//! - `btf`: tp_btf programs receive `task_struct` pointers; the field offsets
//!   they read come from the running kernel's BTF, resolved by the loader and
//!   passed as read-only globals (Rust eBPF has no CO-RE relocations).
//! - `tp`: classic tracepoints; record offsets come from tracefs format files.
#![no_std]
#![no_main]
// Inline assembly for BPF: atomic adds (atomic.rs).
#![feature(asm_experimental_arch)]
// The workspace asks for pub(crate) inside a crate; in this one binary for
// the BPF target the programs keep aya's `pub fn` form (each is an exported
// symbol the loader finds by name) and the helpers stay as they are, so that
// the verified code does not change for a visibility lint.
#![allow(
    unreachable_pub,
    reason = "BPF object: programs are exported symbols; no change to verified code"
)]

mod atomic;
mod bpf;
mod causes;
mod config;
mod decision;
mod filter;
mod keying;
mod memory;
mod slow;
mod victims;
mod wait;
mod workload;

use aya_ebpf::{
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use schedlat_common::start::Kind;

use crate::{
    config::{COMPUTE, RQ, TP, get},
    memory::{CgroupPtr, TaskPtr, tp_read},
};

// tp_btf: sched_wakeup(struct task_struct *p)
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<false, false>(&ctx, Kind::Woken)
}

// The decision split (on unless `--no-decision`) has its own sched_wakeup,
// sched_wakeup_new and sched_switch (names::BTF_DECISION_PROGRAMS), the
// same code with the split compiled in: the other programs carry none of
// it, not even the checks of a global that turns it off, so a run without
// the split verifies and runs exactly the instructions it did before the
// split existed.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup_decision(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<true, false>(&ctx, Kind::Woken)
}

// `--stacks all` (names::BTF_WAKER_STACKS_PROGRAMS, beside its switches below): the
// same wakeups, each also keeping its waker's kernel stack for the wait it
// begins.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup_stacks(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<false, true>(&ctx, Kind::Woken)
}

#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup_decision_stacks(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<true, true>(&ctx, Kind::Woken)
}

/// A tp_btf wakeup of its task argument, the `kind` way (`D`: with the
/// decision split; `S`: keeping the waker's stack).
#[inline(always)]
fn btf_enqueue<const D: bool, const S: bool>(ctx: &BtfTracePointContext, kind: Kind) -> u32 {
    let task = TaskPtr::arg(ctx.arg(0));
    // With the decision split, `task->se.cfs_rq` is read once, here,
    // before any branch, for both the queue and the decision's walk (each
    // load of a pointer field from the argument costs the verifier four
    // scans of the kernel's BTF by name where the kernel cannot cast it:
    // memory.rs `with_links`).
    let task = match D {
        true => task.with_links(get(&RQ.resolved) != 0, false),
        false => task,
    };
    // Filtered-out tasks return here, before any map access.
    if filter::wanted(task) {
        wait::enqueue::<D>(task.pid(), kind, Some(task));
        if S {
            slow::woken(ctx, task.pid());
        }
    }
    0
}

// tp_btf: sched_waking(struct task_struct *p); attached with `--waking`.
#[btf_tracepoint(function = "sched_waking")]
pub fn sched_waking(ctx: BtfTracePointContext) -> u32 {
    let task = TaskPtr::arg(ctx.arg(0));
    if filter::wanted(task) {
        wait::waking(task.pid());
    }
    0
}

// tp_btf: sched_wakeup_new(struct task_struct *p)
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<false, false>(&ctx, Kind::New)
}

#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new_decision(ctx: BtfTracePointContext) -> u32 {
    btf_enqueue::<true, false>(&ctx, Kind::New)
}

// tp_btf: sched_switch(bool preempt, struct task_struct *prev,
//                      struct task_struct *next, unsigned int prev_state)
// Histogram and slow modes.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<false, false, false>(&ctx)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_decision(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<true, false, false>(&ctx)
}

// The neighbour pairs (names::BTF_PAIRS_PROGRAMS, as the victims' below):
// each wait charged to the holders of its CPU during it, a walk in global
// functions (workload.rs). Programs of their own: kernels before 6.8
// verify every global function a program calls, reachable or not, so a
// call behind the loader's flag alone doubled the 6.1 verifier's work for
// every mode (sched_switch_decision 4,563 -> 9,416 instructions).
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_pairs(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<false, false, true>(&ctx)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_decision_pairs(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<true, false, true>(&ctx)
}

// `--stacks` (names::BTF_HOLDER_STACKS_PROGRAMS): the same switches with the
// holder's stacks in each slow event. Programs of their own, like the
// decision split's: a global flag's check, and the code behind it, changed
// the register allocation of the whole switch (the slow mode's verified
// instructions 1,478 -> 1,491 with the flag off, the histogram's 10,652 ->
// 10,475), so without --stacks not one instruction of it is loaded.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_stacks(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<false, true, false>(&ctx)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_decision_stacks(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<true, true, false>(&ctx)
}

// Both (names::BTF_PAIRS_STACKS_PROGRAMS): `serve --pairs --ring
// --stacks`, the DaemonSet's recorder with its slow waits' stacks.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_pairs_stacks(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<false, true, true>(&ctx)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_decision_pairs_stacks(ctx: BtfTracePointContext) -> u32 {
    histogram_switch::<true, true, true>(&ctx)
}

/// The histogram and slow modes' sched_switch (`D`: with the decision
/// split; `S`: slow events with the holder's stacks; `P`: with the
/// neighbour pairs).
#[inline(always)]
fn histogram_switch<const D: bool, const S: bool, const P: bool>(
    ctx: &BtfTracePointContext,
) -> u32 {
    let histogram = get(&COMPUTE.histogram) != 0;
    let (prev, next, Some(ended)) = btf_switch::<D, P, S>(ctx, histogram) else {
        return 0;
    };
    // A constant: in histogram mode the verifier drops this.
    let slow_ns = get(&COMPUTE.slow_ns);
    if slow_ns != 0 && ended.wait_ns >= slow_ns {
        slow::emit::<S>(prev, next, ended);
    }
    0
}

// The victims mode's sched_switch, a program of its own (names::
// BTF_SWITCH_VICTIMS) rather than a branch in the one above: its row
// allocation is an atomic fetch-and-add (kernel 5.12+), which older kernels
// refuse anywhere in a program, even in code the mode switches would make
// dead. Only loaded in that mode, it costs the other modes nothing.
// `schedlat top` loads it with Compute.histogram 1: histogram and tables at once.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_victims(ctx: BtfTracePointContext) -> u32 {
    victims_switch::<false, false>(&ctx)
}

/// The same with the decision split: each row counts its waits' decisions.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_victims_decision(ctx: BtfTracePointContext) -> u32 {
    victims_switch::<true, false>(&ctx)
}

/// The victims' switches with the neighbour pairs (`diagnose` loads both).
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_victims_pairs(ctx: BtfTracePointContext) -> u32 {
    victims_switch::<false, true>(&ctx)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_victims_decision_pairs(ctx: BtfTracePointContext) -> u32 {
    victims_switch::<true, true>(&ctx)
}

#[inline(always)]
fn victims_switch<const D: bool, const P: bool>(ctx: &BtfTracePointContext) -> u32 {
    let histogram = get(&COMPUTE.histogram) != 0;
    let (prev, next, ended) = btf_switch::<D, P, false>(ctx, histogram);
    let charged = ended.map(|ended| victims::charge(prev, next, ended));
    // Every switch, a wait ended or not: prev's run is time others may
    // have waited through.
    victims::switched(prev, charged);
    0
}

/// The bits of a tp_btf argument that hold a `bool`: each argument is a u64
/// in the context, and a bool is copied into it by its size, one byte
/// (include/trace/bpf_probe.h, __CAST_TO_U64), so only the low byte is
/// the value.
const BOOL_ARG: u64 = 0xff;

/// The measurement of a tp_btf sched_switch: prev, next, and the wait of
/// next it ended, if measured. The prev_state argument only exists since
/// 5.18, so the state is read from prev itself, which works on every kernel
/// with tp_btf (5.5+). `R`: keep the CPU's runs for the slow stacks.
#[inline(always)]
fn btf_switch<const D: bool, const P: bool, const R: bool>(
    ctx: &BtfTracePointContext,
    histogram: bool,
) -> (TaskPtr, TaskPtr, Option<wait::Ended>) {
    let preempt: u64 = ctx.arg(0);
    let prev = causes::linked(TaskPtr::arg(ctx.arg(1)));
    let next = causes::linked_next(TaskPtr::arg(ctx.arg(2)), prev);
    // A preempted prev stays on the run queue whatever its __state says (it
    // may have been preempted on its way to sleep): kernel/sched/core.c
    // __schedule() only dequeues a non-running prev when !preempt.
    let prev_runnable = (preempt & BOOL_ARG != 0 || prev.state() == 0) && filter::wanted(prev);
    // next needs no filter: only wanted tasks ever get a start timestamp.
    let ended = wait::switch::<D, P>(
        (prev.pid(), Some(prev)),
        (prev_runnable, preempt),
        (next.pid(), Some(next)),
        histogram,
    );
    if P {
        // prev's run, for the charges of the waits it held up.
        workload::switched(prev);
    }
    if R {
        // prev's run, for the slow event this switch may send.
        slow::schedlat_run_at_switch(u64::from(prev.pid()));
    }
    (prev, next, ended)
}

// tp_btf: cgroup_mkdir(struct cgroup *cgrp, const char *path); attached
// when cgroups are named (breakdown keys, neighbour pairs).
#[btf_tracepoint(function = "cgroup_mkdir")]
pub fn cgroup_mkdir(ctx: BtfTracePointContext) -> u32 {
    workload::created(CgroupPtr::arg(ctx.arg(0)), ctx.arg(1));
    0
}

// tp_btf: sched_process_exit(struct task_struct *p, ...)
#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(ctx: BtfTracePointContext) -> u32 {
    wait::forget(TaskPtr::arg(ctx.arg(0)).pid());
    0
}

#[tracepoint(category = "sched", name = "sched_wakeup")]
pub fn tp_sched_wakeup(ctx: TracePointContext) -> u32 {
    wait::enqueue::<false>(tp_read::<u32>(&ctx, get(&TP.wakeup_pid)), Kind::Woken, None);
    0
}

// sched_waking shares sched_wakeup's event class: the same record layout.
#[tracepoint(category = "sched", name = "sched_waking")]
pub fn tp_sched_waking(ctx: TracePointContext) -> u32 {
    wait::waking(tp_read::<u32>(&ctx, get(&TP.wakeup_pid)));
    0
}

#[tracepoint(category = "sched", name = "sched_wakeup_new")]
pub fn tp_sched_wakeup_new(ctx: TracePointContext) -> u32 {
    wait::enqueue::<false>(tp_read::<u32>(&ctx, get(&TP.wakeup_pid)), Kind::New, None);
    0
}

#[tracepoint(category = "sched", name = "sched_switch")]
pub fn tp_sched_switch(ctx: TracePointContext) -> u32 {
    let prev_pid = tp_read::<u32>(&ctx, get(&TP.switch_prev_pid));
    let prev_state = tp_read::<u64>(&ctx, get(&TP.switch_prev_state));
    let next_pid = tp_read::<u32>(&ctx, get(&TP.switch_next_pid));
    // The record holds the *reported* state: a preempted task shows as
    // TASK_REPORT_MAX ("R+"), above every real state bit, so only the bits
    // under it decide (kernel/sched: __trace_sched_switch_state()).
    let prev_runnable = prev_state & get(&TP.state_mask) == 0;
    // The victims and slow modes need tp_btf (task pointers): the loader
    // refuses them here, so the ended wait has no further use.
    let _ =
        wait::switch::<false, false>((prev_pid, None), (prev_runnable, 0), (next_pid, None), true);
    0
}

#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn tp_sched_process_exit(ctx: TracePointContext) -> u32 {
    wait::forget(tp_read::<u32>(&ctx, get(&TP.exit_pid)));
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

// bpf_probe_read_kernel is GPL-only.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
