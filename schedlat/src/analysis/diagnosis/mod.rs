//! The judgement of `schedlat diagnose` (docs/architecture.md, "The method
//! `schedlat diagnose` follows"), on typed samples that hold every number it
//! goes by: the kernel's own accounting of the window
//! ([`Findings`](crate::sys::findings::Findings)), what eBPF measured of the
//! same window ([`Traced`](traced::Traced)), and the cgroups of the tasks
//! it names ([`TaskCgroups`](crate::sys::cgroup_of::TaskCgroups)). Nothing
//! here reads a file or a map: each step is a function of its samples, its
//! thresholds named constants whose reasons docs/diagnose.md gives.
//!
//! - `verdict.rs`: the verdict, from the steps below; `traced.rs` the eBPF
//!   sample, `named.rs` a named diagnosis;
//! - `waiting.rs`: step 1, whether the scope was runnable but waiting at all;
//! - `capacity.rs`: too little CPU (quota throttling, saturation, pinning);
//! - `priority.rs`: who won by rule (class or priority), from the victims
//!   tables;
//! - `decision.rs`: what the scheduler decided for the slow waits (the
//!   decision split) and the remedy that fits the rule;
//! - `holders.rs`: whose the culprits in other cgroups were: the scope's
//!   own, the root cgroup's own tasks, exited, or another cgroup;
//! - `whose.rs`: a culprit that is a kernel thread, the scope's own, the
//!   root cgroup's own task or exited, as the report names it;
//! - `split.rs`: what the cause split of the waits names (neighbours,
//!   placement, steal, interrupts, throttling);
//! - `selfcheck.rs`: eBPF's total against schedstat's run_delay.

pub(crate) mod capacity;
pub(crate) mod causes;
pub(crate) mod decision;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod holders;
pub(crate) mod named;
pub(crate) mod priority;
pub(crate) mod selfcheck;
pub(crate) mod traced;
pub(crate) mod verdict;
pub(crate) mod waiting;
pub(crate) mod whose;
