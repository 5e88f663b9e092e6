//! Perfetto traces of slow waits, for ui.perfetto.dev and trace_processor.
//!
//! Encoded with the published Perfetto protos: the few messages needed are
//! declared below with their published field numbers, and the same subset is
//! checked in as schedlat/proto/perfetto_trace_subset.proto, from which the
//! tests generate a decoder with protoc.
//!
//! Layout: one track per CPU (the CPU the wait ended on), and under it as
//! many lanes as waits overlapped there: several tasks wait on one run queue
//! at once, and slices on one Perfetto track must nest, so each wait goes to
//! the first lane free at its start. A wait is a slice from its enqueue to
//! its switch-in, named after the task that waited, with the culprit (the
//! task that held the CPU until it ended), the run-queue length, the
//! scheduling classes and the scheduler's decision (docs/decision.md) as
//! arguments. A dump recorded with stacks gives each slice the holder's
//! stack as its callstack (the frames it ran when the wait ended), and an
//! instant `wakeup` at the slice's start with the waker's kernel stack.
//! Timestamps are CLOCK_MONOTONIC ns.

use prost::Message;
use schedlat_common::victims::{RQ_LEN_UNKNOWN, SlowEvent};

use super::decision::wait::WaitDecision;
use crate::{
    analysis::{
        recording::{SlowWait, Window},
        stacks::HolderStacks,
        task,
    },
    sys::symbolize::Frame,
};

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// TrackEvent.Type: SLICE_BEGIN 1, SLICE_END 2.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// TrackEvent.callstack: inline frames, outermost first.
    #[prost(message, optional, tag = "55")]
    pub callstack: Option<Callstack>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Callstack {
    #[prost(message, repeated, tag = "1")]
    pub frames: Vec<CallstackFrame>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct CallstackFrame {
    #[prost(string, optional, tag = "1")]
    pub function_name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub source_file: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DebugAnnotation {
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

pub(crate) const TYPE_SLICE_BEGIN: i32 = 1;
pub(crate) const TYPE_SLICE_END: i32 = 2;
pub(crate) const TYPE_INSTANT: i32 = 3;
/// TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED.
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQUENCE: u32 = 1;
pub(crate) const CATEGORY: &str = "runqueue";

/// The track of a CPU, and of its lanes (lane 0 is the CPU's own track).
pub(crate) fn track_uuid(cpu: u32, lane: u32) -> u64 {
    ((u64::from(cpu) + 1) << 20) | u64::from(lane)
}

/// The trace of the window's slow waits, encoded.
#[cfg(test)]
pub(crate) fn encode(window: &Window) -> Vec<u8> {
    let mut out = Vec::new();
    write(&mut out, window).expect("writing to memory");
    out
}

/// Writes the trace one packet at a time: a Trace is a repeated field, so
/// Trace messages of one packet each, concatenated, are the whole Trace
/// (protobuf merges repeated fields), and the trace is never whole in
/// memory.
pub(crate) fn write(out: &mut impl std::io::Write, window: &Window) -> std::io::Result<()> {
    let mut order: Vec<&SlowWait> = window.slow.iter().collect();
    order.sort_by_key(|w| (start_ns(&w.event), w.event.cpu, w.event.at_ns));
    // Per CPU, the end of the last wait on each lane.
    let mut lanes: std::collections::BTreeMap<u32, Vec<u64>> = std::collections::BTreeMap::new();
    let mut slices = Vec::with_capacity(order.len());
    for wait in order {
        let e = &wait.event;
        let ends = lanes.entry(e.cpu).or_default();
        let start = start_ns(e);
        let lane = match ends.iter().position(|&end| end <= start) {
            Some(free) => free,
            None => {
                ends.push(0);
                ends.len() - 1
            }
        };
        ends[lane] = e.at_ns;
        slices.push((wait, lane as u32 + 1));
    }

    let mut first = true;
    let mut put = |mut p: TracePacket| {
        if std::mem::take(&mut first) {
            p.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED);
        }
        out.write_all(&Trace { packet: vec![p] }.encode_to_vec())
    };
    for (&cpu, ends) in &lanes {
        put(descriptor(track_uuid(cpu, 0), format!("CPU {cpu}"), None))?;
        for lane in 1..=ends.len() as u32 {
            let name = format!("CPU {cpu} waits #{lane}");
            put(descriptor(
                track_uuid(cpu, lane),
                name,
                Some(track_uuid(cpu, 0)),
            ))?;
        }
    }
    for (wait, lane) in slices {
        let (e, stacks) = (&wait.event, wait.stacks.as_deref());
        let track = track_uuid(e.cpu, lane);
        put(event(start_ns(e), track, TYPE_SLICE_BEGIN, |ev| {
            ev.name = Some(format!("{} {}", task::comm(&e.victim), e.victim.tid));
            ev.categories = vec![CATEGORY.to_string()];
            ev.debug_annotations = args(e, window);
            ev.callstack = stacks.map(holder_callstack);
        }))?;
        // Inside the slice, at its start: who woke the waiter, from where.
        if let Some(waker) = stacks.and_then(|s| s.waker.as_ref()) {
            put(event(start_ns(e), track, TYPE_INSTANT, |ev| {
                ev.name = Some("wakeup".into());
                ev.categories = vec![CATEGORY.to_string()];
                ev.debug_annotations = vec![DebugAnnotation {
                    name: Some("waker_tid".into()),
                    uint_value: Some(u64::from(waker.tid)),
                    ..Default::default()
                }];
                ev.callstack = waker.kernel.is_some().then(|| callstack(&[], waker.own()));
            }))?;
        }
        put(event(e.at_ns, track, TYPE_SLICE_END, |_| {}))?;
    }
    Ok(())
}

/// The holder's stack as one callstack, outermost first: its user frames,
/// then its own kernel frames (the tracer's and the scheduler's left out).
fn holder_callstack(s: &HolderStacks) -> Callstack {
    callstack(&s.user, s.own_kernel())
}

/// Frames (each stack innermost first, as walked) as a callstack,
/// outermost first: `user` outside `kernel`. A kernel frame's file is the
/// module it is in, else perf's name for the kernel image.
fn callstack(user: &[Frame], kernel: &[Frame]) -> Callstack {
    let frame = |f: &Frame, kernel: bool| CallstackFrame {
        function_name: Some(f.label()),
        source_file: f
            .module
            .clone()
            .or_else(|| kernel.then(|| "[kernel.kallsyms]".to_string())),
    };
    let user = user.iter().rev().map(|f| frame(f, false));
    let kernel = kernel.iter().rev().map(|f| frame(f, true));
    Callstack {
        frames: user.chain(kernel).collect(),
    }
}

/// When the wait began: its end minus its length.
pub(crate) fn start_ns(e: &SlowEvent) -> u64 {
    e.at_ns.saturating_sub(e.wait_ns)
}

fn descriptor(uuid: u64, name: String, parent: Option<u64>) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            parent_uuid: parent,
        }),
        ..Default::default()
    }
}

