//! Writing dumps, on a thread of its own so that a slow or failing disk
//! never holds up collection. A dump is a directory, `schedlat-<UTC
//! time>-<n>-<pid>-<reason>`, holding `dump.jsonl`, `waits.hlog` and
//! `slow.perfetto-trace`; it is written under a hidden temporary name, each
//! file and the directory fsynced, then renamed: a dump is under its final
//! name whole or not at all.
//!
//! The directory is used only if nobody but the effective user can change
//! it, and every dump goes through its descriptor (sys/owned_dir.rs): no
//! planted link is followed. `<n>` is the directory's own sequence (one
//! more than the highest there), so dumps are ordered by it, not by the
//! wall clock, which can step back; `<pid>` keeps two recorders sharing a
//! directory from picking one name. Only the newest `keep` dumps of each
//! kind (http, sighup, trigger) are kept; when the disk is full the oldest
//! of the dump's kind make room (then, for SIGHUP and trigger dumps only,
//! the oldest of any kind), only when that makes the dump fit. Temporary directories left by a recorder killed
//! during a dump are removed at start.

use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
    thread::JoinHandle,
};

use anyhow::{Context, Result};

use crate::{
    analysis::recording::Window,
    output::{dump, hlog, perfetto},
    sys::owned_dir::OwnedDir,
};

pub(super) const PREFIX: &str = "schedlat-";

/// What asked for a dump: the last word of its name, and its own `--keep`
/// rotation (dumps asked for over HTTP never push out the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DumpKind {
    /// SIGHUP.
    Sighup,
    /// `POST /snapshot`.
    Http,
    /// A `--trigger` that fired.
    Trigger,
}

impl DumpKind {
    /// The word that ends the dump's name.
    pub(crate) fn word(self) -> &'static str {
        match self {
            DumpKind::Sighup => "sighup",
            DumpKind::Http => "http",
            DumpKind::Trigger => "trigger",
        }
    }
}

/// A dump to write.
pub(super) struct Job {
    pub window: Window,
    pub kind: DumpKind,
}

pub(crate) struct Writer {
    jobs: Option<SyncSender<(String, Job)>>,
    thread: Option<JoinHandle<()>>,
    dir: Arc<OwnedDir>,
    /// The last `<n>` given a name.
    named: AtomicU64,
    /// Dumps handed over and not yet written (or failed).
    pending: Arc<AtomicUsize>,
}

/// Why a dump asked for over HTTP was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Another dump is being written.
    Busy,
    /// The writer thread is gone.
    Stopped,
    /// The directory's sequence numbers are spent.
    Spent,
}

impl Writer {
    /// Opens `dir` (created if missing) and checks it: owned by the
    /// effective user, not writable by others without the sticky bit, and
    /// writable (a directory that is not fails now, not at the incident).
    pub(crate) fn start(dir: PathBuf, keep: usize) -> Result<Writer> {
        let dir = Arc::new(OwnedDir::open(&dir).context("the dump directory")?);
        // Named as a temporary dump of this process, so that one left by a
        // kill right here is removed as an orphan too.
        let probe = format!(".{PREFIX}probe-0-{}-probe.tmp", std::process::id());
        drop(dir.create_private(&probe).with_context(|| {
            format!(
                "the dump directory {} cannot be written",
                dir.path().display()
            )
        })?);
        let removed = remove_orphans(&dir);
        if removed > 0 {
            say!(
                "schedlat: removed {removed} temporary dump directories in {} left by a recorder that was stopped while dumping",
                dir.path().display()
            );
        }
        // One dump written and one waiting: a request beyond is refused
        // (said on stderr) rather than queued without bound.
        let (jobs, rx) = sync_channel::<(String, Job)>(1);
        let pending = Arc::new(AtomicUsize::new(0));
        let (at, done) = (dir.clone(), pending.clone());
        let thread = std::thread::Builder::new()
            .name("schedlat-dump".into())
            .spawn(move || run(rx, &at, keep, &done))
            .context("starting the dump writer thread")?;
        Ok(Writer {
            jobs: Some(jobs),
            thread: Some(thread),
            dir,
            named: AtomicU64::new(0),
            pending,
        })
    }

