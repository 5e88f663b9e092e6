//! What the holder was doing when a slow wait ended (docs/stacks.md): its
//! stacks named, with the scheduler's own frames set apart, and the folded
//! stacks of a run, each weighted by the waits that ended behind it.

use std::collections::{BTreeMap, HashMap};

use schedlat_common::{victims::TaskInfo, workload::RING_SWITCHES};

use crate::{
    analysis::task,
    collect::slow::{RanDuring, RawStacks, SlowRecord},
    sys::{
        process_name,
        symbolize::{Frame, Symbolizer},
    },
};

/// The frames on top of every holder's kernel stack that say nothing of
/// it: the tracer's (the stack walk, the BPF program, the tracepoint's
/// dispatch) and the scheduler's entry points. The kernel already leaves
/// out most of the latter (a task's stack walk skips `__sched` functions,
/// as /proc/PID/stack does); a `__cond_resched` or a lock's slow path
/// stays: that is the holder's code giving up the CPU.
fn tracing_frame(name: &str) -> bool {
    const SCHEDULER: &[&str] = &[
        "__schedule",
        "schedule",
        "preempt_schedule",
        "preempt_schedule_common",
        "preempt_schedule_irq",
        "preempt_schedule_notrace",
        "preempt_schedule_thunk",
        "preempt_schedule_notrace_thunk",
        "schedule_idle",
    ];
    const TRACING: &[&str] = &[
        "__traceiter_",
        "__bpf_trace_",
        "__bpf_get_",
        "bpf_get_",
        "bpf_prog_",
        "bpf_trace_run",
        "__traceiter_sched_switch",
        "__bpf_trace_sched_switch",
    ];
    SCHEDULER.contains(&name) || TRACING.iter().any(|p| name.starts_with(p))
}

/// The frames of the way back to user space, from an interrupt or
/// exception that preempted the holder there: a holder stopped in user
/// space has only these (and the scheduler's) in its kernel stack.
fn return_to_user(name: &str) -> bool {
    [
        "asm_sysvec_",
        "sysvec_",
        "asm_common_interrupt",
        "common_interrupt",
        "asm_exc_",
        "exc_",
        "irqentry_exit",
        "exit_to_user_mode",
        "irqentry_exit_to_user_mode",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The holder's stacks at the end of a wait, named, and the waker's at
/// its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HolderStacks {
    /// Innermost first, as the kernel walked them.
    pub kernel: Vec<Frame>,
    pub user: Vec<Frame>,
    /// None when the wait did not begin with a wakeup.
    pub waker: Option<WakerStack>,
    /// Who ran on the CPU during the wait, and for how long.
    pub ran: Ran,
}

/// The tasks that ran on a wait's CPU during it (the holder at its end
/// among them), each with its time on the CPU inside the wait: who the
/// waiter was passed over for, not only who held the CPU when it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ran {
    /// Most time first; at most the kernel's ring of runs
    /// (schedlat_common::workload::RING_SWITCHES) of them.
    pub tasks: Vec<RanTask>,
    /// The part of the wait older than the oldest run the kernel kept.
    pub unknown_ns: u64,
    /// The wait began queued on another CPU: the runs are the CPU's it
    /// ended on, not all it waited through.
    pub queued_elsewhere: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RanTask {
    /// 0: the idle task (the CPU had nothing to run).
    pub tid: u32,
    /// Its name when the event was read; None once it had exited.
    pub comm: Option<String>,
    pub ns: u64,
}

impl Ran {
    /// Names the TIDs the kernel recorded: the holder's from the event
    /// itself, the others from /proc while they live, each read once per
    /// batch (`comms`: a batch's waits share most of their tasks).
    fn named(raw: &RanDuring, holder: &TaskInfo, comms: &mut HashMap<u32, Option<String>>) -> Ran {
        let mut comm = |tid: u32| match tid {
            0 => None,
            tid if tid == holder.tid => Some(task::comm(holder)),
            tid => comms
                .entry(tid)
                .or_insert_with(|| process_name::of(tid))
                .clone(),
        };
        Ran {
            tasks: (raw.tasks.iter())
                .map(|&(tid, ns)| RanTask {
                    tid,
                    comm: comm(tid),
                    ns,
                })
                .collect(),
            unknown_ns: raw.unknown_ns,
            queued_elsewhere: raw.queued_elsewhere,
        }
    }
}

/// Who woke the task that waited, and from where in the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WakerStack {
    /// `current` at the wakeup: in an interrupt, the task it interrupted.
    pub tid: u32,
    /// Innermost first; None when the kernel did not keep it.
    pub kernel: Option<Vec<Frame>>,
}

