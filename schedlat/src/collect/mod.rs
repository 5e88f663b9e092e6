//! Collect: what the kernel's maps hold, read into plain values. The
//! histogram interval, the breakdown keys and their labels, the victims
//! tables, the slow waits an exemplar points to, and the programs' own cost.

pub(crate) mod batch;
pub(crate) mod bpf_cost;
pub(crate) mod cgroup_names;
pub(crate) mod decision;
pub(crate) mod error;
pub(crate) mod exemplar_waits;
pub(crate) mod holder_stacks;
pub(crate) mod interval;
pub(crate) mod key_intervals;
mod key_slots;
pub(crate) mod key_summaries;
pub(crate) mod keylabels;
// The tests that load the eBPF object into this kernel and read its maps
// through the readers here (root).
#[cfg(test)]
mod live;
mod maps;
pub(crate) mod pairs;
pub(crate) mod slow;
mod summary_rows;
pub(crate) mod tracer;
pub(crate) mod victims;
mod whole;
pub(crate) mod workloads;
