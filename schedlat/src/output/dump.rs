//! A flight-recorder dump as JSON Lines (`schedlat.dump.v1`, docs/
//! recorder.md): a header, one line per interval per series embedding the
//! `--json` interval object (`schedlat.histogram.v2`, so `compare` and any
//! reader of schedlat's JSON read it), one line per slow wait, an end line.
//! The same module reads a dump back for `replay` and `compare`.

use std::{
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use schedlat_common::victims::{RQ_LEN_UNKNOWN, SlowEvent, TaskInfo};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Report, decision::wait::WaitDecision, json::Interval, stacks::StacksJson};
use crate::{
    analysis::{
        recording::{CompactWaits, Meta, Second, SlowWait, Window},
        task::{TaskJson, policy_name},
    },
    histogram::Unit,
    kernel::hook::HookMode,
    sys::slice::Slice,
};

pub(crate) const SCHEMA: &str = "schedlat.dump.v1";

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
struct Header {
    #[serde(rename = "type")]
    kind: String,
    schema: String,
    reason: String,
    host: String,
    hook: String,
    unit: String,
    window_s: u64,
    slow_threshold_ns: u64,
    slice_ns: u64,
    slice_source: String,
    dumped_unix_ns: u64,
    slow_evicted: u64,
    /// Absent from dumps without per-cgroup series (and from older ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cgroup_hierarchy: Option<String>,
    /// Recorded with stacks (`record --ring --stacks`), and the slow waits
    /// whose stacks the window had no room for; absent without stacks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stacks: bool,
    /// With the wakers' stacks too (`--stacks=all`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    wakers: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    stacks_evicted: u64,
    intervals: usize,
    slow_waits: usize,
}

