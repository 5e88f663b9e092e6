//! What `diagnose` looks at: the whole system, a process, or a cgroup; and
//! for each, its threads and the cgroup directories holding its pressure,
//! quota and throttling counters (cgroup v2 at /sys/fs/cgroup or
//! /sys/fs/cgroup/unified, and the v1 cpu controller where it is on v1).

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};

use super::{
    cgroup_of,
    mounts::Mounts,
    procfs::{self, CgroupLine, Quota},
};

/// A cgroup, as directories in whichever hierarchies hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// How the user named it, or its path from /proc/PID/cgroup.
    pub name: String,
    /// Its cgroup v2 directory (cpu.pressure, and cpu.stat/cpu.max when the
    /// v2 cpu controller is enabled there).
    pub v2: Option<PathBuf>,
    /// Its directory in the v1 cpu hierarchy (cpu.cfs_quota_us, cpu.stat).
    pub v1_cpu: Option<PathBuf>,
}

impl Cgroup {
    /// The root of its hierarchy (every task not placed in a group).
    pub fn is_root(&self) -> bool {
        let mounts = Mounts::read();
        self.v2
            .as_ref()
            .is_none_or(|d| Some(d) == mounts.v2.as_ref())
            && self
                .v1_cpu
                .as_ref()
                .is_none_or(|d| Some(d) == mounts.v1_cpu.as_ref())
    }

    /// The group's CPU quota, if it has one (v2 cpu.max, else v1 cfs).
    pub fn quota(&self) -> Option<Quota> {
        if let Some(text) = self
            .v2
            .as_ref()
            .and_then(|d| fs::read_to_string(d.join("cpu.max")).ok())
        {
            return procfs::parse_cpu_max(&text).ok().flatten();
        }
        let dir = self.v1_cpu.as_ref()?;
        let quota = fs::read_to_string(dir.join("cpu.cfs_quota_us")).ok()?;
        let period = fs::read_to_string(dir.join("cpu.cfs_period_us")).ok()?;
        procfs::parse_cfs_quota(&quota, &period).ok().flatten()
    }

    /// (nr_periods, nr_throttled, throttled ns) so far: v2 cpu.stat
    /// (throttled_usec) or v1 cpu.stat (throttled_time, ns); and which
    /// hierarchy's cpu.stat it came from.
    pub fn throttling_from(&self) -> Option<((u64, u64, u64), &'static str)> {
        let from = |dir: &PathBuf| -> Option<(u64, u64, u64)> {
            let kv =
                procfs::parse_flat_keyed(&fs::read_to_string(dir.join("cpu.stat")).ok()?).ok()?;
            let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
            let ns = get("throttled_usec")
                .map(|us| us * 1000)
                .or(get("throttled_time"))?;
            Some((get("nr_periods")?, get("nr_throttled")?, ns))
        };
        let v2 = self.v2.as_ref().and_then(from).map(|c| (c, "cgroup v2"));
        v2.or_else(|| {
            let v1 = self.v1_cpu.as_ref().and_then(from);
            v1.map(|c| (c, "cgroup v1"))
        })
    }

    /// TIDs of every thread in the group and in its descendants (a pod's
    /// own cgroup holds no task: its containers' cgroups below it do),
    /// from whichever hierarchies hold it, each thread once.
    pub fn threads(&self) -> Vec<u32> {
        let mut tids = Vec::new();
        if let Some(dir) = &self.v2 {
            subtree_tasks(dir, "cgroup.threads", &mut tids);
        }
        if let Some(dir) = &self.v1_cpu {
            subtree_tasks(dir, "tasks", &mut tids);
        }
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// The group's path relative to the root of each hierarchy holding
    /// it (`/kubepods.slice/...`): (cgroup v2, v1 cpu).
    pub fn paths(&self, mounts: &Mounts) -> (Option<String>, Option<String>) {
        let rel = |dir: &Option<PathBuf>, mount: &Option<PathBuf>| {
            let rest = dir.as_ref()?.strip_prefix(mount.as_ref()?).ok()?;
            Some(format!("/{}", rest.display()))
        };
        (rel(&self.v2, &mounts.v2), rel(&self.v1_cpu, &mounts.v1_cpu))
    }

    /// The group's lines as /proc/PID/cgroup would print them for a task
    /// of the group itself, in the hierarchies it is in (cgroup v2, the v1
    /// cpu controller's): `like` (any task's lines) gives the hierarchies'
    /// numbers, the group its paths; so a task in a child of the group (a
    /// pod's container) reads as below the group, not as the group.
    pub fn lines(&self, like: Vec<CgroupLine>, mounts: &Mounts) -> Vec<CgroupLine> {
        let (v2, v1) = self.paths(mounts);
        like.into_iter()
            .filter_map(|mut l| {
                l.path = if l.hierarchy == 0 {
                    v2.clone()?
                } else if l.controllers.iter().any(|c| c == "cpu") {
                    v1.clone()?
                } else {
                    return None;
                };
                Some(l)
            })
            .collect()
    }
}

/// Appends the TIDs listed in `file` of `dir` and of every cgroup below it.
/// A group removed while it is read is skipped: its tasks are gone too.
fn subtree_tasks(dir: &Path, file: &str, tids: &mut Vec<u32>) {
    if let Ok(text) = fs::read_to_string(dir.join(file)) {
        tids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // cgroupfs lists child groups as directories and control files as
        // regular files; file_type() does not follow links.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            subtree_tasks(&entry.path(), file, tids);
        }
    }
}

