//! The slow events' ring buffer (schedlat-ebpf/src/slow.rs): the waits over
//! the threshold, as the kernel sends them, decoded.

use std::mem::size_of;

use aya::maps::{MapData, RingBuf};
use schedlat_common::{names, victims::SlowEvent};
use tokio::io::{Interest, unix::AsyncFd};

use super::tracer::Tracer;
use crate::collect::error::ReadError;

/// The ring buffer, watched by the runtime for new records.
pub(crate) struct SlowEvents {
    ring: AsyncFd<RingBuf<MapData>>,
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
        Ok(SlowEvents { ring })
    }

    /// Waits until the kernel has written, then returns every event in the
    /// buffer. Cancel-safe: nothing is read before the wait ends.
    pub(crate) async fn next(&mut self) -> std::io::Result<Vec<SlowEvent>> {
        let mut guard = self.ring.readable_mut().await?;
        let events = drain(guard.get_inner_mut());
        guard.clear_ready();
        Ok(events)
    }

    /// Every event in the buffer now, without waiting.
    pub(crate) fn drain(&mut self) -> Vec<SlowEvent> {
        drain(self.ring.get_mut())
    }
}

fn drain(ring: &mut RingBuf<MapData>) -> Vec<SlowEvent> {
    let mut events = Vec::new();
    while let Some(item) = ring.next() {
        if let Some(event) = decode(&item) {
            events.push(event);
        }
    }
    events
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
    }
}
