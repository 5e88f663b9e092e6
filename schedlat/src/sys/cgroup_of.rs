//! Which cgroups a process is in (/proc/PID/cgroup), and how two processes'
//! cgroups differ, named the way a user finds the group: by its path in
//! the cpu controller's hierarchy when that is where they differ, else in
//! cgroup v2, else in the first hierarchy that tells them apart. The
//! kernel's "same cgroup" (the same css_set: every hierarchy alike) is what
//! `differs` compares, so it agrees with the split's held_by classes.
//! [`TaskCgroups`] reads all of it for the tasks a diagnosis names, once.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    fs,
};

use schedlat_common::victims::TaskInfo;

use super::{
    mounts::Mounts,
    procfs::{self, CgroupLine},
    workload::{level::Workload, names::NameRoots, path},
};

/// A task's cgroups, one line per hierarchy; None when it is gone (or its
/// file does not parse). An exiting task (or a zombie) keeps only what is
/// still true of it: the kernel prints `/` for its cgroup v1 lines whatever
/// cgroup it was in, and appends ` (deleted)` to its v2 line once that
/// cgroup is removed (kernel/cgroup/cgroup.c, proc_cgroup_show()), so its
/// v1 lines are left out and the suffix taken off. A task named by where
/// it is must never be named `/` because it was on its way out.
pub fn of(tid: u32) -> Option<Vec<CgroupLine>> {
    let text = fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
    let lines = procfs::parse_proc_cgroup(&text).ok()?;
    // Only lines an exiting task could have printed make its state worth
    // a read. Read after the lines: PF_EXITING is never cleared, so a task
    // that printed `/` because it was exiting is seen exiting here.
    let suspect = |l: &CgroupLine| {
        (l.hierarchy != 0 && l.path == "/") || (l.hierarchy == 0 && l.path.ends_with(DELETED))
    };
    if !lines.iter().any(suspect) || !exiting(tid) {
        return Some(lines);
    }
    Some(as_exiting(lines))
}

const DELETED: &str = " (deleted)";

/// An exiting task's lines, keeping what is still true of them (see [`of`]).
fn as_exiting(lines: Vec<CgroupLine>) -> Vec<CgroupLine> {
    (lines.into_iter())
        .filter(|l| l.hierarchy == 0)
        .map(|l| CgroupLine {
            path: l.path.strip_suffix(DELETED).unwrap_or(&l.path).to_string(),
            ..l
        })
        .collect()
}

/// Whether task `tid` is exiting, or a zombie; a task gone by now (whose
/// state cannot be read) counts as one.
pub fn exiting(tid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok();
    (stat.and_then(|t| procfs::parse_stat_exiting(&t))).unwrap_or(true)
}

/// Whether the process is a kernel thread: a child of kthreadd (PID 2), or
/// kthreadd itself. Kernel threads are the split's own class (held_by
/// kernel), not a neighbouring cgroup.
pub fn is_kernel_thread(pid: u32) -> bool {
    if pid == 2 {
        return true;
    }
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the comm's closing parenthesis: state, then ppid.
    let ppid = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
    ppid == Some(2)
}

/// The name of `culprit`'s cgroup where it is not `victim`'s; None when
/// they are in the same cgroups everywhere.
pub fn differs(culprit: &[CgroupLine], victim: &[CgroupLine]) -> Option<String> {
    differs_in(culprit, victim).map(|d| d.name)
}

/// Where two tasks' cgroups differ: the culprit's group there, and in
/// which hierarchy, which says whether a CPU limit can be put on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Differs {
    /// As [`differs`] names it: the path, or `controllers:path` for a v1
    /// hierarchy other than the cpu controller's.
    pub name: String,
    /// The culprit's path in that hierarchy.
    pub path: String,
    pub hierarchy: Which,
}

/// The hierarchy two tasks' cgroups differ in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    /// The v1 cpu controller's: every group of it is a group of the CPU
    /// scheduler with its own cpu.shares and cfs quota.
    V1Cpu,
    /// cgroup v2: a group has cpu.weight and cpu.max only where its
    /// parent enables the cpu controller (cgroup.subtree_control).
    V2,
    /// Another v1 hierarchy (memory, pids, name=systemd): no CPU limit.
    Other,
}

impl Differs {
    /// The root of its hierarchy: the tasks nobody placed in a group.
    pub fn is_root(&self) -> bool {
        self.path == "/"
    }
}

