//! The least timer (`timer`): bench_ebpf::timer without the decision.
#![no_std]
#![no_main]
#![allow(
    unreachable_pub,
    reason = "BPF object: programs are exported symbols, in aya's `pub fn` form"
)]

bench_ebpf::timer_object!(timer_wakeup, timer_wakeup_new, timer_switch);
