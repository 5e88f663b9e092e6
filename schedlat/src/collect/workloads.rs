//! Cgroup ids named as workloads at the level a user chooses: the path
//! (from the hierarchy, or as the kernel made it), the labels it carries,
//! and, for containers and pods, the names their runtimes keep on disk,
//! from a cache that never makes the caller wait.

use schedlat_common::scope::Breakdown;

use super::{keylabels::KeyLabels, tracer::Tracer};
use crate::sys::workload::{
    cache::NameCache,
    level::{Level, Workload},
    names::NameRoots,
    path,
};

/// Names cgroup ids of one tracer's hierarchy at one level.
pub struct WorkloadNamer {
    labels: KeyLabels,
    level: Level,
    /// The runtimes' names, for the container and pod levels.
    names: Option<NameCache>,
}

impl WorkloadNamer {
    /// `level`'s names for `tracer`'s cgroup ids; the runtimes' files are
    /// read under `/` (the host's).
    pub fn new(tracer: &Tracer, level: Level) -> WorkloadNamer {
        let names = matches!(level, Level::Container | Level::Pod)
            .then(|| NameCache::start(NameRoots::under(std::path::Path::new("/"))).ok())
            .flatten();
        // Every container there now is asked for at once (the asking does
        // not wait), so that the first interval already has their names.
        if let (Some(cache), Some(h)) = (&names, &tracer.cgroup_hierarchy) {
            for path in h.paths_by_id().values() {
                let labels = path::parse(path);
                if let Some(id) = &labels.container_id {
                    cache.get(id, labels.runtime);
                }
            }
        }
        WorkloadNamer {
            labels: tracer.key_labels(Breakdown::Cgroup),
            level,
            names,
        }
    }

    /// Whether cgroup `id` is still there.
    pub fn exists(&mut self, id: u64) -> bool {
        self.labels.exists(id)
    }

    /// Cgroup `id`'s name at the level: its path, or the unit, pod or
    /// container it belongs to; `(removed, id N)` only for a cgroup gone
    /// before it could be named.
    pub fn name(&mut self, id: u64) -> String {
        let Some(path) = self.labels.cgroup_name(id) else {
            return format!("(removed, id {id})");
        };
        if self.level == Level::Cgroup {
            return path;
        }
        let labels = path::parse(&path);
        let names = match (&self.names, &labels.container_id) {
            (Some(cache), Some(cid)) => cache.get(cid, labels.runtime),
            _ => None,
        };
        Workload {
            path,
            labels,
            names,
        }
        .name_at(self.level)
    }
}
