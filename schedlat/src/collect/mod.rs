//! Collect: what the kernel's maps hold, read into plain values. The
//! histogram interval, the breakdown keys and their labels, the victims
//! tables and the programs' own cost.

pub mod batch;
pub mod bpf_cost;
pub mod causes;
pub mod cgroup_names;
#[cfg(test)]
mod causes_live;
#[cfg(test)]
mod pairs_live;
pub mod error;
pub mod histogram;
pub mod interval;
pub mod keylabels;
pub mod pairs;
mod maps;
pub mod slow;
pub mod tracer;
pub mod victims;
mod whole;
