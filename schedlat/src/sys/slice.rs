//! The scheduler's time slice, the yardstick the shape rule measures waits
//! against: a woken task that waits a whole slice waited for someone else's
//! slice to end (a sleeper sharing its CPU with hogs: ~3 ms behind a hog under EEVDF).
//! Read live: from debugfs, else from a fair task's `se.slice` in
//! /proc/PID/sched (EEVDF kernels print it; a task without a custom slice
//! carries the base slice, kernel/sched/debug.c proc_sched_show_task). The
//! scaling of the base value changed between kernels (0.75 ms x (1 +
//! log2 CPUs) on 6.6, 1.4 ms on a 2-CPU 6.18), so when neither can be read
//! the slice is said to be unknown and the value assumed is named.

use std::{fs, path::Path};

use serde::Serialize;

/// EEVDF's base slice (6.6+) or CFS's minimum granularity (before), as
/// debugfs publishes them (already scaled for the number of CPUs), and
/// where CFS kept the latter before debugfs (5.13 moved the sched sysctls
/// there; /proc/sys/kernel has it with CONFIG_SCHED_DEBUG).
const LIVE_FILES: [&str; 3] = [
    "/sys/kernel/debug/sched/base_slice_ns",
    "/sys/kernel/debug/sched/min_granularity_ns",
    "/proc/sys/kernel/sched_min_granularity_ns",
];

/// The kernel's unscaled default (sysctl_sched_base_slice = 0.75 ms).
const DEFAULT_NORMALIZED_NS: u64 = 750_000;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Slice {
    pub ns: u64,
    /// Where the value came from, for the evidence line.
    pub source: String,
    /// Why the live value could not be read, when the kernel's default is
    /// used: said once per run by the command, not in every verdict line.
    #[serde(skip)]
    pub not_live: Option<String>,
}

impl Slice {
    /// From debugfs when it is mounted and readable, else from a fair
    /// task's se.slice, else unknown: the old formula's value, said to be
    /// an assumption (and why).
    pub fn detect() -> Slice {
        let mut first_error = None;
        for file in LIVE_FILES {
            match fs::read_to_string(file) {
                Ok(text) => {
                    if let Some(ns) = text.trim().parse::<u64>().ok().filter(|&ns| ns > 0) {
                        return Slice {
                            ns,
                            source: live_source(file),
                            not_live: None,
                        };
                    }
                }
                Err(e) if file.starts_with(DEBUGFS_SCHED) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {}
            }
        }
        for pid in ["self", "1"] {
            let path = format!("/proc/{pid}/sched");
            if let Some(ns) = fs::read_to_string(&path)
                .ok()
                .and_then(|t| fair_se_slice(&t))
            {
                return Slice {
                    ns,
                    source: format!("se.slice in {path}"),
                    not_live: None,
                };
            }
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Slice {
            ns: default_ns(cpus),
            source: format!("unknown; assumed 0.75 ms x (1 + log2 {cpus} CPUs), 6.6's formula"),
            not_live: Some(why_not_live(
                first_error.as_ref(),
                &lockdown_mode(),
                Path::new(DEBUGFS_SCHED).exists() || Path::new(LIVE_FILES[0]).exists(),
                // SAFETY: geteuid has no preconditions and cannot fail.
                unsafe { libc::geteuid() } == 0,
            )),
        }
    }

    /// Read from the running kernel (debugfs or se.slice), not assumed.
    pub fn is_live(&self) -> bool {
        self.not_live.is_none()
    }

    /// A fixed slice (tests, and `compare` of recordings from elsewhere).
    pub fn fixed(ns: u64, source: &str) -> Slice {
        Slice {
            ns,
            source: source.to_string(),
            not_live: None,
        }
    }
}

const DEBUGFS_SCHED: &str = "/sys/kernel/debug/sched";

/// How a report names a live file: `debugfs base_slice_ns`, `sysctl
/// sched_min_granularity_ns`.
fn live_source(file: &str) -> String {
    let name = Path::new(file)
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    if file.starts_with(DEBUGFS_SCHED) {
        format!("debugfs {name}")
    } else {
        format!("sysctl {name}")
    }
}

/// The active kernel lockdown mode ("integrity", "confidentiality"), from
/// the bracketed word of /sys/kernel/security/lockdown.
fn lockdown_mode() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let mode = text.split('[').nth(1)?.split(']').next()?.to_string();
    (mode != "none").then_some(mode)
}

