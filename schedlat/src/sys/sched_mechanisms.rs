//! The scheduler mechanisms of 6.12 and later that change what a wait
//! means, as the running kernel has them: a sched_ext scheduler in place of
//! the fair class (its dispatch queues decide, not EEVDF's rules), the fair
//! deadline server that runs fair tasks behind a real-time hog (instead of
//! RT throttling), and delayed dequeue (a task that blocked stays queued
//! until picked); and RT throttling's budget, which bounds a fair task's
//! wait behind a real-time one where no server does. Each is read from the kernel's own files; what cannot be
//! read is None with the reason, never inferred from the version.

use std::{fs, path::Path};

use serde::Serialize;

use super::host;

const SCHED_EXT: &str = "/sys/kernel/sched_ext";
/// Under debugfs, wherever it is mounted.
const FAIR_SERVER: &str = "sched/fair_server";
const RT_SYSCTLS: &str = "/proc/sys/kernel";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SchedExt {
    /// `disabled`, `enabling`, `enabled` or `disabling`
    /// (/sys/kernel/sched_ext/state).
    pub state: String,
    /// The attached scheduler's name (root/ops), when one is.
    pub scheduler: Option<String>,
    /// Whether it manages every task but the real-time and deadline ones
    /// (`switch_all` 1), or only those that chose SCHED_EXT (0,
    /// SCX_OPS_SWITCH_PARTIAL); None where unreadable.
    pub switch_all: Option<bool>,
    /// Its event counters (root/events, 6.16+), name and count, since it
    /// was attached.
    pub events: Vec<(String, u64)>,
    /// The same counters over the report's window (`refresh`): those that
    /// moved, by how much. None before a window has passed, or when the
    /// scheduler changed meanwhile.
    pub window_events: Option<Vec<(String, u64)>>,
}

impl SchedExt {
    /// The counters that moved between `before` and now, when the same
    /// scheduler was attached at both.
    fn moved_since(&self, before: &SchedExt) -> Option<Vec<(String, u64)>> {
        if self.scheduler != before.scheduler || self.running().is_none() {
            return None;
        }
        let then = |name: &str| before.events.iter().find(|(n, _)| n == name).map(|e| e.1);
        Some(
            self.events
                .iter()
                .filter_map(|(name, now)| {
                    let d = now.saturating_sub(then(name).unwrap_or(0));
                    (d > 0).then(|| (name.clone(), d))
                })
                .collect(),
        )
    }

    /// The scheduler's name while one is attached.
    pub fn running(&self) -> Option<&str> {
        (self.state == "enabled")
            .then_some(self.scheduler.as_deref())
            .flatten()
    }

    /// A scheduler `name` attached, managing only the tasks that chose
    /// SCHED_EXT, with no events read: the reports' tests' fixture.
    #[cfg(test)]
    pub(crate) fn attached(name: &str) -> SchedExt {
        SchedExt {
            state: "enabled".into(),
            scheduler: Some(name.into()),
            switch_all: Some(false),
            events: vec![],
            window_events: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeadlineServer {
    /// CPU 0's server (the same on every CPU unless set by hand).
    pub runtime_ns: Option<u64>,
    pub period_ns: Option<u64>,
    /// Why the values could not be read, when they could not.
    pub unreadable: Option<String>,
}

/// What the running kernel does; None where the kernel has no such
/// mechanism or it could not be told (`unknown` says why).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Mechanisms {
    /// None: the kernel has no sched_ext (no /sys/kernel/sched_ext).
    pub sched_ext: Option<SchedExt>,
    /// None: no fair deadline server seen (see `fair_server_unknown`).
    pub fair_server: Option<DeadlineServer>,
    /// Why the server's presence is unknown (debugfs not mounted).
    pub fair_server_unknown: Option<String>,
    /// DELAY_DEQUEUE on or off, from the scheduler's features; None when
    /// they could not be read or the kernel has no such feature (before
    /// 6.12).
    pub delayed_dequeue: Option<bool>,
    /// RT throttling's budget; None when the sysctls are unreadable.
    pub rt_throttling: Option<RtThrottling>,
}

/// /proc/sys/kernel/sched_rt_runtime_us of sched_rt_period_us: real-time
/// tasks may run `runtime_us` of every `period_us` (-1: no limit).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct RtThrottling {
    pub runtime_us: i64,
    pub period_us: u64,
}

impl Mechanisms {
    /// `features`: the text of debugfs sched/features, when it was read.
    pub fn detect(features: Option<&str>) -> Mechanisms {
        let (fair_server, fair_server_unknown) = match host::debugfs() {
            Some(debugfs) => fair_server(&debugfs.join(FAIR_SERVER)),
            None => (None, Some("debugfs is not mounted".to_string())),
        };
        Mechanisms {
            sched_ext: sched_ext(Path::new(SCHED_EXT)),
            fair_server,
            fair_server_unknown,
            delayed_dequeue: features.and_then(delayed_dequeue),
            rt_throttling: rt_throttling(Path::new(RT_SYSCTLS)),
        }
    }

