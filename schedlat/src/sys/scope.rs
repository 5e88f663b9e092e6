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

    /// TIDs of every thread in the group.
    pub fn threads(&self) -> Vec<u32> {
        let read = |p: PathBuf| fs::read_to_string(p).ok();
        let text = self
            .v2
            .as_ref()
            .and_then(|d| read(d.join("cgroup.threads")))
            .or_else(|| self.v1_cpu.as_ref().and_then(|d| read(d.join("tasks"))))
            .unwrap_or_default();
        text.lines().filter_map(|l| l.trim().parse().ok()).collect()
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
    /// for the whole system.
    pub fn cgroup_lines(&self) -> Option<Vec<CgroupLine>> {
        match self {
            Scope::System => None,
            Scope::Process { pid, .. } => cgroup_of::of(*pid),
            Scope::Cgroup(c) => c.threads().into_iter().find_map(cgroup_of::of),
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

    /// PATH absolute, or relative to the cgroup v2 mount or the v1 cpu mount.
    pub fn for_cgroup(path: &Path, mounts: &Mounts) -> Result<Scope> {
        let name = path.display().to_string();
        let under = |mount: &Option<PathBuf>| -> Option<PathBuf> {
            let mount = mount.as_ref()?;
            let dir = if path.is_absolute() && path.starts_with(mount) {
                path.to_path_buf()
            } else {
                mount.join(path.strip_prefix("/").unwrap_or(path))
            };
            dir.is_dir().then_some(dir)
        };
        let cgroup = Cgroup {
            name: name.clone(),
            v2: under(&mounts.v2),
            v1_cpu: under(&mounts.v1_cpu),
        };
        if cgroup.v2.is_none() && cgroup.v1_cpu.is_none() {
            let looked: Vec<String> = [&mounts.v2, &mounts.v1_cpu]
                .into_iter()
                .flatten()
                .map(|m| m.display().to_string())
                .collect();
            bail!("no cgroup {name} (looked under {})", looked.join(" and "));
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
    fn a_missing_cgroup_is_an_error() {
        let e = Scope::for_cgroup(Path::new("no/such/group"), &Mounts::read()).unwrap_err();
        assert!(e.to_string().contains("no cgroup no/such/group"), "{e}");
    }
}
