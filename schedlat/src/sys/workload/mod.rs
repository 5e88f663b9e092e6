//! Workloads (systemd units, Kubernetes pods, containers) as their owners
//! know them, from what the host has: the cgroup path's own spelling
//! (`path`), without any API call or extra privilege.

pub mod path;
