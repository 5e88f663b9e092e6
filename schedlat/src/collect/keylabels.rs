//! What a breakdown key (a PID, TID, cgroup id...) stands for, and whether
//! it still exists: the names the keyed intervals (key_intervals.rs) carry
//! for the breakdown tables, the flight recorder's per-cgroup series and
//! `schedlat serve`'s per-key series. A cgroup is also a workload: the
//! labels its path carries and, once asked for ([`KeyLabels::name_containers`]),
//! the names its container runtime keeps on disk.

use std::{
    collections::{HashMap, VecDeque, hash_map::Entry},
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    time::{Duration, Instant},
};

use schedlat_common::scope::Breakdown;

use super::cgroup_names::CgroupNames;
use crate::{
    kernel::{
        cgroupfs::Hierarchy,
        filter::{comm_str, is_alive},
    },
    sys::workload::{cache::NameCache, level::Workload, names::NameRoots, path},
};

/// Names keys of one breakdown; remembers the hierarchy's cgroup paths by
/// id, and the paths the kernel sent as it made each cgroup. The comm the
/// kernel stored with a key is the caller's to keep (the keyed intervals
/// keep it with the key's state).
pub(crate) struct KeyLabels {
    by: Breakdown,
    hierarchy: Option<Hierarchy>,
    /// The hierarchy's cgroups at the last scan, by id.
    cgroup_paths: HashMap<u64, String>,
    /// The cgroup paths seen, by id (the last [`KNOWN_PATHS`]): a
    /// short-lived cgroup is often gone by the time its waits are shown,
    /// and keeps its name here.
    known_paths: KnownPaths,
    /// When the hierarchy was last scanned: one scan answers for a pass
    /// over the keys, not one per unknown key.
    scanned: Option<Instant>,
    /// The names the kernel sent as it made each cgroup: those made and
    /// removed between two scans.
    names: Option<CgroupNames>,
    /// The container runtimes' names, when asked for.
    containers: Option<NameCache>,
}

/// Cgroup paths kept by id, the oldest forgotten first: as many as the
/// kernel's names of new cgroups (collect/cgroup_names.rs), so a churn of
/// cgroups costs at most a few MiB however long it goes on.
const KNOWN_PATHS: usize = super::cgroup_names::BOOK_CAPACITY;

/// Paths by cgroup id, at most [`KNOWN_PATHS`], oldest first in `order`.
#[derive(Default)]
struct KnownPaths {
    paths: HashMap<u64, String>,
    order: VecDeque<u64>,
}

impl KnownPaths {
    /// Keeps `path` for `id` unless one is kept already.
    fn insert(&mut self, id: u64, path: String) {
        if let Entry::Vacant(e) = self.paths.entry(id) {
            e.insert(path);
            self.order.push_back(id);
        }
        while self.order.len() > KNOWN_PATHS {
            if let Some(old) = self.order.pop_front() {
                self.paths.remove(&old);
            }
        }
    }

    fn get(&self, id: u64) -> Option<&String> {
        self.paths.get(&id)
    }

    fn contains_key(&self, id: u64) -> bool {
        self.paths.contains_key(&id)
    }
}

/// How long a start waits at most for the names of the containers
/// already there.
const STARTUP_NAMES: Duration = Duration::from_secs(1);

/// How long one scan of the cgroup hierarchy answers for unknown ids: a
/// pass over thousands of keys takes far less.
const CGROUP_SCAN_TTL: Duration = Duration::from_millis(100);

impl KeyLabels {
    /// `hierarchy`: the one cgroup ids refer to (`Tracer::cgroup_hierarchy`).
    pub(crate) fn new(by: Breakdown, hierarchy: Option<Hierarchy>) -> KeyLabels {
        KeyLabels {
            by,
            hierarchy,
            cgroup_paths: HashMap::new(),
            known_paths: KnownPaths::default(),
            scanned: None,
            names: None,
            containers: None,
        }
    }

    /// Also names cgroups from the paths the kernel sent at their
    /// creation (collect/cgroup_names.rs).
    pub(crate) fn with_names(self, names: Option<CgroupNames>) -> KeyLabels {
        KeyLabels { names, ..self }
    }

