//! A slow wait's stacks (docs/stacks.md) as `slow --stacks` and the
//! flight recorder's dumps show them: every frame in JSON (read back by
//! `replay`), the holder's and the waker's top frames as text lines under
//! the wait's line.

use serde::{Deserialize, Serialize};

use super::escape::printable;
use crate::{
    analysis::{
        fmt_ns,
        stacks::{HolderStacks, Ran, RanTask, WakerStack},
    },
    sys::symbolize::Frame,
};

/// The holder's stacks in an event's JSON: every frame, innermost first.
#[derive(Serialize, Deserialize)]
pub(crate) struct StacksJson {
    /// The kernel stack from the stack walk down; its first
    /// `tracing_frames` are the tracer's and the scheduler's own.
    kernel: Vec<FrameJson>,
    #[serde(default)]
    tracing_frames: usize,
    /// True when the holder was stopped in user space (no kernel frame of
    /// its own under the scheduler's).
    #[serde(default)]
    in_user_space: bool,
    /// Empty for a kernel thread.
    user: Vec<FrameJson>,
    /// Who woke the task that waited, at the wakeup that began the wait;
    /// null when it did not begin with one.
    waker: Option<WakerJson>,
    /// Who ran on the CPU during the wait (absent in dumps written before
    /// it was kept: read back as nobody known).
    #[serde(default)]
    ran: RanJson,
}

#[derive(Serialize, Deserialize, Default)]
struct RanJson {
    /// Most time first; tid 0 is the idle task.
    tasks: Vec<RanTaskJson>,
    /// The part of the wait older than the oldest run the kernel kept.
    unknown_ns: u64,
    queued_elsewhere: bool,
}

#[derive(Serialize, Deserialize)]
struct RanTaskJson {
    tid: u32,
    /// Null once the task had exited when the event was read.
    comm: Option<String>,
    ns: u64,
}

#[derive(Serialize, Deserialize)]
struct WakerJson {
    /// `current` at the wakeup: in an interrupt, the task it interrupted.
    tid: u32,
    /// Its kernel stack there, innermost first; null when not kept.
    kernel: Option<Vec<FrameJson>>,
    #[serde(default)]
    tracing_frames: usize,
}

#[derive(Serialize, Deserialize)]
struct FrameJson {
    /// The address, in hex (a JSON number loses a kernel address's bits).
    addr: String,
    symbol: Option<String>,
    /// Bytes from the symbol's start (null without a symbol).
    offset: Option<u64>,
    module: Option<String>,
    /// For a frame without a symbol in a known file: its offset there.
    module_offset: Option<u64>,
}

impl StacksJson {
    pub(crate) fn new(s: &HolderStacks) -> StacksJson {
        let frames = |v: &[Frame]| -> Vec<FrameJson> {
            v.iter()
                .map(|f| FrameJson {
                    addr: format!("{:#x}", f.addr),
                    symbol: f.symbol.clone(),
                    offset: f.symbol.as_ref().map(|_| f.offset),
                    module: f.module.clone(),
                    module_offset: f.module_offset,
                })
                .collect()
        };
        StacksJson {
            kernel: frames(&s.kernel),
            tracing_frames: s.tracing_frames(),
            in_user_space: s.in_user_space(),
            user: frames(&s.user),
            waker: s.waker.as_ref().map(|w| WakerJson {
                tid: w.tid,
                kernel: w.kernel.as_deref().map(frames),
                tracing_frames: w.tracing_frames(),
            }),
            ran: RanJson {
                tasks: (s.ran.tasks.iter())
                    .map(|t| RanTaskJson {
                        tid: t.tid,
                        comm: t.comm.clone(),
                        ns: t.ns,
                    })
                    .collect(),
                unknown_ns: s.ran.unknown_ns,
                queued_elsewhere: s.ran.queued_elsewhere,
            },
        }
    }

    /// The stacks as read back from a dump; None when an address is not
    /// hex (not a dump schedlat wrote). The counts the JSON adds
    /// (`tracing_frames`, `in_user_space`) follow from the frames.
    pub(crate) fn stacks(&self) -> Option<HolderStacks> {
        let frames = |v: &[FrameJson]| -> Option<Vec<Frame>> {
            v.iter()
                .map(|f| {
                    let hex = f.addr.strip_prefix("0x")?;
                    Some(Frame {
                        addr: u64::from_str_radix(hex, 16).ok()?,
                        symbol: f.symbol.clone(),
                        offset: f.offset.unwrap_or(0),
                        module: f.module.clone(),
                        module_offset: f.module_offset,
                    })
                })
                .collect()
        };
        let waker = match &self.waker {
            Some(w) => Some(WakerStack {
                tid: w.tid,
                kernel: match &w.kernel {
                    Some(k) => Some(frames(k)?),
                    None => None,
                },
            }),
            None => None,
        };
        Some(HolderStacks {
            kernel: frames(&self.kernel)?,
            user: frames(&self.user)?,
            waker,
            ran: Ran {
                tasks: (self.ran.tasks.iter())
                    .map(|t| RanTask {
                        tid: t.tid,
                        comm: t.comm.clone(),
                        ns: t.ns,
                    })
                    .collect(),
                unknown_ns: self.ran.unknown_ns,
                queued_elsewhere: self.ran.queued_elsewhere,
            },
        })
    }
}