#[derive(Debug, Clone)]
pub enum Scope {
    System,
    /// A process and the cgroup it runs in.
    Process {
        pid: u32,
        comm: String,
        cgroup: Cgroup,
    },
    Cgroup(Cgroup),
}

impl Scope {
    pub fn describe(&self) -> String {
        match self {
            Scope::System => "the whole system".to_string(),
            Scope::Process { pid, comm, .. } => format!("process {pid} ({comm})"),
            Scope::Cgroup(c) => format!("cgroup {}", c.name),
        }
    }

    pub fn cgroup(&self) -> Option<&Cgroup> {
        match self {
            Scope::System => None,
            Scope::Process { cgroup, .. } | Scope::Cgroup(cgroup) => Some(cgroup),
        }
    }

    /// The scope's cgroups, from a thread alive now (/proc/PID/cgroup); None
    /// for the whole system. A cgroup's are its own paths, whichever of its
    /// descendants the thread is in (see [`Cgroup::lines`]).
    pub fn cgroup_lines(&self) -> Option<Vec<CgroupLine>> {
        match self {
            Scope::System => None,
            Scope::Process { pid, .. } => cgroup_of::of(*pid),
            Scope::Cgroup(c) => {
                let like = (c.threads().into_iter())
                    .chain([std::process::id()])
                    .find_map(cgroup_of::of)?;
                Some(c.lines(like, &Mounts::read()))
            }
        }
    }

    /// The process whose threads are the scope (-p), if it is one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Scope::Process { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// The threads whose schedstat is summed.
    pub fn threads(&self) -> Vec<u32> {
        match self {
            Scope::System => all_threads("/proc"),
            Scope::Process { pid, .. } => numeric_entries(&format!("/proc/{pid}/task")),
            Scope::Cgroup(c) => c.threads(),
        }
    }

    pub fn for_process(pid: u32, mounts: &Mounts) -> Result<Scope> {
        let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .with_context(|| format!("no process with PID {pid} (check `ps -p {pid}`)"))?;
        let comm = fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let lines = procfs::parse_proc_cgroup(&text)?;
        let v2_path = lines
            .iter()
            .find(|l| l.hierarchy == 0)
            .map(|l| l.path.clone());
        let v1_path = lines
            .iter()
            .find(|l| l.controllers.iter().any(|c| c == "cpu"))
            .map(|l| l.path.clone());
        let join = |mount: &Option<PathBuf>, path: &Option<String>| {
            Some(mount.as_ref()?.join(path.as_ref()?.trim_start_matches('/')))
                .filter(|d| d.is_dir())
        };
        let cgroup = Cgroup {
            name: v1_path
                .clone()
                .or(v2_path.clone())
                .unwrap_or_else(|| "/".into()),
            v2: join(&mounts.v2, &v2_path),
            v1_cpu: join(&mounts.v1_cpu, &v1_path),
        };
        Ok(Scope::Process { pid, comm, cgroup })
    }

    /// The cgroup at `dir` (an absolute directory under a cgroup mount,
    /// as `-c`'s resolver gives it: kernel/filter.rs), named `name` as the
    /// user gave it, with its twins: the group of the same path in the
    /// cgroup v2 and v1 cpu hierarchies. On a hybrid host a container's
    /// group is in both (the runtime makes it in each), and only v2 has
    /// its cpu.pressure while v1's cpu hierarchy has its quota.
    pub fn for_cgroup(name: &str, dir: &Path, mounts: &Mounts) -> Result<Scope> {
        let all = [&mounts.v2, &mounts.v1_cpu]
            .into_iter()
            .flatten()
            .chain(mounts.v1.iter().map(|(m, _)| m));
        // The longest mount that holds it (/sys/fs/cgroup/unified, not a
        // cgroup2 at /sys/fs/cgroup).
        let Some(mount) = all
            .filter(|m| dir.starts_with(m))
            .max_by_key(|m| m.as_os_str().len())
        else {
            bail!(
                "no cgroup {name}: {} is under no cgroup mount",
                dir.display()
            );
        };
        let rel = dir.strip_prefix(mount).unwrap_or(Path::new(""));
        let twin = |m: &Option<PathBuf>| {
            let d = m.as_ref()?.join(rel);
            d.is_dir().then_some(d)
        };
        let path = format!("/{}", rel.display());
        // A path, as given or relative to a mount, is its own name.
        let name = if name.trim_start_matches('/') == rel.as_os_str() || Path::new(name) == dir {
            name.to_string()
        } else {
            format!("{name} ({path})")
        };
        let cgroup = Cgroup {
            name: name.clone(),
            v2: twin(&mounts.v2),
            v1_cpu: twin(&mounts.v1_cpu),
        };
        if cgroup.v2.is_none() && cgroup.v1_cpu.is_none() {
            bail!(
                "cgroup {name} is neither in cgroup v2 nor in the v1 cpu hierarchy (give its path there)"
            );
        }
        Ok(Scope::Cgroup(cgroup))
    }
}

