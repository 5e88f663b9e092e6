//! The recorder's window in memory: the last N seconds and the last M slow
//! waits, oldest dropped first. Its size never depends on the load: a
//! second holds at most `1 + max_series` series of at most
//! MAX_SERIES_SECOND_BYTES each (labels cut to MAX_LABEL bytes), and the
//! slow waits are a fixed number of fixed-size records, the newest of them
//! with their stacks (`--stacks`), each stack cut to a bound.

use std::{collections::VecDeque, sync::Arc};

use crate::analysis::{
    recording::{MAX_SERIES_SECOND_BYTES, Second, SlowWait},
    stacks::KEPT_STACKS_BYTES,
};

/// Longest series name kept (a cgroup path), in bytes.
pub(super) const MAX_LABEL: usize = 256;

pub(super) struct Ring {
    pub seconds: VecDeque<Arc<Second>>,
    pub slow: VecDeque<SlowWait>,
    max_seconds: usize,
    max_slow: usize,
    /// Slow waits kept with their stacks at most, the newest.
    max_stacks: usize,
    /// Waits in `slow` with stacks, and where the oldest of them may be:
    /// every wait before `stacks_from` has none (stacks are dropped oldest
    /// first), so making room never walks the whole window.
    with_stacks: usize,
    stacks_from: usize,
    /// Slow waits dropped to make room, since the start.
    pub slow_evicted: u64,
    /// Slow waits whose stacks were dropped to make room (the wait kept).
    pub stacks_evicted: u64,
}

impl Ring {
    pub(super) fn new(max_seconds: usize, max_slow: usize, max_stacks: usize) -> Ring {
        Ring {
            seconds: VecDeque::with_capacity(max_seconds),
            slow: VecDeque::with_capacity(max_slow),
            max_seconds,
            max_slow,
            max_stacks,
            with_stacks: 0,
            stacks_from: 0,
            slow_evicted: 0,
            stacks_evicted: 0,
        }
    }

    /// The most the window can hold, in bytes, with `max_series` series
    /// besides the total and `max_stacks` waits' stacks.
    pub(super) fn bound_bytes(
        max_seconds: usize,
        max_series: usize,
        max_slow: usize,
        max_stacks: usize,
    ) -> usize {
        let per_series = MAX_SERIES_SECOND_BYTES + MAX_LABEL + std::mem::size_of::<String>();
        max_seconds * (std::mem::size_of::<Second>() + 8 + (1 + max_series) * per_series)
            + max_slow * std::mem::size_of::<SlowWait>()
            + max_stacks * KEPT_STACKS_BYTES
    }

    pub(super) fn push_second(&mut self, s: Second) {
        if self.seconds.len() == self.max_seconds {
            self.seconds.pop_front();
        }
        self.seconds.push_back(Arc::new(s));
    }

    pub(super) fn push_slow(&mut self, waits: impl IntoIterator<Item = SlowWait>) {
        for mut w in waits {
            if self.slow.len() == self.max_slow {
                let oldest = self.slow.pop_front().expect("a full window");
                self.with_stacks -= usize::from(oldest.stacks.is_some());
                self.stacks_from = self.stacks_from.saturating_sub(1);
                self.slow_evicted += 1;
            }
            if w.stacks.is_some() {
                if self.max_stacks == 0 {
                    w.stacks = None;
                    self.stacks_evicted += 1;
                } else if self.with_stacks == self.max_stacks {
                    self.drop_oldest_stacks();
                }
            }
            self.with_stacks += usize::from(w.stacks.is_some());
            self.slow.push_back(w);
        }
    }

    /// Drops the stacks of the oldest wait that has them.
    fn drop_oldest_stacks(&mut self) {
        while let Some(w) = self.slow.get_mut(self.stacks_from) {
            self.stacks_from += 1;
            if w.stacks.take().is_some() {
                self.with_stacks -= 1;
                self.stacks_evicted += 1;
                return;
            }
        }
    }