fn event(ts: u64, track: u64, kind: i32, fill: impl FnOnce(&mut TrackEvent)) -> TracePacket {
    let mut ev = TrackEvent {
        r#type: Some(kind),
        track_uuid: Some(track),
        ..Default::default()
    };
    fill(&mut ev);
    TracePacket {
        timestamp: Some(ts),
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_event: Some(ev),
        ..Default::default()
    }
}

/// The slice's arguments: who waited, who held the CPU, the queue.
fn args(e: &SlowEvent, window: &Window) -> Vec<DebugAnnotation> {
    let text = |name: &str, v: String| DebugAnnotation {
        name: Some(name.to_string()),
        string_value: Some(v),
        ..Default::default()
    };
    let uint = |name: &str, v: u64| DebugAnnotation {
        name: Some(name.to_string()),
        uint_value: Some(v),
        ..Default::default()
    };
    let mut out = vec![
        uint("wait_ns", e.wait_ns),
        uint("cpu", u64::from(e.cpu)),
        text("victim_comm", task::comm(&e.victim)),
        uint("victim_pid", u64::from(e.victim.tgid)),
        uint("victim_tid", u64::from(e.victim.tid)),
        text("victim_sched", task::sched_label(&e.victim)),
        text("culprit_comm", task::comm(&e.culprit)),
        uint("culprit_pid", u64::from(e.culprit.tgid)),
        uint("culprit_tid", u64::from(e.culprit.tid)),
        text("culprit_sched", task::sched_label(&e.culprit)),
        uint("end_unix_ns", window.unix_ns(e.at_ns)),
    ];
    if e.rq_len != RQ_LEN_UNKNOWN {
        out.push(uint("rq_len", u64::from(e.rq_len)));
    }
    // The scheduler's decision (docs/decision.md), where the split saw it.
    if let Some(d) = WaitDecision::of(e.decided) {
        out.push(text("decision", d.decision.name().into()));
        out.push(text("pass_overs", d.pass.name().into()));
        out.push(uint("passes", d.passes));
        out.push(text("holder", d.holder.name().into()));
        out.push(text("outcome", d.outcome.name().into()));
        if let Some(ns) = d.predicted_ns {
            out.push(uint("predicted_ns", ns));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::task::tests::task as t;

    fn wait(cpu: u32, at_ns: u64, wait_ns: u64) -> SlowEvent {
        SlowEvent {
            at_ns,
            wait_ns,
            cpu,
            rq_len: 3,
            victim: t(10, 10, "sleeper", 0, 0, 0),
            culprit: t(20, 20, "hog", 0, 0, 0),
            decided: 0,
        }
    }

    #[test]
    fn overlapping_waits_get_lanes_and_every_wait_a_slice() {
        let waits = [
            wait(1, 10_000, 5_000),
            wait(1, 12_000, 5_000),
            wait(1, 30_000, 1_000),
            wait(0, 9_000, 1_000),
        ];
        let window = Window {
            slow: waits.iter().map(|&w| w.into()).collect(),
            ..Default::default()
        };
        let trace = Trace::decode(&encode(&window)[..]).unwrap();
        let tracks: Vec<_> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .map(|d| d.uuid.unwrap())
            .collect();
        // CPU 0 with one lane, CPU 1 with two.
        assert_eq!(tracks.len(), 2 + 3);
        let begins: Vec<_> = trace
            .packet
            .iter()
            .filter_map(|p| Some((p.timestamp?, p.track_event.as_ref()?)))
            .filter(|(_, e)| e.r#type == Some(TYPE_SLICE_BEGIN))
            .collect();
        assert_eq!(begins.len(), 4);
        let on = |ts: u64| begins.iter().find(|(t, _)| *t == ts).unwrap().1.track_uuid;
        assert_eq!(on(5_000), Some(track_uuid(1, 1)));
        assert_eq!(on(7_000), Some(track_uuid(1, 2)));
        assert_eq!(on(29_000), Some(track_uuid(1, 1)));
        let e = begins[0].1;
        assert!(
            e.debug_annotations
                .iter()
                .any(|a| a.name.as_deref() == Some("culprit_comm")
                    && a.string_value.as_deref() == Some("hog"))
        );
    }

    #[test]
    fn a_decided_wait_carries_the_decision_as_args() {
        use schedlat_common::decision::{Decided, Decision, HolderLeft, Pass};
        let mut decided = wait(1, 10_000, 5_000);
        decided.decided = Decided::pack(
            (
                Decision::Protected as u64,
                Pass::Two as u64,
                HolderLeft::SliceEnded as u64,
            ),
            0,
            900,
            2,
        );
        let window = Window {
            slow: vec![decided.into(), wait(0, 20_000, 1_000).into()],
            ..Default::default()
        };
        let trace = Trace::decode(&encode(&window)[..]).unwrap();
        type Arg = (String, Option<String>, Option<u64>);
        let args: Vec<Vec<Arg>> = (trace.packet.iter())
            .filter_map(|p| p.track_event.as_ref())
            .filter(|e| e.r#type == Some(TYPE_SLICE_BEGIN))
            .map(|e| {
                (e.debug_annotations.iter())
                    .map(|a| {
                        (
                            a.name.clone().unwrap(),
                            a.string_value.clone(),
                            a.uint_value,
                        )
                    })
                    .collect()
            })
            .collect();
        let arg = |slice: &[Arg], name: &str| slice.iter().find(|a| a.0 == name).cloned();
        let with = args.iter().find(|a| arg(a, "decision").is_some()).unwrap();
        assert_eq!(
            arg(with, "decision").unwrap().1.as_deref(),
            Some("protected")
        );
        assert_eq!(arg(with, "pass_overs").unwrap().1.as_deref(), Some("2"));
        assert_eq!(
            arg(with, "holder").unwrap().1.as_deref(),
            Some("slice_ended")
        );
        assert_eq!(
            arg(with, "outcome").unwrap().1.as_deref(),
            Some("passed_over")
        );
        assert_eq!(arg(with, "predicted_ns").unwrap().2, Some(900_000));
        assert_eq!(
            args.iter().filter(|a| arg(a, "decision").is_none()).count(),
            1,
            "the undecided wait has no decision args"
        );
    }

    #[test]
    fn a_wait_with_stacks_carries_the_holders_callstack_and_its_wakeup() {
        let window = crate::output::dump::tests::window_with_stacks();
        let trace = Trace::decode(&encode(&window)[..]).unwrap();
        let events: Vec<&TrackEvent> = (trace.packet.iter())
            .filter_map(|p| p.track_event.as_ref())
            .collect();
        let names = |c: &Option<Callstack>| -> Vec<String> {
            (c.iter().flat_map(|c| &c.frames))
                .map(|f| f.function_name.clone().unwrap())
                .collect()
        };
        let slice = events
            .iter()
            .find(|e| e.r#type == Some(TYPE_SLICE_BEGIN))
            .unwrap();
        // Stopped in user space: its user frames only, outermost first.
        assert_eq!(names(&slice.callstack), ["main", "spin"]);
        let wakeup = events
            .iter()
            .find(|e| e.r#type == Some(TYPE_INSTANT))
            .unwrap();
        assert_eq!(wakeup.track_uuid, slice.track_uuid);
        assert_eq!(
            names(&wakeup.callstack),
            ["hrtimer_wakeup", "try_to_wake_up"]
        );
        let file = &wakeup.callstack.as_ref().unwrap().frames[0].source_file;
        assert_eq!(file.as_deref(), Some("[kernel.kallsyms]"));
        // Without stacks: no callstack, no instant.
        let plain =
            Trace::decode(&encode(&crate::output::dump::tests::sample_window())[..]).unwrap();
        let plain: Vec<_> = (plain.packet.iter())
            .filter_map(|p| p.track_event.as_ref())
            .collect();
        assert!(plain.iter().all(|e| e.callstack.is_none()));
        assert!(plain.iter().all(|e| e.r#type != Some(TYPE_INSTANT)));
    }
}
