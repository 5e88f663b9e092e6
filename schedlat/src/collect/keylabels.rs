//! What a breakdown key (a PID, TID, cgroup id...) stands for, and whether
//! it still exists: shared by the breakdown tables (commands/breakdown.rs) and the
//! per-cgroup and per-process series of `schedlat serve`.

use std::{
    collections::{HashMap, HashSet},
    os::unix::fs::MetadataExt,
    time::{Duration, Instant},
};

use schedlat_common::{
    NR_BUCKETS, NR_LOG2_SLOTS,
    scope::{Breakdown, KeyStats},
};

use crate::{
    collect::histogram::Waits,
    kernel::{
        cgroupfs::Hierarchy,
        filter::{comm_str, is_alive},
    },
};

/// Names keys of one breakdown; remembers the comm the kernel saw for each
/// (a task that exited has no /proc entry left to read it from) and the
/// hierarchy's cgroup paths by id.
pub struct KeyLabels {
    by: Breakdown,
    comms: HashMap<u64, [u8; 16]>,
    hierarchy: Option<Hierarchy>,
    cgroup_paths: HashMap<u64, String>,
    /// The PIDs in /proc, listed once per pass over the keys rather than
    /// one /proc read per key (thousands of process keys per scrape).
    processes: Option<(Instant, HashSet<u32>)>,
}

/// How long one listing of /proc answers for: one scrape or interval.
const PROCESS_LIST_TTL: Duration = Duration::from_millis(500);

impl KeyLabels {
    /// `hierarchy`: the one cgroup ids refer to (`Tracer::cgroup_hierarchy`).
    pub fn new(by: Breakdown, hierarchy: Option<Hierarchy>) -> KeyLabels {
        KeyLabels {
            by,
            comms: HashMap::new(),
            hierarchy,
            cgroup_paths: HashMap::new(),
            processes: None,
        }
    }

    pub fn by(&self) -> Breakdown {
        self.by
    }

    /// Records the comm the kernel stored with a key's histogram.
    pub fn saw(&mut self, key: u64, stats: &KeyStats) {
        self.comms.insert(key, stats.comm);
    }

    /// Forgets a key whose kernel entry was deleted: a reused TID or id
    /// starts again.
    pub fn forget(&mut self, key: u64) {
        self.comms.remove(&key);
    }

    /// A process' or thread's name: the live one, else the kernel's.
    pub fn comm(&self, key: u64) -> String {
        let live = std::fs::read_to_string(format!("/proc/{key}/comm")).ok();
        live.map(|c| c.trim().to_string())
            .or_else(|| self.comms.get(&key).map(comm_str))
            .unwrap_or_default()
    }

    /// A cgroup's path from its id, relative to the hierarchy's mount
    /// (`/` is its root), rescanning the hierarchy for ids not seen yet.
    pub fn cgroup_path(&mut self, id: u64) -> Option<String> {
        if !self.cgroup_paths.contains_key(&id)
            && let Some(h) = &self.hierarchy
        {
            self.cgroup_paths = h.paths_by_id();
        }
        self.cgroup_paths.get(&id).cloned()
    }

    /// Whether the process, thread or cgroup a key names still exists
    /// (zombie threads do not: they wait no more; a zombie process goes
    /// once reaped). Other keys always exist.
    pub fn exists(&mut self, key: u64) -> bool {
        match self.by {
            Breakdown::Process => self.process_exists(key as u32),
            Breakdown::Thread => is_alive(key as u32),
            Breakdown::Cgroup => self.cgroup_exists(key),
            _ => true,
        }
    }

    /// From one listing of /proc (which lists processes, not threads).
    fn process_exists(&mut self, pid: u32) -> bool {
        let fresh = self
            .processes
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < PROCESS_LIST_TTL);
        if !fresh {
            let pids = std::fs::read_dir("/proc")
                .map(|dir| {
                    dir.flatten()
                        .filter_map(|e| e.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            self.processes = Some((Instant::now(), pids));
        }
        self.processes
            .as_ref()
            .is_some_and(|(_, pids)| pids.contains(&pid))
    }

    /// Whether cgroup `id` is still there: its known path still has that
    /// id (removing a cgroup leaves the cached path behind), else a rescan
    /// finds it.
    fn cgroup_exists(&mut self, id: u64) -> bool {
        let Some(h) = &self.hierarchy else {
            return true;
        };
        if let Some(path) = self.cgroup_paths.get(&id) {
            let dir = h.mount.join(path.trim_start_matches('/'));
            if std::fs::metadata(dir).is_ok_and(|m| m.ino() == id) {
                return true;
            }
            self.cgroup_paths.remove(&id);
        }
        self.cgroup_path(id).is_some()
    }

    /// runqlat's label line: `pid = 1234 comm`, `cgroup = /path`...
    pub fn text(&mut self, key: u64) -> String {
        match self.by {
            Breakdown::Process => format!("pid = {key} {}", self.comm(key)),
            Breakdown::Thread => format!("tid = {key} {}", self.comm(key)),
            Breakdown::PidNamespace => format!("pidns = {key}"),
            Breakdown::Cgroup => match self.cgroup_path(key) {
                Some(path) => format!("cgroup = {path}"),
                None => format!("cgroup = (removed, id {key})"),
            },
            Breakdown::Cpu => format!("cpu = {key}"),
            Breakdown::None => key.to_string(),
        }
    }
}

/// A key's kernel histogram as `Waits` (no extremes: they are not kept per key).
pub fn waits_of(stats: &KeyStats) -> Waits {
    let mut w = Waits::default();
    for (sum, &n) in w.buckets.iter_mut().zip(&stats.buckets[..NR_BUCKETS]) {
        *sum = u64::from(n);
    }
    for (sum, &n) in w.log2.iter_mut().zip(&stats.log2[..NR_LOG2_SLOTS]) {
        *sum = u64::from(n);
    }
    w.sum_ns = stats.sum_ns;
    w
}
