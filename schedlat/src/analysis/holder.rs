//! Who held the CPU while tasks waited, as a report names it: one task
//! or the tasks of one cgroup. `diagnose`'s diagnoses list the holders
//! their evidence names (diagnosis/named.rs), and the hottest stack behind
//! each is looked up by it (hottest.rs), `victims`' culprit rows too.

use schedlat_common::victims::TaskInfo;

use crate::sys::cgroup_of::Which;

/// Who held the CPU while the scope waited, as a report names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NamedHolder {
    /// One task (a culprit row, a culprit that outranked the task it made
    /// wait).
    Task(TaskInfo),
    /// The tasks of one cgroup (a noisy neighbour, the root cgroup's own
    /// tasks): its path in `hierarchy`, and how the evidence names it.
    Cgroup {
        path: String,
        hierarchy: Which,
        name: String,
    },
}

impl NamedHolder {
    /// Whether both name the same holder: one task, or one group of one
    /// hierarchy (however each names it).
    pub(crate) fn same(&self, other: &NamedHolder) -> bool {
        match (self, other) {
            (NamedHolder::Task(a), NamedHolder::Task(b)) => a.tid == b.tid,
            (
                NamedHolder::Cgroup {
                    path: a,
                    hierarchy: x,
                    ..
                },
                NamedHolder::Cgroup {
                    path: b,
                    hierarchy: y,
                    ..
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}
