//! Which cgroups a process is in (/proc/PID/cgroup), and how two processes'
//! cgroups differ, named the way a user finds the group: by its path in
//! the cpu controller's hierarchy when that is where they differ, else in
//! cgroup v2, else in the first hierarchy that tells them apart. The
//! kernel's "same cgroup" (the same css_set: every hierarchy alike) is what
//! `differs` compares, so it agrees with the split's held_by classes.

use std::fs;

use super::procfs::{self, CgroupLine};

/// A process's cgroups, one line per hierarchy; None when it is gone (or
/// its file does not parse).
pub fn of(pid: u32) -> Option<Vec<CgroupLine>> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    procfs::parse_proc_cgroup(&text).ok()
}

/// Whether the process is a kernel thread: a child of kthreadd (PID 2), or
/// kthreadd itself. Kernel threads are the split's own class (held_by
/// kernel), not a neighbouring cgroup.
pub fn is_kernel_thread(pid: u32) -> bool {
    if pid == 2 {
        return true;
    }
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the comm's closing parenthesis: state, then ppid.
    let ppid = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
    ppid == Some(2)
}

/// The name of `culprit`'s cgroup where it is not `victim`'s; None when
/// they are in the same cgroups everywhere.
pub fn differs(culprit: &[CgroupLine], victim: &[CgroupLine]) -> Option<String> {
    let path = |lines: &[CgroupLine], want: &dyn Fn(&CgroupLine) -> bool| {
        lines.iter().find(|l| want(l)).map(|l| l.path.clone())
    };
    let cpu = |l: &CgroupLine| l.controllers.iter().any(|c| c == "cpu");
    let v2 = |l: &CgroupLine| l.hierarchy == 0;
    for want in [&cpu as &dyn Fn(&CgroupLine) -> bool, &v2] {
        let (c, v) = (path(culprit, want), path(victim, want));
        if let (Some(c), Some(v)) = (c, v)
            && c != v
        {
            return Some(c);
        }
    }
    culprit
        .iter()
        .find(|c| {
            victim
                .iter()
                .any(|v| v.hierarchy == c.hierarchy && v.path != c.path)
        })
        .map(|c| format!("{}:{}", c.controllers.join(","), c.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<CgroupLine> {
        procfs::parse_proc_cgroup(text).unwrap()
    }

    #[test]
    fn names_the_hierarchy_that_tells_them_apart() {
        // Hybrid: the same v1 cpu group, different v2 groups.
        let a = lines("2:cpu,cpuacct:/\n1:name=systemd:/\n0::/a\n");
        let b = lines("2:cpu,cpuacct:/\n1:name=systemd:/\n0::/b\n");
        assert_eq!(differs(&b, &a).as_deref(), Some("/b"));
        assert_eq!(differs(&a, &a), None);
        // The cpu controller's group first.
        let c = lines("2:cpu,cpuacct:/batch\n1:name=systemd:/\n0::/b\n");
        assert_eq!(differs(&c, &a).as_deref(), Some("/batch"));
        // Only another v1 hierarchy differs.
        let d = lines("2:cpu,cpuacct:/\n1:name=systemd:/x\n0::/a\n");
        assert_eq!(differs(&d, &a).as_deref(), Some("name=systemd:/x"));
    }

    #[test]
    fn this_process_has_cgroups_and_is_no_kernel_thread() {
        let me = std::process::id();
        assert!(of(me).is_some_and(|l| !l.is_empty()));
        assert!(!is_kernel_thread(me));
        assert!(is_kernel_thread(2));
        assert!(of(4_999_999).is_none());
    }
}
