//! The recorder's window in memory: the last N seconds and the last M slow
//! waits, oldest dropped first. Its size never depends on the load: a
//! second holds at most `1 + max_series` series of at most
//! MAX_SERIES_SECOND_BYTES each (labels cut to MAX_LABEL bytes), and the
//! slow waits are a fixed number of fixed-size records.

use std::{collections::VecDeque, sync::Arc};

use schedlat_common::victims::SlowEvent;

use crate::analysis::recording::{MAX_SERIES_SECOND_BYTES, Second};

/// Longest series name kept (a cgroup path), in bytes.
pub(super) const MAX_LABEL: usize = 256;

pub(super) struct Ring {
    pub seconds: VecDeque<Arc<Second>>,
    pub slow: VecDeque<SlowEvent>,
    max_seconds: usize,
    max_slow: usize,
    /// Slow waits dropped to make room, since the start.
    pub slow_evicted: u64,
}

impl Ring {
    pub(super) fn new(max_seconds: usize, max_slow: usize) -> Ring {
        Ring {
            seconds: VecDeque::with_capacity(max_seconds),
            slow: VecDeque::with_capacity(max_slow),
            max_seconds,
            max_slow,
            slow_evicted: 0,
        }
    }

    /// The most the window can hold, in bytes, with `max_series` series
    /// besides the total.
    pub(super) fn bound_bytes(max_seconds: usize, max_series: usize, max_slow: usize) -> usize {
        let per_series = MAX_SERIES_SECOND_BYTES + MAX_LABEL + std::mem::size_of::<String>();
        max_seconds * (std::mem::size_of::<Second>() + 8 + (1 + max_series) * per_series)
            + max_slow * std::mem::size_of::<SlowEvent>()
    }

    pub(super) fn push_second(&mut self, s: Second) {
        if self.seconds.len() == self.max_seconds {
            self.seconds.pop_front();
        }
        self.seconds.push_back(Arc::new(s));
    }

    pub(super) fn push_slow(&mut self, events: impl IntoIterator<Item = SlowEvent>) {
        for e in events {
            if self.slow.len() == self.max_slow {
                self.slow.pop_front();
                self.slow_evicted += 1;
            }
            self.slow.push_back(e);
        }
    }

    /// The newest `n` seconds, oldest first.
    pub(super) fn last(&self, n: usize) -> Vec<&Second> {
        let skip = self.seconds.len().saturating_sub(n);
        self.seconds.iter().skip(skip).map(|s| s.as_ref()).collect()
    }

    /// What a dump takes: the seconds shared, the slow waits copied (a
    /// bounded copy: `max_slow` records at most).
    pub(super) fn snapshot(&self) -> (Vec<Arc<Second>>, Vec<SlowEvent>) {
        (
            self.seconds.iter().cloned().collect(),
            self.slow.iter().copied().collect(),
        )
    }
}

/// A series name cut to MAX_LABEL bytes (on a character boundary).
pub(super) fn label(s: String) -> String {
    if s.len() <= MAX_LABEL {
        return s;
    }
    let mut end = MAX_LABEL;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut r = Ring::new(3, 2);
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
        let e = |at_ns| SlowEvent {
            at_ns,
            ..Default::default()
        };
        r.push_slow([e(1), e(2), e(3)]);
        assert_eq!(r.slow.iter().map(|e| e.at_ns).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(r.slow_evicted, 1);
        assert!(Ring::bound_bytes(300, 16, 10_000) < 32 << 20);
        assert_eq!(label("é".repeat(200)).len(), 256);
    }
}