/// [`differs`], with where.
pub fn differs_in(culprit: &[CgroupLine], victim: &[CgroupLine]) -> Option<Differs> {
    let path = |lines: &[CgroupLine], want: &dyn Fn(&CgroupLine) -> bool| {
        lines.iter().find(|l| want(l)).map(|l| l.path.clone())
    };
    let cpu = |l: &CgroupLine| l.controllers.iter().any(|c| c == "cpu");
    let v2 = |l: &CgroupLine| l.hierarchy == 0;
    for (want, hierarchy) in [
        (&cpu as &dyn Fn(&CgroupLine) -> bool, Which::V1Cpu),
        (&v2, Which::V2),
    ] {
        let (c, v) = (path(culprit, want), path(victim, want));
        if let (Some(c), Some(v)) = (c, v)
            && c != v
        {
            return Some(Differs {
                name: c.clone(),
                path: c,
                hierarchy,
            });
        }
    }
    culprit
        .iter()
        .find(|c| {
            victim
                .iter()
                .any(|v| v.hierarchy == c.hierarchy && v.path != c.path)
        })
        .map(|c| Differs {
            name: format!("{}:{}", c.controllers.join(","), c.path),
            path: c.path.clone(),
            hierarchy: Which::Other,
        })
}

/// Whether `path` is `group` or below it.
fn under(path: &str, group: &str) -> bool {
    group == "/"
        || path == group
        || path
            .strip_prefix(group)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The cgroups of the tasks a diagnosis names (the culprits of its window
/// and the victims they made wait longest) and of its scope, read once at
/// the end of the window: the judgement (analysis/diagnosis/) then reads no
/// file. A task gone by then has no entry's value (None).
#[derive(Debug, Default)]
pub struct TaskCgroups {
    /// The scope's cgroups, from a thread alive at the end of the window;
    /// None for the whole system. They stand for a victim that is gone (a
    /// short-lived child).
    pub scope: Option<Vec<CgroupLine>>,
    /// Each process's cgroups, by PID.
    pub by_pid: HashMap<u32, Option<Vec<CgroupLine>>>,
    /// Each thread's group in the cpu controller (`cpu_group`), by TID.
    pub cpu_groups: HashMap<u32, Option<String>>,
    /// The processes that are kernel threads.
    pub kernel_threads: HashSet<u32>,
    /// What the owners of these cgroups call them, by path, where they
    /// are a container, a pod or a unit (`container shop/web-1/nginx`).
    pub owners: HashMap<String, String>,
    /// The cgroup v2 paths of these tasks whose parent enables the cpu
    /// controller (cgroup.subtree_control): the groups that have a
    /// cpu.max and cpu.weight to set.
    pub v2_cpu: HashSet<String>,
    /// The process the scope is (-p): its own threads are no neighbour's.
    pub scope_pid: Option<u32>,
    /// The scope is a cgroup and everything below it (-c): a task in any
    /// of its descendants (a pod's other container) is its own.
    pub scope_subtree: bool,
}

impl TaskCgroups {
    /// Reads the cgroups of `tasks` (idle tasks, pid 0, are no cgroup's).
    pub fn read<'a>(
        scope: Option<Vec<CgroupLine>>,
        tasks: impl IntoIterator<Item = &'a TaskInfo>,
    ) -> TaskCgroups {
        let mounts = Mounts::read();
        let groups = CpuGroups::read(&mounts);
        let roots = NameRoots::under(std::path::Path::new("/"));
        let mut read = TaskCgroups {
            scope,
            ..TaskCgroups::default()
        };
        for line in read.scope.iter().flatten() {
            if line.hierarchy == 0 && v2_cpu_enabled(&mounts, &line.path) {
                read.v2_cpu.insert(line.path.clone());
            }
        }
        for task in tasks.into_iter().filter(|t| t.tid != 0) {
            let pid = task.tgid;
            if let Entry::Vacant(entry) = read.by_pid.entry(pid) {
                let lines = entry.insert(of(pid));
                for line in lines.iter().flatten() {
                    if !read.owners.contains_key(&line.path)
                        && let Some(owner) = owner_of(&line.path, &roots)
                    {
                        read.owners.insert(line.path.clone(), owner);
                    }
                    if line.hierarchy == 0 && v2_cpu_enabled(&mounts, &line.path) {
                        read.v2_cpu.insert(line.path.clone());
                    }
                }
                if is_kernel_thread(pid) {
                    read.kernel_threads.insert(pid);
                }
            }
            read.cpu_groups
                .entry(task.tid)
                .or_insert_with(|| groups.of(task.tid));
        }
        read
    }

    /// A process's cgroups; None when it is gone or was not read.
    pub fn of(&self, pid: u32) -> Option<&[CgroupLine]> {
        self.by_pid.get(&pid)?.as_deref()
    }

    /// A thread's group in the cpu controller; None when it is gone.
    pub fn cpu_group(&self, tid: u32) -> Option<&str> {
        self.cpu_groups.get(&tid)?.as_deref()
    }

    pub fn is_kernel_thread(&self, pid: u32) -> bool {
        self.kernel_threads.contains(&pid)
    }

    /// Whether process `pid` is the scope's own: the scope's process
    /// itself (-p), or a task of the scope's cgroup or of a group below it
    /// (-c: a pod's containers are the pod's). Its cgroups are compared in
    /// the cgroup v2 and cpu hierarchies the scope is in; a process gone
    /// by the end of the window is not known to be.
    pub fn is_own(&self, pid: u32) -> bool {
        if self.scope_pid == Some(pid) {
            return true;
        }
        let (true, Some(scope), Some(task)) = (self.scope_subtree, &self.scope, self.of(pid))
        else {
            return false;
        };
        let compared = (scope.iter())
            .filter(|s| s.hierarchy == 0 || s.controllers.iter().any(|c| c == "cpu"))
            .filter_map(|s| {
                let t = task.iter().find(|t| t.hierarchy == s.hierarchy)?;
                Some(under(&t.path, &s.path))
            });
        let mut any = false;
        for inside in compared {
            if !inside {
                return false;
            }
            any = true;
        }
        any
    }

    /// Whether the scope's cgroup is a group of the CPU scheduler with a
    /// weight of its own: its v1 cpu group, or its cgroup v2 group where
    /// the parent enables the cpu controller, is not the root. True for
    /// the whole system (no scope cgroup to weigh) and when unknown.
    pub fn scope_has_cpu(&self) -> bool {
        let Some(lines) = &self.scope else {
            return true;
        };
        lines.iter().any(|l| {
            l.path != "/"
                && (l.controllers.iter().any(|c| c == "cpu")
                    || (l.hierarchy == 0 && self.v2_cpu.contains(&l.path)))
        })
    }

    /// Whether a CPU limit (cpu.max, cpu.weight; v1 cfs quota and shares)
    /// can be set on the group two tasks differ in: a group of the v1 cpu
    /// hierarchy, or a v2 group whose parent enables the cpu controller;
    /// never the root (its tasks are the ones nobody placed in a group,
    /// and the root has no cpu.max).
    pub fn can_limit(&self, group: &Differs) -> bool {
        !group.is_root()
            && match group.hierarchy {
                Which::V1Cpu => true,
                Which::V2 => self.v2_cpu.contains(&group.path),
                Which::Other => false,
            }
    }

    /// The hierarchy the neighbour pairs (and `--cgroups`) key by: the v1
    /// cpu controller's where the tasks read are in one, else cgroup v2.
    pub fn keyed_hierarchy(&self) -> Which {
        let v1_cpu = |lines: &[CgroupLine]| {
            (lines.iter()).any(|l| l.hierarchy != 0 && l.controllers.iter().any(|c| c == "cpu"))
        };
        let scope = self.scope.as_deref().is_some_and(v1_cpu);
        match scope || self.by_pid.values().flatten().any(|l| v1_cpu(l)) {
            true => Which::V1Cpu,
            false => Which::V2,
        }
    }

    /// Whether a cgroup of hierarchy `which` (a pair's holder, in
    /// [`Self::keyed_hierarchy`]) is the scope's own: under -c the scope's
    /// group or one below it (a pod's other containers); never for -p or the
    /// whole system.
    pub fn is_own_group(&self, path: &str, which: Which) -> bool {
        let (true, Some(scope)) = (self.scope_subtree, &self.scope) else {
            return false;
        };
        (scope.iter())
            .find(|l| match which {
                Which::V1Cpu => l.hierarchy != 0 && l.controllers.iter().any(|c| c == "cpu"),
                _ => l.hierarchy == 0,
            })
            .is_some_and(|l| under(path, &l.path))
    }

    /// A cgroup (a path [`differs`] gave) as its owner knows it:
    /// `container shop/web-1/nginx`, `unit nginx.service`, else its path.
    pub fn owner(&self, path: &str) -> String {
        self.owners
            .get(path)
            .cloned()
            .unwrap_or_else(|| path.to_string())
    }
}

/// What the owner of cgroup `path` (relative to its hierarchy's root)
/// calls it, the host's runtime files read now: `container shop/web-1/nginx`;
/// None for a cgroup that is none of a container, a pod or a unit.
pub fn owner(path: &str) -> Option<String> {
    owner_of(path, &NameRoots::under(std::path::Path::new("/")))
}

/// What the owner of cgroup `path` calls it, from the path and its
/// container runtime's files (read now: a diagnosis reads them once, at
/// the end of its window); None for a cgroup that is none of a container,
/// a pod or a unit.
fn owner_of(path: &str, roots: &NameRoots) -> Option<String> {
    let labels = path::parse(path);
    let names = (labels.container_id.as_deref()).and_then(|id| roots.resolve(id, labels.runtime));
    let workload = Workload {
        path: path.to_string(),
        labels,
        names,
    };
    match workload.owner_name() {
        ("cgroup", _) => None,
        (is, name) => Some(format!("{is} {name}")),
    }
}

/// What decides a thread's group in the cpu controller, read once: whether
/// the cgroup v2 root delegates the cpu controller, and whether autogroups
/// are on.
struct CpuGroups {
    v2_cpu: bool,
    autogroups: bool,
}

/// Whether cgroup v2 group `path` has the cpu controller: its parent
/// lists cpu in cgroup.subtree_control (the root has no cpu.max).
fn v2_cpu_enabled(mounts: &Mounts, path: &str) -> bool {
    let (Some(v2), Some((parent, _))) = (&mounts.v2, path.rsplit_once('/')) else {
        return false;
    };
    path != "/"
        && fs::read_to_string(
            v2.join(parent.trim_start_matches('/'))
                .join("cgroup.subtree_control"),
        )
        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"))
}

impl CpuGroups {
    fn read(mounts: &Mounts) -> CpuGroups {
        let v2_cpu = mounts.v2.as_ref().is_some_and(|m| {
            fs::read_to_string(m.join("cgroup.subtree_control"))
                .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"))
        });
        let autogroups = fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
            .is_ok_and(|t| t.trim() == "1");
        CpuGroups { v2_cpu, autogroups }
    }

    /// The cpu controller's group of a thread: the v1 `cpu` line of
    /// /proc/TID/cgroup if there is one, else the v2 path when the v2 root
    /// delegates the cpu controller, plus its autogroup when autogroups are
    /// on. Nice orders tasks only within one such group (kernel/sched/
    /// fair.c, one cfs_rq per task group).
    fn of(&self, tid: u32) -> Option<String> {
        let text = fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
        let lines = procfs::parse_proc_cgroup(&text).ok()?;
        let v1 = lines
            .iter()
            .find(|l| l.controllers.iter().any(|c| c == "cpu"));
        let group = match v1 {
            Some(l) => l.path.clone(),
            None if self.v2_cpu => lines.iter().find(|l| l.hierarchy == 0)?.path.clone(),
            None => "/".to_string(),
        };
        // Autogroups only apply to tasks of the root group.
        let auto = if self.autogroups && group == "/" {
            fs::read_to_string(format!("/proc/{tid}/autogroup"))
                .ok()
                .and_then(|t| t.split_whitespace().next().map(str::to_string))
                .unwrap_or_default()
        } else {
            String::new()
        };
        Some(format!("{group} {auto}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<CgroupLine> {
        procfs::parse_proc_cgroup(text).unwrap()
    }

    #[test]
    fn names_the_hierarchy_that_tells_them_apart() {
        // Hybrid: the same v1 cpu group, different v2 groups.
        let a = lines("2:cpu,cpuacct:/\n1:name=systemd:/\n0::/a\n");
        let b = lines("2:cpu,cpuacct:/\n1:name=systemd:/\n0::/b\n");
        assert_eq!(differs(&b, &a).as_deref(), Some("/b"));
        assert_eq!(differs(&a, &a), None);
        // The cpu controller's group first.
        let c = lines("2:cpu,cpuacct:/batch\n1:name=systemd:/\n0::/b\n");
        assert_eq!(differs(&c, &a).as_deref(), Some("/batch"));
        // Only another v1 hierarchy differs.
        let d = lines("2:cpu,cpuacct:/\n1:name=systemd:/x\n0::/a\n");
        assert_eq!(differs(&d, &a).as_deref(), Some("name=systemd:/x"));
    }

    #[test]
    fn says_where_they_differ_and_whether_it_can_be_limited() {
        let a = lines("2:cpu,cpuacct:/pod/a\n0::/pod/a\n");
        let b = lines("2:cpu,cpuacct:/other\n0::/pod/a\n");
        let root = lines("2:cpu,cpuacct:/\n0::/pod/a\n");
        let v2 = lines("2:cpu,cpuacct:/pod/a\n0::/x\n");
        let got = |c: &[CgroupLine]| differs_in(c, &a).unwrap();
        assert_eq!(got(&b).hierarchy, Which::V1Cpu);
        assert_eq!(got(&v2).hierarchy, Which::V2);
        let mut read = TaskCgroups::default();
        assert!(read.can_limit(&got(&b)));
        assert!(!read.can_limit(&got(&root)), "never the root");
        assert!(!read.can_limit(&got(&v2)), "no cpu controller enabled");
        read.v2_cpu.insert("/x".into());
        assert!(read.can_limit(&got(&v2)));
        let other = differs_in(&lines("4:memory:/m\n"), &lines("4:memory:/n\n")).unwrap();
        assert_eq!(
            (other.name.as_str(), other.hierarchy),
            ("memory:/m", Which::Other)
        );
        assert!(!read.can_limit(&other));
    }

    /// A pod's containers are the pod's own; its neighbours, the root and
    /// a look-alike prefix (`/pod/a` against `/pod/ab`) are not; with -p
    /// only the process itself is.
    #[test]
    fn the_scopes_own_tasks_are_below_its_cgroup_or_its_process() {
        let mut read = TaskCgroups {
            scope: Some(lines("2:cpu,cpuacct:/pod\n0::/pod\n")),
            scope_subtree: true,
            ..TaskCgroups::default()
        };
        for (pid, text) in [
            (1, "2:cpu,cpuacct:/pod/a\n4:memory:/m\n0::/pod/a\n"),
            (2, "2:cpu,cpuacct:/pod\n0::/pod\n"),
            (3, "2:cpu,cpuacct:/podx\n0::/podx\n"),
            (4, "2:cpu,cpuacct:/\n0::/\n"),
            (5, "0::/pod/b\n"),
        ] {
            read.by_pid.insert(pid, Some(lines(text)));
        }
        let own: Vec<u32> = (1..=6).filter(|&p| read.is_own(p)).collect();
        assert_eq!(own, [1, 2, 5]);
        read.scope_subtree = false;
        read.scope_pid = Some(3);
        let own: Vec<u32> = (1..=6).filter(|&p| read.is_own(p)).collect();
        assert_eq!(own, [3]);
    }

    #[test]
    fn an_exiting_task_keeps_only_its_v2_line_and_its_cgroup_path() {
        let read = as_exiting(lines(
            "2:cpu,cpuacct:/\n1:name=systemd:/\n0::/kubepods.slice/web.scope (deleted)\n",
        ));
        assert_eq!(read, lines("0::/kubepods.slice/web.scope\n"));
        assert!(as_exiting(lines("4:memory:/\n")).is_empty());
    }

    /// Issue 25: a zombie (here a child of the test's) is read as the
    /// kernel leaves it: on cgroup v1 it shows `/` for every controller,
    /// so no v1 line of it is taken, while a live task's lines are.
    #[test]
    fn a_zombie_is_never_read_as_in_the_v1_root() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let state = |pid: u32| fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !state(pid).contains(") Z ") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(exiting(pid), "a zombie is exiting: {}", state(pid));
        let raw = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let read = of(pid).unwrap();
        child.wait().unwrap();
        assert!(
            read.iter().all(|l| l.hierarchy == 0),
            "{read:?} from\n{raw}"
        );
        assert!(!exiting(std::process::id()));
        assert!(exiting(4_999_999), "a task gone counts as exiting");
    }

    #[test]
    fn this_process_has_cgroups_and_is_no_kernel_thread() {
        let me = std::process::id();
        assert!(of(me).is_some_and(|l| !l.is_empty()));
        assert!(!is_kernel_thread(me));
        assert!(is_kernel_thread(2));
        assert!(of(4_999_999).is_none());
    }

    #[test]
    fn tasks_are_read_once_and_gone_ones_have_none() {
        let task = |tid| TaskInfo {
            tid,
            tgid: tid,
            ..TaskInfo::default()
        };
        let me = std::process::id();
        let tasks = [task(me), task(me), task(2), task(4_999_999), task(0)];
        let read = TaskCgroups::read(None, &tasks);
        assert_eq!(read.by_pid.len(), 3, "{read:?}");
        assert!(read.of(me).is_some_and(|l| !l.is_empty()));
        assert!(read.cpu_group(me).is_some());
        assert!(read.of(4_999_999).is_none() && read.cpu_group(4_999_999).is_none());
        assert!(read.is_kernel_thread(2) && !read.is_kernel_thread(me));
        assert!(read.of(0).is_none(), "idle tasks are no cgroup's");
    }
}
