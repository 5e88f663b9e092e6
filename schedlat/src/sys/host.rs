//! What this host and this process are, as `schedlat check` reports them:
//! the kernel release, the files the kernel publishes about BPF and
//! tracing (lockdown, bpf_stats, PSI, BTF, debugfs), this process's
//! capabilities, seccomp and no_new_privs, its limits and namespaces, and
//! the cgroup layout it sees. Readers only; what each fact means for a
//! mode is the kernel layer's (kernel/preflight.rs).

use std::{
    fs, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use crate::sys::mounts::Mounts;

/// This host's name as the kernel holds it (`uname -n`); empty if
/// unreadable.
pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The running kernel's release (`uname -r`) and its major.minor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub text: String,
    pub version: Option<(u32, u32)>,
}

impl Release {
    pub fn read() -> Release {
        let text = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Release::parse(&text)
    }

    /// `6.1.0-29-amd64` is 6.1; `5.10.0` 5.10.
    pub fn parse(text: &str) -> Release {
        let mut parts = text.split(|c: char| !c.is_ascii_digit());
        let version = match (parts.next(), parts.next()) {
            (Some(major), Some(minor)) => major.parse().ok().zip(minor.parse().ok()),
            _ => None,
        };
        Release {
            text: text.to_string(),
            version,
        }
    }

    /// At least `major.minor`; an unreadable release is taken as new
    /// enough (the trial loads say the rest).
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        self.version.is_none_or(|v| v >= (major, minor))
    }
}

/// The capability sets of this process (/proc/self/status), as bit masks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
    pub bounding: u64,
}

/// The lines of /proc/self/status that `check` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessStatus {
    pub capabilities: Capabilities,
    /// 0 off, 1 strict, 2 filter.
    pub seccomp: Option<u32>,
    pub no_new_privs: bool,
    /// PIDs of this process, outermost namespace first: more than one
    /// means it runs in a PID namespace of its own (a container).
    pub nspid: Vec<u32>,
}

impl ProcessStatus {
    pub fn read() -> ProcessStatus {
        ProcessStatus::parse(&fs::read_to_string("/proc/self/status").unwrap_or_default())
    }

    pub fn parse(text: &str) -> ProcessStatus {
        let mut status = ProcessStatus::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let hex = || u64::from_str_radix(value, 16).unwrap_or(0);
            match key {
                "CapEff" => status.capabilities.effective = hex(),
                "CapPrm" => status.capabilities.permitted = hex(),
                "CapBnd" => status.capabilities.bounding = hex(),
                "Seccomp" => status.seccomp = value.parse().ok(),
                "NoNewPrivs" => status.no_new_privs = value == "1",
                "NSpid" => {
                    status.nspid = value
                        .split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .collect();
                }
                _ => {}
            }
        }
        status
    }
}

/// What /sys/kernel/security/lockdown tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lockdown {
    /// The mode in force: `none`, `integrity` or `confidentiality`.
    Mode(String),
    /// securityfs is mounted and has no lockdown file: no lockdown LSM.
    NoLsm,
    /// Not known: securityfs is not mounted here (a container's /sys
    /// usually lacks it), or the file cannot be read; the reason.
    Unreadable(String),
}

/// The kernel lockdown mode in force (the file lists `none integrity
/// confidentiality` with the active one in brackets).
pub fn lockdown() -> Lockdown {
    classify_lockdown(
        fs::read_to_string("/sys/kernel/security/lockdown"),
        // securityfs's own list of LSMs (Linux 4.15): it is mounted.
        Path::new("/sys/kernel/security/lsm").exists(),
    )
}

pub fn classify_lockdown(read: io::Result<String>, securityfs_mounted: bool) -> Lockdown {
    match read {
        Ok(text) => parse_lockdown(&text).map_or_else(
            || Lockdown::Unreadable(format!("no mode in brackets in {:?}", text.trim())),
            Lockdown::Mode,
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound && securityfs_mounted => Lockdown::NoLsm,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Lockdown::Unreadable(
            "/sys/kernel/security is not mounted here (securityfs)".to_string(),
        ),
        Err(e) => Lockdown::Unreadable(format!("/sys/kernel/security/lockdown: {e}")),
    }
}

pub fn parse_lockdown(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// `kernel.bpf_stats_enabled`: whether the kernel counts BPF run time.
pub fn bpf_stats_enabled() -> Option<bool> {
    let text = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").ok()?;
    Some(text.trim() != "0")
}

/// Whether /proc/pressure/cpu can be read, or why not.
pub fn psi() -> Result<(), String> {
    fs::read_to_string("/proc/pressure/cpu")
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The kernel's BTF (/sys/kernel/btf/vmlinux): readable, or why not.
pub fn kernel_btf() -> Result<PathBuf, String> {
    let path = PathBuf::from("/sys/kernel/btf/vmlinux");
    fs::File::open(&path)
        .map(|_| path)
        .map_err(|e| e.to_string())
}

/// Where debugfs is mounted, from /proc/self/mounts.
pub fn debugfs() -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(2) == Some(&"debugfs")).then(|| PathBuf::from(f[1]))
    })
}

