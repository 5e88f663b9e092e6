//! Recordings that `compare` can trust: each interval object says what was
//! measured (the scope), `record -o FILE` never destroys a file it was not
//! told to replace, nor an earlier recording when the run fails, and a
//! recording read back (`Recording`) is refused when damaged or of another
//! schema.

use std::{
    fs::{self, File, OpenOptions},
    io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::kernel::filter::{Filter, comm_str, cpu_list_str};

pub mod read;

/// What a recording measured, beyond the hook and unit every object carries:
/// two recordings compare only when these agree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The filters on the task that waited; null where not set.
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub cgroup: Option<String>,
    pub comm: Option<String>,
    pub cpus: Option<String>,
    /// The breakdown (`pids`, `tids`, `pidnss`, `cgroups`, `cpus`), if any.
    pub breakdown: Option<String>,
    /// `uname -r` and `uname -n` of the machine measured.
    pub kernel: String,
    pub host: String,
}

impl Scope {
    pub fn of(filter: &Filter, breakdown: Option<&str>) -> Scope {
        let (kernel, host) = uname();
        Scope {
            pid: filter.tgid,
            tid: filter.tid,
            cgroup: filter.cgroup.as_ref().map(|c| c.dir.display().to_string()),
            comm: filter.comm.as_ref().map(comm_str),
            cpus: filter.cpus.as_deref().map(cpu_list_str),
            breakdown: breakdown.map(String::from),
            kernel,
            host,
        }
    }

    /// The filters in words, for messages: "-p 1234 --cpu 0-1", or "the
    /// whole system".
    pub fn filters(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.pid {
            parts.push(format!("-p {p}"));
        }
        if let Some(t) = self.tid {
            parts.push(format!("-t {t}"));
        }
        if let Some(c) = &self.cgroup {
            parts.push(format!("-c {c}"));
        }
        if let Some(c) = &self.comm {
            parts.push(format!("--comm {c}"));
        }
        if let Some(c) = &self.cpus {
            parts.push(format!("--cpu {c}"));
        }
        if parts.is_empty() {
            "the whole system".into()
        } else {
            parts.join(" ")
        }
    }

    /// How `after` differs from `self` (before), one line per aspect that
    /// changes what the numbers mean. Empty when they agree.
    pub fn differences(&self, after: &Scope) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |what: &str, b: String, a: String| {
            if b != a {
                out.push(format!("{what}: {b} before, {a} after"));
            }
        };
        differ("filters", self.filters(), after.filters());
        let none = || "none".to_string();
        differ(
            "breakdown",
            self.breakdown.clone().unwrap_or_else(none),
            after.breakdown.clone().unwrap_or_else(none),
        );
        differ("host", self.host.clone(), after.host.clone());
        differ("kernel", self.kernel.clone(), after.kernel.clone());
        out
    }
}

/// The running kernel's release and the host name, from uname(2).
fn uname() -> (String, String) {
    // SAFETY: uname fills a zeroed utsname; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return (String::new(), String::new());
        }
        let text = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        (text(&u.release), text(&u.nodename))
    }
}

/// A recording being written: a temporary file next to the destination,
/// renamed over it only by [`Pending::commit`]. Dropped uncommitted (the run
/// failed), it is removed and the destination is left as it was.
pub struct Pending {
    pub file: File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl Pending {
    /// Refuses an existing `dest` unless `force`: a recording is usually a
    /// baseline that cannot be made again.
    pub fn create(dest: &Path, force: bool) -> Result<Pending, String> {
        if !force && fs::symlink_metadata(dest).is_ok() {
            return Err(format!(
                "{} exists: choose another name, or pass --force to replace it (it is replaced only when the new recording is complete)",
                dest.display()
            ));
        }
        if dest.is_dir() {
            return Err(format!("{} is a directory", dest.display()));
        }
        let name = dest
            .file_name()
            .ok_or_else(|| format!("{} names no file", dest.display()))?;
        let tmp = dest.with_file_name(format!(
            ".{}.schedlat-{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        Ok(Pending {
            file,
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    /// Flushes the recording to disk and puts it in place.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("schedlat-rec-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_existing_recording_is_kept_unless_forced_and_complete() {
        let dir = scratch("keep");
        let dest = dir.join("before.jsonl");
        fs::write(&dest, "baseline\n").unwrap();
        let e = Pending::create(&dest, false).err().unwrap();
        assert!(e.contains("exists") && e.contains("--force"), "{e}");
        // Forced, but the run fails (dropped uncommitted): the baseline stays.
        let mut p = Pending::create(&dest, true).unwrap();
        p.file.write_all(b"half").unwrap();
        drop(p);
        assert_eq!(fs::read_to_string(&dest).unwrap(), "baseline\n");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temp file left");
        // Forced and complete: replaced.
        let mut p = Pending::create(&dest, true).unwrap();
        p.file.write_all(b"new\n").unwrap();
        p.commit().unwrap();
        assert_eq!(fs::read_to_string(&dest).unwrap(), "new\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scopes_name_their_differences() {
        let whole = Scope {
            kernel: "6.18".into(),
            host: "a".into(),
            ..Scope::default()
        };
        assert!(whole.differences(&whole).is_empty());
        let process = Scope {
            pid: Some(42),
            cpus: Some("0-1".into()),
            kernel: "6.12".into(),
            ..whole.clone()
        };
        let d = whole.differences(&process);
        assert_eq!(
            d,
            [
                "filters: the whole system before, -p 42 --cpu 0-1 after",
                "kernel: 6.18 before, 6.12 after"
            ]
        );
        let (kernel, host) = uname();
        assert!(!kernel.is_empty() && !host.is_empty());
    }
}
