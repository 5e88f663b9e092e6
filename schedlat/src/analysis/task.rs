//! What the kernel reported of a task (`TaskInfo`), for people and JSON:
//! its comm, and its scheduling class as `chrt` and `nice` would show it.

use schedlat_common::victims::TaskInfo;
use serde::Serialize;

/// The task's name: comm up to its NUL (all 16 bytes when it fills them).
pub fn comm(t: &TaskInfo) -> String {
    let len = t.comm.iter().position(|&b| b == 0).unwrap_or(t.comm.len());
    String::from_utf8_lossy(&t.comm[..len]).into_owned()
}

/// include/uapi/linux/sched.h SCHED_* values.
pub fn policy_name(policy: u32) -> &'static str {
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
pub fn nice(t: &TaskInfo) -> i32 {
    t.static_prio as i32 - 120
}

/// "normal 0", "batch 19", "fifo 50" (RT priority), "deadline": the number
/// is what decides among tasks of that class.
pub fn sched_label(t: &TaskInfo) -> String {
    match t.policy {
        1 | 2 => format!("{} {}", policy_name(t.policy), t.rt_priority),
        6 => "deadline".to_string(),
        p => format!("{} {}", policy_name(p), nice(t)),
    }
}

/// "comm pid/tid", or "comm (idle)" for a CPU's idle task (pid 0).
pub fn short(t: &TaskInfo) -> String {
    if t.tid == 0 {
        format!("{} (idle)", comm(t))
    } else {
        format!("{} {}/{}", comm(t), t.tgid, t.tid)
    }
}

/// A task in JSON output (docs/json.md, "TaskInfo").
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TaskJson {
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
pub mod tests {
    use super::*;

    /// A TaskInfo for tests.
    pub fn task(tid: u32, tgid: u32, name: &str, policy: u32, nice: i32, rt: u32) -> TaskInfo {
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
