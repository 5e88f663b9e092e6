//! The least timer and decision (`timer-decision`): bench_ebpf::timer with
//! its decision map.
#![no_std]
#![no_main]
#![allow(
    unreachable_pub,
    reason = "BPF object: programs are exported symbols, in aya's `pub fn` form"
)]

use aya_ebpf::{
    macros::{btf_tracepoint, map},
    maps::{Array, PerCpuArray},
    programs::BtfTracePointContext,
};
use bench_ebpf::{
    offsets::Offsets,
    timer::{Histogram, Timer},
};

#[unsafe(export_name = "OFFSETS")]
static OFFSETS: Offsets = Offsets::ZERO;

// Sized by the loader: one slot per thread id (pid_max).
#[map(name = "timer_starts")]
static STARTS: Array<u64> = Array::with_max_entries(1, 0);

#[map(name = "timer_hist")]
static HISTOGRAM: PerCpuArray<Histogram> = PerCpuArray::with_max_entries(1, 0);

// The switch count at each thread's enqueue; sized as STARTS.
#[map(name = "timer_switches")]
static SWITCHES: Array<u64> = Array::with_max_entries(1, 0);

const TIMER: Timer = Timer {
    offsets: &OFFSETS,
    starts: &STARTS,
    histogram: &HISTOGRAM,
    switches: Some(&SWITCHES),
};

#[btf_tracepoint(function = "sched_wakeup")]
pub fn timerd_wakeup(ctx: BtfTracePointContext) -> i32 {
    TIMER.wakeup(&ctx);
    0
}

#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn timerd_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    TIMER.wakeup(&ctx);
    0
}

#[btf_tracepoint(function = "sched_switch")]
pub fn timerd_switch(ctx: BtfTracePointContext) -> i32 {
    TIMER.switch(&ctx);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

// The kernel loads tracing programs only under a GPL-compatible license.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