    /// From now on also names the cgroups of containers by what their
    /// runtimes keep on the host's disk (sys/workload/names.rs), read by a
    /// thread of its own: every container there now is asked for at once
    /// (and waited for, a second at most), each new one as the kernel
    /// reports its cgroup made or as its key is first seen. A lookup never
    /// waits; without the thread (it could not start), the path's labels
    /// stay.
    pub(crate) fn name_containers(&mut self) {
        if self.containers.is_some() {
            return;
        }
        let paths: Vec<String> = (self.hierarchy.as_ref())
            .map(|h| h.paths_by_id().into_values().collect())
            .unwrap_or_default();
        // Sized for the containers there now: all are asked for at once.
        let containers = paths
            .iter()
            .filter(|p| path::parse(p).container_id.is_some())
            .count();
        let Ok(cache) = NameCache::start(NameRoots::under(std::path::Path::new("/")), containers)
        else {
            return;
        };
        for path in &paths {
            cache.ask_for(path);
        }
        // Names are fixed with a series' first labels: the containers
        // there at start are named before the first interval or scrape
        // (a few ms for a node's hundred containers; a hung file system
        // delays the start by STARTUP_NAMES at most).
        cache.settle(STARTUP_NAMES);
        if let Some(names) = &self.names {
            names.prefetch_into(cache.clone());
        }
        self.containers = Some(cache);
    }

    pub(crate) fn by(&self) -> Breakdown {
        self.by
    }

    /// A key seen for the first time: a cgroup key is named at once, while
    /// it is likeliest to exist still.
    pub(crate) fn saw(&mut self, key: u64) {
        if self.by == Breakdown::Cgroup && !self.known_paths.contains_key(key) {
            self.cgroup_path(key);
            if let Some(path) = self.names.as_ref().and_then(|n| n.get(key)) {
                self.known_paths.insert(key, path);
            }
            if let (Some(cache), Some(path)) = (&self.containers, self.known_paths.get(key)) {
                cache.ask_for(path);
            }
        }
    }

    /// Cgroup `id` as a workload: its name ([`KeyLabels::cgroup_name`]),
    /// the labels its path carries, and its runtime's names if they are
    /// known by now (asked for otherwise, for a later lookup).
    pub(crate) fn workload(&mut self, id: u64) -> Option<Workload> {
        let path = self.cgroup_name(id)?;
        Some(self.workload_at(path))
    }

    /// The cgroup at `path` (in this hierarchy) as a workload, as
    /// [`KeyLabels::workload`] names one by its id.
    pub(crate) fn workload_at(&self, path: String) -> Workload {
        let labels = path::parse(&path);
        // A container under a user's manager is that user's: the system
        // runtimes' files do not name it, whatever ID its cgroup borrows.
        let names = match (&self.containers, &labels.container_id, &labels.delegated) {
            (Some(cache), Some(container), None) => cache
                .get(container, labels.runtime)
                // Only the cgroup the runtime's record puts it in.
                .filter(|names| names.hold_for(&path, container)),
            _ => None,
        };
        Workload {
            path,
            labels,
            names,
        }
    }

    /// Whether cgroup `key` is a container whose runtime's files have not
    /// been answered for yet (asked for now if they were not).
    pub(crate) fn names_pending(&mut self, key: u64) -> bool {
        if self.by != Breakdown::Cgroup || self.containers.is_none() {
            return false;
        }
        let Some(path) = self.cgroup_name(key) else {
            return false;
        };
        let labels = path::parse(&path);
        match (&self.containers, &labels.container_id, &labels.delegated) {
            (Some(cache), Some(id), None) => cache.is_pending(id, labels.runtime),
            _ => false,
        }
    }

    /// The hierarchy cgroup ids and paths are of.
    pub(crate) fn hierarchy(&self) -> Option<&Hierarchy> {
        self.hierarchy.as_ref()
    }

    /// A cgroup's path from its id, relative to the hierarchy's mount
    /// (`/` is its root), rescanning the hierarchy for ids not seen yet.
    pub(crate) fn cgroup_path(&mut self, id: u64) -> Option<String> {
        let fresh = self
            .scanned
            .is_some_and(|at| at.elapsed() < CGROUP_SCAN_TTL);
        if !self.cgroup_paths.contains_key(&id)
            && !fresh
            && let Some(h) = &self.hierarchy
        {
            self.cgroup_paths = h.paths_by_id();
            self.scanned = Some(Instant::now());
            for (id, path) in &self.cgroup_paths {
                self.known_paths.insert(*id, path.clone());
            }
        }
        self.cgroup_paths.get(&id).cloned()
    }