/// The dump as JSON Lines, in memory.
#[cfg(test)]
pub(crate) fn render(w: &Window) -> String {
    let mut out = Vec::new();
    write(&mut out, w).expect("writing to memory");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Writes the dump as JSON Lines, a line at a time (a dump is never whole
/// in memory).
pub(crate) fn write(out: &mut impl std::io::Write, w: &Window) -> std::io::Result<()> {
    let m = &w.meta;
    let mut line = |v: &dyn erased::Ser| -> std::io::Result<()> {
        out.write_all(v.to_json().as_bytes())?;
        out.write_all(b"\n")
    };
    line(&Header {
        kind: "header".into(),
        schema: SCHEMA.into(),
        reason: m.reason.clone(),
        host: m.host.clone(),
        hook: m.hook.clone(),
        unit: m.unit.clone(),
        window_s: m.window_s,
        slow_threshold_ns: m.slow_threshold_ns,
        slice_ns: m.slice_ns,
        slice_source: m.slice_source.clone(),
        dumped_unix_ns: m.dumped_unix_ns,
        slow_evicted: m.slow_evicted,
        cgroup_hierarchy: m.cgroup_hierarchy.clone(),
        stacks: m.stacks,
        wakers: m.wakers,
        stacks_evicted: m.stacks_evicted,
        intervals: w.seconds.len(),
        slow_waits: w.slow.len(),
    })?;
    let unit = if m.unit == "msecs" {
        Unit::Msecs
    } else {
        Unit::Usecs
    };
    let slice = Slice::fixed(m.slice_ns, &m.slice_source);
    for s in &w.seconds {
        for (i, (name, c)) in s.series.iter().enumerate() {
            let waits = c.waits();
            let length = Duration::from_nanos(s.end_mono_ns.saturating_sub(s.start_mono_ns));
            let mut report = Report::new(HookMode::Btf, unit, &waits, &slice, length, false);
            report.time = UNIX_EPOCH + Duration::from_nanos(w.unix_ns(s.end_mono_ns));
            let mut histogram = super::json::interval(&report);
            histogram.hook = m.hook.clone();
            let mut v = json!({
                "type": "interval",
                "series": name,
                "start_unix_ns": w.unix_ns(s.start_mono_ns),
                "end_unix_ns": w.unix_ns(s.end_mono_ns),
                "histogram": histogram,
            });
            if i == 0 {
                v["series_dropped"] = s.series_dropped.into();
                v["slow_lost"] = s.slow_lost.into();
            }
            line(&v)?;
        }
    }
    for e in &w.slow {
        line(&slow_line(e, w))?;
    }
    line(&json!({"type": "end", "schema": SCHEMA}))
}

fn slow_line(wait: &SlowWait, w: &Window) -> Value {
    let e = &wait.event;
    let mut v = json!({
        "type": "slow",
        "end_unix_ns": w.unix_ns(e.at_ns),
        "start_unix_ns": w.unix_ns(e.at_ns.saturating_sub(e.wait_ns)),
        "end_mono_ns": e.at_ns,
        "cpu": e.cpu,
        "wait_ns": e.wait_ns,
        "rq_len": (e.rq_len != RQ_LEN_UNKNOWN).then_some(e.rq_len),
        "victim": TaskJson::from(&e.victim),
        "culprit": TaskJson::from(&e.culprit),
        "decision": WaitDecision::of(e.decided).map(|d| d.json()),
    });
    // Only in dumps recorded with stacks: what the holder ran, every frame
    // kept (docs/stacks.md), as `slow --json` writes it.
    if let Some(stacks) = &wait.stacks {
        v["holder_stacks"] = serde_json::to_value(StacksJson::new(stacks)).unwrap_or_default();
    }
    v
}

/// The longest line a dump holds: an interval line with every bucket and
/// slot non-empty at counts near 2^64 is under 40 KiB (a test checks it);
/// a longer line is not from schedlat, and is refused before it is read
/// whole.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// The largest dump.jsonl read: a day's window (the longest `--ring`) with
/// 16 cgroup series at about 4 KiB a line is under 6 GiB; past this cap a
/// file is refused before it is read.
pub(crate) const MAX_DUMP_BYTES: u64 = 8 << 30;

/// A line's type; its other fields are skipped unread.
#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// An interval line as read back.
#[derive(Deserialize)]
struct IntervalLine {
    series: String,
    start_unix_ns: u64,
    end_unix_ns: u64,
    histogram: Interval,
    #[serde(default)]
    series_dropped: u32,
    #[serde(default)]
    slow_lost: u64,
}

/// A slow wait's line as read back.
#[derive(Deserialize)]
struct SlowLine {
    end_unix_ns: u64,
    end_mono_ns: u64,
    wait_ns: u64,
    cpu: u32,
    rq_len: Option<u32>,
    victim: TaskLine,
    culprit: TaskLine,
    /// Absent in dumps of builds before the decision split's events, null
    /// where the split was off.
    #[serde(default)]
    decision: Value,
    /// Only in dumps recorded with stacks.
    #[serde(default)]
    holder_stacks: Option<StacksJson>,
}

/// A TaskJson as read back (for display only).
#[derive(Deserialize)]
struct TaskLine {
    tid: u32,
    pid: u32,
    comm: String,
    policy: String,
    nice: i32,
    rt_priority: u32,
}

/// Reads a dump: its directory or its dump.jsonl, a regular file of at most
/// [`MAX_DUMP_BYTES`] read a line at a time (a FIFO, a device or a link to
/// one is refused: a dump someone sent cannot hang or fill this machine's
/// memory).
pub(crate) fn load(path: &std::path::Path) -> Result<Window> {
    let file = if path.is_dir() {
        path.join("dump.jsonl")
    } else {
        path.to_path_buf()
    };
    let lines = crate::sys::files::Lines::open(&file, MAX_DUMP_BYTES, MAX_LINE_BYTES)
        .with_context(|| format!("cannot read {}", file.display()))?;
    read(lines, &file.display().to_string())
}

/// Reads a dump back from its text (tests and the fuzz targets).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn parse(text: &str, origin: &str) -> Result<Window> {
    read(
        crate::sys::files::Lines::new(text.as_bytes(), u64::MAX, MAX_LINE_BYTES),
        origin,
    )
}

/// Reads a dump back, a line at a time (never whole in memory). Errors name
/// the line.
pub(crate) fn read<R: std::io::Read>(
    mut lines: crate::sys::files::Lines<R>,
    origin: &str,
) -> Result<Window> {
    let mut dump = Reader::new(origin);
    while let Some((n, line)) = lines
        .next_line()
        .with_context(|| format!("{origin}: cannot read"))?
    {
        dump.line(n, line)?;
    }
    dump.finish()
}

/// Whether a recording's first line is a dump's (typed lines: `compare`
/// then reads the file as a dump, with the checks `replay` makes).
pub(crate) fn is_dump_line(line: &[u8]) -> bool {
    serde_json::from_slice::<Kind>(line).is_ok_and(|k| k.kind.is_some())
}

/// A dump being read, fed one line at a time.
pub(crate) struct Reader<'a> {
    origin: &'a str,
    w: Window,
    header: Option<Header>,
    ended: bool,
}