fn numeric_entries(dir: &str) -> Vec<u32> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn all_threads(proc: &str) -> Vec<u32> {
    numeric_entries(proc)
        .into_iter()
        .flat_map(|pid| numeric_entries(&format!("{proc}/{pid}/task")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_threads_and_a_cgroup() {
        let scope = Scope::for_process(std::process::id(), &Mounts::read()).unwrap();
        assert!(!scope.threads().is_empty());
        assert!(scope.describe().starts_with("process "));
        assert!(Scope::for_process(4_999_999, &Mounts::read()).is_err());
    }

    #[test]
    fn a_directory_under_no_mount_is_an_error() {
        let e = Scope::for_cgroup("x", Path::new("/nonexistent/x"), &Mounts::read()).unwrap_err();
        assert!(e.to_string().contains("no cgroup x"), "{e}");
    }

    /// A group found in the v1 cpu hierarchy (as `-c` resolves a pod UID on
    /// a hybrid host) takes its twin of the same path in cgroup v2, where
    /// its cpu.pressure is; the name says what the user gave and the path.
    #[test]
    fn a_v1_group_takes_its_cgroup_v2_twin() {
        let tmp = std::env::temp_dir().join(format!("schedlat-twin-{}", std::process::id()));
        let (v1, v2) = (tmp.join("cpu"), tmp.join("unified"));
        for root in [&v1, &v2] {
            fs::create_dir_all(root.join("kubepods/pod1")).unwrap();
        }
        fs::create_dir_all(v1.join("only-v1")).unwrap();
        let mounts = Mounts {
            v2: Some(v2.clone()),
            v1_cpu: Some(v1.clone()),
            v1: vec![(v1.clone(), vec!["cpu".into()])],
        };
        let pod = Scope::for_cgroup("1234-abcd", &v1.join("kubepods/pod1"), &mounts);
        let alone = Scope::for_cgroup("only-v1", &v1.join("only-v1"), &mounts);
        let outside = Scope::for_cgroup("x", &tmp.join("x"), &mounts);
        fs::remove_dir_all(&tmp).unwrap();
        let Ok(Scope::Cgroup(pod)) = pod else {
            panic!("{pod:?}")
        };
        assert_eq!(pod.v2, Some(v2.join("kubepods/pod1")));
        assert_eq!(pod.v1_cpu, Some(v1.join("kubepods/pod1")));
        assert_eq!(pod.name, "1234-abcd (/kubepods/pod1)");
        assert_eq!(
            pod.paths(&mounts),
            (Some("/kubepods/pod1".into()), Some("/kubepods/pod1".into()))
        );
        let Ok(Scope::Cgroup(alone)) = alone else {
            panic!("{alone:?}")
        };
        assert_eq!((alone.v2, alone.name.as_str()), (None, "only-v1"));
        assert!(outside.is_err());
    }

    /// A group's subtree is read: the threads of its children count, and
    /// its lines carry its own path, not its child's.
    #[test]
    fn a_groups_threads_are_its_subtrees_and_its_lines_its_own() {
        let dir = std::env::temp_dir().join(format!("schedlat-scope-{}", std::process::id()));
        let child = dir.join("child/grandchild");
        fs::create_dir_all(&child).unwrap();
        fs::write(dir.join("tasks"), "").unwrap();
        fs::write(dir.join("child/tasks"), "7\n8\n").unwrap();
        fs::write(child.join("tasks"), "9\n7\n").unwrap();
        let mounts = Mounts {
            v1_cpu: Some(std::env::temp_dir()),
            ..Mounts::default()
        };
        let group = Cgroup {
            name: "g".into(),
            v2: None,
            v1_cpu: Some(dir.clone()),
        };
        let threads = group.threads();
        let rel = format!("/schedlat-scope-{}", std::process::id());
        let like =
            procfs::parse_proc_cgroup(&format!("3:cpu,cpuacct:{rel}/child\n4:memory:/m\n0::/x\n"))
                .unwrap();
        let lines = group.lines(like, &mounts);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(threads, [7, 8, 9]);
        // Only the hierarchy the group is in, with its own path.
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].path, rel);
    }
}
