//! System readers: what the kernel publishes in /proc and cgroup files, and
//! its clocks. No eBPF, no root; the parsers take text so tests and fuzz
//! targets can feed them.

pub mod cgroup_of;
pub mod clock;
pub mod files;
pub mod kernel_facts;
pub mod procfs;
pub mod throttle;
pub mod topology;
