//! Slow events for people (one aligned line each) and as JSON Lines
//! (docs/json.md, `schedlat.slow.v1`).

use schedlat_common::victims::{RQ_LEN_UNKNOWN, SlowEvent, TaskInfo};
use serde::Serialize;

use crate::{
    analysis::{
        fmt_ns,
        stacks::HolderStacks,
        task::{self, IdleWait, TaskJson},
    },
    collect::workloads::TaskWorkload,
    output::{decision::wait::WaitDecision, escape, stacks::StacksJson, workload},
    sys::clock::{WallClock, local_time_us},
};

pub(crate) const SCHEMA: &str = "schedlat.slow.v1";

pub(crate) const HEADER: &str = "TIME             CPU COMM                 PID     TID       WAIT SCHED      CULPRIT              PID     TID SCHED       RQ  DECISION  WORKLOAD";

/// The workloads of an event's two tasks (the cgroups they were in when the
/// event was read), as `victims` names its rows' tasks: `Exited` where a
/// task had exited by then, none for the idle task.
#[derive(Clone, Copy, Default)]
pub(crate) struct EventWorkloads<'a> {
    pub victim: Option<&'a TaskWorkload>,
    pub culprit: Option<&'a TaskWorkload>,
}

/// One event, then the scheduler's decision of it (docs/decision.md) when
/// the split saw it; `idle` says what a wait that ended on an idle CPU
/// (culprit swapper) was, after the columns; last, the workload of the
/// task that waited (its culprit's is in the JSON).
pub(crate) fn line(
    e: &SlowEvent,
    idle: Option<IdleWait>,
    clock: WallClock,
    workloads: EventWorkloads<'_>,
) -> String {
    let rq = if e.rq_len == RQ_LEN_UNKNOWN {
        "-".to_string()
    } else {
        e.rq_len.to_string()
    };
    format!(
        "{} {:>3} {:<16} {:>7} {:>7} {:>10} {:<10} {:<16} {:>7} {:>7} {:<10} {:>3}{}{}  {}\n",
        local_time_us(clock.unix_ns(e.at_ns)),
        e.cpu,
        escape::comm(&e.victim),
        e.victim.tgid,
        e.victim.tid,
        fmt_ns(e.wait_ns),
        task::sched_label(&e.victim),
        escape::comm(&e.culprit),
        e.culprit.tgid,
        e.culprit.tid,
        task::sched_label(&e.culprit),
        rq,
        WaitDecision::of(e.decided).map_or(String::new(), |d| format!("  {}", d.text())),
        idle.map_or(String::new(), |i| format!("  {}", i.label())),
        workload::cell(workloads.victim),
    )
}

/// "lost N events (ring buffer full)", in the stream where it happened.
pub(crate) fn lost_line(lost: u64) -> String {
    format!("lost {lost} slow events: the ring buffer was full (the reader fell behind)\n")
}