    /// Reads sched_ext's state again at the end of a report's window: a
    /// scheduler attached or detached since is seen, and its event
    /// counters are given over the window.
    pub fn refresh_sched_ext(&mut self) {
        let now = sched_ext(Path::new(SCHED_EXT));
        self.sched_ext = match (now, self.sched_ext.take()) {
            (Some(mut now), Some(before)) => {
                now.window_events = now.moved_since(&before);
                Some(now)
            }
            (now, _) => now,
        };
    }

    /// What lets a fair task run beside a real-time task that keeps its
    /// CPU, for the waits declined because another class held it: the
    /// fair deadline server (6.12+), else RT throttling, with how long
    /// such a wait can last.
    pub fn behind_another_class(&self) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        let throttling = match self.rt_throttling {
            Some(RtThrottling { runtime_us, .. }) if runtime_us < 0 => {
                "RT throttling is off (sched_rt_runtime_us -1): nothing makes a real-time task that never sleeps give its CPU up".to_string()
            }
            Some(RtThrottling {
                runtime_us,
                period_us,
            }) => format!(
                "RT throttling lets real-time tasks run {} ms of every {} ms (sched_rt_runtime_us, sched_rt_period_us), so such a wait can last {} ms",
                ms(runtime_us as u64),
                ms(period_us),
                ms(runtime_us as u64)
            ),
            None => "RT throttling's budget is unreadable (/proc/sys/kernel/sched_rt_runtime_us)".to_string(),
        };
        match (&self.fair_server, &self.fair_server_unknown) {
            (Some(s), _) => match (s.runtime_ns, s.period_ns) {
                (Some(r), Some(p)) => format!(
                    "the fair deadline server runs fair tasks {} ms of every {} ms beside it, so such a wait can last {} ms",
                    ms(r / 1000),
                    ms(p / 1000),
                    ms(p.saturating_sub(r) / 1000)
                ),
                _ => format!(
                    "the fair deadline server runs fair tasks beside it, a share of every period ({}; the kernel's default is 50 ms of every 1000 ms, a wait of up to 950 ms)",
                    s.unreadable.as_deref().unwrap_or("values unreadable")
                ),
            },
            (None, Some(why)) => format!(
                "whether a fair deadline server (6.12+) runs fair tasks beside it is unknown ({why}); without one, {throttling}"
            ),
            (None, None) => throttling,
        }
    }

    /// One line for `check` and the kernel context:
    /// `sched_ext scx_rustland (enabled); fair server 50 ms every 1000 ms;
    /// delayed dequeue on`.
    pub fn summary(&self) -> String {
        let ext = match &self.sched_ext {
            None => "no sched_ext".to_string(),
            Some(ext) => match (ext.running(), &ext.window_events) {
                (Some(name), Some(moved)) if !moved.is_empty() => {
                    let moved: Vec<String> =
                        moved.iter().map(|(n, c)| format!("{n} {c}")).collect();
                    format!(
                        "sched_ext scheduler {name} attached (its events in this window: {})",
                        moved.join(", ")
                    )
                }
                (Some(name), _) => format!("sched_ext scheduler {name} attached"),
                (None, _) => format!("sched_ext {}", ext.state),
            },
        };
        let server = match (&self.fair_server, &self.fair_server_unknown) {
            (Some(s), _) => match (s.runtime_ns, s.period_ns, &s.unreadable) {
                (Some(r), Some(p), _) => format!(
                    "fair deadline server {} ms every {} ms",
                    r / 1_000_000,
                    p / 1_000_000
                ),
                (_, _, why) => format!(
                    "fair deadline server present ({})",
                    why.as_deref().unwrap_or("values unreadable")
                ),
            },
            (None, Some(why)) => format!("fair deadline server unknown ({why})"),
            (None, None) => "no fair deadline server".to_string(),
        };
        let delayed = match self.delayed_dequeue {
            Some(true) => "delayed dequeue on",
            Some(false) => "delayed dequeue off",
            None => "delayed dequeue unknown",
        };
        format!("{ext}; {server}; {delayed}")
    }
}