impl WakerStack {
    /// How many innermost frames are the tracer's (the walk, the program,
    /// the tracepoint's dispatch).
    pub(crate) fn tracing_frames(&self) -> usize {
        self.kernel.as_deref().map_or(0, |k| {
            k.iter()
                .rposition(|f| f.symbol.as_deref().is_some_and(tracing_frame))
                .map_or(0, |i| i + 1)
        })
    }

    /// The frames of the wakeup itself, innermost first.
    pub(crate) fn own(&self) -> &[Frame] {
        self.kernel
            .as_deref()
            .map_or(&[], |k| &k[self.tracing_frames()..])
    }
}

impl HolderStacks {
    /// How many innermost kernel frames are the tracer's and the
    /// scheduler's own: up to the outermost of them, or none when the
    /// stack has none.
    pub(crate) fn tracing_frames(&self) -> usize {
        self.kernel
            .iter()
            .rposition(|f| f.symbol.as_deref().is_some_and(tracing_frame))
            .map_or(0, |i| i + 1)
    }

    /// The holder's own kernel frames, innermost first: none when it was
    /// stopped in user space (what is left is the way back there).
    pub(crate) fn own_kernel(&self) -> &[Frame] {
        let rest = &self.kernel[self.tracing_frames()..];
        let from_user = rest
            .iter()
            .all(|f| f.symbol.as_deref().is_some_and(return_to_user));
        if from_user { &[] } else { rest }
    }

    /// Whether it was stopped in user space (no kernel frame of its own).
    pub(crate) fn in_user_space(&self) -> bool {
        !self.kernel.is_empty() && self.own_kernel().is_empty()
    }

    /// The frames of [`Self::folded_frames`] as one folded stack,
    /// `outer;...;inner`, without a comm or a weight.
    pub(crate) fn folded(&self) -> String {
        self.folded_frames().collect::<Vec<_>>().join(";")
    }

    /// One folded line's frames, outermost first: the user stack, then
    /// the holder's own kernel frames marked `_[k]` (as stackcollapse-perf
    /// marks them, which flame graph palettes colour apart).
    fn folded_frames(&self) -> impl Iterator<Item = String> + '_ {
        let user = self.user.iter().rev().map(|f| fold_safe(&f.label()));
        let kernel = self
            .own_kernel()
            .iter()
            .rev()
            .map(|f| format!("{}_[k]", fold_safe(&f.label())));
        user.chain(kernel)
    }
}

/// Names the stacks of slow events as they are read: a process's
/// addresses mean something only while it lives. `slow --stacks` and the
/// flight recorder (`record --ring --stacks`) read through it.
pub(crate) struct StackNamer {
    symbolizer: Symbolizer,
}

impl StackNamer {
    pub(crate) fn new() -> StackNamer {
        StackNamer {
            symbolizer: Symbolizer::new(),
        }
    }

