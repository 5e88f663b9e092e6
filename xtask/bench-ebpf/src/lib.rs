//! The bench's reference programs (`cargo xtask bench`'s `noop`, `timer`
//! and `timer-decision` modes): what any program on the scheduler's hooks
//! costs before it does a thing, and the least a run queue latency tool
//! can do there. What each does and why the bench measures it is in
//! xtask's src/bench/reference/mod.rs; the code is here.
//!
//! Each mode is one object, a bin of this crate (src/bin/), with only its
//! own programs and maps: `noop` (programs that return at once), `timer`
//! and `timer-decision` (both the `Timer` of timer.rs, the second with its
//! decision map). The library exports no symbol of its own, so no object
//! carries another's maps or globals.
//!
//! Like schedlat-ebpf, the offsets of the kernel's fields come from the
//! running kernel's BTF through a read-only global (offsets.rs) and the
//! programs read them through tp_btf pointers (kernel.rs). Every map is an
//! array, whose lookups the verifier inlines.
#![no_std]

pub mod kernel;
pub mod offsets;
pub mod timer;

/// What every object of this crate ends with: the panic handler a `no_std`
/// binary needs (the verifier rejects any path to it) and the license the
/// kernel loads tracing programs under only when GPL-compatible.
#[macro_export]
macro_rules! object_tail {
    () => {
        #[cfg(not(test))]
        #[panic_handler]
        fn panic(_info: &core::panic::PanicInfo) -> ! {
            loop {}
        }

        #[unsafe(link_section = "license")]
        #[unsafe(no_mangle)]
        static LICENSE: [u8; 4] = *b"GPL\0";
    };
}

/// A `Timer` object (timer.rs): the OFFSETS global, its maps and its three
/// programs, named as given; with `decision`, the switch-count map too.
#[macro_export]
macro_rules! timer_object {
    ($wakeup:ident, $wakeup_new:ident, $switch:ident, decision) => {
        // The switch count at each thread's enqueue; sized as STARTS.
        #[aya_ebpf::macros::map(name = "timer_switches")]
        static SWITCHES: aya_ebpf::maps::Array<u64> = aya_ebpf::maps::Array::with_max_entries(1, 0);
        $crate::timer_object!(@programs $wakeup, $wakeup_new, $switch, Some(&SWITCHES));
    };
    ($wakeup:ident, $wakeup_new:ident, $switch:ident) => {
        $crate::timer_object!(@programs $wakeup, $wakeup_new, $switch, None);
    };
    (@programs $wakeup:ident, $wakeup_new:ident, $switch:ident, $switches:expr) => {
        #[unsafe(export_name = "OFFSETS")]
        static OFFSETS: $crate::offsets::Offsets = $crate::offsets::Offsets::ZERO;

        // Sized by the loader: one slot per thread id (pid_max).
        #[aya_ebpf::macros::map(name = "timer_starts")]
        static STARTS: aya_ebpf::maps::Array<u64> = aya_ebpf::maps::Array::with_max_entries(1, 0);

        #[aya_ebpf::macros::map(name = "timer_hist")]
        static HISTOGRAM: aya_ebpf::maps::PerCpuArray<$crate::timer::Histogram> =
            aya_ebpf::maps::PerCpuArray::with_max_entries(1, 0);

        const TIMER: $crate::timer::Timer = $crate::timer::Timer {
            offsets: &OFFSETS,
            starts: &STARTS,
            histogram: &HISTOGRAM,
            switches: $switches,
        };

        #[aya_ebpf::macros::btf_tracepoint(function = "sched_wakeup")]
        pub fn $wakeup(ctx: aya_ebpf::programs::BtfTracePointContext) -> i32 {
            TIMER.wakeup(&ctx);
            0
        }

        #[aya_ebpf::macros::btf_tracepoint(function = "sched_wakeup_new")]
        pub fn $wakeup_new(ctx: aya_ebpf::programs::BtfTracePointContext) -> i32 {
            TIMER.wakeup(&ctx);
            0
        }

        #[aya_ebpf::macros::btf_tracepoint(function = "sched_switch")]
        pub fn $switch(ctx: aya_ebpf::programs::BtfTracePointContext) -> i32 {
            TIMER.switch(&ctx);
            0
        }

        $crate::object_tail!();
    };
}
