//! Cgroup ids named as workloads at the level a user chooses: the path
//! (from the hierarchy, or as the kernel made it), the labels it carries,
//! and, for containers and pods, the names their runtimes keep on disk,
//! from a cache that never makes the caller wait.

use schedlat_common::scope::Breakdown;

use super::{keylabels::KeyLabels, tracer::Tracer};
use crate::sys::workload::level::Level;

/// Names cgroup ids of one tracer's hierarchy at one level.
pub(crate) struct WorkloadNamer {
    labels: KeyLabels,
    level: Level,
}

impl WorkloadNamer {
    /// `level`'s names for `tracer`'s cgroup ids; the runtimes' files are
    /// read under `/` (the host's).
    pub(crate) fn new(tracer: &Tracer, level: Level) -> WorkloadNamer {
        let mut labels = tracer.key_labels(Breakdown::Cgroup);
        if matches!(level, Level::Container | Level::Pod) {
            labels.name_containers();
        }
        WorkloadNamer { labels, level }
    }

    /// Whether cgroup `id` is still there.
    pub(crate) fn exists(&mut self, id: u64) -> bool {
        self.labels.exists(id)
    }

    /// Cgroup `id`'s name at the level: its path, or the unit, pod or
    /// container it belongs to; `(removed, id N)` only for a cgroup gone
    /// before it could be named.
    pub(crate) fn name(&mut self, id: u64) -> String {
        match self.labels.workload(id) {
            Some(workload) => workload.name_at(self.level),
            None => format!("(removed, id {id})"),
        }
    }
}