fn sched_ext(dir: &Path) -> Option<SchedExt> {
    let state = fs::read_to_string(dir.join("state")).ok()?;
    let root = dir.join("root");
    Some(SchedExt {
        state: state.trim().to_string(),
        switch_all: fs::read_to_string(dir.join("switch_all"))
            .ok()
            .map(|s| s.trim() == "1"),
        scheduler: fs::read_to_string(root.join("ops"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        events: fs::read_to_string(root.join("events"))
            .map(|t| events(&t))
            .unwrap_or_default(),
        window_events: None,
    })
}

/// `NAME COUNT` lines (SCX_EV_SELECT_CPU_FALLBACK 0, ...).
fn events(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (name, count) = l.split_once(char::is_whitespace)?;
            Some((name.to_string(), count.trim().parse().ok()?))
        })
        .collect()
}

/// The server under a mounted debugfs: present when its directory is; its
/// values need debugfs to be readable (lockdown and some kernels refuse
/// them: EPERM on this project's 6.18 VM).
fn fair_server(dir: &Path) -> (Option<DeadlineServer>, Option<String>) {
    if !dir.exists() {
        return (None, None);
    }
    let cpu0 = dir.join("cpu0");
    let read = |name: &str| -> Result<u64, String> {
        let path = cpu0.join(name);
        let text =
            fs::read_to_string(&path).map_err(|e| format!("{}: {}", path.display(), e.kind()))?;
        text.trim()
            .parse()
            .map_err(|_| format!("{}: not a number", path.display()))
    };
    let server = match (read("runtime"), read("period")) {
        (Ok(r), Ok(p)) => DeadlineServer {
            runtime_ns: Some(r),
            period_ns: Some(p),
            unreadable: None,
        },
        (Err(e), _) | (_, Err(e)) => DeadlineServer {
            runtime_ns: None,
            period_ns: None,
            unreadable: Some(e),
        },
    };
    (Some(server), None)
}

fn rt_throttling(dir: &Path) -> Option<RtThrottling> {
    let read = |name: &str| {
        fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse::<i64>()
            .ok()
    };
    Some(RtThrottling {
        runtime_us: read("sched_rt_runtime_us")?,
        period_us: u64::try_from(read("sched_rt_period_us")?).ok()?,
    })
}

