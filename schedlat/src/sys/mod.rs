//! System readers: what the kernel publishes in /proc and cgroup files, and
//! its clocks. No eBPF, no root; the parsers take text so tests and fuzz
//! targets can feed them. One system interface besides: the bpf() system
//! call's `union bpf_attr`, for the commands schedlat issues itself
//! (bpf.rs).

pub mod bpf;
pub mod byte_names;
pub mod cgroup_of;
pub mod clock;
pub mod files;
pub mod findings;
pub mod host;
pub mod kernel_facts;
pub mod mounts;
pub mod notice;
pub mod own_limits;
pub mod owned_dir;
pub mod process_name;
pub mod procfs;
pub mod sched_context;
pub mod sched_mechanisms;
pub mod scope;
pub mod slice;
pub mod symbolize;
pub mod terminal;
pub mod throttle;
pub mod topology;
pub mod whole_file;
pub mod workload;
