//! The slow events' ring buffer (schedlat-ebpf/src/slow.rs): the waits over
//! the threshold, as the kernel sends them, decoded.

use std::mem::size_of;

use aya::maps::{MapData, RingBuf, StackTraceMap};
use schedlat_common::{
    names,
    victims::{NO_WAKER, SlowEvent, SlowStacks},
};
use tokio::io::{Interest, unix::AsyncFd};

use super::tracer::Tracer;
use crate::collect::error::ReadError;

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
        let map = tracer
            .ebpf
            .take_map(name)
            .ok_or(ReadError::MissingMap(name))?;
        let ring = RingBuf::try_from(map).map_err(|error| ReadError::Map { name, error })?;
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
    }
}
