//! The names of cgroups as the kernel made them (the cgroup_mkdir program
//! of schedlat-ebpf/src/workload.rs): each new cgroup's id and path, read
//! off the ring buffer by a thread of its own as they come, into a bounded
//! book that the labels look up. A cgroup that lives 20 ms is named as
//! surely as one that lives for hours, and nothing that reads the book
//! waits for the ring buffer or the filesystem.

use std::{
    collections::{HashMap, VecDeque},
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use aya::maps::{MapData, RingBuf};
use schedlat_common::{
    names,
    workload::{NAME_PATH_LEN, NameHeader},
};

use crate::{
    collect::error::{InMap, ReadError},
    sys::workload::cache::NameCache,
};

/// Names kept: the oldest is forgotten first. Far more than the keys a
/// breakdown or a scrape names (`--max-keys`, 4096 by default), so a name
/// is gone only after this many newer cgroups; at most about 3 MiB with
/// Kubernetes paths.
pub(crate) const BOOK_CAPACITY: usize = 16_384;

/// How long the thread sleeps between looks when nothing wakes it: a stop
/// wakes it at once (`wake`), so this only bounds how soon it sees that
/// every other handle was dropped without one. Idle wakeups are not free
/// (about 50 us each on a VM, timer included): ten a second were a tenth of
/// a 10,000-cgroup scrape's CPU a second.
const IDLE_LOOK: Duration = Duration::from_secs(5);

/// The names read so far, shared with the thread that reads them.
#[derive(Clone)]
pub(crate) struct CgroupNames {
    book: Arc<Mutex<Book>>,
    stop: Arc<AtomicBool>,
    /// An eventfd the thread polls beside the ring buffer: written by
    /// [`CgroupNames::stop`].
    wake: Arc<OwnedFd>,
}

/// Paths by cgroup id, oldest first in `order`.
#[derive(Default)]
struct Book {
    paths: HashMap<u64, String>,
    order: VecDeque<u64>,
    /// Asked for the names of each new container cgroup as the kernel
    /// reports it ([`CgroupNames::prefetch_into`]).
    containers: Option<NameCache>,
}

impl Book {
    fn insert(&mut self, id: u64, path: String) {
        if let Some(cache) = &self.containers {
            cache.ask_for(&path);
        }
        if self.paths.insert(id, path).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > BOOK_CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.paths.remove(&old);
            }
        }
    }
}

impl CgroupNames {
    /// Starts reading the names the kernel sends through `map` (the
    /// CGROUP_NAMES ring buffer, taken out of the object).
    pub(crate) fn start(map: aya::maps::Map) -> Result<CgroupNames, ReadError> {
        let name = names::MAP_CGROUP_NAMES;
        let ring = RingBuf::try_from(map).in_map(name)?;
        // SAFETY: eventfd has no memory arguments; a valid fd is owned.
        let wake = match unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) } {
            -1 => {
                return Err(ReadError::Proc {
                    path: "an eventfd for the cgroup names",
                    error: std::io::Error::last_os_error(),
                });
            }
            // SAFETY: just made, owned by nothing else.
            fd => unsafe { OwnedFd::from_raw_fd(fd) },
        };
        let names = CgroupNames {
            book: Arc::default(),
            stop: Arc::default(),
            wake: Arc::new(wake),
        };
        let reader = names.clone();
        thread::Builder::new()
            .name("cgroup-names".into())
            .spawn(move || reader.read(ring))
            .map_err(|error| ReadError::Proc {
                path: "a thread for the cgroup names",
                error,
            })?;
        Ok(names)
    }

    /// The path the kernel gave cgroup `id` when it made it (relative to
    /// its hierarchy's root), if it was made since load and is among the
    /// last [`BOOK_CAPACITY`].
    pub(crate) fn get(&self, id: u64) -> Option<String> {
        self.lock().paths.get(&id).cloned()
    }

    /// From now on, asks `cache` for the names of every container whose
    /// cgroup the kernel reports made. The runtimes write those files
    /// before they make the container's cgroup (containerd its bundle,
    /// CRI-O and podman their container config, Docker config.v2.json),
    /// so the names are usually read before the container's first wait.
    pub(crate) fn prefetch_into(&self, cache: NameCache) {
        self.lock().containers = Some(cache);
    }

    /// Ends the reading thread.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes from a live buffer to our eventfd; a failure
        // (the counter full) leaves it readable, which is all it is for.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        // A panic while holding it leaves a usable book.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The thread: drains the ring buffer whenever it is readable.
    fn read(self, mut ring: RingBuf<MapData>) {
        let fd = ring.as_fd().as_raw_fd();
        while !self.stop.load(Ordering::Relaxed) && Arc::strong_count(&self.stop) > 1 {
            let mut records = Vec::new();
            while let Some(item) = ring.next() {
                records.extend(decode(&item));
            }
            if !records.is_empty() {
                let mut book = self.lock();
                for (id, path) in records {
                    book.insert(id, path);
                }
            }
            wait_readable([fd, self.wake.as_raw_fd()], IDLE_LOOK);
        }
    }
}

