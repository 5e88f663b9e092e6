//! Kernel access: loading and attaching the eBPF object, the running
//! kernel's BTF and tracefs formats, the cgroup filesystems, the privileges
//! loading needs, and what the programs are configured to compute and keep.

pub(crate) mod attach_btf;
pub(crate) mod btf;
// Unused in fault-injection builds, which replace an offset on purpose.
#[cfg_attr(feature = "fault-injection", allow(dead_code))]
pub(crate) mod btf_check;
mod btf_names;
pub(crate) mod causes;
pub(crate) mod cgroup_by_name;
pub(crate) mod cgroupfs;
pub(crate) mod decision;
pub(crate) mod error;
pub(crate) mod filter;
pub(crate) mod hook;
pub(crate) mod limits;
pub(crate) mod loader;
pub(crate) mod map_memory;
pub(crate) mod modes;
pub(crate) mod preflight;
pub(crate) mod privileges;
pub(crate) mod tracefs;