impl<'a> Reader<'a> {
    /// `origin` names the dump in errors.
    pub(crate) fn new(origin: &'a str) -> Reader<'a> {
        Reader {
            origin,
            w: Window::default(),
            header: None,
            ended: false,
        }
    }

    /// Line `n` of the dump, without its newline.
    pub(crate) fn line(&mut self, n: usize, line: &[u8]) -> Result<()> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let at = || format!("{}:{n}", self.origin);
        if self.ended {
            bail!("{}: a line after the dump's end line", at());
        }
        let kind: Kind =
            serde_json::from_slice(line).with_context(|| format!("{}: not JSON", at()))?;
        let w = &mut self.w;
        match kind.kind.as_deref() {
            Some("header") if self.header.is_some() => bail!("{}: a second dump header", at()),
            Some("header") => {
                let h: Header = serde_json::from_slice(line).with_context(at)?;
                if h.schema != SCHEMA {
                    bail!(
                        "{}: schema {} (this schedlat reads {SCHEMA})",
                        at(),
                        h.schema
                    );
                }
                self.header = Some(h);
            }
            _ if self.header.is_none() => bail!(
                "{}: no dump header before it: not a whole schedlat dump ({SCHEMA}, docs/recorder.md)",
                at()
            ),
            Some("interval") => {
                let v: IntervalLine = serde_json::from_slice(line).with_context(at)?;
                let waits = v.histogram.waits().with_context(|| {
                    format!(
                        "{}: wait counts add up to more than 2^64: a damaged dump",
                        at()
                    )
                })?;
                let c = CompactWaits::of(&waits);
                // On the wall clock until `finish` knows the offset.
                match w.seconds.last_mut() {
                    Some(s)
                        if s.start_mono_ns == v.start_unix_ns && s.end_mono_ns == v.end_unix_ns =>
                    {
                        Arc::make_mut(s).series.push((v.series, c))
                    }
                    _ => w.seconds.push(Arc::new(Second {
                        start_mono_ns: v.start_unix_ns,
                        end_mono_ns: v.end_unix_ns,
                        series: vec![(v.series, c)],
                        series_dropped: v.series_dropped,
                        slow_lost: v.slow_lost,
                    })),
                }
            }
            Some("slow") => {
                let v: SlowLine = serde_json::from_slice(line)
                    .with_context(|| format!("{}: bad slow wait", at()))?;
                if w.slow.is_empty() {
                    w.mono_to_unix_ns = i128::from(v.end_unix_ns) - i128::from(v.end_mono_ns);
                }
                let stacks = match &v.holder_stacks {
                    Some(s) => Some(Arc::new(s.stacks().with_context(|| {
                        format!("{}: a stack address that is not hex", at())
                    })?)),
                    None => None,
                };
                let event = SlowEvent {
                    at_ns: v.end_mono_ns,
                    wait_ns: v.wait_ns,
                    cpu: v.cpu,
                    rq_len: v.rq_len.unwrap_or(RQ_LEN_UNKNOWN),
                    victim: task_of(v.victim),
                    culprit: task_of(v.culprit),
                    decided: WaitDecision::from_json(&v.decision).map_or(0, |d| d.word()),
                };
                w.slow.push(SlowWait { event, stacks });
            }
            Some("end") => self.ended = true,
            _ => bail!("{}: not a line of a schedlat dump ({SCHEMA})", at()),
        }
        Ok(())
    }