/// One sentence: why the live slice was not read, and what would fix it.
fn why_not_live(
    error: Option<&std::io::Error>,
    lockdown: &Option<String>,
    mounted: bool,
    root: bool,
) -> String {
    use std::io::ErrorKind;
    let default = "no fair task's se.slice in /proc/PID/sched either (kernels before 6.6): the base slice is unknown";
    match (error.map(|e| e.kind()), lockdown) {
        (Some(ErrorKind::PermissionDenied), Some(mode)) if mounted => {
            format!("kernel lockdown ({mode}) blocks reading {DEBUGFS_SCHED}; {default}")
        }
        // Root refused with debugfs mounted and no lockdown to read (no
        // securityfs): lockdown, or debugfs restricted at boot.
        (Some(ErrorKind::PermissionDenied), _) if root && mounted => format!(
            "the kernel refuses reading {DEBUGFS_SCHED} although debugfs is mounted (kernel lockdown or a debugfs= restriction); {default}"
        ),
        (Some(ErrorKind::PermissionDenied), _) => {
            format!("cannot read {DEBUGFS_SCHED} (needs root); {default}")
        }
        _ if !mounted => format!(
            "debugfs is not mounted; {default} (`mount -t debugfs none /sys/kernel/debug` for the live value)"
        ),
        _ => {
            format!("this kernel publishes no base slice in {DEBUGFS_SCHED}; {default}")
        }
    }
}

/// The `se.slice` of a /proc/PID/sched text whose task is of the fair
/// class without a real-time policy (policy 0 SCHED_NORMAL, 3 SCHED_BATCH,
/// 5 SCHED_IDLE); None when the kernel prints no slice (CFS kernels).
fn fair_se_slice(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().parse::<u64>().ok())?
        })
    };
    matches!(field("policy")?, 0 | 3 | 5)
        .then(|| field("se.slice"))?
        .filter(|&ns| ns > 0)
}

/// kernel/sched/fair.c get_update_sysctl_factor() with the default
/// SCHED_TUNABLESCALING_LOG: 0.75 ms x (1 + ilog2(min(cpus, 8))).
pub fn default_ns(cpus: usize) -> u64 {
    let cpus = cpus.clamp(1, 8);
    DEFAULT_NORMALIZED_NS * (1 + cpus.ilog2() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scales_like_the_kernel() {
        assert_eq!(default_ns(1), 750_000);
        assert_eq!(default_ns(2), 1_500_000);
        assert_eq!(default_ns(8), 3_000_000);
        assert_eq!(default_ns(64), 3_000_000);
    }

    /// Issue 19: the reason is said once and is the real one: lockdown
    /// with debugfs mounted is not "mount debugfs".
    #[test]
    fn says_why_the_live_value_is_missing() {
        use std::io::{Error, ErrorKind};
        let denied = Error::from(ErrorKind::PermissionDenied);
        let lockdown = Some("confidentiality".to_string());
        let text = why_not_live(Some(&denied), &lockdown, true, true);
        assert!(
            text.contains("lockdown (confidentiality)") && !text.contains("mount"),
            "{text}"
        );
        let text = why_not_live(Some(&Error::from(ErrorKind::NotFound)), &None, false, true);
        assert!(text.contains("debugfs is not mounted"), "{text}");
        let text = why_not_live(Some(&denied), &None, true, false);
        assert!(text.contains("needs root"), "{text}");
        let text = why_not_live(Some(&denied), &None, true, true);
        assert!(
            text.contains("refuses") && !text.contains("needs root"),
            "{text}"
        );
    }

    #[test]
    fn the_source_no_longer_repeats_advice() {
        let s = Slice::detect();
        assert!(!s.source.contains("mount"), "{}", s.source);
        assert_eq!(
            s.is_live(),
            s.source.starts_with("debugfs")
                || s.source.starts_with("sysctl")
                || s.source.starts_with("se.slice")
        );
    }

    #[test]
    fn live_files_are_named_by_where_they_live() {
        assert_eq!(live_source(LIVE_FILES[0]), "debugfs base_slice_ns");
        assert_eq!(
            live_source(LIVE_FILES[2]),
            "sysctl sched_min_granularity_ns"
        );
    }

    /// Issue 24: on a 2-CPU 6.18 (lockdown refuses debugfs) every task's
    /// se.slice reads 1.4 ms while 6.6's formula gives 1.5 ms: the live
    /// value is read, never the formula silently.
    #[test]
    fn the_live_slice_is_a_fair_tasks_se_slice() {
        // Captured from /proc/self/sched on the 6.18 test machine.
        let fair = "cat (21131, #threads: 1)\n\
            -------------------------------------------------------------------\n\
            se.load.weight                               :              1048576\n\
            policy                                       :                    0\n\
            prio                                         :                  120\n\
            se.slice                                     :              1400000\n";
        assert_eq!(fair_se_slice(fair), Some(1_400_000));
        let fifo = fair.replace("                    0\n", "                    1\n");
        assert_eq!(
            fair_se_slice(&fifo),
            None,
            "a SCHED_FIFO task has no fair slice"
        );
        // A CFS kernel (before 6.6) prints no se.slice.
        let cfs = "policy                                       :                    0\n";
        assert_eq!(fair_se_slice(cfs), None);
    }

    /// Where the kernel does publish it, the slice is read live: on any
    /// 6.6+ kernel schedlat's own /proc/self/sched has se.slice.
    #[test]
    fn this_kernel_gives_a_live_slice() {
        let release = crate::sys::kernel_facts::release();
        let s = Slice::detect();
        if release >= crate::sys::kernel_facts::Release(6, 6) {
            assert!(s.is_live(), "{release:?}: {s:?}");
        } else {
            assert!(s.source.starts_with("unknown") || s.is_live(), "{s:?}");
        }
    }
}
