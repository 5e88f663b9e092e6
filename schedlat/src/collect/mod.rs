//! Collect: what the kernel's maps hold, read into plain values. The
//! histogram interval, the breakdown keys and their labels, the victims
//! tables, the slow waits an exemplar points to, and the programs' own cost.

pub(crate) mod batch;
pub(crate) mod bpf_cost;
#[cfg(test)]
mod causes_live;
pub(crate) mod cgroup_names;
pub(crate) mod decision;
#[cfg(test)]
mod decision_live;
// The kernel's own trace, the live tests' oracle: one file with the root
// tests (tests/common), which check the same waits through the binary.
#[cfg(test)]
#[path = "../../../tests/common/kernel_trace.rs"]
mod decision_trace;
pub(crate) mod error;
pub(crate) mod exemplar_waits;
pub(crate) mod holder_stacks;
pub(crate) mod interval;
#[cfg(test)]
mod key_decision_live;
pub(crate) mod key_intervals;
mod key_slots;
pub(crate) mod key_summaries;
pub(crate) mod keylabels;
mod maps;
pub(crate) mod pairs;
#[cfg(test)]
mod pairs_live;
pub(crate) mod slow;
mod summary_rows;
#[cfg(test)]
mod summary_rows_live;
pub(crate) mod tracer;
pub(crate) mod victims;
mod whole;
pub(crate) mod workloads;
#[cfg(test)]
mod yield_live;