/// poll(2) on the ring buffer's fd (readable when the kernel has written)
/// and the stop's eventfd.
fn wait_readable(fds: [i32; 2], timeout: Duration) {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: two valid pollfds; an error or a signal only ends the wait.
    unsafe { libc::poll(pfds.as_mut_ptr(), 2, ms) };
}

/// What ends a path the kernel's record cut.
pub(crate) const CUT: &str = "... (cut at 1023 bytes)";

/// A record: its header, then `len` bytes of path.
fn decode(bytes: &[u8]) -> Option<(u64, String)> {
    let head = size_of::<NameHeader>();
    if bytes.len() < head {
        return None;
    }
    // SAFETY: long enough; NameHeader is repr(C) u64s, valid for any bit
    // pattern; the record need not be aligned for Rust.
    let header = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<NameHeader>()) };
    let len = usize::try_from(header.len).ok()?;
    let path = bytes.get(head..head.checked_add(len)?)?;
    // Invalid UTF-8 escaped one to one: two names apart stay apart.
    let mut name = crate::sys::byte_names::escape(path);
    // The kernel's record holds 1,023 bytes of path at most (its own
    // tracepoint buffer is as long): one that long was most likely cut,
    // and says so rather than pass for whole.
    if len >= NAME_PATH_LEN - 1 {
        name.push_str(CUT);
    }
    Some((header.id, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, path: &str) -> Vec<u8> {
        let mut bytes = id.to_ne_bytes().to_vec();
        bytes.extend((path.len() as u64).to_ne_bytes());
        bytes.extend(path.as_bytes());
        bytes
    }

    #[test]
    fn records_decode_and_short_or_lying_ones_are_skipped() {
        assert_eq!(decode(&record(7, "/a/b")), Some((7, "/a/b".into())));
        assert_eq!(decode(&[0u8; 8]), None);
        let mut lying = record(7, "/a");
        lying[8] = 200;
        assert_eq!(decode(&lying), None);
    }

    /// Issue 48 item 9: a path the kernel's record cut at 1,023 bytes was
    /// shown as if whole.
    #[test]
    fn a_path_as_long_as_the_record_holds_is_marked_cut() {
        let long = format!("/{}", "a".repeat(NAME_PATH_LEN - 2));
        let (_, name) = decode(&record(7, &long)).unwrap();
        assert_eq!(name, format!("{long}{CUT}"));
        let short = format!("/{}", "a".repeat(NAME_PATH_LEN - 3));
        assert_eq!(decode(&record(7, &short)).unwrap().1, short);
    }

    #[test]
    fn the_book_forgets_the_oldest_names_first() {
        let mut book = Book::default();
        for id in 0..BOOK_CAPACITY as u64 + 10 {
            book.insert(id, format!("/g{id}"));
        }
        assert_eq!(book.paths.len(), BOOK_CAPACITY);
        assert!(!book.paths.contains_key(&9));
        assert_eq!(book.paths.get(&10).map(String::as_str), Some("/g10"));
        // An id seen again (a reused inode) takes its new path, once.
        book.insert(20, "/new".into());
        assert_eq!(book.paths.get(&20).map(String::as_str), Some("/new"));
        assert_eq!(book.order.len(), BOOK_CAPACITY);
    }
}
