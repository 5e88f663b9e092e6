//! The running kernel's scheduling context, the facts every verdict about
//! a wait depends on: the live base slice, the scheduler features that
//! decide whether a wakeup preempts (RUN_TO_PARITY, PREEMPT_SHORT,
//! NEXT_BUDDY, PLACE_LAG), HZ, the preemption model and the CPU count.
//! What cannot be read is None with the reason, never a guess.

use std::{fs, path::Path};

use serde::Serialize;

use super::{
    kernel_facts::{self, config_value},
    sched_mechanisms::Mechanisms,
    slice::Slice,
};

/// The features of kernel/sched/features.h that decide preemption.
pub const FEATURES: [&str; 4] = ["RUN_TO_PARITY", "PREEMPT_SHORT", "NEXT_BUDDY", "PLACE_LAG"];

const DEBUGFS: &str = "/sys/kernel/debug";
const DEBUGFS_FEATURES: &str = "/sys/kernel/debug/sched/features";
/// Where debugfs had them before 5.13 gathered the scheduler's files
/// under sched/.
const DEBUGFS_FEATURES_OLD: &str = "/sys/kernel/debug/sched_features";
const DEBUGFS_PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Preemption {
    /// `none`, `voluntary`, `full`, `lazy` or `rt`.
    pub model: String,
    /// Where it was read.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SchedContext {
    pub release: String,
    pub cpus: usize,
    pub hz: Option<u64>,
    pub preemption: Option<Preemption>,
    pub base_slice: Slice,
    /// Each of FEATURES: on, off, or None when not readable (or not in
    /// this kernel's list).
    pub features: Vec<(String, Option<bool>)>,
    /// Why the features could not be read, when they could not.
    pub features_unknown: Option<String>,
    /// sched_ext, the fair deadline server, delayed dequeue.
    pub mechanisms: Mechanisms,
}

impl SchedContext {
    pub fn detect(base_slice: &Slice) -> SchedContext {
        let read = fs::read_to_string(DEBUGFS_FEATURES)
            .or_else(|e| fs::read_to_string(DEBUGFS_FEATURES_OLD).map_err(|_| e));
        let mechanisms = Mechanisms::detect(read.as_deref().ok());
        let (features, features_unknown) = match read {
            Ok(text) => (features_of(&text), None),
            Err(e) => (
                FEATURES.iter().map(|f| (f.to_string(), None)).collect(),
                Some(features_unreadable(
                    e.kind(),
                    &fs::read_to_string("/proc/self/mounts").unwrap_or_default(),
                )),
            ),
        };
        let config = kernel_facts::config_text();
        let version = fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
        let debugfs = fs::read_to_string(DEBUGFS_PREEMPT)
            .ok()
            .and_then(|t| debugfs_preempt(&t));
        let realtime = fs::read_to_string("/sys/kernel/realtime").unwrap_or_default();
        let preemption = rt_build(&version, &realtime, debugfs.as_deref())
            .or_else(|| {
                debugfs.map(|model| Preemption {
                    model,
                    source: DEBUGFS_PREEMPT.into(),
                })
            })
            .or_else(|| {
                boot_preemption(
                    &version,
                    &fs::read_to_string("/proc/cmdline").unwrap_or_default(),
                    config.as_deref(),
                )
            });
        SchedContext {
            release: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|t| t.trim().to_string())
                .unwrap_or_default(),
            cpus: online_cpus(Path::new("/sys/devices/system/cpu/online")),
            hz: config
                .as_deref()
                .and_then(|c| config_value(c, "CONFIG_HZ")?.parse().ok()),
            preemption,
            base_slice: base_slice.clone(),
            features,
            features_unknown,
            mechanisms,
        }
    }

    /// This project's 6.18 VM as schedlat reads it, for tests: HZ 250,
    /// preemption none, a live 1.4 ms slice, lockdown refusing debugfs (the
    /// features unknown, the fair server's presence unknown).
    #[cfg(test)]
    pub fn this_vm() -> SchedContext {
        SchedContext {
            release: "6.18.44".into(),
            cpus: 2,
            hz: Some(250),
            preemption: Some(Preemption {
                model: "none".into(),
                source: "PREEMPT_DYNAMIC default".into(),
            }),
            base_slice: Slice::fixed(1_400_000, "se.slice in /proc/self/sched"),
            features: FEATURES.iter().map(|f| (f.to_string(), None)).collect(),
            features_unknown: Some(
                "/sys/kernel/debug/sched/features: Operation not permitted".into(),
            ),
            mechanisms: Mechanisms {
                fair_server_unknown: Some("debugfs is not mounted".into()),
                ..Mechanisms::default()
            },
        }
    }

    /// One tick, when HZ is known.
    pub fn tick_ns(&self) -> Option<u64> {
        self.hz.filter(|&hz| hz > 0).map(|hz| 1_000_000_000 / hz)
    }

    /// The longest wait EEVDF's design explains for a woken task that is
    /// picked next: the holder's whole slice, plus the tick that notices it
    /// is used up (update_curr -> update_deadline -> resched; the switch
    /// follows at the next tick without HRTICK). None when the slice is
    /// assumed or HZ unknown.
    pub fn design_bound_ns(&self) -> Option<u64> {
        Some(self.base_slice.ns + self.tick_ns()?).filter(|_| self.base_slice.is_live())
    }
}

