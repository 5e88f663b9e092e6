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
