//! Slow events for people (one aligned line each) and as JSON Lines
//! (docs/json.md, `schedlat.slow.v1`).

use schedlat_common::victims::{RQ_LEN_UNKNOWN, SlowEvent};
use serde::Serialize;

use crate::{
    analysis::{
        fmt_ns,
        task::{self, IdleWait, TaskJson},
    },
    output::{decided::WaitDecision, escape},
    sys::clock::{WallClock, local_time_us},
};

pub(crate) const SCHEMA: &str = "schedlat.slow.v1";

pub(crate) const HEADER: &str = "TIME             CPU COMM                 PID     TID       WAIT SCHED      CULPRIT              PID     TID SCHED       RQ  DECISION";

/// One event, then the scheduler's decision of it (docs/decision.md) when
/// the split saw it; `idle` says what a wait that ended on an idle CPU
/// (culprit swapper) was, after the columns.
pub(crate) fn line(e: &SlowEvent, idle: Option<IdleWait>, clock: WallClock) -> String {
    let rq = if e.rq_len == RQ_LEN_UNKNOWN {
        "-".to_string()
    } else {
        e.rq_len.to_string()
    };
    format!(
        "{} {:>3} {:<16} {:>7} {:>7} {:>10} {:<10} {:<16} {:>7} {:>7} {:<10} {:>3}{}{}\n",
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
        idle.map_or(String::new(), |i| format!("  {}", i.label()))
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
        victim: TaskJson,
        culprit: TaskJson,
        /// An idle culprit (the wait ended on an idle CPU): "throttled" or
        /// "woken-onto-idle-cpu".
        #[serde(skip_serializing_if = "Option::is_none")]
        idle_wait: Option<IdleWait>,
        /// The scheduler's decision of the wait (output/decided.rs); null
        /// when the decision split is off or did not see it.
        decision: Option<serde_json::Value>,
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

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn to_line(j: &Json) -> String {
    serde_json::to_string(j).expect("JSON values serialize") + "\n"
}

pub(crate) fn json(e: &SlowEvent, idle: Option<IdleWait>, clock: WallClock) -> String {
    to_line(&Json::Wait {
        schema: SCHEMA,
        time_unix_ns: clock.unix_ns(e.at_ns),
        cpu: e.cpu,
        wait_ns: e.wait_ns,
        rq_len: (e.rq_len != RQ_LEN_UNKNOWN).then_some(e.rq_len),
        victim: TaskJson::from(&e.victim),
        culprit: TaskJson::from(&e.culprit),
        idle_wait: idle,
        decision: WaitDecision::of(e.decided).map(|d| d.json()),
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
        use schedlat_common::decision::{Decided, Decision, Holder, Pass};
        let mut e = event(4);
        e.decided = Decided::pack(
            (
                Decision::NotEligible as u64,
                Pass::ThreePlus as u64,
                Holder::Preempted as u64,
            ),
            0,
            700,
            4,
        );
        let l = line(&e, None, WallClock::now());
        assert!(
            l.trim_end()
                .ends_with(" 4  not eligible, passed over 4, holder preempted, predicted 700 us"),
            "{l}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&e, None, WallClock::now())).unwrap();
        assert_eq!(v["decision"]["decision"], "not_eligible");
        assert_eq!(v["decision"]["passes"], 4);
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(4), None, WallClock::now())).unwrap();
        assert!(v["decision"].is_null(), "{v}");
    }

    #[test]
    fn a_line_has_victim_wait_culprit_and_run_queue() {
        let l = line(&event(7), None, WallClock::now());
        let fields: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(fields[2..5], ["cyclictest", "943", "943"], "{l}");
        assert!(l.contains("3.12 ms") && l.contains("cal.sh"), "{l}");
        assert_eq!(fields.last(), Some(&"7"));
        assert!(
            line(&event(RQ_LEN_UNKNOWN), None, WallClock::now())
                .trim_end()
                .ends_with('-')
        );
    }

    #[test]
    fn json_objects_are_typed() {
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(7), None, WallClock::now())).unwrap();
        assert_eq!(
            (v["type"].as_str(), v["schema"].as_str()),
            (Some("wait"), Some(SCHEMA))
        );
        assert_eq!(v["victim"]["tid"], 943);
        assert_eq!(v["culprit"]["comm"], "cal.sh");
        assert_eq!(v["rq_len"], 7);
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(RQ_LEN_UNKNOWN), None, WallClock::now())).unwrap();
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
        let l = line(&e, Some(IdleWait::Throttled), WallClock::now());
        assert!(l.trim_end().ends_with("(throttled: cgroup quota)"), "{l}");
        let l = line(&e, Some(IdleWait::WokenOntoIdleCpu), WallClock::now());
        assert!(
            l.trim_end().ends_with("(idle: woken onto an idle CPU)"),
            "{l}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&json(&e, Some(IdleWait::Throttled), WallClock::now())).unwrap();
        assert_eq!(v["idle_wait"], "throttled");
        let v: serde_json::Value =
            serde_json::from_str(&json(&event(1), None, WallClock::now())).unwrap();
        assert!(v.get("idle_wait").is_none());
    }
}