/// Why the features could not be read: a missing file on a host without
/// debugfs at /sys/kernel/debug (`mounts` as /proc/self/mounts lists them)
/// is the mount missing, not the kernel lacking the file, so say how to
/// mount it; any other error as it is.
fn features_unreadable(kind: std::io::ErrorKind, mounts: &str) -> String {
    let mounted = mounts.lines().any(|l| {
        let mut fields = l.split_whitespace().skip(1);
        fields.next() == Some(DEBUGFS) && fields.next() == Some("debugfs")
    });
    if kind == std::io::ErrorKind::NotFound && !mounted {
        format!("debugfs is not mounted at {DEBUGFS}: mount -t debugfs none {DEBUGFS}")
    } else {
        format!("{DEBUGFS_FEATURES}: {kind}")
    }
}

/// Whether mounting debugfs would let the features be read on this boot:
/// kernel lockdown (securityfs' `lockdown`, or `lockdown=` on the kernel
/// command line) refuses debugfs to root too, so advice to mount it is
/// only given where lockdown is off. Some(false) names the mode; None
/// where neither says.
pub fn debugfs_allowed() -> (Option<bool>, Option<String>) {
    lockdown_state(
        fs::read_to_string("/sys/kernel/security/lockdown")
            .ok()
            .as_deref(),
        &fs::read_to_string("/proc/cmdline").unwrap_or_default(),
    )
}

fn lockdown_state(securityfs: Option<&str>, cmdline: &str) -> (Option<bool>, Option<String>) {
    // securityfs lists every mode with the current one in brackets:
    // `[none] integrity confidentiality`.
    if let Some(text) = securityfs
        && let (Some(a), Some(b)) = (text.find('['), text.find(']'))
        && a < b
    {
        let mode = &text[a + 1..b];
        return (Some(mode == "none"), Some(mode.to_string()));
    }
    match cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("lockdown="))
    {
        Some("none") => (Some(true), None),
        Some(mode) => (Some(false), Some(mode.to_string())),
        None => (None, None),
    }
}

/// The features as debugfs lists them: `NAME` on, `NO_NAME` off.
fn features_of(text: &str) -> Vec<(String, Option<bool>)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    FEATURES
        .iter()
        .map(|&f| {
            let state = if words.contains(&f) {
                Some(true)
            } else if words.iter().any(|w| w.strip_prefix("NO_") == Some(f)) {
                Some(false)
            } else {
                None
            };
            (f.to_string(), state)
        })
        .collect()
}

/// debugfs sched/preempt: `none (voluntary) full lazy`, the current one
/// in parentheses.
fn debugfs_preempt(text: &str) -> Option<String> {
    let current = text.split('(').nth(1)?.split(')').next()?;
    (!current.is_empty()).then(|| current.to_string())
}

