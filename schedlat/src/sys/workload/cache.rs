//! Container names without waiting for the disk: a bounded cache of
//! [`NameRoots::resolve`] answers, filled by a thread of its own. A lookup
//! answers at once with what the cache holds and asks the thread for what
//! it lacks, so an interval or a scrape never waits on a runtime's files
//! (a slow or hung file system delays names, never a measurement); the
//! name appears at the next lookup.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, Mutex, MutexGuard,
        mpsc::{self, Receiver, SyncSender},
    },
    thread,
    time::{Duration, Instant},
};

use super::{
    names::{ContainerNames, NameRoots},
    path::Runtime,
};

/// Containers whose answers are kept at least; the oldest answer is
/// dropped first. A node runs a few hundred containers (the kubelet's
/// default limit is 110 pods); a host with more found at start keeps
/// twice what it found ([`NameCache::start`]).
pub const CAPACITY: usize = 4096;

/// How long "no names found" stands before the files are read again: a
/// container's bundle may be written just after its cgroup is made.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Lookups waiting for the thread at least; more are dropped (and asked
/// again at their next lookup). A start that finds more containers asks
/// for all of them at once: the queue is sized to hold them (twice what it
/// found), or most of 3,000 went unnamed for good (labels are fixed at a
/// series' first scrape).
const QUEUE: usize = 1024;

/// The cache, shared with the thread that fills it.
#[derive(Clone)]
pub struct NameCache {
    state: Arc<Mutex<State>>,
    requests: SyncSender<(String, Option<Runtime>)>,
}

#[derive(Default)]
struct State {
    answers: HashMap<String, (Option<ContainerNames>, Instant)>,
    order: VecDeque<String>,
    /// Asked and not answered yet.
    pending: HashSet<String>,
}

impl NameCache {
    /// Starts the thread that reads the runtimes' files under `roots`,
    /// sized for `containers` (those found at start): its queue and its
    /// answers hold twice as many, at least 1,024 and [`CAPACITY`].
    pub fn start(roots: NameRoots, containers: usize) -> std::io::Result<NameCache> {
        let room = containers.saturating_mul(2);
        let (requests, queue) = mpsc::sync_channel(room.max(QUEUE));
        let capacity = room.max(CAPACITY);
        let cache = NameCache {
            state: Arc::default(),
            requests,
        };
        let state = Arc::clone(&cache.state);
        thread::Builder::new()
            .name("container-names".into())
            .spawn(move || serve(&roots, &state, &queue, capacity))?;
        Ok(cache)
    }

    /// The names of container `id` if known now; else None, and the
    /// thread is asked (answered by a later lookup).
    pub fn get(&self, id: &str, runtime: Option<Runtime>) -> Option<ContainerNames> {
        let mut state = self.lock();
        if let Some((answer, at)) = state.answers.get(id)
            && (answer.is_some() || at.elapsed() < RETRY_AFTER)
        {
            return answer.clone();
        }
        if state.pending.insert(id.to_string())
            && self.requests.try_send((id.to_string(), runtime)).is_err()
        {
            state.pending.remove(id);
        }
        None
    }

    /// Asks for the names of the container cgroup `path` is, if it is
    /// one, without waiting for them (a later [`NameCache::get`] has
    /// them).
    pub fn ask_for(&self, path: &str) {
        let labels = super::path::parse(path);
        // A user's own cgroup is named from no system runtime's files.
        if let (Some(id), None) = (&labels.container_id, &labels.delegated) {
            self.get(id, labels.runtime);
        }
    }

    /// A cache whose thread never answers (tests: names that stay
    /// pending).
    #[cfg(test)]
    pub(crate) fn unanswered() -> NameCache {
        let (requests, _) = mpsc::sync_channel(1);
        NameCache {
            state: Arc::default(),
            requests,
        }
    }

    /// Whether container `id` has no answer yet (asked for now if it was
    /// not): its names may still come. "Not found" is an answer.
    pub fn is_pending(&self, id: &str, runtime: Option<Runtime>) -> bool {
        self.get(id, runtime).is_none() && !self.lock().answers.contains_key(id)
    }