    /// A cgroup's name: its path now, else the path it had when last seen
    /// or when the kernel made it. None only for a cgroup that was gone
    /// before any of these (made before load and removed before a scan).
    pub(crate) fn cgroup_name(&mut self, id: u64) -> Option<String> {
        self.cgroup_path(id)
            .or_else(|| self.known_paths.get(id).cloned())
            .or_else(|| self.names.as_ref()?.get(id))
    }

    /// Whether the process, thread or cgroup a key names still exists
    /// (zombie threads do not: they wait no more; a zombie process goes
    /// once reaped). Other keys always exist.
    pub(crate) fn exists(&mut self, key: u64) -> bool {
        match self.by {
            Breakdown::Process => process_exists(key as u32),
            Breakdown::Thread => is_alive(key as u32),
            Breakdown::Cgroup => self.cgroup_exists(key),
            _ => true,
        }
    }

    /// Whether cgroup `id` is still there: its known path still has that
    /// id (removing a cgroup leaves the cached path behind), else a rescan
    /// finds it.
    fn cgroup_exists(&mut self, id: u64) -> bool {
        let Some(h) = &self.hierarchy else {
            return true;
        };
        if let Some(path) = self.cgroup_paths.get(&id) {
            // The path's bytes: a name with invalid UTF-8 is escaped.
            let bytes = crate::sys::byte_names::unescape(path.trim_start_matches('/'));
            let dir = h.mount.join(std::ffi::OsStr::from_bytes(&bytes));
            if std::fs::metadata(dir).is_ok_and(|m| m.ino() == id) {
                return true;
            }
            self.cgroup_paths.remove(&id);
        }
        self.cgroup_path(id).is_some()
    }

    /// runqlat's label line: `pid = 1234 comm`, `cgroup = /path`...; a
    /// cgroup that is a container, a pod or a unit is named that first
    /// (`container = shop/web-1/nginx, cgroup = /kubepods.slice/...`).
    /// `comm` is the name the kernel stored with the key.
    pub(crate) fn text(&mut self, key: u64, comm: &[u8; 16]) -> String {
        match self.by {
            Breakdown::Process => format!("pid = {key} {}", task_comm(key, comm)),
            Breakdown::Thread => format!("tid = {key} {}", task_comm(key, comm)),
            Breakdown::PidNamespace => format!("pidns = {key}"),
            Breakdown::Cgroup => {
                let removed = if self.cgroup_path(key).is_some() {
                    ""
                } else {
                    " (removed)"
                };
                match self.workload(key) {
                    None => format!("cgroup = (removed, id {key})"),
                    Some(w) => match w.owner_name() {
                        ("cgroup", path) => format!("cgroup = {path}{removed}"),
                        (is, name) => format!("{is} = {name}, cgroup = {}{removed}", w.path),
                    },
                }
            }
            Breakdown::Cpu => format!("cpu = {key}"),
            Breakdown::None => key.to_string(),
        }
    }
}

/// A process' or thread's name: the live one, else `kernel`'s, the name
/// the kernel stored with the key.
pub(crate) fn task_comm(key: u64, kernel: &[u8; 16]) -> String {
    live_comm(key).unwrap_or_else(|| comm_str(kernel))
}

