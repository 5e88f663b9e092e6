//! The cgroup filesystems as the kernel side needs them (where they are
//! mounted is sys/mounts.rs): which hierarchy a path belongs to, its kernfs
//! id (the inode number of its directory, which is what the kernel side
//! compares), and the way back from an id to a path.

use std::{
    collections::HashMap,
    fs,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use crate::{kernel::btf::CssChoice, sys::mounts::Mounts};

/// The hierarchy `--cgroups` breaks down by when `-c` does not choose:
/// the one the cpu controller is in (v1 where it is mounted there, as
/// on hybrid systems; else v2), since that is where CPU policy lives.
pub(crate) fn default_hierarchy(mounts: &Mounts) -> Option<Hierarchy> {
    if let Some(mount) = &mounts.v1_cpu {
        let controllers = mounts
            .v1
            .iter()
            .find(|(m, _)| m == mount)
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| vec!["cpu".into()]);
        return Some(Hierarchy {
            mount: mount.clone(),
            css: CssChoice::Controllers(controllers),
        });
    }
    mounts.v2.as_ref().map(|mount| Hierarchy {
        mount: mount.clone(),
        css: CssChoice::Default,
    })
}

/// The cgroup a user names: an absolute directory under a cgroup mount,
/// or a path relative to the cgroup v2 mount, then to the v1 cpu mount.
pub(crate) fn resolve(mounts: &Mounts, path: &Path) -> Result<CgroupTarget, String> {
    let v2 = mounts.v2.iter().map(|m| (m, CssChoice::Default));
    let v1 = mounts
        .v1
        .iter()
        .map(|(m, c)| (m, CssChoice::Controllers(c.clone())));
    let hierarchies: Vec<(&PathBuf, CssChoice)> = v2.chain(v1).collect();
    // The path as the kernel sees it: `..` and symlinks resolved, so
    // that `/sys/fs/cgroup/cpu/../unified/G` is taken for the v2 group
    // it is, not for a group of the v1 cpu hierarchy its text starts with.
    let candidate = if path.is_absolute() {
        Some(path.to_path_buf())
    } else {
        let relative_to = mounts.v2.iter().chain(mounts.v1_cpu.iter());
        relative_to.map(|m| m.join(path)).find(|dir| dir.is_dir())
    };
    let found = candidate
        .and_then(|dir| fs::canonicalize(dir).ok())
        .and_then(|dir| {
            // The longest mount that holds it (/sys/fs/cgroup/unified,
            // not a cgroup2 at /sys/fs/cgroup).
            hierarchies
                .iter()
                .filter(|(m, _)| dir.starts_with(m))
                .max_by_key(|(m, _)| m.as_os_str().len())
                .map(|(m, css)| ((*m).clone(), css.clone(), dir.clone()))
        });
    let looked = || {
        let mounts: Vec<String> = hierarchies
            .iter()
            .map(|(m, _)| m.display().to_string())
            .collect();
        format!(
            "no cgroup {} (give a directory under a cgroup mount: {}; or a path relative to the cgroup v2 mount)",
            path.display(),
            mounts.join(", ")
        )
    };
    let (mount, css, dir) = found.ok_or_else(looked)?;
    let meta = fs::metadata(&dir).map_err(|_| looked())?;
    if !meta.is_dir() {
        return Err(looked());
    }
    if matches!(&css, CssChoice::Controllers(c) if c.is_empty()) {
        return Err(format!(
            "{} is in a cgroup v1 hierarchy without a controller (e.g. name=systemd), which the kernel side cannot follow: use the cgroup v2 or the cpu controller's path",
            dir.display()
        ));
    }
    Ok(CgroupTarget {
        hierarchy: Hierarchy { mount, css },
        id: meta.ino(),
        dir,
    })
}

/// One cgroup hierarchy: its mount and the css that names a task's cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    pub mount: PathBuf,
    pub css: CssChoice,
}

