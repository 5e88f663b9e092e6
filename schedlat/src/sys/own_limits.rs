//! This process's own limits that loading the object runs into: open files
//! (RLIMIT_NOFILE) and the memory cgroup BPF maps are charged to.

use std::fs;

/// The soft limit on open files (RLIMIT_NOFILE), if it can be read.
pub fn open_files() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r.rlim_cur)
}

/// The descriptors this process has open now (/proc/self/fd, without the
/// one reading it), if it can be read: `limit` when the read itself finds
/// none left (EMFILE, ENFILE).
pub fn open_descriptors(limit: u64) -> Option<u64> {
    match fs::read_dir("/proc/self/fd") {
        Ok(entries) => Some((entries.count() as u64).saturating_sub(1)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => Some(limit),
        Err(_) => None,
    }
}

/// Raises the soft limit on open files to the hard limit, up to 1024 (the
/// usual default, far above the object's needs and serve's connections):
/// a soft limit set low with a higher hard limit is the process's to lift,
/// as systemd advises programs that need more (Go's runtime does the
/// same). A hard limit below what schedlat needs stays the user's to raise,
/// and the error then says so.
pub fn raise_open_files() {
    const WANTED: u64 = 1024;
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur >= WANTED {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: WANTED.min(r.rlim_max),
        rlim_max: r.rlim_max,
    };
    if raised.rlim_cur > r.rlim_cur {
        // SAFETY: a valid rlimit; failure leaves the limit as it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// This process's memory cgroup, as /proc/self/cgroup names it (v2, or
/// the v1 memory hierarchy), for messages.
pub fn own_memory_cgroup() -> String {
    let text = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v1 = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| format!("memory:{path}"))
    });
    v1.or_else(|| {
        text.lines()
            .find_map(|l| l.strip_prefix("0::").map(String::from))
    })
    .unwrap_or_else(|| "an unknown cgroup".to_string())
}
