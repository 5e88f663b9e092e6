//! Whose a culprit of the victims tables is, where that is not its cgroup's
//! name: a kernel thread, a task of the scope's own (under -c a pod's
//! other container), one of the root cgroup's own tasks (nobody placed it
//! in a group), or a task that exited before its cgroups could be read.
//! The report says so beside the task, so that `/` or a bare comm is never
//! read as a neighbour to cap. The idle task has its own label
//! (analysis/task.rs).

use std::collections::HashMap;

use serde::Serialize;

use crate::{analysis::victims::Tables, sys::cgroup_of::TaskCgroups};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Whose {
    KernelThread,
    Own,
    RootCgroup,
    Exited,
}

impl Whose {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Whose::KernelThread => "kernel thread",
            Whose::Own => "the scope's own",
            Whose::RootCgroup => "the root cgroup's own task",
            Whose::Exited => "exited",
        }
    }
}

/// Whose each culprit process of `tables` is, where it is one of these.
pub(crate) fn of(tables: &Tables, cgroups: &TaskCgroups) -> HashMap<u32, Whose> {
    let mut whose = HashMap::new();
    for c in &tables.culprits {
        let pid = c.task.tgid;
        if c.task.tid == 0 {
            continue;
        }
        let kind = if cgroups.is_kernel_thread(pid) {
            Whose::KernelThread
        } else if cgroups.is_own(pid) {
            Whose::Own
        } else {
            match cgroups.by_pid.get(&pid) {
                // Read at the end of the window and gone.
                Some(None) => Whose::Exited,
                Some(Some(lines)) if in_root(lines) => Whose::RootCgroup,
                _ => continue,
            }
        };
        whose.insert(pid, kind);
    }
    whose
}

/// In the root of the CPU scheduler's hierarchy: its v1 cpu line, else its
/// cgroup v2 line, is `/`.
fn in_root(lines: &[crate::sys::procfs::CgroupLine]) -> bool {
    let cpu = lines
        .iter()
        .find(|l| l.controllers.iter().any(|c| c == "cpu"));
    cpu.or_else(|| lines.iter().find(|l| l.hierarchy == 0))
        .is_some_and(|l| l.path == "/")
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::procfs::parse_proc_cgroup,
    };

    #[test]
    fn kernel_threads_own_root_and_exited_tasks_are_told() {
        let victim = task(40, 40, "web", 0, 0, 0);
        let row = |pid| WaitStats {
            task: task(pid, pid, "t", 0, 0, 0),
            count: 1,
            total_ns: 10,
            max_other: victim,
            ..Default::default()
        };
        let rows = [row(2), row(50), row(60), row(70), row(80), row(0)];
        let lines = |text: &str| Some(parse_proc_cgroup(text).unwrap());
        let cgroups = TaskCgroups {
            scope: lines("3:cpu:/pod\n0::/pod\n"),
            scope_subtree: true,
            by_pid: [
                (2, lines("3:cpu:/\n0::/\n")),
                (50, lines("3:cpu:/pod/b\n0::/pod/b\n")),
                (60, lines("3:cpu:/\n0::/user.slice\n")),
                (70, None),
                (80, lines("3:cpu:/other\n0::/other\n")),
            ]
            .into_iter()
            .collect(),
            kernel_threads: [2].into_iter().collect(),
            ..TaskCgroups::default()
        };
        let w = of(&rank(&[], &rows, SortKey::Total, 0), &cgroups);
        assert_eq!(w.get(&2), Some(&Whose::KernelThread));
        assert_eq!(w.get(&50), Some(&Whose::Own));
        // In the cpu controller's root, whatever its v2 group.
        assert_eq!(w.get(&60), Some(&Whose::RootCgroup));
        assert_eq!(w.get(&70), Some(&Whose::Exited));
        assert_eq!(w.get(&80), None);
        assert_eq!(w.get(&0), None);
    }
}