/// DELAY_DEQUEUE in debugfs sched/features: `DELAY_DEQUEUE` on,
/// `NO_DELAY_DEQUEUE` off, absent before 6.12.
fn delayed_dequeue(features: &str) -> Option<bool> {
    features.split_whitespace().find_map(|w| match w {
        "DELAY_DEQUEUE" => Some(true),
        "NO_DELAY_DEQUEUE" => Some(false),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("schedlat-mech-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_sched_ext_scheduler_is_named_while_enabled() {
        let dir = scratch("ext");
        assert_eq!(sched_ext(&dir.join("absent")), None);
        fs::write(dir.join("state"), "disabled\n").unwrap();
        let off = sched_ext(&dir).unwrap();
        assert_eq!((off.state.as_str(), off.running()), ("disabled", None));
        fs::create_dir_all(dir.join("root")).unwrap();
        fs::write(dir.join("state"), "enabled\n").unwrap();
        fs::write(dir.join("root/ops"), "simple\n").unwrap();
        fs::write(
            dir.join("root/events"),
            "SCX_EV_SELECT_CPU_FALLBACK 3\nSCX_EV_DISPATCH_KEEP_LAST 0\n",
        )
        .unwrap();
        let on = sched_ext(&dir).unwrap();
        assert_eq!(on.running(), Some("simple"));
        assert_eq!(on.events[0], ("SCX_EV_SELECT_CPU_FALLBACK".to_string(), 3));
        // Over a window: the counters that moved, by how much.
        fs::write(
            dir.join("root/events"),
            "SCX_EV_SELECT_CPU_FALLBACK 10\nSCX_EV_DISPATCH_KEEP_LAST 0\n",
        )
        .unwrap();
        let later = sched_ext(&dir).unwrap();
        assert_eq!(
            later.moved_since(&on),
            Some(vec![("SCX_EV_SELECT_CPU_FALLBACK".to_string(), 7)])
        );
        let other = SchedExt {
            scheduler: Some("rusty".into()),
            ..later.clone()
        };
        assert_eq!(other.moved_since(&on), None, "another scheduler's counters");
        let m = Mechanisms {
            sched_ext: Some(SchedExt {
                window_events: later.moved_since(&on),
                ..later
            }),
            ..Mechanisms::default()
        };
        assert!(
            m.summary().starts_with(
                "sched_ext scheduler simple attached (its events in this window: SCX_EV_SELECT_CPU_FALLBACK 7)"
            ),
            "{}",
            m.summary()
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_fair_server_is_read_or_said_unreadable() {
        let dir = scratch("dl");
        let server = dir.join("sched/fair_server");
        // debugfs without the server (before 6.12).
        assert_eq!(fair_server(&server), (None, None));
        fs::create_dir_all(server.join("cpu0")).unwrap();
        let unreadable = fair_server(&server).0.unwrap();
        assert!(unreadable.unreadable.unwrap().contains("runtime"));
        fs::write(server.join("cpu0/runtime"), "50000000\n").unwrap();
        fs::write(server.join("cpu0/period"), "1000000000\n").unwrap();
        let read = fair_server(&server).0.unwrap();
        assert_eq!(
            (read.runtime_ns, read.period_ns),
            (Some(50_000_000), Some(1_000_000_000))
        );
        let m = Mechanisms {
            fair_server: Some(read),
            delayed_dequeue: Some(true),
            ..Mechanisms::default()
        };
        assert_eq!(
            m.summary(),
            "no sched_ext; fair deadline server 50 ms every 1000 ms; delayed dequeue on"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn delayed_dequeue_from_the_features() {
        // 6.18's sched/features, shortened.
        let f = "PLACE_LAG RUN_TO_PARITY PREEMPT_SHORT DELAY_DEQUEUE DELAY_ZERO NO_NEXT_BUDDY";
        assert_eq!(delayed_dequeue(f), Some(true));
        assert_eq!(delayed_dequeue("NO_DELAY_DEQUEUE DELAY_ZERO"), Some(false));
        // 6.1 (before 6.12).
        assert_eq!(delayed_dequeue("GENTLE_FAIR_SLEEPERS START_DEBIT"), None);
    }

    #[test]
    fn waits_behind_another_class_say_what_lets_fair_tasks_run() {
        let rt = Some(RtThrottling {
            runtime_us: 950_000,
            period_us: 1_000_000,
        });
        let server = |runtime_ns, period_ns, unreadable: Option<&str>| Mechanisms {
            fair_server: Some(DeadlineServer {
                runtime_ns,
                period_ns,
                unreadable: unreadable.map(String::from),
            }),
            rt_throttling: rt,
            ..Mechanisms::default()
        };
        let s = server(Some(50_000_000), Some(1_000_000_000), None).behind_another_class();
        assert!(
            s.contains("50 ms of every 1000 ms") && s.contains("can last 950 ms"),
            "{s}"
        );
        let s = server(None, None, Some("runtime: permission denied")).behind_another_class();
        assert!(
            s.contains("permission denied") && s.contains("default"),
            "{s}"
        );
        let old = Mechanisms {
            rt_throttling: rt,
            ..Mechanisms::default()
        };
        let s = old.behind_another_class();
        assert!(
            s.starts_with("RT throttling lets") && s.contains("can last 950 ms"),
            "{s}"
        );
        let unknown = Mechanisms {
            fair_server_unknown: Some("debugfs is not mounted".into()),
            rt_throttling: Some(RtThrottling {
                runtime_us: -1,
                period_us: 1_000_000,
            }),
            ..Mechanisms::default()
        };
        let s = unknown.behind_another_class();
        assert!(
            s.contains("unknown (debugfs is not mounted)") && s.contains("off"),
            "{s}"
        );
    }

    #[test]
    fn rt_throttling_is_read_from_the_sysctls() {
        let dir = scratch("rt");
        assert_eq!(rt_throttling(&dir), None);
        fs::write(dir.join("sched_rt_runtime_us"), "-1\n").unwrap();
        fs::write(dir.join("sched_rt_period_us"), "1000000\n").unwrap();
        assert_eq!(
            rt_throttling(&dir),
            Some(RtThrottling {
                runtime_us: -1,
                period_us: 1_000_000
            })
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