/// A PREEMPT_RT build is `rt` whatever else it allows: from 6.12 such a
/// build can also be PREEMPT_DYNAMIC, and debugfs then shows the dynamic
/// mode (`full` on Debian's 7.2 rt), which is not what makes it real-time
/// (its interrupts and softirqs in threads, sleeping locks). The mode is
/// kept in the source. Known by the version string's `PREEMPT_RT` or
/// /sys/kernel/realtime (`1`).
fn rt_build(version: &str, realtime: &str, dynamic_mode: Option<&str>) -> Option<Preemption> {
    let rt = version.split_whitespace().any(|w| w == "PREEMPT_RT") || realtime.trim() == "1";
    rt.then(|| Preemption {
        model: "rt".into(),
        source: match dynamic_mode {
            Some(mode) => format!("PREEMPT_RT build; {DEBUGFS_PREEMPT}: {mode}"),
            None => "PREEMPT_RT build".into(),
        },
    })
}

/// The model the kernel booted with, on a build that is not PREEMPT_RT
/// (`rt_build` tells those first): with PREEMPT_DYNAMIC a `preempt=` on the
/// command line, else the configured default (kernel/sched/core.c
/// preempt_dynamic_init); without it the configured model. A later change
/// through debugfs is not seen here.
fn boot_preemption(version: &str, cmdline: &str, config: Option<&str>) -> Option<Preemption> {
    let dynamic = version.split_whitespace().any(|w| w == "PREEMPT_DYNAMIC");
    if dynamic {
        let arg = cmdline
            .split_whitespace()
            .find_map(|a| a.strip_prefix("preempt="));
        if let Some(model) = arg.filter(|m| ["none", "voluntary", "full", "lazy"].contains(m)) {
            return Some(Preemption {
                model: model.into(),
                source: "preempt= at boot".into(),
            });
        }
    }
    let config = config?;
    let on = |name: &str| config_value(config, name) == Some("y");
    let model = [
        ("CONFIG_PREEMPT_RT", "rt"),
        ("CONFIG_PREEMPT_NONE", "none"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
    ]
    .into_iter()
    .find(|(name, _)| on(name))?
    .1;
    // PREEMPT_DYNAMIC: a change through debugfs after boot is not seen.
    let source = if dynamic {
        "PREEMPT_DYNAMIC default"
    } else {
        "kernel config"
    };
    Some(Preemption {
        model: model.into(),
        source: source.into(),
    })
}

/// CPUs in a sysfs CPU list (`0-1`, `0,2-3`); 1 when unreadable.
fn online_cpus(path: &Path) -> usize {
    let text = fs::read_to_string(path).unwrap_or_default();
    let n: usize = text
        .trim()
        .split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?),
            None => part.parse::<usize>().ok().map(|_| 1),
        })
        .sum();
    n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_read_on_off_and_absent() {
        // 6.18's sched/features, shortened.
        let text = "PLACE_LAG PLACE_DEADLINE_INITIAL PLACE_REL_DEADLINE RUN_TO_PARITY \
                    PREEMPT_SHORT NO_NEXT_BUDDY PICK_BUDDY CACHE_HOT_BUDDY\n";
        let f = features_of(text);
        assert_eq!(
            f,
            vec![
                ("RUN_TO_PARITY".to_string(), Some(true)),
                ("PREEMPT_SHORT".to_string(), Some(true)),
                ("NEXT_BUDDY".to_string(), Some(false)),
                ("PLACE_LAG".to_string(), Some(true)),
            ]
        );
        // CFS (5.10) has neither RUN_TO_PARITY nor PREEMPT_SHORT.
        let cfs = features_of("GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY");
        assert_eq!(cfs[0].1, None);
        assert_eq!(cfs[2].1, Some(false));
    }

    #[test]
    fn lockdown_is_read_from_securityfs_then_the_command_line() {
        assert_eq!(
            lockdown_state(
                Some("[none] integrity confidentiality\n"),
                "lockdown=integrity"
            ),
            (Some(true), Some("none".into()))
        );
        assert_eq!(
            lockdown_state(Some("none [confidentiality]\n"), ""),
            (Some(false), Some("confidentiality".into()))
        );
        assert_eq!(
            lockdown_state(None, "root=/dev/vda lockdown=integrity quiet"),
            (Some(false), Some("integrity".into()))
        );
        assert_eq!(lockdown_state(None, "root=/dev/vda"), (None, None));
    }

    #[test]
    fn unreadable_features_say_when_debugfs_is_not_mounted() {
        use std::io::ErrorKind;
        let bare = "proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n";
        assert_eq!(
            features_unreadable(ErrorKind::NotFound, bare),
            "debugfs is not mounted at /sys/kernel/debug: mount -t debugfs none /sys/kernel/debug"
        );
        // Mounted, the file is what is missing (a kernel without
        // CONFIG_SCHED_DEBUG); refused is refused (lockdown).
        let mounted = format!("{bare}debugfs /sys/kernel/debug debugfs rw 0 0\n");
        assert_eq!(
            features_unreadable(ErrorKind::NotFound, &mounted),
            "/sys/kernel/debug/sched/features: entity not found"
        );
        assert_eq!(
            features_unreadable(ErrorKind::PermissionDenied, bare),
            "/sys/kernel/debug/sched/features: permission denied"
        );
    }

    #[test]
    fn the_preemption_model_from_debugfs_boot_or_config() {
        assert_eq!(
            debugfs_preempt("none (voluntary) full lazy\n").as_deref(),
            Some("voluntary")
        );
        // This project's 6.18 VM: PREEMPT_DYNAMIC, CONFIG_PREEMPT_NONE, no
        // preempt= (dmesg: "Dynamic Preempt: none").
        let config = "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT_LAZY is not set\nCONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
        let version = "#1 SMP PREEMPT_DYNAMIC @0";
        let p = boot_preemption(version, "console=ttyS0 quiet", Some(config)).unwrap();
        assert_eq!(p.model, "none");
        assert!(p.source.contains("PREEMPT_DYNAMIC"), "{}", p.source);
        let p = boot_preemption(version, "quiet preempt=full", Some(config)).unwrap();
        assert_eq!(
            (p.model.as_str(), p.source.as_str()),
            ("full", "preempt= at boot")
        );
        // Debian's 6.1-rt.
        let rt = rt_build("#1 SMP PREEMPT_RT Debian 6.1.90-1", "", None).unwrap();
        assert_eq!(rt.model, "rt");
        // Debian's 7.2 rt: PREEMPT_DYNAMIC too, debugfs says `full`.
        let rt = rt_build("#1 SMP PREEMPT_RT Debian 7.2.13-1", "", Some("full")).unwrap();
        assert_eq!(
            (rt.model.as_str(), rt.source.as_str()),
            (
                "rt",
                "PREEMPT_RT build; /sys/kernel/debug/sched/preempt: full"
            )
        );
        assert_eq!(rt_build("#1 SMP PREEMPT_DYNAMIC", "", Some("full")), None);
        assert_eq!(
            rt_build("#1 SMP PREEMPT_DYNAMIC", "1\n", None).map(|p| p.model),
            Some("rt".to_string())
        );
        // A non-dynamic full-preemption build ignores preempt=.
        let full = "CONFIG_PREEMPT=y\n";
        let p = boot_preemption("#1 SMP PREEMPT", "preempt=none", Some(full)).unwrap();
        assert_eq!(p.model, "full");
        assert_eq!(boot_preemption("#1 SMP", "", None), None);
    }

    #[test]
    fn the_design_bound_needs_a_live_slice_and_hz() {
        let mut c = SchedContext {
            release: "6.18.44".into(),
            cpus: 2,
            hz: Some(250),
            preemption: None,
            base_slice: Slice::fixed(1_400_000, "se.slice in /proc/self/sched"),
            features: vec![],
            features_unknown: None,
            mechanisms: Mechanisms::default(),
        };
        assert_eq!(c.tick_ns(), Some(4_000_000));
        assert_eq!(c.design_bound_ns(), Some(5_400_000));
        c.hz = None;
        assert_eq!(c.design_bound_ns(), None);
        c.hz = Some(1000);
        c.base_slice.not_live = Some("assumed".into());
        assert_eq!(c.design_bound_ns(), None);
    }

    #[test]
    fn cpu_lists_count() {
        let dir = std::env::temp_dir().join(format!("schedlat-cpus-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("online");
        fs::write(&file, "0-1\n").unwrap();
        assert_eq!(online_cpus(&file), 2);
        fs::write(&file, "0,2-3,7\n").unwrap();
        assert_eq!(online_cpus(&file), 4);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(online_cpus(&dir), 1);
    }
}