impl Hierarchy {
    /// "cgroup v2" or "cgroup v1 cpu", for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.css {
            CssChoice::Default => format!("cgroup v2 at {}", self.mount.display()),
            CssChoice::Controllers(c) => {
                format!("cgroup v1 {} at {}", c.join(","), self.mount.display())
            }
        }
    }

    /// On a hybrid host (this a v1 hierarchy, cgroup v2 mounted beside
    /// it), which groups a per-cgroup breakdown in this hierarchy leaves
    /// out and how to follow them: the hierarchy is -c's, so naming the v2
    /// mount picks v2 (every task is under its root).
    pub(crate) fn other_groups(&self, mounts: &Mounts) -> Option<String> {
        let (CssChoice::Controllers(_), Some(v2)) = (&self.css, &mounts.v2) else {
            return None;
        };
        Some(format!(
            "the groups of cgroup v2 at {} are not these: -c picks the hierarchy, -c {} follows them",
            v2.display(),
            v2.display()
        ))
    }

    /// The hierarchy's number, as /proc/PID/cgroup prints it and the
    /// kernel keeps it (`cgroup_root.hierarchy_id`): 0 for cgroup v2, else
    /// that of the line listing the first controller. None when this
    /// process's /proc/self/cgroup does not list it.
    pub(crate) fn number(&self) -> Option<u64> {
        let CssChoice::Controllers(controllers) = &self.css else {
            return Some(0);
        };
        let text = fs::read_to_string("/proc/self/cgroup").ok()?;
        let lines = crate::sys::procfs::parse_proc_cgroup(&text).ok()?;
        let first = controllers.first()?;
        lines
            .iter()
            .find(|l| l.controllers.contains(first))
            .map(|l| u64::from(l.hierarchy))
    }

    /// The cgroup task `tid` is in now, in this hierarchy (`number`, as
    /// [`Hierarchy::number`] gave it): its id and its path relative to the
    /// mount, from `/proc/TID/cgroup` (the paths of schedlat's cgroup
    /// namespace) and the directory's inode. None once the task is gone or
    /// the hierarchy is not listed.
    pub(crate) fn task_cgroup(&self, number: u64, tid: u32) -> Option<(u64, String)> {
        let text = fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
        let lines = crate::sys::procfs::parse_proc_cgroup(&text).ok()?;
        let line = lines
            .into_iter()
            .find(|l| u64::from(l.hierarchy) == number)?;
        let dir = self.mount.join(line.path.trim_start_matches('/'));
        let id = fs::metadata(dir).ok()?.ino();
        Some((id, line.path))
    }

    /// Every cgroup's path relative to the mount (`/` for the root), by id.
    /// Ids are directory inode numbers, which kernfs keeps equal to the
    /// kernel's `kn->id` on 64-bit kernels.
    ///
    /// Walked by path (readdir's large buffers: 5,000 cgroups in half the
    /// time of a walk by descriptor), except below a directory whose
    /// children's paths come near PATH_MAX: those are opened relative to
    /// it ([`walk`]), which a path could not reach (ENAMETOOLONG).
    pub(crate) fn paths_by_id(&self) -> HashMap<u64, String> {
        let mut paths = HashMap::new();
        let mut stack = vec![self.mount.clone()];
        while let Some(dir) = stack.pop() {
            let rel = dir.strip_prefix(&self.mount).unwrap_or(&dir);
            if let Ok(meta) = fs::metadata(&dir) {
                // As the kernel's records name it (collect/cgroup_names.rs):
                // invalid UTF-8 escaped one to one, never merged.
                let name = crate::sys::byte_names::escape(rel.as_os_str().as_bytes());
                paths.insert(meta.ino(), format!("/{name}"));
            }
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let children = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
            for child in children {
                let path = child.path();
                if path.as_os_str().len() < NEAR_PATH_MAX {
                    stack.push(path);
                    continue;
                }
                // Opened relative to its parent, and walked so below.
                let Ok(parent) = rustix::fs::open(&dir, WALK_FLAGS, rustix::fs::Mode::empty())
                else {
                    continue;
                };
                let name = child.file_name();
                let opened = rustix::fs::openat(
                    &parent,
                    name.as_os_str(),
                    WALK_FLAGS,
                    rustix::fs::Mode::empty(),
                );
                if let Ok(fd) = opened {
                    let mut rel = rel.as_os_str().as_bytes().to_vec();
                    if !rel.is_empty() {
                        rel.push(b'/');
                    }
                    rel.extend_from_slice(name.as_bytes());
                    walk(fd, &mut rel, 0, &mut paths);
                }
            }
        }
        paths
    }
}

/// How a cgroup directory is opened for the walk: never through a link.
const WALK_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::DIRECTORY)
    .union(rustix::fs::OFlags::NOFOLLOW)
    .union(rustix::fs::OFlags::CLOEXEC);

/// Levels past PATH_MAX the walk descends to: one descriptor is held per
/// level (a path of 4 KiB more takes at least 17 of 255-byte names).
const MAX_DEPTH: usize = 128;

/// A path this long is opened relative to its parent's descriptor: a
/// name of up to 255 bytes below it would pass PATH_MAX (4,096).
const NEAR_PATH_MAX: usize = 4096 - 256;

