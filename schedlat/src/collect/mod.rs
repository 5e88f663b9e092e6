//! Collect: what the kernel's maps hold, read into plain values. The
//! histogram interval, the breakdown keys and their labels, the victims
//! tables and the programs' own cost.

pub mod batch;
pub mod bpf_cost;
#[cfg(test)]
mod causes_live;
pub mod cgroup_names;
pub mod decision;
#[cfg(test)]
mod decision_live;
#[cfg(test)]
mod decision_trace;
pub mod error;
pub mod interval;
pub mod key_intervals;
mod key_slots;
pub mod keylabels;
mod maps;
pub mod pairs;
#[cfg(test)]
mod pairs_live;
pub mod slow;
pub mod tracer;
pub mod victims;
mod whole;
pub mod workloads;
