//! The least timer and decision (`timer-decision`): bench_ebpf::timer with
//! its decision map.
#![no_std]
#![no_main]
#![allow(
    unreachable_pub,
    reason = "BPF object: programs are exported symbols, in aya's `pub fn` form"
)]

bench_ebpf::timer_object!(timerd_wakeup, timerd_wakeup_new, timerd_switch, decision);
