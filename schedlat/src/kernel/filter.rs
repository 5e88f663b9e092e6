//! The filters (`-p`, `-t`, `-c`, `--comm`, `--cpu`): checked against /proc
//! and cgroupfs before any kernel work, applied in the kernel to the task
//! that waited, and watched during the run so that a target that goes away
//! ends it cleanly, its waits so far reported.

use std::{fs, path::PathBuf};

use thiserror::Error;

use crate::{
    kernel::{
        cgroup_by_name,
        cgroupfs::{self, CgroupTarget},
    },
    sys::mounts::Mounts,
};

/// The filters as asked for (`-p`, `-t`, `-c`, `--comm`, `--cpu`), before
/// they are checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct FilterSpec {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub cgroup: Option<PathBuf>,
    pub comm: Option<String>,
    pub cpu: Option<String>,
}

#[derive(Debug, Error)]
pub(crate) enum FilterError {
    #[error("no process with PID {0} (check `ps -p {0}`)")]
    NoSuchProcess(u32),
    #[error(
        "{tid} is a thread of process {tgid}: use `-p {tgid}` to measure that process, or `-t {tid}` for the thread"
    )]
    IsThread { tid: u32, tgid: u32 },
    #[error("no thread with TID {0} (check `ps -eL | grep {0}`)")]
    NoSuchThread(u32),
    #[error("{0}")]
    Cgroup(String),
    #[error("--comm: {0}")]
    Comm(String),
    #[error("--cpu {list}: {why}")]
    Cpu { list: String, why: String },
}

/// What the kernel side measures: waits of tasks that pass every filter set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// Only this process (tgid).
    pub tgid: Option<u32>,
    /// Only this thread.
    pub tid: Option<u32>,
    /// The start times (/proc/PID/stat) of the process and the thread named:
    /// with the number they identify the task, so that another one given
    /// the same number after it exited is not taken for it.
    pub tgid_start: Option<u64>,
    pub tid_start: Option<u64>,
    /// Only tasks with this comm (the kernel's 16 bytes, NUL-padded).
    pub comm: Option<[u8; 16]>,
    /// Only tasks in this cgroup or below it.
    pub cgroup: Option<CgroupTarget>,
    /// Only waits that end on these CPUs.
    pub cpus: Option<Vec<usize>>,
}

impl Filter {
    pub(crate) fn resolve(args: &FilterSpec) -> Result<Filter, FilterError> {
        if let Some(pid) = args.pid {
            match tgid_of(pid) {
                None => return Err(FilterError::NoSuchProcess(pid)),
                Some(tgid) if tgid != pid => return Err(FilterError::IsThread { tid: pid, tgid }),
                Some(_) => {}
            }
        }
        if let Some(tid) = args.tid
            && tgid_of(tid).is_none()
        {
            return Err(FilterError::NoSuchThread(tid));
        }
        let cgroup = match &args.cgroup {
            Some(path) => Some(cgroup_target(path).map_err(FilterError::Cgroup)?),
            None => None,
        };
        let cpus = match &args.cpu {
            Some(list) => Some(cpu_list(list)?),
            None => None,
        };
        Ok(Filter {
            tgid: args.pid,
            tid: args.tid,
            tgid_start: args.pid.and_then(start_time),
            tid_start: args.tid.and_then(start_time),
            comm: args.comm.as_deref().map(kernel_comm).transpose()?,
            cgroup,
            cpus,
        })
    }

    /// Filters that read the waiting task's task_struct: they need tp_btf
    /// (classic tracepoints only carry TIDs). `--cpu` works in both modes.
    pub(crate) fn needs_btf(&self) -> Option<&'static str> {
        [
            (self.tgid.is_some(), "-p"),
            (self.tid.is_some(), "-t"),
            (self.comm.is_some(), "--comm"),
            (self.cgroup.is_some(), "-c"),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }

    /// A note when `--cpu` names CPUs that are offline now (`online` is
    /// the text of /sys/devices/system/cpu/online): no task runs on them
    /// until they are brought online, so their waits stay 0, which without
    /// a word reads as an idle CPU.
    pub(crate) fn offline_note(&self, online: &str) -> Option<String> {
        let online = crate::sys::procfs::parse_cpu_list(online).ok()?;
        let offline: Vec<usize> = self
            .cpus
            .as_ref()?
            .iter()
            .copied()
            .filter(|c| !online.contains(c))
            .collect();
        if offline.is_empty() {
            return None;
        }
        Some(format!(
            "--cpu: CPU {} {} offline (online: {}): no task runs there until brought online (/sys/devices/system/cpu/cpuN/online), so {} no waits",
            cpu_list_str(&offline),
            if offline.len() == 1 { "is" } else { "are" },
            cpu_list_str(&online),
            if offline.len() == 1 {
                "it has"
            } else {
                "they have"
            }
        ))
    }