    /// The newest `n` seconds, oldest first.
    pub(super) fn last(&self, n: usize) -> Vec<&Second> {
        let skip = self.seconds.len().saturating_sub(n);
        self.seconds.iter().skip(skip).map(|s| s.as_ref()).collect()
    }

    /// What a dump takes: the seconds shared, the slow waits copied (a
    /// bounded copy: `max_slow` records at most).
    pub(super) fn snapshot(&self) -> (Vec<Arc<Second>>, Vec<SlowWait>) {
        (
            self.seconds.iter().cloned().collect(),
            self.slow.iter().cloned().collect(),
        )
    }
}

/// A series name cut to MAX_LABEL bytes (on a character boundary).
pub(super) fn label(mut s: String) -> String {
    crate::analysis::cut_to(&mut s, MAX_LABEL);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stacks::{HolderStacks, Ran};

    fn second(i: u64) -> Second {
        Second {
            start_mono_ns: i,
            end_mono_ns: i + 1,
            series: Vec::new(),
            series_dropped: 0,
            slow_lost: 0,
        }
    }

    #[test]
    fn keeps_the_newest_and_counts_what_it_drops() {
        let mut r = Ring::new(3, 2, 0);
        for i in 0..5 {
            r.push_second(second(i));
        }
        let kept: Vec<u64> = r.seconds.iter().map(|s| s.start_mono_ns).collect();
        assert_eq!(kept, [2, 3, 4]);
        assert_eq!(
            r.last(2)
                .iter()
                .map(|s| s.start_mono_ns)
                .collect::<Vec<_>>(),
            [3, 4]
        );
        r.push_slow([wait(1, false), wait(2, false), wait(3, false)]);
        assert_eq!(
            r.slow.iter().map(|w| w.event.at_ns).collect::<Vec<_>>(),
            [2, 3]
        );
        assert_eq!(r.slow_evicted, 1);
        assert!(Ring::bound_bytes(300, 16, 10_000, 0) < 32 << 20);
        assert_eq!(label("é".repeat(200)).len(), 256);
    }

    fn wait(at_ns: u64, stacks: bool) -> SlowWait {
        let event = schedlat_common::victims::SlowEvent {
            at_ns,
            ..Default::default()
        };
        SlowWait {
            event,
            stacks: stacks.then(|| {
                Arc::new(HolderStacks {
                    kernel: Vec::new(),
                    user: Vec::new(),
                    waker: None,
                    ran: Ran::default(),
                })
            }),
        }
    }

    fn with_stacks(r: &Ring) -> Vec<u64> {
        (r.slow.iter())
            .filter(|w| w.stacks.is_some())
            .map(|w| w.event.at_ns)
            .collect()
    }

    #[test]
    fn only_the_newest_waits_keep_their_stacks() {
        let mut r = Ring::new(3, 5, 2);
        r.push_slow([wait(1, true), wait(2, false), wait(3, true)]);
        assert_eq!(with_stacks(&r), [1, 3]);
        r.push_slow([wait(4, true)]);
        // The wait stays; its stacks make room for the newest.
        assert_eq!(with_stacks(&r), [3, 4]);
        assert_eq!((r.slow.len(), r.stacks_evicted), (4, 1));
        // Waits leaving the window take their stacks with them.
        r.push_slow([
            wait(5, false),
            wait(6, false),
            wait(7, false),
            wait(8, true),
        ]);
        assert_eq!(r.slow.len(), 5);
        assert_eq!(with_stacks(&r), [4, 8]);
        assert_eq!((r.slow_evicted, r.stacks_evicted), (3, 1));
        r.push_slow([wait(9, true), wait(10, true)]);
        assert_eq!(with_stacks(&r), [9, 10]);
        assert_eq!(r.stacks_evicted, 2);
        let mut none = Ring::new(1, 2, 0);
        none.push_slow([wait(1, true)]);
        assert_eq!((with_stacks(&none).len(), none.stacks_evicted), (0, 1));
    }
}
