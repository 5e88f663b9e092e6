//! Which cgroups CPU bandwidth throttled, and when: each cgroup's cpu.stat
//! `nr_throttled`, compared between two looks.
//!
//! A wait that ends on an idle CPU has the idle task as its culprit. That is
//! either a wake onto an idle CPU (the CPU was free; the wait is the wakeup
//! path), or CPU-bandwidth throttling: the task was runnable but its group
//! had used its quota, so the CPU idled until the next period. The kernel
//! counts each throttling in the group's cpu.stat (and a parent's throttling
//! in the parent's), so a task whose cgroup, or an ancestor, was throttled in
//! the interval had its idle-ended waits throttled. One scan of the cgroup
//! tree per interval: a few hundred small reads on a busy host.

use std::{
    collections::{HashMap, HashSet},
    fs,
    path::{Path, PathBuf},
};

use super::{mounts::Mounts, procfs};

/// The throttling counts of every cgroup at the last look, and which grew.
#[derive(Debug, Default)]
pub struct ThrottleWatch {
    /// The cpu controller's hierarchies: v2 and, on hybrid systems, v1.
    roots: Vec<Root>,
    last: HashMap<PathBuf, u64>,
    grown: HashSet<PathBuf>,
    /// `grown` of the interval before: a stream of events (`slow`) looks
    /// back two intervals, as a throttling counted just before a look
    /// belongs to waits that end just after it.
    before: HashSet<PathBuf>,
}

#[derive(Debug)]
struct Root {
    mount: PathBuf,
    /// v1: the /proc/PID/cgroup line naming the cpu controller; v2: "0::".
    v1: bool,
}

impl ThrottleWatch {
    /// Starts watching the cpu controller's hierarchies as mounted now:
    /// telling throttled waits from wakes onto an idle CPU (both end on an
    /// idle CPU, culprit swapper).
    pub fn start_mounted() -> ThrottleWatch {
        let mounts = Mounts::read();
        ThrottleWatch::start(mounts.v2.as_deref(), mounts.v1_cpu.as_deref())
    }

    /// Starts watching the hierarchies mounted at `v2` and `v1_cpu`: the
    /// counts now are the baseline of the first interval.
    pub fn start(v2: Option<&Path>, v1_cpu: Option<&Path>) -> ThrottleWatch {
        let mut roots: Vec<Root> = Vec::new();
        if let Some(m) = v1_cpu {
            roots.push(Root {
                mount: m.to_path_buf(),
                v1: true,
            });
        }
        if let Some(m) = v2 {
            roots.push(Root {
                mount: m.to_path_buf(),
                v1: false,
            });
        }
        let mut watch = ThrottleWatch {
            roots,
            ..ThrottleWatch::default()
        };
        watch.last = watch.counts();
        watch
    }

    /// Ends an interval: the cgroups throttled since the previous call (or
    /// the start) become `grown`. A cgroup created in the interval started
    /// from 0, so its first count is its growth.
    pub fn end_interval(&mut self) {
        let now = self.counts();
        self.before = std::mem::take(&mut self.grown);
        self.grown = now
            .iter()
            .filter(|(dir, n)| **n > self.last.get(*dir).copied().unwrap_or(0))
            .map(|(dir, _)| dir.clone())
            .collect();
        self.last = now;
    }

    /// Whether process `pid`'s cgroup, or one above it, was throttled in
    /// the interval that `end_interval` ended. False when it cannot tell
    /// (the process exited, no cpu controller).
    pub fn throttled(&self, pid: u32) -> bool {
        self.throttled_in(pid, &[&self.grown])
    }

    /// `throttled`, in the last two intervals.
    pub fn throttled_recently(&self, pid: u32) -> bool {
        self.throttled_in(pid, &[&self.grown, &self.before])
    }

    fn throttled_in(&self, pid: u32, sets: &[&HashSet<PathBuf>]) -> bool {
        if sets.iter().all(|s| s.is_empty()) {
            return false;
        }
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        let Ok(lines) = procfs::parse_proc_cgroup(&text) else {
            return false;
        };
        self.roots.iter().any(|root| {
            let line = lines.iter().find(|l| {
                if root.v1 {
                    l.controllers.iter().any(|c| c == "cpu")
                } else {
                    l.hierarchy == 0
                }
            });
            let Some(line) = line else {
                return false;
            };
            let mut dir = root.mount.join(line.path.trim_start_matches('/'));
            loop {
                if sets.iter().any(|s| s.contains(&dir)) {
                    return true;
                }
                if dir == root.mount || !dir.pop() {
                    return false;
                }
            }
        })
    }

    /// `nr_throttled` of every cgroup with the cpu controller (those with a
    /// cpu.stat that has it).
    fn counts(&self) -> HashMap<PathBuf, u64> {
        let mut counts = HashMap::new();
        for root in &self.roots {
            let mut stack = vec![root.mount.clone()];
            while let Some(dir) = stack.pop() {
                if let Some(n) = nr_throttled(&dir) {
                    counts.insert(dir.clone(), n);
                }
                let Ok(entries) = fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(entry.path());
                    }
                }
            }
        }
        counts
    }
}

fn nr_throttled(dir: &Path) -> Option<u64> {
    let text = fs::read_to_string(dir.join("cpu.stat")).ok()?;
    procfs::parse_flat_keyed(&text)
        .ok()?
        .into_iter()
        .find_map(|(k, v)| (k == "nr_throttled").then_some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake hierarchy: a parent throttled in the interval, its child not
    /// (it has no quota of its own): the child's tasks count as throttled.
    #[test]
    fn growth_in_a_cgroup_or_above_it_counts() {
        let root = std::env::temp_dir().join(format!("schedlat-throttle-{}", std::process::id()));
        let child = root.join("svc/worker");
        fs::create_dir_all(&child).unwrap();
        let stat = |dir: &Path, n: u64| {
            fs::write(
                dir.join("cpu.stat"),
                format!("usage_usec 5\nnr_periods 9\nnr_throttled {n}\n"),
            )
            .unwrap()
        };
        stat(&root.join("svc"), 3);
        stat(&child, 0);
        let mut w = ThrottleWatch::start(Some(&root), None);
        assert_eq!(w.last.len(), 2);
        w.end_interval();
        assert!(w.grown.is_empty());
        stat(&root.join("svc"), 4);
        w.end_interval();
        assert_eq!(w.grown, HashSet::from([root.join("svc")]));
        // Our own process is not in the fake tree: not throttled.
        assert!(!w.throttled(std::process::id()));
        w.end_interval();
        assert!(w.grown.is_empty() && w.before.contains(&root.join("svc")));
        fs::remove_dir_all(&root).unwrap();
    }
}