    /// Whether a target that can go away (a process, thread or cgroup) is
    /// watched.
    pub(crate) fn is_active(&self) -> bool {
        self.tgid.is_some() || self.tid.is_some() || self.cgroup.is_some()
    }

    /// None while every target exists; else what went away.
    pub(crate) fn gone(&self) -> Option<String> {
        if let Some(pid) = self.tgid
            && !is_same_task(pid, self.tgid_start)
        {
            return Some(format!("process {pid} exited"));
        }
        if let Some(tid) = self.tid
            && !is_same_task(tid, self.tid_start)
        {
            return Some(format!("thread {tid} exited"));
        }
        if let Some(c) = &self.cgroup
            && !c.dir.is_dir()
        {
            return Some(format!("cgroup {} was removed", c.dir.display()));
        }
        None
    }

    /// False once a target has gone away.
    pub(crate) fn target_alive(&self) -> bool {
        self.gone().is_none()
    }

    /// For messages: "waits of process 1234 (comm) that end on CPUs 0-1".
    pub(crate) fn describe(&self) -> Option<String> {
        let comm_of = |path: String| {
            fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let mut parts = Vec::new();
        if let Some(pid) = self.tgid {
            parts.push(format!(
                "process {pid} ({})",
                comm_of(format!("/proc/{pid}/comm"))
            ));
        }
        if let Some(tid) = self.tid {
            parts.push(format!(
                "thread {tid} ({})",
                comm_of(format!("/proc/{tid}/comm"))
            ));
        }
        if let Some(comm) = &self.comm {
            parts.push(format!("tasks named {}", comm_str(comm)));
        }
        if let Some(c) = &self.cgroup {
            parts.push(format!(
                "cgroup {} and below ({})",
                c.dir.display(),
                c.hierarchy.describe()
            ));
        }
        let cpus = self
            .cpus
            .as_ref()
            .map(|c| format!("that end on CPUs {}", cpu_list_str(c)));
        match (parts.is_empty(), cpus) {
            (true, None) => None,
            (true, Some(cpus)) => Some(format!("waits {cpus}")),
            (false, None) => Some(format!("waits of {}", parts.join(", "))),
            (false, Some(cpus)) => Some(format!("waits of {} {cpus}", parts.join(", "))),
        }
    }

    /// The `--cpu` mask as the kernel side reads it: bit `cpu % 64` of word
    /// `cpu / 64`.
    pub(crate) fn cpu_mask(&self) -> Option<[u64; schedlat_common::scope::CPU_MASK_WORDS]> {
        let cpus = self.cpus.as_ref()?;
        let mut mask = [0u64; schedlat_common::scope::CPU_MASK_WORDS];
        for &cpu in cpus {
            mask[cpu / 64] |= 1 << (cpu % 64);
        }
        Some(mask)
    }
}

/// `-c`'s cgroup: a path (absolute, or relative to the cgroup v2 mount,
/// then to the v1 cpu mount); else a container ID or unique prefix, a pod
/// UID or a systemd unit (cgroup_by_name.rs). `diagnose` takes its scope
/// from it too, so that every `-c` takes the same names.
pub(crate) fn cgroup_target(arg: &std::path::Path) -> Result<CgroupTarget, String> {
    let mounts = Mounts::read();
    let as_path = cgroupfs::resolve(&mounts, arg);
    match (&as_path, arg.to_str()) {
        (Err(_), Some(name)) => cgroup_by_name::find(&mounts, name).unwrap_or(as_path),
        _ => as_path,
    }
}

/// Whether a process or thread still runs: it exists and is not a zombie
/// waiting for its parent to reap it (it will never wait again).
pub(crate) fn is_alive(id: u32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{id}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|s| !matches!(s.trim().chars().next(), Some('Z' | 'X')))
}

/// Whether the task numbered `id` is still the one that started at `start`
/// (ticks since boot) and runs: a PID reused by a newcomer is not.
fn is_same_task(id: u32, start: Option<u64>) -> bool {
    is_alive(id) && (start.is_none() || start_time(id) == start)
}

/// A task's start time, from /proc/ID/stat.
fn start_time(id: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{id}/stat")).ok()?;
    crate::sys::procfs::parse_stat_starttime(&stat).ok()
}