/// RLIMIT_MEMLOCK's soft limit in bytes; None when unlimited.
pub fn memlock() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &raw mut limit) };
    (got == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The inode of the initial PID namespace, the host's: a constant of the
/// kernel (include/linux/proc_ns.h, PROC_PID_INIT_INO).
const INIT_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// Whether this process runs in the host's PID namespace, from
/// /proc/self/ns/pid (`pid:[INODE]`). NSpid cannot tell inside a
/// container: it lists PIDs from the namespace /proc was mounted in down,
/// and a container mounts its own. None when the link is unreadable.
pub fn in_host_pid_namespace() -> Option<bool> {
    let link = fs::read_link("/proc/self/ns/pid").ok()?;
    namespace_inode(link.to_str()?).map(|ino| ino == INIT_PID_NAMESPACE)
}

/// `pid:[4026531836]` -> 4026531836.
pub fn namespace_inode(link: &str) -> Option<u64> {
    link.split_once(":[")?.1.strip_suffix(']')?.parse().ok()
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The cgroup filesystems this process sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// cgroup2 alone (most production machines).
    V2(PathBuf),
    /// cgroup v1 controllers beside a cgroup2 mount (systemd's hybrid).
    Hybrid {
        v1_cpu: Option<PathBuf>,
        v2: PathBuf,
    },
    /// cgroup v1 only.
    V1(Option<PathBuf>),
    None,
}

impl CgroupLayout {
    pub fn of(mounts: &Mounts) -> CgroupLayout {
        match (&mounts.v2, mounts.v1.is_empty()) {
            (Some(v2), true) => CgroupLayout::V2(v2.clone()),
            (Some(v2), false) => CgroupLayout::Hybrid {
                v1_cpu: mounts.v1_cpu.clone(),
                v2: v2.clone(),
            },
            (None, false) => CgroupLayout::V1(mounts.v1_cpu.clone()),
            (None, true) => CgroupLayout::None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            CgroupLayout::V2(_) => "v2",
            CgroupLayout::Hybrid { .. } => "hybrid",
            CgroupLayout::V1(_) => "v1",
            CgroupLayout::None => "none",
        }
    }
}

/// Whether `mount` shows a hierarchy from its root. The root cgroup's
/// kernfs node has inode 1 (kernfs hands out ids from 1, the root first:
/// fs/kernfs/dir.c, kernfs_new_node); a container that mounts cgroupfs in
/// its own cgroup namespace, or is given a subtree bind-mounted, sees a
/// group further down, with another inode: the host's other groups are
/// not there to be named.
pub fn shows_whole_hierarchy(mount: &Path) -> Option<bool> {
    fs::metadata(mount).ok().map(|m| m.ino() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_to_major_minor() {
        assert_eq!(Release::parse("6.1.0-29-amd64").version, Some((6, 1)));
        assert_eq!(Release::parse("5.10.0").version, Some((5, 10)));
        assert_eq!(Release::parse("6.18.0+").version, Some((6, 18)));
        assert_eq!(Release::parse("").version, None);
        assert!(Release::parse("5.10.0").at_least(5, 8));
        assert!(!Release::parse("5.10.0").at_least(5, 11));
        assert!(Release::parse("garbage").at_least(9, 9));
    }

    #[test]
    fn status_lines_are_read() {
        let text = "Name:\tschedlat\nNSpid:\t4242\t7\nNoNewPrivs:\t1\nSeccomp:\t2\n\
                    CapPrm:\t000000c000000000\nCapEff:\t000000c000000000\nCapBnd:\t000001ffffffffff\n";
        let s = ProcessStatus::parse(text);
        assert_eq!(s.capabilities.effective, (1 << 38) | (1 << 39));
        assert_eq!(s.capabilities.permitted, (1 << 38) | (1 << 39));
        assert_eq!(s.capabilities.bounding, 0x1ff_ffff_ffff);
        assert_eq!(
            (s.seccomp, s.no_new_privs, s.nspid),
            (Some(2), true, vec![4242, 7])
        );
    }

    #[test]
    fn the_host_pid_namespace_is_told_by_its_inode() {
        assert_eq!(
            namespace_inode("pid:[4026531836]"),
            Some(INIT_PID_NAMESPACE)
        );
        assert_eq!(namespace_inode("pid:[4026532577]"), Some(4_026_532_577));
        assert_eq!(namespace_inode("pid:4026531836"), None);
    }

    #[test]
    fn lockdown_names_the_bracketed_mode() {
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(
            parse_lockdown("[none] integrity confidentiality").as_deref(),
            Some("none")
        );
        assert_eq!(parse_lockdown("none integrity"), None);
    }

    /// Regression: inside a container without securityfs, check said "no
    /// lockdown LSM" when it could not see.
    #[test]
    fn lockdown_unknown_is_not_absent() {
        let missing = || Err(io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(classify_lockdown(missing(), true), Lockdown::NoLsm);
        assert!(matches!(
            classify_lockdown(missing(), false),
            Lockdown::Unreadable(why) if why.contains("not mounted")
        ));
        assert!(matches!(
            classify_lockdown(Err(io::Error::from(io::ErrorKind::PermissionDenied)), true),
            Lockdown::Unreadable(_)
        ));
        assert_eq!(
            classify_lockdown(Ok("[none] integrity confidentiality\n".into()), true),
            Lockdown::Mode("none".into())
        );
    }

    #[test]
    fn layouts_are_told_apart() {
        let mounts = |text: &str| CgroupLayout::of(&Mounts::parse(text));
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n";
        let v1 = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
        let unified = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(mounts(v2).name(), "v2");
        assert_eq!(mounts(&format!("{v1}{unified}")).name(), "hybrid");
        assert_eq!(mounts(v1).name(), "v1");
        assert_eq!(mounts("").name(), "none");
    }
}