    /// Waits until every lookup asked for so far is answered, at most
    /// `timeout`: for a start that asked for every container there, so
    /// that the first interval or scrape already has their names. Never
    /// called from a scrape or an interval.
    pub fn settle(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.lock().pending.is_empty() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread: answers each request from the files, outside the lock.
/// Ends when every [`NameCache`] is gone.
fn serve(
    roots: &NameRoots,
    state: &Mutex<State>,
    queue: &Receiver<(String, Option<Runtime>)>,
    capacity: usize,
) {
    for (id, runtime) in queue {
        let answer = roots.resolve(&id, runtime);
        let mut state = lock(state);
        state.pending.remove(&id);
        if state
            .answers
            .insert(id.clone(), (answer, Instant::now()))
            .is_none()
        {
            state.order.push_back(id);
        }
        while state.order.len() > capacity {
            if let Some(old) = state.order.pop_front() {
                state.answers.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_lookup_answers_later_and_never_waits() {
        let root = std::env::temp_dir().join(format!("schedlat-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let id = "ab".repeat(32);
        let dir = root.join(format!("var/lib/docker/containers/{id}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("config.v2.json"), r#"{"Name":"/redis"}"#).unwrap();
        let cache = NameCache::start(NameRoots::under(&root), 0).unwrap();
        assert_eq!(cache.get(&id, Some(Runtime::Docker)), None);
        // A start waits for what it asked for: then the answer is there.
        cache.settle(Duration::from_secs(5));
        let names = cache
            .get(&id, Some(Runtime::Docker))
            .expect("answered once settled");
        assert_eq!(names.container.as_deref(), Some("redis"));
        // Unknown containers are answered None, and not asked again at
        // once.
        let unknown = "cd".repeat(32);
        assert_eq!(cache.get(&unknown, None), None);
        thread::sleep(Duration::from_millis(200));
        assert_eq!(cache.get(&unknown, None), None);
        assert!(cache.lock().answers.contains_key(&unknown));
        assert!(!cache.lock().pending.contains(&unknown));
        fs::remove_dir_all(&root).unwrap();
    }

    /// Issue 48 item 10: a start that found 3,000 containers asked for
    /// them all at once into a 1,024-entry queue: the rest were dropped,
    /// and their series' labels, fixed at the first scrape, never had the
    /// names. The queue is sized from what the start found.
    #[test]
    fn every_container_found_at_start_is_named_once_settled() {
        let root = std::env::temp_dir().join(format!("schedlat-cache-many-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        const FOUND: usize = 3000;
        let ids: Vec<String> = (0..FOUND).map(|i| format!("{i:064x}")).collect();
        for (i, id) in ids.iter().enumerate() {
            let dir = root.join(format!("var/lib/docker/containers/{id}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("config.v2.json"), format!(r#"{{"Name":"/c{i}"}}"#)).unwrap();
        }
        let cache = NameCache::start(NameRoots::under(&root), FOUND).unwrap();
        for id in &ids {
            cache.get(id, Some(Runtime::Docker));
        }
        cache.settle(Duration::from_secs(30));
        let named = ids
            .iter()
            .filter(|id| cache.get(id, Some(Runtime::Docker)).is_some())
            .count();
        assert_eq!(named, FOUND);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_cache_keeps_at_most_its_capacity() {
        let root = std::env::temp_dir().join("schedlat-cache-empty");
        let cache = NameCache::start(NameRoots::under(&root), 0).unwrap();
        for i in 0..CAPACITY + 100 {
            let id = format!("{i:064x}");
            // Paced so the queue never fills.
            while cache.get(&id, None).is_none() && cache.lock().pending.contains(&id) {
                thread::sleep(Duration::from_micros(50));
            }
        }
        thread::sleep(Duration::from_millis(100));
        let state = cache.lock();
        assert!(state.answers.len() <= CAPACITY, "{}", state.answers.len());
        assert_eq!(state.answers.len(), state.order.len());
    }
}