/// The process a PID (or TID) belongs to, from /proc/PID/status.
fn tgid_of(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A name as the kernel keeps it in task->comm: at most 15 bytes, then NUL.
fn kernel_comm(name: &str) -> Result<[u8; 16], FilterError> {
    if name.is_empty() {
        return Err(FilterError::Comm("the name is empty".into()));
    }
    if name.len() > 15 {
        // The kernel cuts bytes, possibly inside a UTF-8 character; a name
        // to type is cut at the last whole character within 15 bytes.
        let cut = (0..=15)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        return Err(FilterError::Comm(format!(
            "`{name}` is longer than the kernel's 15-byte task name: use `{}` (what `ps -o comm` shows)",
            &name[..cut]
        )));
    }
    let mut comm = [0u8; 16];
    comm[..name.len()].copy_from_slice(name.as_bytes());
    Ok(comm)
}

pub(crate) fn comm_str(comm: &[u8; 16]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

/// clap value parser for `--comm`: a bad name is a bad command line (exit 2).
pub(crate) fn comm_arg(name: &str) -> Result<String, String> {
    kernel_comm(name)
        .map(|_| name.to_string())
        .map_err(|e| e.to_string())
}

/// clap value parser for `--cpu`: the list must parse and name CPUs this
/// machine has, or the command line is bad (exit 2).
pub(crate) fn cpu_list_arg(list: &str) -> Result<String, String> {
    cpu_list(list)
        .map(|_| list.to_string())
        .map_err(|e| e.to_string())
}

/// `--cpu 0-3,8`: CPUs that exist on this machine. Each range is checked
/// for its syntax first, then its order, then against the CPUs this machine
/// has, so that every mistake gets its own reason.
fn cpu_list(list: &str) -> Result<Vec<usize>, FilterError> {
    let bad = |why: String| FilterError::Cpu {
        list: list.to_string(),
        why,
    };
    let syntax = || bad("not a CPU list (e.g. `0`, `0-3`, `0,2-3`)".into());
    // Possible CPUs are numbered 0..n (the per-CPU maps' size, too).
    let possible = aya::util::nr_cpus()
        .map_err(|(path, e)| bad(format!("cannot read {path}: {e}")))?
        .min(schedlat_common::scope::CPU_MASK_WORDS * 64);
    let number = |s: &str| -> Result<u64, FilterError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax());
        }
        // All digits: too long for u64 is still a number, just not a CPU.
        Ok(s.parse().unwrap_or(u64::MAX))
    };
    let mut cpus = Vec::new();
    for part in list.trim().split(',') {
        let (low, high) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if low > high {
            return Err(bad(format!(
                "the range {part} is backwards (write {high}-{low})"
            )));
        }
        if high >= possible as u64 {
            let cpu = if low >= possible as u64 { low } else { high };
            return Err(bad(format!(
                "CPU {cpu} does not exist (this machine has 0-{})",
                possible - 1
            )));
        }
        cpus.extend(low as usize..=high as usize);
    }
    Ok(cpus)
}