    /// The dump, if it was whole: a header and an end line.
    pub(crate) fn finish(self) -> Result<Window> {
        let origin = self.origin;
        let Some(h) = self.header else {
            bail!("{origin}: no dump header: not a schedlat dump (docs/recorder.md)");
        };
        if !self.ended {
            bail!("{origin}: the dump is cut short (no end line)");
        }
        let mut w = self.w;
        // The seconds back on the monotonic clock, by the offset the slow
        // waits give (both were dated with one offset); without slow waits
        // it is 0 and they keep the dump's wall-clock stamps.
        let offset = w.mono_to_unix_ns;
        for s in &mut w.seconds {
            let mono = |unix: u64| u64::try_from(i128::from(unix) - offset).ok();
            let (Some(start), Some(end)) = (mono(s.start_mono_ns), mono(s.end_mono_ns)) else {
                bail!(
                    "{origin}: an interval dated before its slow waits' clock began: a damaged dump"
                );
            };
            let s = Arc::make_mut(s);
            (s.start_mono_ns, s.end_mono_ns) = (start, end);
        }
        w.meta = Meta {
            reason: h.reason,
            host: h.host,
            hook: h.hook,
            unit: h.unit,
            window_s: h.window_s,
            slow_threshold_ns: h.slow_threshold_ns,
            slice_ns: h.slice_ns,
            slice_source: h.slice_source,
            dumped_unix_ns: h.dumped_unix_ns,
            slow_evicted: h.slow_evicted,
            cgroup_hierarchy: h.cgroup_hierarchy,
            stacks: h.stacks,
            wakers: h.wakers,
            stacks_evicted: h.stacks_evicted,
        };
        Ok(w)
    }
}

/// A TaskJson back into the kernel's form (for display only).
fn task_of(t: TaskLine) -> TaskInfo {
    let mut comm = [0u8; 16];
    let name = t.comm.as_bytes();
    let n = name.len().min(16);
    comm[..n].copy_from_slice(&name[..n]);
    let policy = (0..8u32).find(|&p| policy_name(p) == t.policy).unwrap_or(0);
    TaskInfo {
        tid: t.tid,
        tgid: t.pid,
        comm,
        policy,
        static_prio: (120 + t.nice.clamp(-20, 19)) as u32,
        rt_priority: t.rt_priority,
        _pad: 0,
    }
}

/// serde_json::to_string for any Serialize, behind a trait object.
mod erased {
    pub(super) trait Ser {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_json(&self) -> String {
            serde_json::to_string(self).expect("plain data serializes")
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use schedlat_common::{CpuStats, bucket_index, log2_slot};

    use super::*;
    use crate::{analysis::task::tests::task, histogram::Waits};

