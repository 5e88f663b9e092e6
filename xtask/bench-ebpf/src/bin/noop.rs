//! The hooks' floor (`noop`): a tp_btf program on each of sched_wakeup,
//! sched_wakeup_new and sched_switch that returns at once (`r0 = 0; exit`).
#![no_std]
#![no_main]
#![allow(
    unreachable_pub,
    reason = "BPF object: programs are exported symbols, in aya's `pub fn` form"
)]

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};

#[btf_tracepoint(function = "sched_wakeup")]
pub fn noop_wakeup(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn noop_wakeup_new(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "sched_switch")]
pub fn noop_switch(_ctx: BtfTracePointContext) -> i32 {
    0
}

bench_ebpf::object_tail!();