    /// Where the dumps go: the directory asked for, or the private
    /// subdirectory of ours in it when it is shared (sticky).
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory the dump will have once written: the next sequence
    /// number of the directory (of this writer, if another recorder's
    /// dumps are not there to read).
    ///
    /// None when the sequence is spent (a dump numbered 2^64-1 is there):
    /// wrapping to 0 would make every new dump the oldest, pruned as soon
    /// as written.
    fn name(&self, job: &Job) -> Option<String> {
        let highest = dumps(&self.dir).last().map_or(0, |d| d.0);
        let mut n = 0;
        self.named
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                n = last.max(highest).checked_add(1)?;
                Some(n)
            })
            .ok()?;
        Some(format!(
            "{PREFIX}{}-{n}-{}-{}",
            utc_stamp(job.window.meta.dumped_unix_ns),
            std::process::id(),
            job.kind.word()
        ))
    }

    /// Says that the dump `job` was not taken because the sequence is
    /// spent.
    fn say_spent(&self, job: &Job) {
        say!(
            "schedlat: error: dump ({}) not taken: {} holds a dump numbered {}, the last sequence number; move the dumps there elsewhere",
            job.window.meta.reason,
            self.dir.path().display(),
            u64::MAX
        );
    }

    /// Hands a dump to the writer unless one is being written (a request
    /// over HTTP, which is answered at once); never waits. The path is
    /// where the dump will be once whole.
    pub(super) fn request_now(&self, job: Job) -> Result<PathBuf, Refused> {
        let jobs = self.jobs.as_ref().ok_or(Refused::Stopped)?;
        if self.pending.load(Ordering::Acquire) > 0 {
            return Err(Refused::Busy);
        }
        let Some(name) = self.name(&job) else {
            self.say_spent(&job);
            return Err(Refused::Spent);
        };
        let path = self.dir.path().join(&name);
        self.pending.fetch_add(1, Ordering::AcqRel);
        match jobs.try_send((name, job)) {
            Ok(()) => Ok(path),
            Err(e) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                Err(match e {
                    TrySendError::Full(_) => Refused::Busy,
                    TrySendError::Disconnected(_) => Refused::Stopped,
                })
            }
        }
    }

    /// Hands a dump to the writer; never waits. One may wait while
    /// another is written (SIGHUP, triggers).
    pub(super) fn request(&self, job: Job) {
        let Some(jobs) = &self.jobs else { return };
        let Some(name) = self.name(&job) else {
            return self.say_spent(&job);
        };
        self.pending.fetch_add(1, Ordering::AcqRel);
        let sent = jobs.try_send((name, job));
        if sent.is_err() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        match sent {
            Ok(()) => {}
            Err(TrySendError::Full((_, job))) => say!(
                "schedlat: dump ({}) not taken: one is being written and another waits; collection continues",
                job.window.meta.reason
            ),
            Err(TrySendError::Disconnected(_)) => {
                say!("schedlat: the dump writer has stopped; collection continues")
            }
        }
    }

    /// Lets the dumps asked for finish (at exit).
    pub(super) fn finish(mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(rx: Receiver<(String, Job)>, dir: &OwnedDir, keep: usize, pending: &AtomicUsize) {
    while let Ok((name, job)) = rx.recv() {
        let written = write_making_room(dir, &name, job.kind, &job.window);
        pending.fetch_sub(1, Ordering::AcqRel);
        match written {
            Ok(path) => {
                say!(
                    "schedlat: dumped {} s and {} slow waits ({}) to {}",
                    job.window.seconds.len(),
                    job.window.slow.len(),
                    job.window.meta.reason,
                    path.display()
                );
                if let Err(e) = prune(dir, keep, job.kind) {
                    say!(
                        "schedlat: removing old dumps in {}: {e:#}",
                        dir.path().display()
                    );
                }
            }
            Err(e) => say!(
                "schedlat: error: dump ({}) failed, nothing written under {}: {e:#}; collection continues",
                job.window.meta.reason,
                dir.path().join(&name).display()
            ),
        }
    }
}

/// Whether `e` is the disk (or the user's quota) being full.
fn disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .is_some_and(|code| code == libc::ENOSPC || code == libc::EDQUOT)
    })
}

