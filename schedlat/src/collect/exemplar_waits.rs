//! The slow waits `serve --exemplars` points its histograms' buckets to
//! (export/exemplars.rs): per exported bucket of the whole system and of
//! each breakdown key, the latest slow wait that bucket counted, as the
//! Prometheus client libraries keep a bucket's exemplar. A scrape reads
//! them without taking them: two Prometheus servers scraping one serve (a
//! high-availability pair) both see every bucket's latest, and Prometheus
//! stores an exemplar it has already seen once.
//!
//! A slow event (slow.rs) names the task that waited, not its key. Per
//! process the key is its tgid. Per cgroup it is the cgroup the task is in
//! when userspace reads the event, from `/proc/TID/cgroup`: the task has
//! just been switched in, so it is almost always there to ask (one that
//! exited first counts for the total only), and a task moved between the
//! wait and the read is put in its new cgroup. A task is asked once per
//! scrape interval.

use std::collections::{BTreeMap, HashMap};

use schedlat_common::{scope::Breakdown, victims::SlowEvent};

use crate::{
    histogram::layout::{LAYOUT, Layout},
    kernel::{cgroupfs::Hierarchy, filter::comm_str},
    sys::clock::{WallClock, monotonic_ns},
};

/// Keys (and tasks' cgroups) kept at most: a storm of slow waits over
/// more keys costs no more memory; the keys beyond get no exemplar until
/// others age out.
const MAX_KEYS: usize = 16_384;

/// A bucket's wait is forgotten this long after it ended (nanoseconds):
/// the keys of gone tasks and cgroups do not pile up.
const MAX_AGE_NS: u64 = 600 * 1_000_000_000;

/// One slow wait, as an exemplar needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    pub wait_ns: u64,
    /// When it ended, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The task's cgroup (the total's, read at the next scrape).
    pub cgroup: TaskCgroup,
}

/// A wait's task's cgroup, as far as it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaskCgroup {
    Unread,
    /// Its path in the hierarchy, relative to the mount.
    Path(String),
    /// The task was gone, or the hierarchy is not known.
    Unknown,
}

/// Per exported bucket (its index in the layout), the latest wait.
pub(crate) type BucketWaits = BTreeMap<usize, Wait>;

/// The latest slow waits per bucket, of the total and of each key.
pub(crate) struct ExemplarWaits {
    by: Option<Breakdown>,
    /// The per-key family's layout.
    key_layout: &'static Layout,
    /// The hierarchy cgroup paths are read in, and its number in
    /// `/proc/PID/cgroup`.
    hierarchy: Option<(Hierarchy, u64)>,
    clock: WallClock,
    total: BucketWaits,
    keys: HashMap<u64, BucketWaits>,
    /// Each task's cgroup (id, path) this scrape interval; None: not found.
    cgroups: HashMap<u32, Option<(u64, String)>>,
}

impl ExemplarWaits {
    /// `by`: the breakdown whose keys get exemplars, in `key_layout`;
    /// `hierarchy`: the one cgroup ids refer to (the breakdown's, or the
    /// one the total's exemplars name a cgroup in).
    pub(crate) fn new(
        by: Option<Breakdown>,
        key_layout: &'static Layout,
        hierarchy: Option<Hierarchy>,
    ) -> ExemplarWaits {
        let hierarchy = hierarchy.and_then(|h| h.number().map(|n| (h, n)));
        ExemplarWaits {
            by,
            key_layout,
            hierarchy,
            clock: WallClock::now(),
            total: BucketWaits::new(),
            keys: HashMap::new(),
            cgroups: HashMap::new(),
        }
    }

    /// Takes in slow events as they are read (in the order they ended).
    pub(crate) fn add(&mut self, events: &[SlowEvent]) {
        for event in events {
            self.add_one(event);
        }
    }

