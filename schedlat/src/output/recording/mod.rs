//! Recordings that `compare` can trust: each interval object says what was
//! measured (the scope), `record -o FILE` never destroys a file it was not
//! told to replace, nor an earlier recording when the run fails, nor a
//! device node or a link (it writes through FIFOs and character devices),
//! and a recording read back
//! ([`Recording`](crate::output::recording::read::Recording)) is refused
//! when damaged or of another schema.

use std::{
    fs::{self, File, OpenOptions},
    io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::kernel::filter::{Filter, comm_str, cpu_list_str};

pub(crate) mod read;

/// What a recording measured, beyond the hook and unit every object carries:
/// two recordings compare only when these agree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecordedScope {
    /// The filters on the task that waited; null where not set.
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub cgroup: Option<String>,
    /// `cgroup` as its owner knows it, when it is a container, a pod or a
    /// unit (`container shop/web-1/nginx`): two recordings of one workload
    /// compare even where its cgroup's path changed (a restarted
    /// container has a new ID). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    pub comm: Option<String>,
    pub cpus: Option<String>,
    /// The breakdown (`pids`, `tids`, `pidnss`, `cgroups`, `cpus`), if any.
    pub breakdown: Option<String>,
    /// `uname -r` and `uname -n` of the machine measured.
    pub kernel: String,
    pub host: String,
}

impl RecordedScope {
    /// `workload`: `-c`'s cgroup as its owner knows it, if it is one.
    pub(crate) fn of(
        filter: &Filter,
        breakdown: Option<&str>,
        workload: Option<String>,
    ) -> RecordedScope {
        let (kernel, host) = uname();
        RecordedScope {
            pid: filter.tgid,
            tid: filter.tid,
            cgroup: filter.cgroup.as_ref().map(|c| c.dir.display().to_string()),
            workload,
            comm: filter.comm.as_ref().map(comm_str),
            cpus: filter.cpus.as_deref().map(cpu_list_str),
            breakdown: breakdown.map(String::from),
            kernel,
            host,
        }
    }