    pub(crate) fn sample_window() -> Window {
        let waits = |values: &[u64]| {
            let mut cpu = CpuStats::ZERO;
            for &v in values {
                cpu.buckets[bucket_index(v)] += 1;
                cpu.log2[log2_slot(v / 1000)] += 1;
                cpu.sum_ns += v;
            }
            CompactWaits::of(&Waits::from_cpus(&[cpu]))
        };
        let base = 1_700_000_000_000_000_000u64;
        // Monotonic: 100 s after boot; the wall clock is `base` at boot.
        let second = |i: u64, values: &[u64]| Second {
            start_mono_ns: (100 + i) * 1_000_000_000,
            end_mono_ns: (101 + i) * 1_000_000_000,
            series: vec![
                ("total".into(), waits(values)),
                ("cgroup /a".into(), waits(&values[..1])),
            ],
            series_dropped: i as u32,
            slow_lost: 0,
        };
        Window {
            meta: Meta {
                reason: "SIGHUP".into(),
                host: "h".into(),
                hook: "tp_btf".into(),
                unit: "usecs".into(),
                window_s: 60,
                slow_threshold_ns: 1_000_000,
                slice_ns: 3_000_000,
                slice_source: "test".into(),
                dumped_unix_ns: base + 103_000_000_000,
                slow_evicted: 0,
                cgroup_hierarchy: Some("cgroup v2 at /sys/fs/cgroup".into()),
                stacks: false,
                wakers: false,
                stacks_evicted: 0,
            },
            seconds: vec![
                second(0, &[2_000, 3_000]).into(),
                second(1, &[5_000_000, 9_000]).into(),
            ],
            slow: vec![
                SlowEvent {
                    at_ns: 101_500_000_000,
                    wait_ns: 5_000_000,
                    cpu: 1,
                    rq_len: 4,
                    victim: task(10, 10, "sleeper", 0, 0, 0),
                    culprit: task(20, 20, "hog", 0, 5, 0),
                    decided: schedlat_common::decision::Decided::pack((10, 3, 2), 251, 1400, 4),
                }
                .into(),
            ],
            mono_to_unix_ns: i128::from(base),
        }
    }

    #[test]
    fn a_dump_reads_back_as_written() {
        let w = sample_window();
        let text = render(&w);
        assert_eq!(text.lines().count(), 1 + 4 + 1 + 1);
        let back = parse(&text, "dump").unwrap();
        assert_eq!(back.meta, w.meta);
        assert_eq!(back.seconds, w.seconds);
        assert_eq!(back.slow, w.slow);
        assert_eq!(back.mono_to_unix_ns, w.mono_to_unix_ns);
    }

    /// A window recorded with stacks, its wait behind `spin` in user space
    /// and woken from a timer.
    pub(crate) fn window_with_stacks() -> Window {
        use crate::{
            analysis::stacks::{HolderStacks, Ran, RanTask, WakerStack},
            sys::symbolize::Frame,
        };
        let frame = |addr: u64, name: &str| Frame {
            addr,
            symbol: Some(name.into()),
            offset: 3,
            module: None,
            module_offset: None,
        };
        let mut w = sample_window();
        w.meta.stacks = true;
        w.meta.wakers = true;
        w.meta.stacks_evicted = 2;
        w.slow[0].stacks = Some(Arc::new(HolderStacks {
            kernel: vec![frame(
                0xffff_ffff_8100_0010,
                "asm_sysvec_apic_timer_interrupt",
            )],
            user: vec![frame(0x401000, "spin"), frame(0x400100, "main")],
            waker: Some(WakerStack {
                tid: 0,
                kernel: Some(vec![
                    frame(0xffff_ffff_8200_0000, "try_to_wake_up"),
                    frame(0xffff_ffff_8200_0100, "hrtimer_wakeup"),
                ]),
            }),
            ran: Ran {
                tasks: vec![RanTask {
                    tid: 42,
                    comm: Some("hog".into()),
                    ns: 900_000,
                }],
                unknown_ns: 100_000,
                queued_elsewhere: false,
            },
        }));
        w
    }

    #[test]
    fn a_dump_with_stacks_reads_them_back() {
        let w = window_with_stacks();
        let text = render(&w);
        assert!(text.contains("\"holder_stacks\""), "{text}");
        let back = parse(&text, "dump").unwrap();
        assert_eq!(back.meta, w.meta);
        assert_eq!(back.slow, w.slow);
        // Without stacks the lines have none of their fields.
        let plain = render(&sample_window());
        assert!(!plain.contains("stacks"), "{plain}");
    }

    #[test]
    fn a_cut_dump_is_refused() {
        let text = render(&sample_window());
        let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        let e = parse(&cut, "d").unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        let e = parse("{\"schema\":1}\n", "d").unwrap_err().to_string();
        assert!(e.contains("no dump header before it"), "{e}");
    }
}