/// kill(pid, 0): one syscall, where a listing of /proc costs
/// milliseconds at ten thousand processes. It finds threads too, but a
/// process key is a tgid; a zombie is there until reaped, as in /proc.
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// /proc/PID/comm in three syscalls (open, read, close: no size probe), as
/// `serve --pids` names up to --max-series new keys a scrape.
fn live_comm(pid: u64) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(format!("/proc/{pid}/comm")).ok()?;
    // TASK_COMM_LEN is 16 (64 since 6.x for some kthreads): room for both.
    let mut buf = [0u8; 80];
    let n = file.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::btf::CssChoice;

    #[test]
    fn known_paths_keep_the_newest_and_stay_bounded() {
        let mut known = KnownPaths::default();
        for id in 0..(KNOWN_PATHS as u64 + 100) {
            known.insert(id, format!("/g{id}"));
        }
        known.insert(KNOWN_PATHS as u64 + 99, "/renamed".into());
        assert_eq!(known.paths.len(), KNOWN_PATHS);
        assert_eq!(known.order.len(), KNOWN_PATHS);
        assert!(!known.contains_key(99) && known.contains_key(100));
        // The first path seen for an id stays (a removed cgroup's name).
        let last = KNOWN_PATHS as u64 + 99;
        assert_eq!(
            known.get(last).map(String::as_str),
            Some(&*format!("/g{last}"))
        );
    }

    /// Issue 48 item 8: two cgroups whose names differ only in bytes that
    /// are not UTF-8 were both `/g\u{fffd}`: one label set for two keys.
    /// Their names are apart now, and each is still found to exist.
    #[test]
    fn cgroups_apart_only_in_invalid_utf8_are_named_apart() {
        use std::os::unix::ffi::OsStrExt;
        let mount = std::env::temp_dir().join(format!("schedlat-kl-utf8-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&mount);
        let dirs = [b"g\xff".as_slice(), b"g\xfe", b"g\\xff"];
        let ids: Vec<u64> = dirs
            .iter()
            .map(|name| {
                let dir = mount.join(std::ffi::OsStr::from_bytes(name));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::metadata(&dir).unwrap().ino()
            })
            .collect();
        let hierarchy = Hierarchy {
            mount: mount.clone(),
            css: CssChoice::Default,
        };
        let mut labels = KeyLabels::new(Breakdown::Cgroup, Some(hierarchy));
        let texts: Vec<String> = ids.iter().map(|&id| labels.text(id, &[0; 16])).collect();
        assert_eq!(
            texts,
            [
                "cgroup = /g\\xff",
                "cgroup = /g\\xfe",
                "cgroup = /g\\x5cxff"
            ]
        );
        for &id in &ids {
            assert!(labels.exists(id), "{texts:?}");
        }
        std::fs::remove_dir_all(&mount).unwrap();
    }

    /// Issue 48 item 5: a cgroup someone else made, named like a real
    /// container's (`docker-<its ID>.scope` in a service that may make
    /// cgroups, a container of another pod, a nested node's), took that
    /// container's names. A container is named only in the cgroup its
    /// runtime's own record puts it in: Docker's cgroup parent, the OCI
    /// `linux.cgroupsPath` of containerd's bundle and podman's config.
    #[test]
    fn only_the_cgroup_the_runtimes_record_names_takes_the_names() {
        use std::fs;
        let root = std::env::temp_dir().join(format!("schedlat-kl-record-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let write = |rel: String, text: &str| {
            let path = root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        let id = |tag: u8| format!("{tag:02x}").repeat(32);
        let (docker, containerd, podman) = (id(0xd0), id(0xc0), id(0xb0));
        let uid = "3f1c2d4e_5b6a_7c8d_9e0f_123456789abc";
        // Docker, default parent (the systemd driver's system.slice).
        write(
            format!("var/lib/docker/containers/{docker}/config.v2.json"),
            r#"{"Name":"/redis"}"#,
        );
        write(
            format!("var/lib/docker/containers/{docker}/hostconfig.json"),
            r#"{"CgroupParent":""}"#,
        );
        // A Kubernetes container of containerd (systemd driver).
        write(
            format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{containerd}/config.json"),
            &format!(
                r#"{{"annotations":{{"io.kubernetes.cri.container-name":"nginx",
                "io.kubernetes.cri.sandbox-name":"web-1","io.kubernetes.cri.sandbox-namespace":"shop"}},
                "linux":{{"cgroupsPath":"kubepods-burstable-pod{uid}.slice:cri-containerd:{containerd}"}}}}"#
            ),
        );
        // podman's name (containers.json), its cgroup in its config.
        let storage = "var/lib/containers/storage/overlay-containers";
        write(
            format!("{storage}/containers.json"),
            &format!(r#"[{{"id":"{podman}","names":["db"]}}]"#),
        );
        write(
            format!("{storage}/{podman}/userdata/config.json"),
            &format!(r#"{{"linux":{{"cgroupsPath":"machine.slice:libpod:{podman}"}}}}"#),
        );
        let mut labels = KeyLabels::new(Breakdown::Cgroup, None);
        labels.containers = Some(NameCache::start(NameRoots::under(&root), 0).unwrap());
        let name = |path: String| {
            let w = labels.workload_at(path.clone());
            if w.names.is_none() {
                // Asked for now; answered once the thread has read it.
                labels
                    .containers
                    .as_ref()
                    .unwrap()
                    .settle(Duration::from_secs(5));
            }
            let names = labels.workload_at(path).names;
            names.and_then(|n| n.container)
        };
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice");
        // The real ones, and a cgroup below a container (crun's `container`).
        assert_eq!(
            name(format!("/system.slice/docker-{docker}.scope")).as_deref(),
            Some("redis")
        );
        assert_eq!(
            name(format!("{pod}/cri-containerd-{containerd}.scope")).as_deref(),
            Some("nginx")
        );
        assert_eq!(
            name(format!("/machine.slice/libpod-{podman}.scope/container")).as_deref(),
            Some("db")
        );
        // A node in a cgroup of its own (kind): the record is below it.
        assert_eq!(
            name(format!(
                "/system.slice/docker-{}.scope{pod}/cri-containerd-{containerd}.scope",
                id(0x11)
            ))
            .as_deref(),
            Some("nginx")
        );
        // Named like them, elsewhere: no names.
        for fake in [
            format!("/system.slice/delegated.service/docker-{docker}.scope"),
            format!("/system.slice/delegated.service/{docker}"),
            format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{containerd}.scope",
                "0".repeat(8)
            ),
            format!(
                "/system.slice/docker-{}.scope/libpod-{podman}.scope",
                id(0x11)
            ),
            format!("/machine.slice/libpod-{podman}.scope-x/{podman}"),
        ] {
            assert_eq!(name(fake.clone()), None, "{fake}");
        }
        fs::remove_dir_all(&root).unwrap();
    }

    /// Issue 48 item 10: a container cgroup's names are pending until its
    /// runtime's files are answered for ("not found" is an answer), so its
    /// first series can wait for them; other cgroups are never pending.
    #[test]
    fn a_containers_names_are_pending_until_answered() {
        let mount =
            std::env::temp_dir().join(format!("schedlat-kl-pending-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&mount);
        let id = "ab".repeat(32);
        let ino = |rel: &str| {
            std::fs::create_dir_all(mount.join(rel)).unwrap();
            std::fs::metadata(mount.join(rel)).unwrap().ino()
        };
        let container = ino(&format!("system.slice/docker-{id}.scope"));
        let unit = ino("system.slice/cron.service");
        let hierarchy = Hierarchy {
            mount: mount.clone(),
            css: CssChoice::Default,
        };
        let mut labels = KeyLabels::new(Breakdown::Cgroup, Some(hierarchy));
        assert!(!labels.names_pending(container), "no names asked for");
        labels.containers = Some(NameCache::unanswered());
        assert!(labels.names_pending(container));
        assert!(!labels.names_pending(unit));
        labels.containers = Some(NameCache::start(NameRoots::under(&mount), 0).unwrap());
        labels.names_pending(container);
        labels
            .containers
            .as_ref()
            .unwrap()
            .settle(Duration::from_secs(5));
        assert!(!labels.names_pending(container), "answered: not found");
        std::fs::remove_dir_all(&mount).unwrap();
    }

    /// Regression: a cgroup seen while it existed but removed before its
    /// waits were shown was labelled `(removed, id N)`, its name lost.
    #[test]
    fn a_removed_cgroup_keeps_the_name_it_had_when_first_seen() {
        let mount = std::env::temp_dir().join(format!("schedlat-kl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&mount);
        std::fs::create_dir_all(mount.join("batch/job1")).unwrap();
        let id = std::fs::metadata(mount.join("batch/job1")).unwrap().ino();
        let hierarchy = Hierarchy {
            mount: mount.clone(),
            css: CssChoice::Default,
        };
        let mut labels = KeyLabels::new(Breakdown::Cgroup, Some(hierarchy));
        labels.saw(id);
        assert_eq!(labels.text(id, &[0; 16]), "cgroup = /batch/job1");
        std::fs::remove_dir(mount.join("batch/job1")).unwrap();
        std::thread::sleep(CGROUP_SCAN_TTL);
        assert!(!labels.exists(id));
        assert_eq!(labels.text(id, &[0; 16]), "cgroup = /batch/job1 (removed)");
        assert_eq!(labels.text(1, &[0; 16]), "cgroup = (removed, id 1)");
        std::fs::remove_dir_all(&mount).unwrap();
    }
}
