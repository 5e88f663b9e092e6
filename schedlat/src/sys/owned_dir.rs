//! Writing into a directory as root without trusting its path: the
//! flight recorder's dump directory (`--dump-dir`, default `.`). Whoever
//! can create or rename entries in a directory can swap a file root is
//! about to write for a link to any file, and root then overwrites that
//! file. So a directory is used only when the effective user owns it and
//! nobody else can write it. A shared one under the sticky bit (as /tmp)
//! stops others renaming our entries but not taking a name first or
//! planting entries: there a private subdirectory of ours (0700,
//! `schedlat-dumps-uid<euid>`) is used instead. Everything in it is done
//! through descriptors: a new private directory
//! (mkdirat 0700) opened with O_DIRECTORY|O_NOFOLLOW, each file created in
//! it with O_CREAT|O_EXCL|O_NOFOLLOW, the directory renamed into place
//! with renameat (never over an existing name), and only entries this
//! process created or can see are its own removed.

use std::{
    fs::File,
    io,
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};

/// Why a directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    #[error(
        "{} is owned by uid {owner}, not by uid {euid} that schedlat runs as: its owner could replace what schedlat writes there with links to other files. Use a directory of uid {euid} (e.g. --dump-dir /var/lib/schedlat, created if missing)",
        path.display()
    )]
    NotOwned {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error(
        "{} can be written by {who} (mode {mode:04o}) without the sticky bit: they could replace what schedlat writes there with links to other files. Run `chmod go-w {}` (or `chmod +t`), or use another directory",
        path.display(),
        path.display()
    )]
    Writable {
        path: PathBuf,
        who: &'static str,
        mode: u32,
    },
    #[error(
        "{} was made by someone else: {why}. schedlat keeps its dumps in that private directory of its own when the dump directory is shared (sticky, as /tmp); remove it, or use a directory of schedlat's user (e.g. --dump-dir /var/lib/schedlat)",
        path.display()
    )]
    Squatted { path: PathBuf, why: String },
}

/// The name of the private subdirectory used in a shared sticky
/// directory, followed by the effective uid.
pub const PRIVATE_PREFIX: &str = "schedlat-dumps-uid";

