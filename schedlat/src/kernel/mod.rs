//! Kernel access: loading and attaching the eBPF object, the running
//! kernel's BTF and tracefs formats, the cgroup filesystems, the privileges
//! loading needs, and what the programs are configured to compute and keep.

pub mod btf;
pub mod btf_prefix;
pub mod cgroupfs;
pub mod error;
pub mod filter;
pub mod hook;
pub mod limits;
pub mod loader;
pub mod modes;
pub mod privileges;
pub mod tracefs;