    fn add_one(&mut self, event: &SlowEvent) {
        let key = match self.by {
            Some(Breakdown::Process) => Some(u64::from(event.victim.tgid)),
            Some(Breakdown::Cgroup) => self.cgroup(event.victim.tid).map(|(id, _)| id),
            _ => None,
        };
        let wait = Wait::of(self.clock, event);
        if let Some(key) = key
            && (self.keys.len() < MAX_KEYS || self.keys.contains_key(&key))
        {
            let bucket = self.key_layout.bucket_of(wait.wait_ns);
            self.keys
                .entry(key)
                .or_default()
                .insert(bucket, wait.clone());
        }
        self.total.insert(LAYOUT.bucket_of(wait.wait_ns), wait);
    }

    /// At a scrape: forgets the waits older than [`MAX_AGE_NS`], reads the
    /// cgroup of the total's new ones, and starts a new interval of the
    /// tasks' cgroups.
    pub(crate) fn refresh(&mut self) {
        let now = self.clock.unix_ns(monotonic_ns());
        let fresh = |w: &Wait| now.saturating_sub(w.unix_ns) <= MAX_AGE_NS;
        self.total.retain(|_, w| fresh(w));
        for buckets in self.keys.values_mut() {
            buckets.retain(|_, w| fresh(w));
        }
        self.keys.retain(|_, buckets| !buckets.is_empty());
        let unread: Vec<u32> = (self.total.values())
            .filter(|w| w.cgroup == TaskCgroup::Unread)
            .map(|w| w.tid)
            .collect();
        for tid in unread {
            let found = match self.cgroup(tid) {
                Some((_, path)) => TaskCgroup::Path(path),
                None => TaskCgroup::Unknown,
            };
            for w in (self.total.values_mut()).filter(|w| w.tid == tid) {
                w.cgroup = found.clone();
            }
        }
        self.cgroups.clear();
        // A clock read per interval: an NTP step moves the timestamps
        // within one scrape.
        self.clock = WallClock::now();
    }

    /// The whole system's latest wait per bucket (the total's layout).
    pub(crate) fn total(&self) -> &BucketWaits {
        &self.total
    }

    /// A key's latest wait per bucket (the per-key layout), if any.
    pub(crate) fn key(&self, key: u64) -> Option<&BucketWaits> {
        self.keys.get(&key)
    }

    /// Task `tid`'s cgroup, read once per scrape interval.
    fn cgroup(&mut self, tid: u32) -> Option<(u64, String)> {
        let (hierarchy, number) = self.hierarchy.as_ref()?;
        if let Some(known) = self.cgroups.get(&tid) {
            return known.clone();
        }
        let found = hierarchy.task_cgroup(*number, tid);
        if self.cgroups.len() < MAX_KEYS {
            self.cgroups.insert(tid, found.clone());
        }
        found
    }
}

impl Wait {
    fn of(clock: WallClock, event: &SlowEvent) -> Wait {
        Wait {
            wait_ns: event.wait_ns,
            unix_ns: clock.unix_ns(event.at_ns),
            pid: event.victim.tgid,
            tid: event.victim.tid,
            comm: comm_str(&event.victim.comm),
            cgroup: TaskCgroup::Unread,
        }
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::TaskInfo;

    use super::*;
    use crate::histogram::layout::LOG2;

    fn event(tgid: u32, tid: u32, wait_ns: u64) -> SlowEvent {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"task");
        SlowEvent {
            at_ns: monotonic_ns(),
            wait_ns,
            victim: TaskInfo {
                tid,
                tgid,
                comm,
                ..TaskInfo::default()
            },
            ..SlowEvent::default()
        }
    }

    fn tids(buckets: &BucketWaits) -> Vec<(usize, u32)> {
        buckets.iter().map(|(&b, w)| (b, w.tid)).collect()
    }