    /// The holder's stacks of each record, named; None without stacks or
    /// for an idle CPU (the idle task's stack says nothing of a holder:
    /// the wait was the wakeup's or a throttled group's). One pass over
    /// the kernel's symbols and one per process for a whole batch: named
    /// one event at a time, the reader fell behind a thousand slow waits a
    /// second and lost most of them.
    pub(crate) fn name(&self, records: &[SlowRecord]) -> Vec<Option<HolderStacks>> {
        let held: Vec<Option<&RawStacks>> = records
            .iter()
            .map(|r| r.stacks.as_ref().filter(|_| r.event.culprit.tid != 0))
            .collect();
        // The holders' kernel stacks, then the wakers', in one pass.
        let holders = held.iter().flatten().map(|s| &s.kernel[..]);
        let wakers = held
            .iter()
            .flatten()
            .filter_map(|s| s.waker.as_ref()?.kernel.as_deref());
        let kernel_stacks: Vec<&[u64]> = holders.chain(wakers).collect();
        let mut named = self.symbolizer.kernel(&kernel_stacks).into_iter();
        let holder_kernel: Vec<Vec<Frame>> =
            named.by_ref().take(held.iter().flatten().count()).collect();
        let mut holder_kernel = holder_kernel.into_iter();
        let mut waker_kernel = named;
        let mut by_process: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, (r, s)) in records.iter().zip(&held).enumerate() {
            if s.is_some() {
                by_process.entry(r.event.culprit.tgid).or_default().push(i);
            }
        }
        let mut user: Vec<Vec<Frame>> = vec![Vec::new(); records.len()];
        for (tgid, at) in by_process {
            let stacks: Vec<&[u64]> = at
                .iter()
                .filter_map(|&i| held[i].map(|s| &s.user[..]))
                .collect();
            for (i, frames) in at.into_iter().zip(self.symbolizer.user(tgid, &stacks)) {
                user[i] = frames;
            }
        }
        let mut comms = HashMap::new();
        held.into_iter()
            .zip(user)
            .zip(records)
            .map(|((s, user), r)| {
                let s = s?;
                let waker = s.waker.as_ref().map(|w| WakerStack {
                    tid: w.tid,
                    kernel: w
                        .kernel
                        .as_ref()
                        .map(|_| waker_kernel.next().unwrap_or_default()),
                });
                Some(HolderStacks {
                    kernel: holder_kernel.next().unwrap_or_default(),
                    user,
                    waker,
                    ran: Ran::named(&s.ran, &r.event.culprit, &mut comms),
                })
            })
            .collect()
    }
}

/// Frames a kept stack holds at most, innermost first (`bounded`).
pub(crate) const KEPT_FRAMES: usize = 64;

/// Bytes a kept frame's function or file name holds at most.
pub(crate) const KEPT_NAME: usize = 128;

/// Bytes a kept task name holds at most: the kernel's TASK_COMM_LEN.
const KEPT_COMM: usize = 16;

/// The most a kept wait's stacks take in memory (the holder's two and
/// the waker's, each cut by `bounded`, and the tasks that ran, in their
/// shared allocation with its two counts): what the flight recorder's
/// bound counts per wait with stacks.
pub(crate) const KEPT_STACKS_BYTES: usize = 2 * std::mem::size_of::<usize>()
    + std::mem::size_of::<HolderStacks>()
    + std::mem::size_of::<WakerStack>()
    + 3 * KEPT_FRAMES * (std::mem::size_of::<Frame>() + 2 * KEPT_NAME)
    + RING_SWITCHES * (std::mem::size_of::<RanTask>() + KEPT_COMM);

impl HolderStacks {
    /// The stacks cut to a bound a long-lived window can hold: the
    /// innermost KEPT_FRAMES frames of each stack (where the task was,
    /// what a reader looks for first), each name cut to KEPT_NAME bytes.
    pub(crate) fn bounded(mut self) -> HolderStacks {
        let cut = |frames: &mut Vec<Frame>| {
            frames.truncate(KEPT_FRAMES);
            frames.shrink_to_fit();
            for f in frames {
                for name in [&mut f.symbol, &mut f.module].into_iter().flatten() {
                    super::cut_to(name, KEPT_NAME);
                }
            }
        };
        cut(&mut self.kernel);
        cut(&mut self.user);
        if let Some(k) = self.waker.as_mut().and_then(|w| w.kernel.as_mut()) {
            cut(k);
        }
        // As many as the kernel's ring holds (a dump read back may say
        // more), each name as long as the kernel's.
        self.ran.tasks.truncate(RING_SWITCHES);
        self.ran.tasks.shrink_to_fit();
        for comm in self.ran.tasks.iter_mut().filter_map(|t| t.comm.as_mut()) {
            super::cut_to(comm, KEPT_COMM);
        }
        self
    }
}