    /// The filters in words, for messages: "-p 1234 --cpu 0-1", "-c
    /// container shop/web-1/nginx" (a cgroup its owner names: the workload,
    /// whatever its path), or "the whole system".
    pub(crate) fn filters(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.pid {
            parts.push(format!("-p {p}"));
        }
        if let Some(t) = self.tid {
            parts.push(format!("-t {t}"));
        }
        match (&self.workload, &self.cgroup) {
            (Some(w), _) => parts.push(format!("-c {w}")),
            (None, Some(c)) => parts.push(format!("-c {c}")),
            (None, None) => {}
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
    pub(crate) fn differences(&self, after: &RecordedScope) -> Vec<String> {
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

/// A recording being written. To a regular file (or a new name): a
/// temporary file next to the destination, renamed over it only by
/// [`Pending::commit`]; dropped uncommitted (the run failed), it is removed
/// and the destination is left as it was. To a FIFO or a character device
/// (`-o /dev/stdout`, a pipe to another program): written through, the node
/// itself left in place.
pub(crate) struct Pending {
    pub file: File,
    /// The temporary file and the destination it replaces; None when
    /// written through.
    replace: Option<(PathBuf, PathBuf)>,
    committed: bool,
}

/// What a destination that exists is, for `record -o`.
enum Existing {
    /// Replaced (with --force) by renaming a new file over it.
    Regular,
    /// Written through: a FIFO or a character device, or a link to one.
    Stream,
    /// Refused, with why.
    Refused(String),
}

fn existing(dest: &Path) -> Option<Existing> {
    use std::os::unix::fs::FileTypeExt;
    let link = fs::symlink_metadata(dest).ok()?;
    let target = fs::metadata(dest).map(|m| m.file_type());
    let stream = |t: &fs::FileType| t.is_fifo() || t.is_char_device();
    Some(match (link.file_type(), target) {
        (kind, _) if kind.is_file() => Existing::Regular,
        (kind, _) if stream(&kind) => Existing::Stream,
        (kind, Ok(target)) if kind.is_symlink() && stream(&target) => Existing::Stream,
        // Renaming over a link replaces the link, not what it names: the
        // file the user meant stays as it was and the link is gone.
        (kind, Ok(target)) if kind.is_symlink() && target.is_file() => Existing::Refused(format!(
            "{} is a symbolic link{}: name the file itself to replace it",
            dest.display(),
            fs::read_link(dest)
                .map(|t| format!(" to {}", t.display()))
                .unwrap_or_default()
        )),
        (kind, _) if kind.is_symlink() => Existing::Refused(format!(
            "{} is a symbolic link to something that is not a file, FIFO or character device",
            dest.display()
        )),
        (kind, _) if kind.is_dir() => {
            Existing::Refused(format!("{} is a directory", dest.display()))
        }
        (kind, _) if kind.is_block_device() => Existing::Refused(format!(
            "{} is a block device: a recording is not written onto a disk",
            dest.display()
        )),
        _ => Existing::Refused(format!(
            "{} is a socket or another special file: give a file name, a FIFO or a character device",
            dest.display()
        )),
    })
}

impl Pending {
    /// Refuses an existing regular `dest` unless `force`: a recording is
    /// usually a baseline that cannot be made again. A FIFO or character
    /// device is written through (opening a FIFO waits for its reader);
    /// anything else that exists is refused, `force` or not.
    pub(crate) fn create(dest: &Path, force: bool) -> Result<Pending, String> {
        match existing(dest) {
            Some(Existing::Refused(why)) => return Err(why),
            Some(Existing::Stream) => return Pending::stream(dest),
            Some(Existing::Regular) if !force => {
                return Err(format!(
                    "{} exists: choose another name, or pass --force to replace it (it is replaced only when the new recording is complete)",
                    dest.display()
                ));
            }
            Some(Existing::Regular) | None => {}
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
            replace: Some((tmp, dest.to_path_buf())),
            committed: false,
        })
    }

    /// Opens a FIFO or character device for writing, checking on the open
    /// descriptor that it still is one (the name may have been swapped for
    /// a regular file since it was looked at: opened without O_TRUNC and
    /// closed unwritten, such a file is left as it was).
    fn stream(dest: &Path) -> Result<Pending, String> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(dest)
            .map_err(|e| format!("cannot open {} for writing: {e}", dest.display()))?;
        let kind = file
            .metadata()
            .map_err(|e| format!("{}: {e}", dest.display()))?
            .file_type();
        if !(kind.is_fifo() || kind.is_char_device()) {
            return Err(format!(
                "{} changed while it was opened: run again",
                dest.display()
            ));
        }
        Ok(Pending {
            file,
            replace: None,
            committed: false,
        })
    }

    /// Flushes the recording to disk and puts it in place (written through:
    /// nothing to do, the data went out as it was written).
    pub(crate) fn commit(mut self) -> io::Result<()> {
        if let Some((tmp, dest)) = &self.replace {
            self.file.sync_all()?;
            fs::rename(tmp, dest)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let (false, Some((tmp, _))) = (self.committed, &self.replace) {
            let _ = fs::remove_file(tmp);
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

    /// Issue 29 item 8: `--force` replaced device nodes and links with
    /// regular files (`-o /dev/stdout --force` would break /dev/stdout for
    /// everyone). Links to files are refused; FIFOs and character devices
    /// are written through and stay what they are.
    #[test]
    fn links_are_refused_and_streams_written_through() {
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("special");
        let file = dir.join("baseline.jsonl");
        fs::write(&file, "baseline\n").unwrap();
        let link = dir.join("latest.jsonl");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = Pending::create(&link, true).err().unwrap();
        assert!(
            e.contains("is a symbolic link to") && e.contains("name the file itself"),
            "{e}"
        );
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let e = Pending::create(&dir, true).err().unwrap();
        assert!(e.contains("is a directory"), "{e}");

        // A character device: /dev/null, directly and through a link.
        for dest in [Path::new("/dev/null").to_path_buf(), {
            let l = dir.join("null");
            std::os::unix::fs::symlink("/dev/null", &l).unwrap();
            l
        }] {
            let mut p = Pending::create(&dest, false).unwrap();
            p.file.write_all(b"{}\n").unwrap();
            p.commit().unwrap();
            assert!(fs::metadata(&dest).unwrap().file_type().is_char_device());
        }

        // A FIFO: what is written arrives at its reader, and it stays a FIFO.
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
        };
        let mut p = Pending::create(&fifo, true).unwrap();
        p.file.write_all(b"{\"recording\":1}\n").unwrap();
        p.commit().unwrap();
        assert_eq!(reader.join().unwrap(), "{\"recording\":1}\n");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(fs::read_to_string(&file).unwrap(), "baseline\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scopes_name_their_differences() {
        let whole = RecordedScope {
            kernel: "6.18".into(),
            host: "a".into(),
            ..RecordedScope::default()
        };
        assert!(whole.differences(&whole).is_empty());
        let process = RecordedScope {
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

    #[test]
    fn one_workload_compares_across_a_new_cgroup_and_two_do_not() {
        let at = |path: &str, workload: Option<&str>| RecordedScope {
            cgroup: Some(path.into()),
            workload: workload.map(String::from),
            ..RecordedScope::default()
        };
        let web = "container shop/web-1/nginx";
        // Restarted: a new container ID, the same container.
        let before = at("/kubepods.slice/pod_a/cri-containerd-aaaa.scope", Some(web));
        let after = at("/kubepods.slice/pod_a/cri-containerd-bbbb.scope", Some(web));
        assert!(before.differences(&after).is_empty());
        let other = at(
            "/kubepods.slice/pod_b/cri-containerd-cccc.scope",
            Some("container shop/db-0/pg"),
        );
        assert_eq!(
            before.differences(&other),
            ["filters: -c container shop/web-1/nginx before, -c container shop/db-0/pg after"]
        );
        // Plain cgroups compare by their paths, as before.
        assert_eq!(
            at("/a", None).differences(&at("/b", None)),
            ["filters: -c /a before, -c /b after"]
        );
    }
}
