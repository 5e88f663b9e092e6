//! Where the cgroup filesystems are mounted (/proc/self/mounts): the
//! cgroup v2 hierarchy, and on hybrid systems the v1 hierarchies and their
//! controllers.

use std::{fs, path::PathBuf};

/// Where the cgroup filesystems are mounted, from /proc/self/mounts.
#[derive(Debug, Clone, Default)]
pub struct Mounts {
    pub v2: Option<PathBuf>,
    pub v1_cpu: Option<PathBuf>,
    /// Every cgroup v1 mount and its controllers (`name=` hierarchies
    /// have none).
    pub v1: Vec<(PathBuf, Vec<String>)>,
}

impl Mounts {
    pub fn read() -> Mounts {
        let text = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        Mounts::parse(&text)
    }

    pub fn parse(text: &str) -> Mounts {
        let mut mounts = Mounts::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [_, dir, fstype, options, ..] = f[..] else {
                continue;
            };
            match fstype {
                "cgroup2" => mounts.v2 = mounts.v2.or(Some(dir.into())),
                "cgroup" => {
                    let controllers: Vec<String> = options
                        .split(',')
                        .filter(|o| is_controller(o))
                        .map(String::from)
                        .collect();
                    if controllers.iter().any(|c| c == "cpu") {
                        mounts.v1_cpu = Some(dir.into());
                    }
                    mounts.v1.push((dir.into(), controllers));
                }
                _ => {}
            }
        }
        mounts
    }
}

/// Whether a cgroup v1 mount option names a controller: the generic mount
/// flags and the cgroup v1 options (kernel/cgroup/cgroup-v1.c
/// cgroup1_parse_param) do not; `name=` and `release_agent=` carry values.
fn is_controller(option: &str) -> bool {
    !matches!(
        option,
        "rw" | "ro"
            | "nosuid"
            | "nodev"
            | "noexec"
            | "relatime"
            | "noatime"
            | "strictatime"
            | "xattr"
            | "none"
            | "all"
            | "noprefix"
            | "clone_children"
            | "cpuset_v2_mode"
            | "favordynmods"
    ) && !option.contains('=')
}

#[cfg(test)]
pub mod tests {
    use std::path::Path;

    use super::*;

    /// A hybrid system's mounts: v1 controllers and cgroup2 at unified.
    pub const HYBRID: &str = "tmpfs /sys/fs/cgroup tmpfs rw,mode=755 0 0\n\
         cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
         cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
         cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,xattr,name=systemd 0 0\n\
         cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset,clone_children 0 0\n\
         cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

    #[test]
    fn mounts_find_v2_and_the_v1_controllers() {
        let m = Mounts::parse(HYBRID);
        assert_eq!(m.v2.as_deref(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(m.v1_cpu.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu")));
        assert_eq!(m.v1.len(), 4);
        assert_eq!(
            m.v1[2].1,
            Vec::<String>::new(),
            "name=systemd has no controller"
        );
        assert_eq!(m.v1[3].1, ["cpuset"], "clone_children is an option");
        let pure_v2 = Mounts::parse("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
        assert!(pure_v2.v1_cpu.is_none());
    }
}