/// Records `dir` (at `rel`, its path's bytes below the hierarchy's root)
/// and the cgroups below it. Each child is opened relative to its parent's
/// descriptor, so a path longer than PATH_MAX (4 KiB), which a path-based
/// walk could not stat nor list (ENAMETOOLONG), is found and named whole.
fn walk(
    dir: std::os::fd::OwnedFd,
    rel: &mut Vec<u8>,
    depth: usize,
    paths: &mut HashMap<u64, String>,
) {
    use rustix::fs::{AtFlags, Dir, FileType, Mode};
    let Ok(st) = rustix::fs::fstat(&dir) else {
        return;
    };
    // As the kernel's records name it (collect/cgroup_names.rs): invalid
    // UTF-8 escaped one to one, never merged.
    paths.insert(
        st.st_ino,
        format!("/{}", crate::sys::byte_names::escape(rel)),
    );
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(mut entries) = Dir::new(dir) else {
        return;
    };
    let mut children = Vec::new();
    while let Some(Ok(entry)) = entries.read() {
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => entries.fd().is_ok_and(|fd| {
                rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_dir())
            }),
            _ => false,
        };
        if is_dir {
            children.push(name.to_owned());
        }
    }
    for name in children {
        let Ok(fd) = entries.fd() else { return };
        let Ok(child) = rustix::fs::openat(fd, &name, WALK_FLAGS, Mode::empty()) else {
            continue;
        };
        let at = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.to_bytes());
        walk(child, rel, depth + 1, paths);
        rel.truncate(at);
    }
}

/// A cgroup named by `-c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupTarget {
    pub hierarchy: Hierarchy,
    pub dir: PathBuf,
    pub id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::mounts::tests::HYBRID;

    #[test]
    fn the_cpu_controllers_hierarchy_is_the_default() {
        let m = Mounts::parse(HYBRID);
        let h = default_hierarchy(&m).unwrap();
        assert_eq!(h.css, CssChoice::Controllers(vec!["cpu".into()]));
        let pure_v2 = Mounts::parse("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
        assert!(pure_v2.v1_cpu.is_none());
        assert_eq!(default_hierarchy(&pure_v2).unwrap().css, CssChoice::Default);
    }

    /// Issue 28: on a hybrid host the per-cgroup series silently followed
    /// the v1 cpu hierarchy; what it leaves out is now said, with the -c
    /// that follows the v2 groups. Nothing to say on pure v2 (or pure v1).
    #[test]
    fn a_v1_breakdown_on_a_hybrid_host_names_the_v2_groups_it_leaves_out() {
        let m = Mounts::parse(HYBRID);
        let v2 = m.v2.clone().unwrap();
        let note = default_hierarchy(&m).unwrap().other_groups(&m).unwrap();
        let v2 = v2.display();
        assert_eq!(
            note,
            format!(
                "the groups of cgroup v2 at {v2} are not these: -c picks the hierarchy, -c {v2} follows them"
            )
        );
        let pure_v2 = Mounts::parse("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
        assert_eq!(
            default_hierarchy(&pure_v2).unwrap().other_groups(&pure_v2),
            None
        );
    }

    #[test]
    fn resolves_real_cgroups_and_refuses_missing_ones() {
        let mounts = Mounts::read();
        let Some(root) = mounts.v2.clone().or(mounts.v1_cpu.clone()) else {
            panic!("this machine mounts cgroups");
        };
        let t = resolve(&mounts, &root).unwrap();
        assert_eq!(t.dir, root);
        assert_eq!(
            t.hierarchy.paths_by_id().get(&t.id).map(String::as_str),
            Some("/")
        );
        let e = resolve(&mounts, Path::new("no/such/group")).unwrap_err();
        assert!(e.contains("no cgroup no/such/group"), "{e}");
        let e = resolve(&mounts, Path::new("/tmp")).unwrap_err();
        assert!(e.contains("no cgroup /tmp"), "{e}");
    }

    /// Regression: a path whose text starts under the v1 cpu mount but that
    /// leads (through `..` or a symlink) into the v2 mount was matched by
    /// its text, giving the v2 group's id with the v1 hierarchy: nothing
    /// measured.
    #[test]
    fn paths_are_resolved_before_picking_the_hierarchy() {
        let root = std::env::temp_dir().join(format!("schedlat-cg-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("cpu/A")).unwrap();
        fs::create_dir_all(root.join("unified/G")).unwrap();
        std::os::unix::fs::symlink(root.join("unified/G"), root.join("cpu/link")).unwrap();
        let root = fs::canonicalize(&root).unwrap();
        let mounts = Mounts::parse(&format!(
            "cgroup {0}/cpu cgroup rw,cpu 0 0\ncgroup2 {0}/unified cgroup2 rw 0 0\n",
            root.display()
        ));
        let g = fs::metadata(root.join("unified/G")).unwrap().ino();
        for typed in ["cpu/../unified/G", "cpu/link"] {
            let t = resolve(&mounts, &root.join(typed)).unwrap();
            assert_eq!(t.hierarchy.css, CssChoice::Default, "{typed}");
            assert_eq!(t.hierarchy.mount, root.join("unified"), "{typed}");
            assert_eq!(
                (t.dir.clone(), t.id),
                (root.join("unified/G"), g),
                "{typed}"
            );
        }
        let a = resolve(&mounts, &root.join("cpu/A")).unwrap();
        assert_eq!(a.hierarchy.css, CssChoice::Controllers(vec!["cpu".into()]));
        fs::remove_dir_all(&root).unwrap();
    }
}