/// `[0, 1, 2, 5]` as `0-2,5`.
pub(crate) fn cpu_list_str(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        parts.push(if sorted[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", sorted[i])
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: FilterSpec) -> Result<Filter, FilterError> {
        Filter::resolve(&args)
    }

    fn pid(pid: u32) -> FilterSpec {
        FilterSpec {
            pid: Some(pid),
            ..FilterSpec::default()
        }
    }

    #[test]
    fn our_own_process_resolves_and_is_alive() {
        let me = std::process::id();
        let f = resolve(pid(me)).unwrap();
        assert_eq!(f.tgid, Some(me));
        assert!(f.target_alive() && f.is_active());
        assert_eq!(f.needs_btf(), Some("-p"));
        assert!(
            f.describe()
                .unwrap()
                .starts_with(&format!("waits of process {me} ("))
        );
    }

    #[test]
    fn a_missing_process_or_thread_is_an_error() {
        // pid_max is at most 2^22, so this PID cannot exist.
        let e = resolve(pid(5_000_000)).unwrap_err().to_string();
        assert!(e.contains("no process with PID 5000000"), "{e}");
        let args = FilterSpec {
            tid: Some(5_000_000),
            ..FilterSpec::default()
        };
        let e = resolve(args).unwrap_err().to_string();
        assert!(e.contains("no thread with TID 5000000"), "{e}");
    }

    #[test]
    fn a_thread_id_points_at_its_process_and_resolves_with_t() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let e = resolve(pid(tid)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("use `-p {}`", std::process::id())),
            "{e}"
        );
        let args = FilterSpec {
            tid: Some(tid),
            ..FilterSpec::default()
        };
        let f = resolve(args).unwrap();
        assert!(f.target_alive());
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(f.gone(), Some(format!("thread {tid} exited")));
    }

    /// Issue 19: `--cpu 0` alone read "only waits of ending on CPUs 0".
    #[test]
    fn a_cpu_filter_reads_as_a_sentence() {
        let cpu = |list: &str| FilterSpec {
            cpu: Some(list.to_string()),
            ..FilterSpec::default()
        };
        let f = resolve(cpu("0")).unwrap();
        assert_eq!(f.describe().unwrap(), "waits that end on CPUs 0");
        let me = std::process::id();
        let f = resolve(FilterSpec {
            pid: Some(me),
            ..cpu("0")
        })
        .unwrap();
        let text = f.describe().unwrap();
        assert!(
            text.starts_with(&format!("waits of process {me} ("))
                && text.ends_with(") that end on CPUs 0"),
            "{text}"
        );
    }

    #[test]
    fn a_reused_pid_is_not_the_target() {
        let me = std::process::id();
        let mut f = resolve(pid(me)).unwrap();
        assert!(f.tgid_start.is_some() && f.target_alive());
        // A newcomer given our number after we exited would have another
        // start time; before the start time was kept, this passed as alive.
        f.tgid_start = f.tgid_start.map(|t| t + 1);
        assert_eq!(f.gone(), Some(format!("process {me} exited")));
    }

    #[test]
    fn no_filter_is_inactive() {
        let f = resolve(FilterSpec::default()).unwrap();
        assert!(!f.is_active() && f.target_alive() && f.describe().is_none());
        assert_eq!(f.needs_btf(), None);
    }

    #[test]
    fn comm_is_checked_against_the_kernel_limit() {
        assert_eq!(&kernel_comm("sleep").unwrap()[..6], b"sleep\0");
        assert_eq!(kernel_comm("fifteen-chars-x").unwrap()[15], 0);
        let e = kernel_comm("sixteen-chars-xy").unwrap_err().to_string();
        assert!(e.contains("`sixteen-chars-x`"), "{e}");
        assert!(kernel_comm("").is_err());
        // Regression: the suggestion was cut at byte 15, inside the "é"
        // (bytes 14-15), and printed as a replacement character.
        let e = kernel_comm("fourteen-bytesé-long").unwrap_err().to_string();
        assert!(e.contains("use `fourteen-bytes`"), "{e}");
        assert!(!e.contains('\u{fffd}'), "{e}");
    }

    /// Issue 29 item 11: `--cpu N` for an offline CPU gave 0 waits with no
    /// note.
    #[test]
    fn offline_cpus_are_named() {
        let f = Filter {
            cpus: Some(vec![1, 3]),
            ..Filter::default()
        };
        assert_eq!(f.offline_note("0-3\n"), None);
        let note = f.offline_note("0,2-3\n").unwrap();
        assert!(
            note.starts_with("--cpu: CPU 1 is offline (online: 0,2-3)"),
            "{note}"
        );
        let note = f.offline_note("0\n").unwrap();
        assert!(
            note.contains("CPU 1,3 are offline") && note.contains("they have no waits"),
            "{note}"
        );
        assert_eq!(Filter::default().offline_note("0"), None);
    }

    #[test]
    fn cpu_lists_must_name_real_cpus() {
        let args = |list: &str| FilterSpec {
            cpu: Some(list.to_string()),
            ..FilterSpec::default()
        };
        let f = resolve(args("0")).unwrap();
        assert_eq!(f.cpu_mask().unwrap()[0], 1);
        assert_eq!(f.needs_btf(), None, "--cpu works with classic tracepoints");
        let e = resolve(args("4000")).unwrap_err().to_string();
        assert!(e.contains("CPU 4000 does not exist"), "{e}");
        let e = resolve(args("x")).unwrap_err().to_string();
        assert!(e.contains("not a CPU list"), "{e}");
        for open_or_empty in ["0-", "-1", "", "0,,1", "1 2"] {
            let e = cpu_list_arg(open_or_empty).unwrap_err();
            assert!(e.contains("not a CPU list"), "{open_or_empty:?}: {e}");
        }
        let e = cpu_list_arg("3-1").unwrap_err();
        assert!(e.contains("range 3-1 is backwards"), "{e}");
        // Regression: numbers past the parser's old bound were "not a CPU list".
        for huge in ["99999", "0-99999", "99999999999999999999999"] {
            let e = cpu_list_arg(huge).unwrap_err();
            assert!(e.contains("does not exist"), "{huge}: {e}");
        }
        assert_eq!(cpu_list_str(&[5, 0, 1, 2]), "0-2,5");
    }
}
