//! Cgroup ids named as workloads at the level a user chooses: the path
//! (from the hierarchy, or as the kernel made it), the labels it carries,
//! and, for containers and pods, the names their runtimes keep on disk,
//! from a cache that never makes the caller wait. Tasks are named too,
//! by the cgroup they are in now (the victims' and culprits' columns).

use std::collections::HashMap;

use schedlat_common::scope::Breakdown;

use super::{keylabels::KeyLabels, tracer::Tracer};
use crate::{
    kernel::{
        btf::CssChoice,
        cgroupfs::{self, CgroupTarget, Hierarchy},
    },
    sys::{
        cgroup_of,
        mounts::Mounts,
        procfs::CgroupLine,
        workload::level::{Level, Workload},
    },
};

/// What a task was in when it was named: the workload of its cgroup, or
/// none known because it (and its process) had exited: an exiting task's
/// cgroup v1 lines read `/` whatever cgroup it was in (sys/cgroup_of.rs),
/// so it is said to have exited rather than named by them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaskWorkload {
    /// Boxed: a workload is large, and most rows' tasks have one.
    In(Box<Workload>),
    Exited,
}

impl TaskWorkload {
    /// The workload, when one is known.
    pub(crate) fn workload(&self) -> Option<&Workload> {
        match self {
            TaskWorkload::In(w) => Some(&**w),
            TaskWorkload::Exited => None,
        }
    }
}

/// Names cgroup ids of one tracer's hierarchy as workloads.
pub(crate) struct WorkloadNamer {
    labels: KeyLabels,
}

impl WorkloadNamer {
    /// Names for `tracer`'s cgroup ids, the runtimes' files read (under
    /// `/`, the host's) only where `level` names containers or pods.
    pub(crate) fn new(tracer: &Tracer, level: Level) -> WorkloadNamer {
        let mut labels = tracer.key_labels(Breakdown::Cgroup);
        if matches!(level, Level::Container | Level::Pod) {
            labels.name_containers();
        }
        WorkloadNamer { labels }
    }

    /// For naming tasks as well as cgroup ids: in the tracer's hierarchy,
    /// else the cpu controller's (the one `--cgroups` keys by), with the
    /// runtimes' names of containers (a task's column names its
    /// container whatever `--by` rolls pairs up to).
    pub(crate) fn for_tasks(tracer: &Tracer) -> WorkloadNamer {
        let hierarchy = (tracer.cgroup_hierarchy.clone())
            .or_else(|| cgroupfs::default_hierarchy(&Mounts::read()));
        let mut labels =
            KeyLabels::new(Breakdown::Cgroup, hierarchy).with_names(tracer.cgroup_names.clone());
        labels.name_containers();
        WorkloadNamer { labels }
    }

    /// The workloads of `tasks` (TID, PID), by TID, from the cgroup each
    /// is in now (/proc/TID/cgroup, the hierarchy's line; a thread gone
    /// or exiting by then, whose cgroup v1 line no longer says where it
    /// was, is taken to be in its process's cgroup, as threads are unless
    /// cgroup v2's threaded mode splits them); a task whose process is
    /// gone or exiting too is `Exited`, and one in no cgroup of the
    /// hierarchy has no entry.
    pub(crate) fn tasks(
        &mut self,
        tasks: impl IntoIterator<Item = (u32, u32)>,
    ) -> HashMap<u32, TaskWorkload> {
        let mut found = HashMap::new();
        for (tid, pid) in tasks {
            if tid == 0 || found.contains_key(&tid) {
                continue;
            }
            let Some(h) = self.labels.hierarchy() else {
                continue;
            };
            let path = |task| Some(line_of(h, &cgroup_of::of(task)?)?.path.clone());
            match path(tid).or_else(|| path(pid)) {
                Some(path) => {
                    found.insert(
                        tid,
                        TaskWorkload::In(Box::new(self.labels.workload_at(path))),
                    );
                }
                None if cgroup_of::exiting(tid) && cgroup_of::exiting(pid) => {
                    found.insert(tid, TaskWorkload::Exited);
                }
                None => {}
            }
        }
        found
    }

    /// Whether cgroup `id` is still there.
    pub(crate) fn exists(&mut self, id: u64) -> bool {
        self.labels.exists(id)
    }

    /// Cgroup `id`'s path, without reading what it is; None for a cgroup
    /// gone before it could be named.
    pub(crate) fn path(&mut self, id: u64) -> Option<String> {
        self.labels.cgroup_name(id)
    }

    /// What cgroup `id` is: its path, labels and runtime's names; None
    /// only for a cgroup gone before it could be named.
    pub(crate) fn workload(&mut self, id: u64) -> Option<Workload> {
        self.labels.workload(id)
    }
}

/// What the owner of `-c`'s cgroup calls it (`container shop/web-1/nginx`,
/// `pod shop/web-1`, `unit nginx.service`), its runtime's files read now;
/// None for a cgroup that is none of these. A recording keeps it, so that
/// two recordings of one container compare across a restart (a new ID).
pub(crate) fn owner_of_target(target: &CgroupTarget) -> Option<String> {
    let relative = target.dir.strip_prefix(&target.hierarchy.mount).ok()?;
    cgroup_of::owner(&format!("/{}", relative.to_str()?))
}

/// The line of /proc/PID/cgroup that is `hierarchy`'s: the v2 line (0), or
/// the v1 line holding its controllers.
fn line_of<'a>(hierarchy: &Hierarchy, lines: &'a [CgroupLine]) -> Option<&'a CgroupLine> {
    lines.iter().find(|l| match &hierarchy.css {
        CssChoice::Default => l.hierarchy == 0,
        CssChoice::Controllers(want) => {
            l.hierarchy != 0 && want.iter().any(|c| l.controllers.contains(c))
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sys::procfs::parse_proc_cgroup;

    #[test]
    fn a_task_is_named_in_the_hierarchy_cgroup_ids_are_of() {
        let lines = parse_proc_cgroup(
            "12:cpu,cpuacct:/kubepods/besteffort/podx/abc\n5:memory:/other\n0::/kubepods.slice/web.scope\n",
        )
        .unwrap();
        let v1 = Hierarchy {
            mount: PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
            css: CssChoice::Controllers(vec!["cpu".into(), "cpuacct".into()]),
        };
        let v2 = Hierarchy {
            mount: PathBuf::from("/sys/fs/cgroup"),
            css: CssChoice::Default,
        };
        let path = |h: &Hierarchy| line_of(h, &lines).map(|l| l.path.as_str());
        assert_eq!(path(&v1), Some("/kubepods/besteffort/podx/abc"));
        assert_eq!(path(&v2), Some("/kubepods.slice/web.scope"));
        let lines = parse_proc_cgroup("0::/only-v2\n").unwrap();
        assert_eq!(line_of(&v1, &lines), None);
    }
}