/// A frame as one field of a folded line: `;` separates frames and the
/// last space the weight, so neither may appear in a name (C++ and Rust
/// demangled names can hold both).
pub(crate) fn fold_safe(name: &str) -> String {
    name.replace(';', ":").replace([' ', '\n'], "_")
}

/// The folded stacks of a run (Brendan Gregg's format: `comm;outer;...;
/// inner weight`), weighted by the microseconds waiters spent behind each.
#[derive(Default, Debug)]
pub(crate) struct Folded {
    stacks: BTreeMap<String, u64>,
    /// Per holder (its roots) and innermost frame, the microseconds
    /// waited behind them: what `summary` names.
    innermost: BTreeMap<(String, String), u64>,
    total_us: u64,
}

impl Folded {
    /// Adds a wait of `wait_ns` that ended behind a holder with these
    /// stacks; `roots`, outermost first, are the frames its stacks are
    /// folded under: its comm, and with `--by` its workload above it.
    pub(crate) fn add(&mut self, roots: &[&str], stacks: &HolderStacks, wait_ns: u64) {
        let us = wait_ns / 1000;
        let frames: Vec<String> = stacks.folded_frames().collect();
        let mut line: Vec<String> = roots.iter().map(|r| fold_safe(r)).collect();
        line.extend(frames.iter().cloned());
        *self.stacks.entry(line.join(";")).or_default() += us;
        // The holder as a reader names it: its comm, then where it is.
        let holder = match roots {
            [workload, comm] => format!("{comm} ({workload})"),
            _ => roots.join(";"),
        };
        let inner = frames
            .last()
            .map_or("(no stack)", |f| f.trim_end_matches("_[k]"));
        *self
            .innermost
            .entry((holder, inner.to_string()))
            .or_default() += us;
        self.total_us += us;
    }

    /// The lines, sorted by stack (as flamegraph.pl wants them).
    pub(crate) fn lines(&self) -> Vec<String> {
        self.stacks
            .iter()
            .filter(|(_, us)| **us > 0)
            .map(|(stack, us)| format!("{stack} {us}"))
            .collect()
    }

