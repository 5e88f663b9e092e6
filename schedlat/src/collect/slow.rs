//! The slow events' ring buffer (schedlat-ebpf/src/slow.rs): the waits over
//! the threshold, as the kernel sends them, decoded.

use std::mem::size_of;

use aya::maps::{MapData, RingBuf, StackTraceMap};
use schedlat_common::{
    names,
    victims::{NO_WAKER, SlowEvent, SlowStacks},
    workload::{RING_SWITCHES, SwitchRing},
};
use tokio::io::{Interest, unix::AsyncFd};

use super::tracer::Tracer;
use crate::collect::error::InMap;

/// The ring buffer, watched by the runtime for new records.
pub(crate) struct SlowEvents {
    ring: AsyncFd<RingBuf<MapData>>,
    /// The wakers' stacks (`--stacks`), read by the id each event holds.
    waker_stacks: Option<StackTraceMap<MapData>>,
}

impl SlowEvents {
    /// Takes the ring buffer out of the loaded object (once).
    pub(crate) fn take(tracer: &mut Tracer) -> anyhow::Result<SlowEvents> {
        let name = names::MAP_SLOW_EVENTS;
        let map = tracer.ebpf.take_map(name).in_map(name)?;
        let ring = RingBuf::try_from(map).in_map(name)?;
        // SAFETY: RingBuf owns its map fd and keeps it open, unchanged, for as
        // long as it lives, which is as long as the AsyncFd.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)
            .map_err(|e| anyhow::Error::new(e).context("watching the slow events' ring buffer"))?;
        // Only read when an event names a stack, that is with --stacks.
        let waker_stacks = tracer
            .ebpf
            .take_map(names::MAP_WAKER_STACKS)
            .and_then(|map| StackTraceMap::try_from(map).ok());
        Ok(SlowEvents { ring, waker_stacks })
    }

    /// Waits until the kernel has written, then returns every event in the
    /// buffer, each with its holder's stacks where the kernel took them
    /// (`--stacks`). Cancel-safe: nothing is read before the wait ends.
    pub(crate) async fn next(&mut self) -> std::io::Result<Vec<SlowRecord>> {
        let mut guard = self.ring.readable_mut().await?;
        let records = drain_records(guard.get_inner_mut(), self.waker_stacks.as_ref());
        guard.clear_ready();
        Ok(records)
    }

    /// Every event in the buffer now, without waiting.
    pub(crate) fn drain(&mut self) -> Vec<SlowRecord> {
        drain_records(self.ring.get_mut(), self.waker_stacks.as_ref())
    }
}

/// A slow event and, with `--stacks`, the holder's stacks as the kernel
/// took them (addresses, innermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlowRecord {
    pub event: SlowEvent,
    pub stacks: Option<RawStacks>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawStacks {
    pub kernel: Vec<u64>,
    pub user: Vec<u64>,
    /// Who woke the task at the wakeup that began the wait; None when the
    /// wait did not begin with a wakeup (a preemption, a new task).
    pub waker: Option<RawWaker>,
    /// Who ran on the CPU during the wait.
    pub ran: RanDuring,
}

/// The tasks that ran on a wait's CPU during it, from the kernel's ring of
/// that CPU's last runs: each one's time on the CPU inside the wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RanDuring {
    /// (TID, ns) per task, most time first (ties by TID); TID 0 is the
    /// idle task (the CPU had nothing to run: the wakeup's own latency).
    pub tasks: Vec<(u32, u64)>,
    /// The part of the wait before the oldest run the ring kept.
    pub unknown_ns: u64,
    /// The wait began queued on another CPU (a preempted task moved by
    /// load balancing): these runs are not all it waited through.
    pub queued_elsewhere: bool,
}