/// Frames of each stack a text line shows.
pub(crate) const TEXT_FRAMES: usize = 5;

/// The holder's top frames under an event's line, innermost first: its
/// own kernel frames (none when it was stopped in user space), then its
/// user stack (none for a kernel thread).
pub(crate) fn stacks_lines(s: &HolderStacks) -> String {
    let join = |frames: &[Frame]| {
        // A symbol is a file's bytes (and a dump's, read back): shown
        // through `printable`, as every name from outside is.
        let mut text: Vec<String> = (frames.iter().take(TEXT_FRAMES))
            .map(|f| printable(&f.label()).into_owned())
            .collect();
        if frames.len() > TEXT_FRAMES {
            text.push("...".into());
        }
        text.join(" <- ")
    };
    let mut out = String::new();
    let own = s.own_kernel();
    if !own.is_empty() {
        out.push_str(&format!("    holder kernel: {}\n", join(own)));
    }
    if !s.user.is_empty() {
        out.push_str(&format!("    holder user:   {}\n", join(&s.user)));
    }
    if out.is_empty() {
        out.push_str("    holder: no stack (the kernel walked none)\n");
    }
    match &s.waker {
        Some(w) if w.kernel.is_some() => {
            out.push_str(&format!("    waker {:<7}  {}\n", w.tid, join(w.own())));
        }
        Some(w) => out.push_str(&format!("    waker {:<7}  (stack not kept)\n", w.tid)),
        None => {}
    }
    if let Some(line) = ran_line(&s.ran) {
        out.push_str(&line);
    }
    out
}

/// Tasks of a wait's `ran during` line.
const TEXT_TASKS: usize = 4;

/// Who ran on the CPU during the wait, most time first: `ran during:
/// hog 812 3.91 ms, kworker/1:2 40 62.0 us, idle 8.00 us`; None when the
/// kernel kept no run of it.
fn ran_line(ran: &Ran) -> Option<String> {
    if ran.tasks.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = (ran.tasks.iter().take(TEXT_TASKS))
        .map(|t| match (t.tid, &t.comm) {
            (0, _) => format!("idle {}", fmt_ns(t.ns)),
            (tid, Some(comm)) => format!("{} {tid} {}", printable(comm), fmt_ns(t.ns)),
            (tid, None) => format!("(exited) {tid} {}", fmt_ns(t.ns)),
        })
        .collect();
    if ran.tasks.len() > TEXT_TASKS {
        shown.push(format!("{} more", ran.tasks.len() - TEXT_TASKS));
    }
    let mut line = format!("    ran during: {}", shown.join(", "));
    if ran.unknown_ns > 0 {
        line.push_str(&format!(
            "; {} before the runs kept",
            fmt_ns(ran.unknown_ns)
        ));
    }
    if ran.queued_elsewhere {
        line.push_str("; queued on another CPU first");
    }
    line.push('\n');
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(addr: u64, symbol: Option<&str>) -> Frame {
        Frame {
            addr,
            symbol: symbol.map(String::from),
            offset: 4,
            module: Some("/usr/bin/hog".into()),
            module_offset: symbol.is_none().then_some(0x40),
        }
    }

    #[test]
    fn stacks_read_back_as_written() {
        let s = HolderStacks {
            kernel: vec![frame(0xffff_ffff_8100_0000, Some("pipe_read"))],
            user: vec![frame(0x401000, Some("spin")), frame(0x402000, None)],
            waker: Some(WakerStack {
                tid: 9,
                kernel: Some(vec![frame(0xffff_ffff_8200_0000, Some("hrtimer_wakeup"))]),
            }),
            ran: Ran {
                tasks: vec![
                    RanTask {
                        tid: 812,
                        comm: Some("hog".into()),
                        ns: 3_910_000,
                    },
                    RanTask {
                        tid: 0,
                        comm: None,
                        ns: 8_000,
                    },
                    RanTask {
                        tid: 77,
                        comm: None,
                        ns: 1_000,
                    },
                ],
                unknown_ns: 2_000,
                queued_elsewhere: true,
            },
        };
        assert!(stacks_lines(&s).ends_with(
            "    ran during: hog 812 3.91 ms, idle 8.00 us, (exited) 77 1.00 us; 2.00 us before the runs kept; queued on another CPU first\n"
        ));
        let text = serde_json::to_string(&StacksJson::new(&s)).unwrap();
        let back: StacksJson = serde_json::from_str(&text).unwrap();
        let mut expected = s.clone();
        // An unnamed frame's offset is not written: it reads back as 0.
        expected.user[1].offset = 0;
        assert_eq!(back.stacks(), Some(expected));
        let bad = text.replace("0x401000", "401000");
        let bad: StacksJson = serde_json::from_str(&bad).unwrap();
        assert_eq!(bad.stacks(), None);
        // A dump written before the runs were kept reads back without them.
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old.as_object_mut().unwrap().remove("ran");
        let old: StacksJson = serde_json::from_value(old).unwrap();
        assert_eq!(old.stacks().unwrap().ran, Ran::default());
    }
}
