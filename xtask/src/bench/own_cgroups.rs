//! One cgroup per sleeper process, for the scrape bench's `--cgroups` rows:
//! `serve --cgroups` then has as many keys as `serve --pids` (one per
//! sleeper), so the two are compared at the same key count. The cgroups
//! live under one parent in the hierarchy `--cgroups` breaks down by (the
//! v1 cpu controller's where it is mounted, as on a hybrid host; else
//! cgroup v2), and are removed when dropped, after the sleepers are gone.

use std::{
    fs,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

/// The parent cgroup and its children, one per process moved in.
pub(crate) struct OwnCgroups {
    parent: PathBuf,
    children: Vec<PathBuf>,
}

impl OwnCgroups {
    /// Moves every process in `pids` into a cgroup of its own under a new
    /// parent in the hierarchy `serve --cgroups` keys by.
    pub(crate) fn create(pids: &[u32]) -> Result<OwnCgroups> {
        let parent =
            breakdown_mount()?.join(format!("schedlat-bench-scrape-{}", std::process::id()));
        fs::create_dir(&parent).with_context(|| format!("creating {}", parent.display()))?;
        let mut own = OwnCgroups {
            parent,
            children: Vec::with_capacity(pids.len()),
        };
        for &pid in pids {
            let child = own.parent.join(pid.to_string());
            fs::create_dir(&child).with_context(|| format!("creating {}", child.display()))?;
            own.children.push(child.clone());
            fs::write(child.join("cgroup.procs"), pid.to_string())
                .with_context(|| format!("moving process {pid} into {}", child.display()))?;
        }
        Ok(own)
    }
}

impl Drop for OwnCgroups {
    /// Removes the cgroups; a cgroup whose process is still dying is busy
    /// (EBUSY) for a moment, so each is retried for up to 30 s in all.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for dir in self.children.iter().chain([&self.parent]) {
            while fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
        }
        if self.parent.exists() {
            eprintln!(
                "bench: could not remove {} (its processes still dying?)",
                self.parent.display()
            );
        }
    }
}

/// The hierarchy `--cgroups` breaks down by when `-c` does not choose
/// (schedlat's kernel/cgroupfs.rs): the v1 hierarchy holding the cpu
/// controller where one is mounted, else cgroup v2.
fn breakdown_mount() -> Result<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").context("reading mounts")?;
    let v1_cpu = mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpu"))
        .map(|f| PathBuf::from(f[1]));
    match v1_cpu {
        Some(dir) => Ok(dir),
        None => v2_mount(),
    }
}

/// Where cgroup v2 is mounted (/sys/fs/cgroup, or .../unified on a hybrid
/// host).
pub(super) fn v2_mount() -> Result<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").context("reading mounts")?;
    let Some(dir) = mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
    else {
        bail!("no cgroup2 mount (cgroup v2 is needed here)");
    };
    Ok(dir)
}

/// The children of process `pid` (/proc/PID/task/PID/children).
pub(crate) fn children(pid: u32) -> Result<Vec<u32>> {
    let path = Path::new("/proc")
        .join(pid.to_string())
        .join("task")
        .join(pid.to_string())
        .join("children");
    let text = fs::read_to_string(&path)
        .with_context(|| format!("reading {} (CONFIG_PROC_CHILDREN?)", path.display()))?;
    text.split_whitespace()
        .map(|p| {
            p.parse()
                .with_context(|| format!("a pid in {}: {p}", path.display()))
        })
        .collect()
}