impl RanDuring {
    /// The runs of `ring` inside the wait of `waiter` `[end - wait, end]`,
    /// walked back from the newest: the runs tile the CPU's time, so what
    /// they cover and `unknown_ns` add up to the wait.
    ///
    /// A waiter preempted on this CPU ran until its wait began, but the
    /// ring's clock is read a moment after the wait's (slow.rs): its own
    /// run seems to reach a few hundred nanoseconds into its wait. Those
    /// belong to the run after it, which began at the preemption.
    pub(crate) fn of(ring: &SwitchRing, (end, wait): (u64, u64), waiter: u32) -> RanDuring {
        let began = end.saturating_sub(wait);
        let mut by_tid = std::collections::BTreeMap::<u32, u64>::new();
        let mut covered = 0;
        let kept = ring.next.min(RING_SWITCHES as u64);
        // The holder of the run after the one at hand (None at the newest).
        let mut after: Option<u32> = None;
        for k in 0..kept {
            let i = (ring.next - 1 - k) as usize % RING_SWITCHES;
            let run = ring.records[i];
            if run.until <= began {
                break;
            }
            let ns = run.until.min(end).saturating_sub(run.since.max(began));
            // A TID is 32 bits (the ring's holder is a u64 for the pairs'
            // cgroup ids).
            let tid = run.holder as u32;
            let holder = match (tid == waiter, after) {
                (true, Some(next)) => next,
                _ => tid,
            };
            if ns > 0 {
                *by_tid.entry(holder).or_default() += ns;
                covered += ns;
            }
            after = Some(holder);
        }
        let mut tasks: Vec<(u32, u64)> = by_tid.into_iter().collect();
        tasks.sort_by_key(|&(tid, ns)| (std::cmp::Reverse(ns), tid));
        RanDuring {
            tasks,
            unknown_ns: wait.saturating_sub(covered),
            queued_elsewhere: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawWaker {
    /// `current` at the wakeup: in an interrupt, the task it interrupted.
    pub tid: u32,
    /// Its kernel stack there, innermost first; None when not kept.
    pub kernel: Option<Vec<u64>>,
}

fn drain_records(
    ring: &mut RingBuf<MapData>,
    waker_stacks: Option<&StackTraceMap<MapData>>,
) -> Vec<SlowRecord> {
    let mut records = Vec::new();
    while let Some(item) = ring.next() {
        if let Some(mut record) = decode_record(&item) {
            if let (Some(map), Some(w)) = (waker_stacks, waker_of(&item)) {
                let waker = record.stacks.as_mut().map(|s| &mut s.waker);
                *waker.expect("a record with a waker has stacks") = Some(RawWaker {
                    tid: w.0,
                    kernel: (w.1 != NO_WAKER)
                        .then(|| map.get(&w.1, 0).ok())
                        .flatten()
                        .map(|t| t.frames().iter().map(|f| f.ip).collect()),
                });
            }
            records.push(record);
        }
    }
    records
}

/// The waker's TID and stack id of a record with stacks, if it has one.
fn waker_of(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < size_of::<SlowStacks>() {
        return None;
    }
    // SAFETY: as in decode_record.
    let s = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<SlowStacks>()) };
    (s.waker_tid != NO_WAKER).then_some((s.waker_tid, s.waker_stack))
}

/// The frames up to the first zero: a frame-pointer walk through code
/// built without frame pointers reads a zero where the chain ends (or a
/// stray one), and no code is at address 0: what follows is not a caller.
fn walked(frames: &[u64]) -> Vec<u64> {
    frames.iter().copied().take_while(|&a| a != 0).collect()
}

/// A record of either size: with stacks when it is long enough for them.
fn decode_record(bytes: &[u8]) -> Option<SlowRecord> {
    if bytes.len() < size_of::<SlowStacks>() {
        return decode(bytes).map(|event| SlowRecord {
            event,
            stacks: None,
        });
    }
    // SAFETY: long enough; SlowStacks is repr(C) plain data, valid for
    // any bit pattern; the record need not be aligned for Rust.
    let s = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<SlowStacks>()) };
    Some(SlowRecord {
        event: s.event,
        stacks: Some(RawStacks {
            kernel: walked(SlowStacks::frames(&s.kernel, s.kernel_bytes)),
            user: walked(SlowStacks::frames(&s.user, s.user_bytes)),
            waker: None,
            ran: RanDuring {
                queued_elsewhere: s.queued_elsewhere != 0,
                ..RanDuring::of(
                    &s.runs,
                    (s.event.at_ns, s.event.wait_ns),
                    s.event.victim.tid,
                )
            },
        }),
    })
}

/// A ring buffer record as the kernel wrote it.
fn decode(bytes: &[u8]) -> Option<SlowEvent> {
    (bytes.len() >= size_of::<SlowEvent>()).then(|| {
        // SAFETY: long enough; SlowEvent is repr(C) plain data, valid for
        // any bit pattern; the record need not be aligned for Rust.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<SlowEvent>()) }
    })
}