/// Writes the dump; when the disk is full, older dumps go to make room,
/// but only when removing them makes the new dump fit: the oldest of its
/// kind first (for a SIGHUP or trigger dump, then the oldest of any kind:
/// a request over HTTP never removes another kind's), then one more try.
/// Pruning only after a success kept the oldest incidents and lost every
/// new one; removing dumps while someone else's files keep the disk full
/// lost the old dumps and the new one alike.
fn write_making_room(
    dir: &OwnedDir,
    name: &str,
    kind: DumpKind,
    window: &Window,
) -> Result<PathBuf> {
    let full = match write_dump(dir, name, window) {
        Err(e) if disk_full(&e) => e,
        other => return other,
    };
    let room = dir.room().context("reading the free space")?;
    // Over a quota the file system's free space does not apply: only what
    // this user's dumps give back does.
    let over_quota = full.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            == Some(libc::EDQUOT)
    });
    let free = if over_quota { 0 } else { room.free };
    let needed = dump_bytes(window, room.block);
    let all = dumps(dir);
    let own = all.iter().filter(|(_, n)| of_kind(n, kind));
    let others = all
        .iter()
        .filter(|(_, n)| kind != DumpKind::Http && !of_kind(n, kind));
    let mut freed = 0u64;
    let mut chosen = Vec::new();
    for (_, candidate) in own.chain(others) {
        if free.saturating_add(freed) >= needed {
            break;
        }
        freed = freed.saturating_add(dir.dir_bytes(candidate).unwrap_or(0));
        chosen.push(candidate.as_str());
    }
    if free.saturating_add(freed) < needed {
        return Err(full.context(format!(
            "the dump needs about {} KiB, {} KiB are free and removing every older dump it may remove would free only {} KiB more: none removed",
            needed.div_ceil(1024),
            free / 1024,
            freed / 1024
        )));
    }
    for oldest in &chosen {
        dir.remove_dir_of_files(oldest)
            .with_context(|| format!("making room: removing {oldest}"))?;
    }
    if !chosen.is_empty() {
        say!(
            "schedlat: the disk under {} is full: removed the oldest dump{}, {}, to make room",
            dir.path().display(),
            if chosen.len() == 1 { "" } else { "s" },
            chosen.join(", ")
        );
    }
    write_dump(dir, name, window)
}

/// About what the dump `window` takes on a file system of `block`-byte
/// blocks: its three files, each rounded up to whole blocks, and a block
/// for the directory. Counted by writing it to nowhere.
fn dump_bytes(window: &Window, block: u64) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let blocks = |c: Count| c.0.div_ceil(block).max(1) * block;
    let (mut a, mut b, mut c) = (Count(0), Count(0), Count(0));
    let _ = dump::write(&mut a, window);
    let _ = hlog::write_window(&mut b, window);
    let _ = perfetto::write(&mut c, window);
    blocks(a) + blocks(b) + blocks(c) + block
}

/// Writes the dump under a temporary name, then renames it into place.
pub(super) fn write_dump(dir: &OwnedDir, name: &str, window: &Window) -> Result<PathBuf> {
    let tmp = format!(".{name}.tmp");
    let at = |file: &str| dir.path().join(&tmp).join(file);
    let mut private = dir
        .create_private(&tmp)
        .with_context(|| format!("creating {}", dir.path().join(&tmp).display()))?;
    let mut file = |name: &str, fill: &dyn Fn(&mut BufWriter<File>) -> Result<()>| {
        let f = private
            .create(name)
            .with_context(|| format!("creating {}", at(name).display()))?;
        write_file(f, fill).with_context(|| format!("writing {}", at(name).display()))
    };
    file("dump.jsonl", &|f| Ok(dump::write(f, window)?))?;
    file("waits.hlog", &|f| hlog::write_window(f, window))?;
    file("slow.perfetto-trace", &|f| Ok(perfetto::write(f, window)?))?;
    private
        .commit(name)
        .with_context(|| format!("renaming {} to {name}", dir.path().join(&tmp).display()))?;
    Ok(dir.path().join(name))
}