    /// Where most of the waiting went: `of 4.20 s waited behind holders
    /// with their stacks, 61% went to batch-7 in compress_block`; None
    /// before any wait.
    pub(crate) fn summary(&self) -> Option<String> {
        let ((holder, frame), us) = self.innermost.iter().max_by_key(|(_, us)| **us)?;
        (self.total_us > 0).then(|| {
            format!(
                "of {} waited behind holders with their stacks, {:.0}% went to {holder} in {frame}",
                super::fmt_ns(self.total_us * 1000),
                *us as f64 * 100.0 / self.total_us as f64
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Frame {
        Frame {
            addr: 1,
            symbol: Some(name.into()),
            offset: 0,
            module: None,
            module_offset: None,
        }
    }

    fn stacks(kernel: &[&str], user: &[&str]) -> HolderStacks {
        HolderStacks {
            kernel: kernel.iter().map(|n| named(n)).collect(),
            user: user.iter().map(|n| named(n)).collect(),
            waker: None,
            ran: Ran::default(),
        }
    }

    #[test]
    fn a_holder_preempted_in_user_space_has_no_kernel_frames_of_its_own() {
        let s = stacks(
            // As 6.18 walks it: the kernel leaves out __schedule and the
            // other scheduler functions itself.
            &[
                "__bpf_get_stack",
                "__bpf_get_task_stack",
                "bpf_prog_1_sched_switch",
                "bpf_trace_run4",
                "__traceiter_sched_switch",
                "irqentry_exit_to_user_mode",
                "asm_sysvec_apic_timer_interrupt",
            ],
            &["spin", "main"],
        );
        assert_eq!(s.tracing_frames(), 5);
        assert!(s.in_user_space());
        let mut f = Folded::default();
        f.add(&["hog"], &s, 3_500_000);
        f.add(&["hog"], &s, 1_000_000);
        assert_eq!(f.lines(), ["hog;main;spin 4500"]);
        assert_eq!(
            f.summary().as_deref(),
            Some("of 4.50 ms waited behind holders with their stacks, 100% went to hog in spin")
        );
    }

    #[test]
    fn a_holder_in_the_kernel_keeps_its_frames_under_the_scheduler() {
        let s = stacks(
            &[
                "__schedule",
                "schedule",
                "pipe_read",
                "vfs_read",
                "do_syscall_64",
            ],
            &["read", "main"],
        );
        assert!(!s.in_user_space());
        let own: Vec<_> = s.own_kernel().iter().map(Frame::label).collect();
        assert_eq!(own, ["pipe_read", "vfs_read", "do_syscall_64"]);
        let mut f = Folded::default();
        f.add(&["a;b c"], &s, 2000);
        assert_eq!(
            f.lines(),
            ["a:b_c;main;read;do_syscall_64_[k];vfs_read_[k];pipe_read_[k] 2"]
        );
        // Under its workload (`--by`), which the summary names too.
        f.add(&["shop/web-1", "web"], &s, 6000);
        assert!(f.lines().contains(
            &"shop/web-1;web;main;read;do_syscall_64_[k];vfs_read_[k];pipe_read_[k] 6".to_string()
        ));
        assert_eq!(
            f.summary().as_deref(),
            Some(
                "of 8.00 us waited behind holders with their stacks, 75% went to web (shop/web-1) in pipe_read"
            )
        );
    }

    #[test]
    fn a_wakers_stack_starts_under_the_tracepoint() {
        let names = [
            "bpf_prog_1_sched_wakeup",
            "bpf_trace_run1",
            "__traceiter_sched_wakeup",
            "ttwu_do_activate",
            "try_to_wake_up",
            "pipe_write",
        ];
        let w = WakerStack {
            tid: 7,
            kernel: Some(names.iter().map(|n| named(n)).collect()),
        };
        assert_eq!(w.tracing_frames(), 3);
        assert_eq!(w.own()[0].label(), "ttwu_do_activate");
        let lost = WakerStack {
            tid: 7,
            kernel: None,
        };
        assert!(lost.own().is_empty());
    }

    #[test]
    fn kept_stacks_are_cut_to_their_bound() {
        let long = "é".repeat(KEPT_NAME);
        let deep: Vec<&str> = vec![long.as_str(); KEPT_FRAMES + 10];
        let mut s = stacks(&deep, &["main"]);
        s.waker = Some(WakerStack {
            tid: 1,
            kernel: Some(deep.iter().map(|n| named(n)).collect()),
        });
        let kept = s.bounded();
        assert_eq!(kept.kernel.len(), KEPT_FRAMES);
        assert_eq!(kept.user.len(), 1);
        let waker = kept.waker.as_ref().unwrap().kernel.as_ref().unwrap();
        assert_eq!(waker.len(), KEPT_FRAMES);
        let name = kept.kernel[0].symbol.as_deref().unwrap();
        assert_eq!(name.len(), KEPT_NAME);
        assert!(name.chars().all(|c| c == 'é'));
    }

    #[test]
    fn an_unnamed_kernel_stack_is_kept_whole() {
        let mut s = stacks(&[], &[]);
        s.kernel.push(Frame {
            symbol: None,
            ..named("")
        });
        assert_eq!(s.tracing_frames(), 0);
        assert_eq!(s.own_kernel().len(), 1);
    }
}

/// Stacks for other modules' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{HolderStacks, Ran};
    use crate::sys::symbolize::Frame;

    /// A holder stopped in user space in `names` (outermost first), with
    /// nothing else known.
    pub(crate) fn user_stacks(names: &[&str]) -> HolderStacks {
        HolderStacks {
            kernel: Vec::new(),
            // Innermost first, as the kernel walks them.
            user: (names.iter().rev())
                .map(|n| Frame {
                    addr: 1,
                    symbol: Some(n.to_string()),
                    offset: 0,
                    module: None,
                    module_offset: None,
                })
                .collect(),
            waker: None,
            ran: Ran::default(),
        }
    }
}