#[cfg(test)]
mod tests {
    use schedlat_common::workload::SwitchRecord;

    use super::*;

    #[test]
    fn short_records_are_skipped() {
        assert!(decode(&[0u8; 8]).is_none());
        let bytes = vec![0u8; size_of::<SlowEvent>()];
        assert_eq!(decode(&bytes), Some(SlowEvent::default()));
        assert_eq!(decode_record(&bytes).unwrap().stacks, None);
    }

    #[test]
    fn a_record_with_stacks_keeps_the_frames_the_kernel_wrote() {
        let mut bytes = vec![0u8; size_of::<SlowStacks>()];
        let at = size_of::<SlowEvent>();
        // 2 kernel frames; the user stack an error (a kernel thread).
        bytes[at..at + 4].copy_from_slice(&16i32.to_ne_bytes());
        bytes[at + 4..at + 8].copy_from_slice(&(-14i32).to_ne_bytes());
        bytes[at + 8..at + 12].copy_from_slice(&NO_WAKER.to_ne_bytes());
        bytes[at + 16..at + 24].copy_from_slice(&0xffff_ffff_8100_0000u64.to_ne_bytes());
        let stacks = decode_record(&bytes).unwrap().stacks.unwrap();
        assert_eq!(stacks.kernel, [0xffff_ffff_8100_0000]);
        assert_eq!(waker_of(&bytes), None);
        bytes[at + 8..at + 12].copy_from_slice(&77u32.to_ne_bytes());
        bytes[at + 12..at + 16].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(waker_of(&bytes), Some((77, 3)));
        assert!(stacks.user.is_empty());
        // No run kept: the whole wait is unknown.
        assert_eq!(stacks.ran, RanDuring::default());
    }

    /// A ring holding `runs` (holder, since, until), oldest first, as the
    /// kernel writes it (`next` counts every run since load).
    fn ring(runs: &[(u64, u64, u64)], written: u64) -> SwitchRing {
        let mut ring = SwitchRing::default();
        for (k, &(holder, since, until)) in runs.iter().enumerate() {
            let n = written - runs.len() as u64 + k as u64;
            ring.records[n as usize % RING_SWITCHES] = SwitchRecord {
                since,
                until,
                holder,
            };
        }
        ring.next = written;
        ring
    }

    #[test]
    fn the_runs_inside_a_wait_add_up_to_it() {
        // The wait is [100, 1000]: task 7 ran 50..400 (300 inside), the
        // idle task 400..450, task 9 450..700, task 7 again 700..1010 (the
        // holder's run, read just after the wait's end).
        let r = ring(
            &[
                (5, 0, 50),
                (7, 50, 400),
                (0, 400, 450),
                (9, 450, 700),
                (7, 700, 1010),
            ],
            // Past a wrap of the ring: the index is taken modulo.
            RING_SWITCHES as u64 + 3,
        );
        let ran = RanDuring::of(&r, (1000, 900), 11);
        assert_eq!(ran.tasks, [(7, 600), (9, 250), (0, 50)]);
        assert_eq!(ran.unknown_ns, 0);
        // A wait longer than the ring reaches: the rest is unknown.
        let ran = RanDuring::of(&r, (1000, 1500), 11);
        assert_eq!(ran.tasks.iter().map(|t| t.1).sum::<u64>(), 1000);
        assert_eq!(ran.unknown_ns, 500);
    }

    #[test]
    fn a_ring_not_yet_full_is_read_from_its_start() {
        let r = ring(&[(3, 10, 20), (4, 20, 90)], 2);
        let ran = RanDuring::of(&r, (90, 100), 11);
        assert_eq!(ran.tasks, [(4, 70), (3, 10)]);
        // Before the first run (the ring's zeroed records are not runs).
        assert_eq!(ran.unknown_ns, 20);
    }

    #[test]
    fn the_waiters_own_run_is_never_among_its_holders() {
        // Task 5 was preempted at 100 by task 7 (the ring's boundary read
        // at 103), ran again at 1000: its wait is [100, 1000].
        let r = ring(&[(5, 0, 103), (7, 103, 1001)], 2);
        let ran = RanDuring::of(&r, (1000, 900), 5);
        assert_eq!(ran.tasks, [(7, 900)]);
        assert_eq!(ran.unknown_ns, 0);
    }
}