/// The closing line of a text run.
pub(crate) fn summary(events: u64, lost: u64, threshold_ns: u64) -> String {
    format!(
        "{events} waits of at least {}; lost {lost} (ring buffer full)\n",
        fmt_ns(threshold_ns)
    )
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Json {
    Wait {
        schema: &'static str,
        time_unix_ns: u64,
        cpu: u32,
        wait_ns: u64,
        /// Null when the kernel's BTF lacks task->se.cfs_rq->rq.
        rq_len: Option<u32>,
        // Boxed: a wait is much larger than the other objects.
        victim: Box<EventTask>,
        culprit: Box<EventTask>,
        /// An idle culprit (the wait ended on an idle CPU): "throttled" or
        /// "woken-onto-idle-cpu".
        #[serde(skip_serializing_if = "Option::is_none")]
        idle_wait: Option<IdleWait>,
        /// The scheduler's decision of the wait (output/decision/wait.rs); null
        /// when the decision split is off or did not see it.
        decision: Option<serde_json::Value>,
        /// With `--stacks`: what the culprit was running (docs/stacks.md).
        #[serde(skip_serializing_if = "Option::is_none")]
        holder_stacks: Option<StacksJson>,
    },
    Lost {
        schema: &'static str,
        time_unix_ns: u64,
        count: u64,
    },
    End {
        schema: &'static str,
        time_unix_ns: u64,
        threshold_ns: u64,
        events: u64,
        lost: u64,
    },
}

/// A task of an event, with the cgroup it was in (its path) and that
/// cgroup as a workload (output/workload.rs), null when unknown.
#[derive(Serialize)]
struct EventTask {
    #[serde(flatten)]
    task: TaskJson,
    cgroup: Option<String>,
    workload: Option<serde_json::Value>,
}

impl EventTask {
    fn new(task: &TaskInfo, workload: Option<&TaskWorkload>) -> Box<EventTask> {
        let workload = workload.and_then(TaskWorkload::workload);
        Box::new(EventTask {
            task: TaskJson::from(task),
            cgroup: workload.map(|w| w.path.clone()),
            workload: workload.map(workload::workload_json),
        })
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn to_line(j: &Json) -> String {
    serde_json::to_string(j).expect("JSON values serialize") + "\n"
}

pub(crate) fn json(
    e: &SlowEvent,
    idle: Option<IdleWait>,
    clock: WallClock,
    workloads: EventWorkloads<'_>,
    stacks: Option<&HolderStacks>,
) -> String {
    to_line(&Json::Wait {
        schema: SCHEMA,
        time_unix_ns: clock.unix_ns(e.at_ns),
        cpu: e.cpu,
        wait_ns: e.wait_ns,
        rq_len: (e.rq_len != RQ_LEN_UNKNOWN).then_some(e.rq_len),
        victim: EventTask::new(&e.victim, workloads.victim),
        culprit: EventTask::new(&e.culprit, workloads.culprit),
        idle_wait: idle,
        decision: WaitDecision::of(e.decided).map(|d| d.json()),
        holder_stacks: stacks.map(StacksJson::new),
    })
}

pub(crate) fn lost_json(lost: u64) -> String {
    to_line(&Json::Lost {
        schema: SCHEMA,
        time_unix_ns: unix_now(),
        count: lost,
    })
}

pub(crate) fn end_json(events: u64, lost: u64, threshold_ns: u64) -> String {
    to_line(&Json::End {
        schema: SCHEMA,
        time_unix_ns: unix_now(),
        threshold_ns,
        events,
        lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::task::tests::task;

    /// A line without its last cell, the workload (`-`: none known).
    fn columns(l: &str) -> &str {
        l.trim_end()
            .strip_suffix("  -")
            .expect("a line ends with its workload")
    }

    fn event(rq_len: u32) -> SlowEvent {
        SlowEvent {
            at_ns: 1,
            wait_ns: 3_120_000,
            cpu: 1,
            rq_len,
            victim: task(943, 943, "cyclictest", 0, 0, 0),
            culprit: task(917, 917, "cal.sh", 0, 0, 0),
            decided: 0,
        }
    }

    #[test]
    fn a_decided_event_says_what_the_scheduler_decided() {
        use schedlat_common::decision::{Decided, Decision, HolderLeft, Pass};
        let mut e = event(4);
        e.decided = Decided::pack(
            (
                Decision::NotEligible as u64,
                Pass::ThreePlus as u64,
                HolderLeft::Preempted as u64,
            ),
            0,
            700,
            4,
        );
        let l = line(&e, None, WallClock::now(), EventWorkloads::default());
        assert!(
            columns(&l)
                .ends_with(" 4  not eligible, passed over 4, holder preempted, predicted 700 us"),
            "{l}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(
            &e,
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert_eq!(v["decision"]["decision"], "not_eligible");
        assert_eq!(v["decision"]["passes"], 4);
        let v: serde_json::Value = serde_json::from_str(&json(
            &event(4),
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert!(v["decision"].is_null(), "{v}");
    }

    #[test]
    fn a_line_has_victim_wait_culprit_and_run_queue() {
        let l = line(&event(7), None, WallClock::now(), EventWorkloads::default());
        let fields: Vec<&str> = columns(&l).split_whitespace().collect();
        assert_eq!(fields[2..5], ["cyclictest", "943", "943"], "{l}");
        assert!(l.contains("3.12 ms") && l.contains("cal.sh"), "{l}");
        assert_eq!(fields.last(), Some(&"7"));
        let unknown = line(
            &event(RQ_LEN_UNKNOWN),
            None,
            WallClock::now(),
            EventWorkloads::default(),
        );
        assert!(columns(&unknown).ends_with('-'), "{unknown}");
    }

    #[test]
    fn json_objects_are_typed() {
        let v: serde_json::Value = serde_json::from_str(&json(
            &event(7),
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert_eq!(
            (v["type"].as_str(), v["schema"].as_str()),
            (Some("wait"), Some(SCHEMA))
        );
        assert_eq!(v["victim"]["tid"], 943);
        assert_eq!(v["culprit"]["comm"], "cal.sh");
        assert_eq!(v["rq_len"], 7);
        let v: serde_json::Value = serde_json::from_str(&json(
            &event(RQ_LEN_UNKNOWN),
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert!(v["rq_len"].is_null());
        let v: serde_json::Value = serde_json::from_str(&lost_json(3)).unwrap();
        assert_eq!(
            (v["type"].as_str(), v["count"].as_u64()),
            (Some("lost"), Some(3))
        );
        let v: serde_json::Value = serde_json::from_str(&end_json(5, 0, 1_000_000)).unwrap();
        assert_eq!(v["type"], "end");
        assert_eq!(v["events"], 5);
    }

    /// Issue 19: a wait that ended on an idle CPU says what it was.
    #[test]
    fn an_idle_culprit_is_labelled() {
        let mut e = event(1);
        e.culprit = task(0, 0, "swapper/1", 0, 0, 0);
        let l = line(
            &e,
            Some(IdleWait::Throttled),
            WallClock::now(),
            EventWorkloads::default(),
        );
        assert!(columns(&l).ends_with("(throttled: cgroup quota)"), "{l}");
        let l = line(
            &e,
            Some(IdleWait::WokenOntoIdleCpu),
            WallClock::now(),
            EventWorkloads::default(),
        );
        assert!(
            columns(&l).ends_with("(idle: woken onto an idle CPU)"),
            "{l}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(
            &e,
            Some(IdleWait::Throttled),
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert_eq!(v["idle_wait"], "throttled");
        let v: serde_json::Value = serde_json::from_str(&json(
            &event(1),
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert!(v.get("idle_wait").is_none());
    }

    /// Issue 25: an event names the workload of the task that waited (text
    /// and JSON) and of its culprit (JSON), as victims names its rows.
    #[test]
    fn an_event_names_its_tasks_workloads() {
        use crate::sys::workload::level::tests::workload;
        let (web, batch) = (
            TaskWorkload::In(Box::new(workload("/system.slice/web.service", None))),
            TaskWorkload::In(Box::new(workload("/system.slice/batch.service", None))),
        );
        let both = EventWorkloads {
            victim: Some(&web),
            culprit: Some(&batch),
        };
        let l = line(&event(3), None, WallClock::now(), both);
        assert!(l.trim_end().ends_with(" 3  unit web.service"), "{l}");
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(3), None, WallClock::now(), both, None)).unwrap();
        assert_eq!(v["victim"]["workload"]["unit"], "web.service", "{v}");
        assert_eq!(v["victim"]["comm"], "cyclictest", "{v}");
        assert_eq!(v["culprit"]["cgroup"], "/system.slice/batch.service", "{v}");
        let v: serde_json::Value = serde_json::from_str(&json(
            &event(3),
            None,
            WallClock::now(),
            EventWorkloads::default(),
            None,
        ))
        .unwrap();
        assert!(v["victim"]["workload"].is_null() && v["culprit"]["cgroup"].is_null());
        // A task that had exited when the event was read: said so, never
        // named by the `/` its cgroup v1 lines read then; null in JSON.
        let exited = EventWorkloads {
            victim: Some(&TaskWorkload::Exited),
            culprit: Some(&batch),
        };
        let l = line(&event(3), None, WallClock::now(), exited);
        assert!(l.trim_end().ends_with(" 3  (exited)"), "{l}");
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(3), None, WallClock::now(), exited, None)).unwrap();
        assert!(
            v["victim"]["workload"].is_null() && v["victim"]["cgroup"].is_null(),
            "{v}"
        );
    }
}
