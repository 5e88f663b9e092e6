//! Writing dumps, on a thread of its own so that a slow or failing disk
//! never holds up collection. A dump is a directory, `schedlat-<UTC
//! time>-<n>-<reason>`, holding `dump.jsonl`, `waits.hlog` and
//! `slow.perfetto-trace`; it is written under a hidden temporary name, each
//! file and the directory fsynced, then renamed: a dump is under its final
//! name whole or not at all. Only the newest `keep` dumps of each kind
//! (http, sighup, trigger) are kept.

use std::{
    fs::{self, File},
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
};

pub const PREFIX: &str = "schedlat-";

/// A dump to write.
pub struct Job {
    pub window: Window,
    /// A short word for the file name: sighup, http, trigger.
    pub kind: &'static str,
}

pub struct Writer {
    jobs: Option<SyncSender<(String, Job)>>,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
    /// Dumps named so far (the `<n>` of the names).
    named: AtomicU64,
    /// Dumps handed over and not yet written (or failed).
    pending: Arc<AtomicUsize>,
}

/// Why a dump asked for over HTTP was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Another dump is being written.
    Busy,
    /// The writer thread is gone.
    Stopped,
}

impl Writer {
    pub fn start(dir: PathBuf, keep: usize) -> Result<Writer> {
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

    /// The directory the dump will have once written.
    fn name(&self, job: &Job) -> String {
        let n = self.named.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "{PREFIX}{}-{n}-{}",
            utc_stamp(job.window.meta.dumped_unix_ns),
            job.kind
        )
    }

    /// Hands a dump to the writer unless one is being written (a request
    /// over HTTP, which is answered at once); never waits. The path is
    /// where the dump will be once whole.
    pub fn request_now(&self, job: Job) -> Result<PathBuf, Refused> {
        let jobs = self.jobs.as_ref().ok_or(Refused::Stopped)?;
        if self.pending.load(Ordering::Acquire) > 0 {
            return Err(Refused::Busy);
        }
        let name = self.name(&job);
        let path = self.dir.join(&name);
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
    pub fn request(&self, job: Job) {
        let Some(jobs) = &self.jobs else { return };
        let name = self.name(&job);
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
    pub fn finish(mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(rx: Receiver<(String, Job)>, dir: &Path, keep: usize, pending: &AtomicUsize) {
    while let Ok((name, job)) = rx.recv() {
        let written = write_dump(dir, &name, &job.window);
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
                    say!("schedlat: removing old dumps in {}: {e:#}", dir.display());
                }
            }
            Err(e) => say!(
                "schedlat: error: dump ({}) failed, nothing written under {}: {e:#}; collection continues",
                job.window.meta.reason,
                dir.join(&name).display()
            ),
        }
    }
}

/// Writes the dump under a temporary name, then renames it into place.
pub fn write_dump(dir: &Path, name: &str, window: &Window) -> Result<PathBuf> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let done = dir.join(name);
    let result = (|| -> Result<()> {
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        write_file(&tmp.join("dump.jsonl"), |f| Ok(dump::write(f, window)?))?;
        write_file(&tmp.join("waits.hlog"), |f| hlog::write_window(f, window))?;
        write_file(&tmp.join("slow.perfetto-trace"), |f| {
            Ok(perfetto::write(f, window)?)
        })?;
        sync_dir(&tmp)?;
        fs::rename(&tmp, &done)
            .with_context(|| format!("renaming {} to {}", tmp.display(), done.display()))?;
        sync_dir(dir)
    })();
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    Ok(done)
}

/// Creates `path`, writes it through a buffer, and fsyncs it.
fn write_file(path: &Path, fill: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::with_capacity(64 << 10, f);
    let written = fill(&mut out).and_then(|()| {
        let f = out.into_inner().map_err(|e| e.into_error())?;
        Ok(f.sync_all()?)
    });
    written.with_context(|| format!("writing {}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// Removes the oldest dumps of `kind` beyond `keep` (names sort by time
/// and end with their kind). Each kind has its own rotation: dumps asked
/// for over HTTP never push out a trigger's or a SIGHUP's.
fn prune(dir: &Path, keep: usize, kind: &str) -> Result<()> {
    let suffix = format!("-{kind}");
    let mut dumps: Vec<(String, PathBuf)> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            (name.starts_with(PREFIX) && name.ends_with(&suffix)).then(|| (name, e.path()))
        })
        .collect();
    dumps.sort();
    let excess = dumps.len().saturating_sub(keep);
    for (_, path) in dumps.into_iter().take(excess) {
        fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
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
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_whole_dumps_and_keeps_the_newest() {
        let dir = scratch("keep");
        for i in 0..4 {
            write_dump(&dir, &format!("{PREFIX}2026010{i}-x"), &sample_window()).unwrap();
        }
        // Another kind's dump, older than all: not in x's rotation.
        write_dump(&dir, &format!("{PREFIX}20251231-y"), &sample_window()).unwrap();
        prune(&dir, 2, "x").unwrap();
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                format!("{PREFIX}20251231-y"),
                format!("{PREFIX}20260102-x"),
                format!("{PREFIX}20260103-x")
            ]
        );
        let files = fs::read_dir(dir.join(&names[2])).unwrap().count();
        assert_eq!(files, 3);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_dump_leaves_nothing() {
        let dir = scratch("fail");
        let missing = dir.join("no-such-dir");
        let e = write_dump(&missing, "d", &sample_window()).unwrap_err();
        assert!(format!("{e:#}").contains("creating"), "{e:#}");
        assert!(!missing.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stamps_sort_by_time() {
        assert_eq!(utc_stamp(1_700_000_000_123_000_000), "20231114T221320.123Z");
    }
}