/// Writes `f` through a buffer, and fsyncs it.
fn write_file(f: File, fill: &dyn Fn(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let mut out = BufWriter::with_capacity(64 << 10, f);
    fill(&mut out)?;
    let f = out.into_inner().map_err(|e| e.into_error())?;
    Ok(f.sync_all()?)
}

/// The fields of a dump's name: `schedlat-<UTC>-<n>-<pid>-<reason>` (and
/// `schedlat-<UTC>-<n>-<reason>` of older versions, without the pid).
fn sequence(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?.split('-').nth(1)?.parse().ok()
}

/// The dumps in `dir`, by sequence (then by name): oldest first. Links and
/// files named like dumps are not dumps.
fn dumps(dir: &OwnedDir) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = dir
        .names()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| Some((sequence(&name)?, name)))
        .filter(|(_, name)| dir.is_own_dir(name))
        .collect();
    out.sort();
    out
}

/// Whether the dump `name` is of `kind` (its name ends with it).
fn of_kind(name: &str, kind: DumpKind) -> bool {
    name.strip_suffix(kind.word())
        .is_some_and(|rest| rest.ends_with('-'))
}

/// Removes the oldest dumps of `kind` beyond `keep`. Each kind has its own
/// rotation: dumps asked for over HTTP never push out a trigger's or a
/// SIGHUP's.
fn prune(dir: &OwnedDir, keep: usize, kind: DumpKind) -> Result<()> {
    let own: Vec<String> = dumps(dir)
        .into_iter()
        .filter(|(_, name)| of_kind(name, kind))
        .map(|(_, name)| name)
        .collect();
    let excess = own.len().saturating_sub(keep);
    for name in own.into_iter().take(excess) {
        dir.remove_dir_of_files(&name)
            .with_context(|| format!("removing {}", dir.path().join(&name).display()))?;
    }
    Ok(())
}

/// Removes the temporary directories of recorders no longer running (its
/// pid is in the name); returns how many.
fn remove_orphans(dir: &OwnedDir) -> usize {
    let owner = |name: &str| -> Option<u32> {
        let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
        inner.strip_prefix(PREFIX)?.split('-').nth(2)?.parse().ok()
    };
    dir.names()
        .unwrap_or_default()
        .iter()
        .filter(|name| {
            owner(name).is_some_and(|pid| {
                pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
            })
        })
        .filter(|name| dir.is_own_dir(name) && dir.remove_dir_of_files(name).is_ok())
        .count()
}

