//! What the kernel reported of a task ([`TaskInfo`]), for people and JSON:
//! its comm, and its scheduling class as `chrt` and `nice` would show it.

use std::collections::HashSet;

use schedlat_common::victims::TaskInfo;
use serde::Serialize;

/// The task's name: comm up to its NUL (all 16 bytes when it fills them).
pub(crate) fn comm(t: &TaskInfo) -> String {
    let len = t.comm.iter().position(|&b| b == 0).unwrap_or(t.comm.len());
    String::from_utf8_lossy(&t.comm[..len]).into_owned()
}

/// include/uapi/linux/sched.h SCHED_* values.
pub(crate) fn policy_name(policy: u32) -> &'static str {
    match policy {
        0 => "normal",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        7 => "ext",
        _ => "unknown",
    }
}

/// Nice value: static_prio is 120 + nice for every policy
/// (include/linux/sched/prio.h NICE_TO_PRIO).
pub(crate) fn nice(t: &TaskInfo) -> i32 {
    t.static_prio as i32 - 120
}

/// "normal 0", "batch 19", "fifo 50" (RT priority), "deadline": the number
/// is what decides among tasks of that class.
pub(crate) fn sched_label(t: &TaskInfo) -> String {
    match t.policy {
        1 | 2 => format!("{} {}", policy_name(t.policy), t.rt_priority),
        6 => "deadline".to_string(),
        p => format!("{} {}", policy_name(p), nice(t)),
    }
}

/// "comm pid/tid", or "comm (idle)" for a CPU's idle task (pid 0).
pub(crate) fn short(t: &TaskInfo) -> String {
    if t.tid == 0 {
        format!("{} (idle)", comm(t))
    } else {
        format!("{} {}/{}", comm(t), t.tgid, t.tid)
    }
}

/// What a wait that ended on an idle CPU was: its culprit is the idle task
/// (swapper), which is not contention. Either the task's cgroup had used its
/// CPU-bandwidth quota (the task was runnable, the group was throttled, and
/// the CPU idled until the next period), or the task was woken onto an idle
/// CPU and the wait is the wakeup path. Told apart by the cgroup's cpu.stat
/// (sys/throttle.rs): whether it, or a parent, was throttled in the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum IdleWait {
    Throttled,
    WokenOntoIdleCpu,
}

impl IdleWait {
    /// For the process that waited, given the processes whose cgroup was
    /// throttled.
    pub(crate) fn of(victim_pid: u32, throttled: &HashSet<u32>) -> IdleWait {
        if throttled.contains(&victim_pid) {
            IdleWait::Throttled
        } else {
            IdleWait::WokenOntoIdleCpu
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            IdleWait::Throttled => "(throttled: cgroup quota)",
            IdleWait::WokenOntoIdleCpu => "(idle: woken onto an idle CPU)",
        }
    }

    /// For narrow columns (`top` at 80 columns).
    pub(crate) fn short(self) -> &'static str {
        match self {
            IdleWait::Throttled => "throttled",
            IdleWait::WokenOntoIdleCpu => "idle wake",
        }
    }
}

/// `short`, for the culprit of a wait of process `victim_pid`: an idle
/// culprit says what the wait was instead of "(idle)".
pub(crate) fn culprit(t: &TaskInfo, victim_pid: u32, throttled: &HashSet<u32>) -> String {
    if t.tid == 0 {
        format!(
            "{} {}",
            comm(t),
            IdleWait::of(victim_pid, throttled).label()
        )
    } else {
        short(t)
    }
}

/// A task in JSON output (docs/json.md, "TaskInfo").
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct TaskJson {
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    pub policy: &'static str,
    pub nice: i32,
    pub rt_priority: u32,
}

impl From<&TaskInfo> for TaskJson {
    fn from(t: &TaskInfo) -> TaskJson {
        TaskJson {
            tid: t.tid,
            pid: t.tgid,
            comm: comm(t),
            policy: policy_name(t.policy),
            nice: nice(t),
            rt_priority: t.rt_priority,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A TaskInfo for tests.
    pub(crate) fn task(
        tid: u32,
        tgid: u32,
        name: &str,
        policy: u32,
        nice: i32,
        rt: u32,
    ) -> TaskInfo {
        let mut comm = [0u8; 16];
        comm[..name.len()].copy_from_slice(name.as_bytes());
        TaskInfo {
            tid,
            tgid,
            comm,
            policy,
            static_prio: (120 + nice) as u32,
            rt_priority: rt,
            _pad: 0,
        }
    }

    #[test]
    fn labels_say_what_decides_within_the_class() {
        assert_eq!(sched_label(&task(1, 1, "a", 0, -5, 0)), "normal -5");
        assert_eq!(sched_label(&task(1, 1, "a", 1, 0, 50)), "fifo 50");
        assert_eq!(sched_label(&task(1, 1, "a", 3, 19, 0)), "batch 19");
        assert_eq!(sched_label(&task(1, 1, "a", 6, 0, 0)), "deadline");
        assert_eq!(policy_name(4), "unknown");
    }

    #[test]
    fn comm_stops_at_nul_or_fills_16_bytes() {
        assert_eq!(comm(&task(1, 1, "cal.sh", 0, 0, 0)), "cal.sh");
        assert_eq!(
            comm(&task(1, 1, "0123456789abcdef", 0, 0, 0)),
            "0123456789abcdef"
        );
        assert_eq!(short(&task(917, 900, "cal.sh", 0, 0, 0)), "cal.sh 900/917");
        assert_eq!(short(&task(0, 0, "swapper/1", 0, 0, 0)), "swapper/1 (idle)");
        // Issue 19: an idle culprit says what the wait was.
        let idle = task(0, 0, "swapper/1", 0, 0, 0);
        let throttled = HashSet::from([42]);
        assert_eq!(
            culprit(&idle, 42, &throttled),
            "swapper/1 (throttled: cgroup quota)"
        );
        assert_eq!(
            culprit(&idle, 7, &throttled),
            "swapper/1 (idle: woken onto an idle CPU)"
        );
        let busy = task(9, 9, "hog", 0, 0, 0);
        assert_eq!(culprit(&busy, 42, &throttled), short(&busy));
    }

    #[test]
    fn json_names_pid_and_tid() {
        let j = TaskJson::from(&task(917, 900, "cal.sh", 0, 5, 0));
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["pid"], 900);
        assert_eq!(v["tid"], 917);
        assert_eq!(v["nice"], 5);
        assert_eq!(v["policy"], "normal");
    }
}
