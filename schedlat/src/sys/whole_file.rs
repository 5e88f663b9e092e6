//! A small file read whole, and only once it stands still: the web
//! configuration and the PEM files it names, which are read again while
//! serve runs, often just as something rewrites them in place (`cp`,
//! `cat >`, configuration tools truncate the file, then write it). A read
//! that falls between the truncation and the write, or in the middle of the
//! write, would take an empty or half file for the whole.
//!
//! So the file is opened as the other readers open theirs
//! ([`super::files::open_regular`]: a regular file checked on the
//! descriptor, never a FIFO or a device, under a cap), and its identity,
//! size and times are compared before and after the read and with the name
//! again; a file modified within [`SETTLE`] is waited for. It is read again
//! until all agree, for [`STEADY_WITHIN`] at most.
//!
//! A writer stalled between its truncation and its write for longer than
//! the settle time (a loaded machine, a stopped process) still leaves an
//! empty or partial file that stands still: its readers must not trust a
//! file for more than its content (serve never lets a reload drop TLS or
//! authentication, web/mod.rs).

use std::{
    io::Read,
    os::unix::fs::MetadataExt,
    path::Path,
    time::{Duration, SystemTime},
};

use super::files::open_regular;

/// What tells that a file changed: its device and inode (a file renamed
/// into place, a Kubernetes Secret's link swapped), size, and modification
/// and change times.
pub type Stamp = (u64, u64, u64, i64, i64, i64, i64);

/// The stamp of `meta`.
pub fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The stamp of the file `path` names now (links followed, as the read
/// follows them); None if it cannot be looked at.
pub fn stamp_of(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().map(|m| stamp(&m))
}

/// How long a file must have been left alone before it is taken: a writer
/// that truncated it is still writing. Configuration tools write a few
/// kilobytes in well under a millisecond.
pub const SETTLE: Duration = Duration::from_millis(100);

/// How long a file may keep changing before the read gives up.
pub const STEADY_WITHIN: Duration = Duration::from_secs(2);

/// The whole content of the regular file `path` (at most `max_bytes`),
/// read while it did not change, with its stamp. The error says what is
/// wrong: not a regular file, over the cap, or never still.
pub fn read_steady(path: &Path, max_bytes: u64) -> std::io::Result<(Vec<u8>, Stamp)> {
    let deadline = std::time::Instant::now() + STEADY_WITHIN;
    loop {
        if let Some(steady) = read_once(path, max_bytes)? {
            return Ok(steady);
        }
        if std::time::Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                format!(
                    "it kept changing while read, for {} s: write the new file beside it and rename it into place",
                    STEADY_WITHIN.as_secs()
                ),
            ));
        }
        std::thread::sleep(SETTLE / 4);
    }
}

/// One attempt: Some when the file stood still across it.
fn read_once(path: &Path, max_bytes: u64) -> std::io::Result<Option<(Vec<u8>, Stamp)>> {
    let file = open_regular(path, max_bytes)?;
    let before = file.metadata()?;
    let mut bytes = Vec::with_capacity(before.len().min(max_bytes) as usize);
    // One byte past the cap tells a file that grew past it while read.
    (&file).take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it grew past the {max_bytes} bytes read at most"),
        ));
    }
    let after = file.metadata()?;
    let stamp_before = stamp(&before);
    let still = stamp_before == stamp(&after)
        && bytes.len() as u64 == after.len()
        && stamp_of(path) == Some(stamp_before)
        && settled(&after);
    Ok(still.then_some((bytes, stamp_before)))
}

/// Whether the file was last modified (or had its metadata changed) at
/// least [`SETTLE`] ago; a time in the future (a clock set back) counts as
/// settled, or the file would never be read.
fn settled(meta: &std::fs::Metadata) -> bool {
    let now = SystemTime::now();
    [meta.modified().ok(), Some(changed(meta))]
        .into_iter()
        .flatten()
        .all(|t| now.duration_since(t).map_or(true, |age| age >= SETTLE))
}

/// The change time (ctime) as a SystemTime.
fn changed(meta: &std::fs::Metadata) -> SystemTime {
    let (secs, nanos) = (meta.ctime(), meta.ctime_nsec());
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(secs as u64, nanos.clamp(0, 999_999_999) as u32)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("schedlat-steady-{name}-{}", std::process::id()))
    }

    #[test]
    fn a_still_file_is_read_whole_once_settled() {
        let file = path("still");
        fs::write(&file, b"basic_auth_users: {}\n").unwrap();
        let started = std::time::Instant::now();
        let (bytes, stamp) = read_steady(&file, 1 << 20).unwrap();
        // Just written: it waited for the settle time, no longer.
        let took = started.elapsed();
        assert_eq!(bytes, b"basic_auth_users: {}\n");
        assert_eq!(Some(stamp), stamp_of(&file));
        // Rewritten in place just before the read (truncated, written):
        // the new version, whole, once it settled.
        fs::write(&file, b"basic_auth_users:\n  a: b\n").unwrap();
        let (bytes, _) = read_steady(&file, 1 << 20).unwrap();
        assert_eq!(bytes, b"basic_auth_users:\n  a: b\n");
        assert!(took >= SETTLE / 2 && took < STEADY_WITHIN, "{took:?}");
        fs::remove_file(&file).unwrap();
    }

    #[test]
    fn fifos_devices_and_large_files_are_refused() {
        let e = read_steady(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        let file = path("large");
        fs::write(&file, vec![b'#'; 100]).unwrap();
        let e = read_steady(&file, 99).unwrap_err();
        assert!(e.to_string().contains("100 bytes, more than the 99"), "{e}");
        fs::remove_file(&file).unwrap();
    }
}