/// 20261130T141500.123Z: sorts by time, safe in a file name.
fn utc_stamp(unix_ns: u64) -> String {
    let secs = (unix_ns / 1_000_000_000) as libc::time_t;
    let ms = (unix_ns / 1_000_000) % 1000;
    // SAFETY: gmtime_r with valid pointers.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::gmtime_r(&secs, &mut tm).is_null() {
            return format!("{secs}");
        }
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}.{ms:03}Z",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::dump::tests::sample_window;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("schedlat-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Issue 29 item 3: dumps sorted by their wall-clock names, so after
    /// a step back `--keep` removed the newest and kept future-dated ones.
    /// They are ordered by their sequence now.
    #[test]
    fn the_oldest_by_sequence_go_whatever_their_clock() {
        let path = scratch("keep");
        let dir = OwnedDir::open(&path).unwrap();
        // Stamped 2026, then the clock stepped back to 2025.
        for (n, stamp) in [
            (1, "20260101T000000.000Z"),
            (2, "20260101T000001.000Z"),
            (3, "20250101T000000.000Z"),
            (4, "20250101T000001.000Z"),
        ] {
            write_dump(
                &dir,
                &format!("{PREFIX}{stamp}-{n}-7-sighup"),
                &sample_window(),
            )
            .unwrap();
        }
        // Another kind's dump, older than all: not in sighup's rotation.
        let http = format!("{PREFIX}20240101T000000.000Z-0-7-http");
        write_dump(&dir, &http, &sample_window()).unwrap();
        prune(&dir, 2, DumpKind::Sighup).unwrap();
        assert_eq!(
            names(&path),
            [
                format!("{PREFIX}20240101T000000.000Z-0-7-http"),
                format!("{PREFIX}20250101T000000.000Z-3-7-sighup"),
                format!("{PREFIX}20250101T000001.000Z-4-7-sighup")
            ]
        );
        assert_eq!(
            std::fs::read_dir(path.join(&names(&path)[2]))
                .unwrap()
                .count(),
            3
        );
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// Issue 29 item 4: two recorders sharing a directory picked the same
    /// name in the same millisecond, and the loser's cleanup removed the
    /// winner's temporary directory. Names carry the pid and the
    /// directory's next sequence; a name taken is never removed by another.
    #[test]
    fn names_are_unique_and_nothing_of_another_is_removed() {
        let path = scratch("unique");
        let w = Writer::start(path.clone(), 10).unwrap();
        let job = || Job {
            window: sample_window(),
            kind: DumpKind::Sighup,
        };
        let (a, b) = (w.name(&job()).unwrap(), w.name(&job()).unwrap());
        assert_ne!(a, b);
        assert!(
            a.contains(&format!("-1-{}-sighup", std::process::id())),
            "{a}"
        );
        // Another recorder's dump, sequence 41, is seen: the next is 42.
        let dir = OwnedDir::open(&path).unwrap();
        write_dump(
            &dir,
            &format!("{PREFIX}20260101T000000.000Z-41-99-sighup"),
            &sample_window(),
        )
        .unwrap();
        assert!(
            w.name(&job()).unwrap().contains("-42-"),
            "{}",
            w.name(&job()).unwrap()
        );
        // Its temporary directory under a name we also wanted: our dump
        // fails and leaves it as it was.
        let theirs = format!("{PREFIX}20260101T000000.000Z-50-99-sighup");
        let tmp = path.join(format!(".{theirs}.tmp"));
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("dump.jsonl"), "theirs\n").unwrap();
        assert!(write_dump(&dir, &theirs, &sample_window()).is_err());
        assert_eq!(
            std::fs::read_to_string(tmp.join("dump.jsonl")).unwrap(),
            "theirs\n"
        );
        w.finish();
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// Issue 29 item 11: a kill during a dump left hidden temporary
    /// directories never pruned nor counted. Those of recorders no longer
    /// running are removed at start; a live one's are not.
    #[test]
    fn temporary_dumps_of_dead_recorders_are_removed_at_start() {
        let path = scratch("orphans");
        // A pid that is not running: past pid_max.
        let dead = format!(".{PREFIX}20260101T000000.000Z-3-4194999-sighup.tmp");
        let live = format!(".{PREFIX}20260101T000000.000Z-4-1-sighup.tmp");
        for name in [&dead, &live] {
            std::fs::create_dir(path.join(name)).unwrap();
            std::fs::write(path.join(name).join("dump.jsonl"), "{}\n").unwrap();
        }
        let w = Writer::start(path.clone(), 10).unwrap();
        w.finish();
        assert_eq!(names(&path), [live]);
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// Issue 29 item 11: an unwritable --dump-dir was accepted at start and
    /// failed only at the incident.
    #[test]
    fn an_unwritable_directory_is_refused_at_start() {
        let e = Writer::start(PathBuf::from("/proc/self"), 10)
            .err()
            .unwrap();
        let e = format!("{e:#}");
        assert!(e.contains("/proc/self"), "{e}");
    }

    #[test]
    fn stamps_sort_by_time() {
        assert_eq!(utc_stamp(1_700_000_000_123_000_000), "20231114T221320.123Z");
    }
}