    #[test]
    fn each_bucket_keeps_its_latest_wait_of_each_process_and_of_all() {
        let mut waits = ExemplarWaits::new(Some(Breakdown::Process), &LOG2, None);
        waits.add(&[event(10, 11, 3_000_000), event(20, 20, 9_000_000)]);
        waits.add(&[event(10, 12, 3_500_000), event(10, 13, 5_000_000)]);
        waits.refresh();
        let (ms3, ms5, ms9) = (
            LOG2.bucket_of(3_000_000),
            LOG2.bucket_of(5_000_000),
            LOG2.bucket_of(9_000_000),
        );
        assert_eq!(ms3, LOG2.bucket_of(3_500_000));
        // 3 and 3.5 ms share a log2 bucket: the later one is kept.
        assert_eq!(tids(waits.key(10).unwrap()), [(ms3, 12), (ms5, 13)]);
        assert_eq!(tids(waits.key(20).unwrap()), [(ms9, 20)]);
        // The total's fine layout tells 3 and 3.5 ms apart.
        let total = tids(waits.total());
        assert_eq!(total.len(), 4, "{total:?}");
        assert_eq!(waits.total()[&LAYOUT.bucket_of(3_000_000)].comm, "task");
        // A scrape reads them without taking them.
        waits.refresh();
        assert_eq!(tids(waits.key(10).unwrap()), [(ms3, 12), (ms5, 13)]);
    }

    #[test]
    fn waits_older_than_the_bound_are_forgotten() {
        let mut waits = ExemplarWaits::new(Some(Breakdown::Process), &LOG2, None);
        let mut old = event(10, 11, 3_000_000);
        old.at_ns -= MAX_AGE_NS + 1_000_000_000;
        waits.add(&[old, event(20, 20, 3_000_000)]);
        waits.refresh();
        assert!(waits.key(10).is_none());
        assert_eq!(tids(waits.total()), [(LAYOUT.bucket_of(3_000_000), 20)]);
    }

    #[test]
    fn without_a_breakdown_only_the_total_is_kept() {
        let mut waits = ExemplarWaits::new(None, &LOG2, None);
        waits.add(&[event(10, 11, 3_000_000)]);
        assert!(waits.key(10).is_none());
        assert_eq!(waits.total().len(), 1);
    }

    #[test]
    fn keys_beyond_the_bound_keep_no_exemplar_but_the_total_does() {
        let mut waits = ExemplarWaits::new(Some(Breakdown::Process), &LOG2, None);
        let many: Vec<SlowEvent> = (0..MAX_KEYS as u32 + 10)
            .map(|pid| event(pid + 1, pid + 1, 1_000_000))
            .collect();
        waits.add(&many);
        waits.add(&[event(u32::MAX, u32::MAX, 2_000_000)]);
        assert_eq!(waits.keys.len(), MAX_KEYS);
        assert!(waits.key(u64::from(u32::MAX)).is_none());
        assert_eq!(waits.total()[&LAYOUT.bucket_of(2_000_000)].tid, u32::MAX);
    }

    /// This process' own cgroup, found the way a slow event's is: its key
    /// per cgroup, and the path on the total's wait after a scrape.
    #[test]
    fn a_tasks_cgroup_is_read_from_proc() {
        let mounts = crate::sys::mounts::Mounts::read();
        let hierarchy = crate::kernel::cgroupfs::default_hierarchy(&mounts)
            .expect("a cgroup hierarchy with the cpu controller, v1 or v2");
        let mut waits = ExemplarWaits::new(Some(Breakdown::Cgroup), &LOG2, Some(hierarchy.clone()));
        let me = std::process::id();
        waits.add(&[event(me, me, 1_000_000)]);
        waits.refresh();
        let total = &waits.total()[&LAYOUT.bucket_of(1_000_000)];
        let TaskCgroup::Path(path) = &total.cgroup else {
            panic!("our own cgroup: {total:?}");
        };
        let dir = hierarchy.mount.join(path.trim_start_matches('/'));
        let id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir).unwrap());
        assert_eq!(waits.key(id).unwrap().values().next().unwrap().tid, me);
    }
}
