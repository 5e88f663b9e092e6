//! The value model at the bottom of the crate: the waits as counted
//! ([`Waits`], with their [`Unit`] and cause split), and every bucket
//! layout and translation of them. The kernel's geometry is defined once,
//! in `schedlat_common::bucket` (the programs count with it); this module
//! wraps it for userspace and holds everything that follows from it:
//!
//! - buckets: the fine buckets' bounds (the last one open above), a
//!   rank's bucket, runqlat's log2 slots;
//! - layout: the exported `le` layouts, and how fine buckets fold into
//!   them;
//! - native: the same in Prometheus' native (exponential) schema 3;
//! - hdr: the same as an HdrHistogram, for .hlog files.
//!
//! It imports nothing else of the crate, so a recording, a comparison or a
//! replay depends on nothing that touches a kernel.

mod buckets;
mod cause_counts;
mod decision_counts;
#[cfg(test)]
pub(crate) mod decision_fixtures;
pub(crate) mod hdr;
mod key_decision;
pub(crate) mod layout;
pub(crate) mod native;
mod waits;

pub(crate) use self::{
    buckets::{Bucket, NR_BUCKETS, NR_LOG2_SLOTS, Rank, bucket_index, log2_slot, log2_slot_bounds},
    cause_counts::{CauseCounts, CauseFacts},
    decision_counts::{DecisionCounts, DecisionFacts, TifSource},
    key_decision::{KeyDecisionCounts, WORDS as KEY_DECISION_WORDS},
    waits::{Unit, Waits},
};
