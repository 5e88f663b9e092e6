//! A named diagnosis: what every step of the judgement that names a cause
//! gives (capacity.rs, priority.rs, split.rs), and what the report shows.

use schedlat_common::victims::TaskInfo;
use serde::Serialize;

use crate::sys::cgroup_of::Which;

/// A named diagnosis: a known mechanism that explains the scope's waiting,
/// with its evidence and a next step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Diagnosis {
    pub name: &'static str,
    /// Roughly, the share of the window it explains; orders the causes.
    pub strength: f64,
    pub evidence: String,
    pub next_step: String,
    /// The holders its evidence names, in its order: the report quotes
    /// what each was running (hottest.rs) under the evidence.
    #[serde(skip)]
    pub holders: Vec<Holder>,
}

/// Who held the CPU while the scope waited, as a diagnosis names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Holder {
    /// One task (a culprit that outranked the task it made wait).
    Task(TaskInfo),
    /// The tasks of one cgroup (a noisy neighbour, the root cgroup's own
    /// tasks): its path in `hierarchy`, and how the evidence names it.
    Cgroup {
        path: String,
        hierarchy: Which,
        name: String,
    },
}

impl Holder {
    /// Whether both name the same holder: one task, or one group of one
    /// hierarchy (however each names it).
    pub(crate) fn same(&self, other: &Holder) -> bool {
        match (self, other) {
            (Holder::Task(a), Holder::Task(b)) => a.tid == b.tid,
            (
                Holder::Cgroup {
                    path: a,
                    hierarchy: x,
                    ..
                },
                Holder::Cgroup {
                    path: b,
                    hierarchy: y,
                    ..
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}
