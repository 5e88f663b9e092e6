//! Kernel access: loading and attaching the eBPF object, the running
//! kernel's BTF and tracefs formats, the cgroup filesystems, the privileges
//! loading needs, and what the programs are configured to compute and keep.

pub mod attach_btf;
pub mod btf;
// Unused in fault-injection builds, which replace an offset on purpose.
#[cfg_attr(feature = "fault-injection", allow(dead_code))]
pub mod btf_check;
mod btf_names;
pub mod causes;
pub mod cgroup_by_name;
pub mod cgroupfs;
pub mod decision;
pub mod error;
pub mod filter;
pub mod hook;
pub mod limits;
pub mod loader;
pub mod map_memory;
pub mod modes;
pub mod preflight;
pub mod privileges;
pub mod tracefs;
