//! Workloads (systemd units, Kubernetes pods, containers) as their owners
//! know them, from what the host has, without any API call or extra
//! privilege: the cgroup path's own spelling (`path`), and the names the
//! container runtimes keep on disk (`names`), read off the measuring path
//! by a thread of their own (`cache`); and a workload named on a command
//! line (`wanted`).

pub mod cache;
pub mod level;
pub mod names;
pub mod path;
pub mod wanted;