/// A directory checked to be safe to write into, held by its descriptor:
/// what its path names later does not matter.
pub struct OwnedDir {
    fd: OwnedFd,
    path: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(rustix::io::Errno) -> DirError + '_ {
    move |e| DirError::Io {
        path: path.to_path_buf(),
        error: e.into(),
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl OwnedDir {
    /// Opens `path`, creating it (mode 0700, parents too) if missing, and
    /// checks who may change it.
    pub fn open(path: &Path) -> Result<OwnedDir, DirError> {
        if !path.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|error| DirError::Io {
                    path: path.to_path_buf(),
                    error,
                })?;
        }
        // The directory itself may be reached through a link (a
        // /var/lib/schedlat moved to another disk): what is checked is
        // what was opened.
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_err(path))?;
        let st = rustix::fs::fstat(&fd).map_err(io_err(path))?;
        let euid = rustix::process::geteuid().as_raw();
        if st.st_uid != euid {
            return Err(DirError::NotOwned {
                path: path.to_path_buf(),
                owner: st.st_uid,
                euid,
            });
        }
        let mode = st.st_mode & 0o7777;
        let sticky = mode & 0o1000 != 0;
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (_, true) => Some("every user"),
            (true, false) => Some("its group"),
            (false, false) => None,
        };
        match (who, sticky) {
            (None, _) => Ok(OwnedDir {
                fd,
                path: path.to_path_buf(),
            }),
            (Some(who), false) => Err(DirError::Writable {
                path: path.to_path_buf(),
                who,
                mode,
            }),
            // Shared under the sticky bit (as /tmp): others cannot rename
            // our entries, but they can take a name before we do (a dump's
            // final name, announced by its temporary one) or plant
            // entries we would read as dumps. Everything goes into a
            // private subdirectory of ours instead.
            (Some(_), true) => OwnedDir::private_in(&fd, path, euid),
        }
    }

    /// The private subdirectory (0700, ours) of the shared sticky
    /// directory `shared`, made if missing: `schedlat-dumps-uid<euid>`.
    /// One that exists and is not a directory of ours that only we can
    /// change was made by someone else, and is refused.
    fn private_in(shared: &OwnedFd, path: &Path, euid: u32) -> Result<OwnedDir, DirError> {
        let name = format!("{PRIVATE_PREFIX}{euid}");
        let sub = path.join(&name);
        match rustix::fs::mkdirat(shared, name.as_str(), Mode::RWXU) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io_err(&sub)(e)),
        }
        // O_NOFOLLOW: a link planted under the name is refused (ELOOP or
        // ENOTDIR), never followed.
        let fd =
            rustix::fs::openat(shared, name.as_str(), DIR_FLAGS, Mode::empty()).map_err(|e| {
                DirError::Squatted {
                    path: sub.clone(),
                    why: format!("it cannot be opened as a directory ({e})"),
                }
            })?;
        let st = rustix::fs::fstat(&fd).map_err(io_err(&sub))?;
        if st.st_uid != euid {
            return Err(DirError::Squatted {
                path: sub,
                why: format!("it is owned by uid {}", st.st_uid),
            });
        }
        if st.st_mode & 0o022 != 0 {
            return Err(DirError::Squatted {
                path: sub,
                why: format!("others can write it (mode {:04o})", st.st_mode & 0o7777),
            });
        }
        Ok(OwnedDir { fd, path: sub })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new private directory `name` (mode 0700) in this one, opened
    /// without following links. An existing `name` is an error: it is
    /// never taken over, nor removed.
    pub fn create_private(&self, name: &str) -> io::Result<Private<'_>> {
        rustix::fs::mkdirat(&self.fd, name, Mode::RWXU)?;
        let opened = rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty());
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR);
                return Err(e.into());
            }
        };
        Ok(Private {
            parent: self,
            fd,
            name: name.to_string(),
            files: Vec::new(),
            committed: false,
        })
    }

    /// The names in this directory.
    pub fn names(&self) -> io::Result<Vec<String>> {
        let dir = rustix::fs::Dir::read_from(&self.fd)?;
        Ok(dir
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().ok().map(String::from))
            .filter(|n| n != "." && n != "..")
            .collect())
    }

    /// Whether `name` is a directory (not a link to one) of the effective
    /// user's: an entry someone else made is never taken for ours.
    pub fn is_own_dir(&self, name: &str) -> bool {
        let euid = rustix::process::geteuid().as_raw();
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() && st.st_uid == euid
        })
    }

    /// Removes the directory `name` and the regular files in it, never
    /// following a link: it is opened with O_NOFOLLOW and its entries are
    /// unlinked relative to it. Anything else inside (a subdirectory) is
    /// left, and the directory with it.
    pub fn remove_dir_of_files(&self, name: &str) -> io::Result<()> {
        let fd = rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())?;
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let file = entry.file_name();
            if file.to_bytes() == b"." || file.to_bytes() == b".." {
                continue;
            }
            let st = rustix::fs::statat(&fd, file, AtFlags::SYMLINK_NOFOLLOW)?;
            if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() {
                rustix::fs::unlinkat(&fd, file, AtFlags::empty())?;
            }
        }
        rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)?;
        Ok(())
    }

    /// The bytes the directory `name` and the files in it take on disk
    /// (their blocks), read without following links.
    pub fn dir_bytes(&self, name: &str) -> io::Result<u64> {
        let fd = rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())?;
        let mut bytes = blocks_bytes(&rustix::fs::fstat(&fd)?);
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let file = entry.file_name();
            if file.to_bytes() == b"." || file.to_bytes() == b".." {
                continue;
            }
            bytes += blocks_bytes(&rustix::fs::statat(&fd, file, AtFlags::SYMLINK_NOFOLLOW)?);
        }
        Ok(bytes)
    }

    /// What the file system holding this directory can still take, and
    /// its block size: the blocks free to this user (root may use the
    /// blocks ext4 reserves for it).
    pub fn room(&self) -> io::Result<Room> {
        let st = rustix::fs::fstatvfs(&self.fd)?;
        let blocks = if rustix::process::geteuid().is_root() {
            st.f_bfree
        } else {
            st.f_bavail
        };
        Ok(Room {
            free: blocks.saturating_mul(st.f_frsize),
            block: st.f_frsize.max(1),
        })
    }

    /// Flushes the directory's entries to disk.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }
}

/// Free space on a file system, in bytes, and its block size.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    pub free: u64,
    pub block: u64,
}

fn blocks_bytes(st: &rustix::fs::Stat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512)
}

/// A private directory being filled; removed when dropped uncommitted,
/// with only the files this value created in it.
pub struct Private<'a> {
    parent: &'a OwnedDir,
    fd: OwnedFd,
    name: String,
    files: Vec<String>,
    committed: bool,
}

impl Private<'_> {
    /// A new file `name` (mode 0600) for writing: never an existing one,
    /// never through a link.
    pub fn create(&mut self, name: &str) -> io::Result<File> {
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )?;
        self.files.push(name.to_string());
        Ok(File::from(fd))
    }

    /// Flushes the directory, renames it to `name` in its parent (never
    /// over an existing entry) and flushes the parent.
    pub fn commit(mut self, name: &str) -> io::Result<()> {
        rustix::fs::fsync(&self.fd)?;
        let parent = &self.parent.fd;
        match rustix::fs::renameat_with(parent, &*self.name, parent, name, RenameFlags::NOREPLACE) {
            Ok(()) => {}
            // A file system without RENAME_NOREPLACE: a rename that would
            // replace a directory only succeeds over an empty one, and the
            // check below keeps even that from happening unseen.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                if rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                    return Err(io::Error::from(io::ErrorKind::AlreadyExists));
                }
                rustix::fs::renameat(parent, &*self.name, parent, name)?;
            }
            Err(e) => return Err(e.into()),
        }
        self.committed = true;
        self.parent.sync()
    }
}

impl Drop for Private<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for file in &self.files {
            let _ = rustix::fs::unlinkat(&self.fd, file.as_str(), AtFlags::empty());
        }
        let _ = rustix::fs::unlinkat(
            self.parent.fd.as_fd(),
            self.name.as_str(),
            AtFlags::REMOVEDIR,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::{io::Write, os::unix::fs::PermissionsExt};

    use super::*;

    fn scratch(name: &str, mode: u32) -> PathBuf {
        let d = std::env::temp_dir().join(format!("schedlat-owned-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    #[test]
    fn only_a_directory_nobody_else_can_change_is_used() {
        let private = scratch("private", 0o755);
        assert!(OwnedDir::open(&private).is_ok());
        let shared = scratch("shared", 0o777);
        let e = OwnedDir::open(&shared).err().unwrap().to_string();
        assert!(
            e.contains("every user (mode 0777)") && e.contains("chmod go-w"),
            "{e}"
        );
        let group = scratch("group", 0o775);
        let e = OwnedDir::open(&group).err().unwrap().to_string();
        assert!(e.contains("its group"), "{e}");
        let sticky = scratch("sticky", 0o1777);
        assert!(OwnedDir::open(&sticky).is_ok(), "sticky, as /tmp");
        let made = private.join("new/dumps");
        OwnedDir::open(&made).unwrap();
        let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        for d in [private, shared, group, sticky] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn files_are_new_never_links_and_a_dropped_directory_goes() {
        let root = scratch("files", 0o755);
        let dir = OwnedDir::open(&root).unwrap();
        let outside = root.join("outside");
        std::fs::write(&outside, "precious\n").unwrap();
        {
            let mut p = dir.create_private(".tmp-a").unwrap();
            let mut f = p.create("dump.jsonl").unwrap();
            f.write_all(b"{}\n").unwrap();
            // A link planted where a file will be is not followed.
            std::os::unix::fs::symlink(&outside, root.join(".tmp-a/waits.hlog")).unwrap();
            let e = p.create("waits.hlog").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
            // Dropped: the file it made goes, the planted link keeps the
            // directory (it was not ours to remove).
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
        assert!(!root.join(".tmp-a/dump.jsonl").exists());
        // An existing name is never taken over.
        assert!(dir.create_private(".tmp-a").is_err());
        let mut p = dir.create_private(".tmp-b").unwrap();
        p.create("dump.jsonl").unwrap();
        p.commit("done").unwrap();
        assert!(dir.is_own_dir("done"));
        let mut q = dir.create_private(".tmp-c").unwrap();
        q.create("dump.jsonl").unwrap();
        let e = q.commit("done").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert!(!root.join(".tmp-c").exists());
        dir.remove_dir_of_files("done").unwrap();
        assert!(!dir.is_own_dir("done"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
