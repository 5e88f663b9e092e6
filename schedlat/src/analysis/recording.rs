//! A recorded window: per-second histograms of one or more series (the
//! total, and per cgroup) and the slow waits, as the flight recorder keeps
//! them in memory and as a dump holds them (docs/recorder.md).
//!
//! A second's histogram is kept sparse, only its non-empty buckets, as
//! (index, count) pairs of 2 + 4 bytes (a count per bucket per second fits
//! 32 bits: 4 billion waits in one bucket in one second do not happen on a
//! run queue; more saturate). That bounds a series-second at
//! [`MAX_SERIES_SECOND_BYTES`] whatever the load, and it is a few hundred
//! bytes in practice.

use std::sync::Arc;

use schedlat_common::victims::SlowEvent;

use super::stacks::HolderStacks;
use crate::histogram::{NR_BUCKETS, NR_LOG2_SLOTS, Waits};

/// One series' waits in one interval, sparse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompactWaits {
    /// Non-empty fine buckets: (index, count).
    pub buckets: Box<[(u16, u32)]>,
    /// Non-empty runqlat log2 slots: (slot, count).
    pub log2: Box<[(u8, u32)]>,
    pub sum_ns: u64,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub untracked_tid: u32,
    pub discarded_negative: u32,
    pub unkeyed: u32,
}

/// The most a series-second can take: every bucket and slot non-empty,
/// plus the fixed part (what the memory bound is computed from).
pub(crate) const MAX_SERIES_SECOND_BYTES: usize =
    NR_BUCKETS * 8 + NR_LOG2_SLOTS * 8 + std::mem::size_of::<CompactWaits>();

fn narrow(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl CompactWaits {
    pub(crate) fn of(w: &Waits) -> CompactWaits {
        let nonzero = |v: &[u64]| -> Vec<(usize, u32)> {
            v.iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, &n)| (i, narrow(n)))
                .collect()
        };
        CompactWaits {
            buckets: nonzero(&w.buckets)
                .into_iter()
                .map(|(i, n)| (i as u16, n))
                .collect(),
            log2: nonzero(&w.log2)
                .into_iter()
                .map(|(i, n)| (i as u8, n))
                .collect(),
            sum_ns: w.sum_ns,
            min_ns: w.min_ns,
            max_ns: w.max_ns,
            untracked_tid: narrow(w.untracked_tid),
            discarded_negative: narrow(w.discarded_negative),
            unkeyed: narrow(w.unkeyed),
        }
    }

    pub(crate) fn waits(&self) -> Waits {
        let mut w = Waits::default();
        for &(i, n) in &self.buckets {
            w.buckets[usize::from(i)] = u64::from(n);
        }
        for &(i, n) in &self.log2 {
            w.log2[usize::from(i)] = u64::from(n);
        }
        w.sum_ns = self.sum_ns;
        w.min_ns = self.min_ns;
        w.max_ns = self.max_ns;
        w.untracked_tid = u64::from(self.untracked_tid);
        w.discarded_negative = u64::from(self.discarded_negative);
        w.unkeyed = u64::from(self.unkeyed);
        w
    }

    /// Heap and inline bytes this value holds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + std::mem::size_of_val(&*self.buckets)
            + std::mem::size_of_val(&*self.log2)
    }
}

/// One interval (a second, normally) of the recording.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Second {
    /// Its bounds on CLOCK_MONOTONIC (the clock of the kernel's timestamps
    /// and of the slow waits' `at_ns`): a wall clock stepped back while
    /// recording cannot reorder them or date them in the future.
    /// [`Window::unix_ns`] puts them on the wall clock with the one offset
    /// read when the dump was taken. A dump read back without slow waits
    /// has no offset to go by: it is 0 and these are the dump's wall-clock
    /// stamps.
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    /// The total first, then the series kept (per cgroup, the largest
    /// total wait first, up to the series cap).
    pub series: Vec<(String, CompactWaits)>,
    /// Series with waits this second that the cap left out.
    pub series_dropped: u32,
    /// Slow waits the kernel's ring buffer had no room for this second.
    pub slow_lost: u64,
}

impl Second {
    pub(crate) fn total(&self) -> Option<&CompactWaits> {
        self.series.first().map(|(_, w)| w)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&CompactWaits> {
        self.series.iter().find(|(n, _)| n == name).map(|(_, w)| w)
    }

    /// The waits of the series `names`, added up (a workload recorded as
    /// several cgroups); None when they add up past u64.
    pub(crate) fn waits_of(&self, names: &[String]) -> Option<Waits> {
        let mut w = Waits::default();
        for c in names.iter().filter_map(|n| self.get(n)) {
            w.try_merge(&c.waits())?;
        }
        Some(w)
    }
}

/// What the dump's header says about how it was recorded.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Meta {
    /// Why the dump was taken (SIGHUP, HTTP, a trigger's description).
    pub reason: String,
    pub host: String,
    pub hook: String,
    pub unit: String,
    pub window_s: u64,
    pub slow_threshold_ns: u64,
    pub slice_ns: u64,
    pub slice_source: String,
    pub dumped_unix_ns: u64,
    /// Slow waits the recorder's own window had no room for (oldest
    /// dropped first), over the whole run so far.
    pub slow_evicted: u64,
    /// The cgroup hierarchy the per-cgroup series' groups belong to
    /// (`--ring-cgroups`), as `Hierarchy::describe` says it: on a hybrid
    /// host the v1 cpu hierarchy's groups are not the v2 ones. None: no
    /// per-cgroup series.
    pub cgroup_hierarchy: Option<String>,
    /// Recorded with the holders' stacks (`--stacks`), and the wakers'
    /// (`--stacks=all`).
    pub stacks: bool,
    pub wakers: bool,
    /// Slow waits whose stacks the window had no room for (the waits
    /// kept), over the whole run so far.
    pub stacks_evicted: u64,
}

/// A slow wait as the recorder keeps it: the kernel's event and, with
/// `record --ring --stacks`, the holder's and the waker's stacks, named
/// when the event was read and cut to a bound (`HolderStacks::bounded`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlowWait {
    pub event: SlowEvent,
    /// Shared with the recorder's ring while a dump is written.
    pub stacks: Option<Arc<HolderStacks>>,
}

impl From<SlowEvent> for SlowWait {
    fn from(event: SlowEvent) -> SlowWait {
        SlowWait {
            event,
            stacks: None,
        }
    }
}

/// A dump: its seconds in order, and the slow waits of the same window.
#[derive(Debug, Clone, Default)]
pub(crate) struct Window {
    pub meta: Meta,
    /// Shared with the recorder's ring while a dump is written.
    pub seconds: Vec<Arc<Second>>,
    pub slow: Vec<SlowWait>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, read once when the dump was taken,
    /// to put the seconds' bounds and the slow waits' kernel timestamps on
    /// the wall clock.
    pub mono_to_unix_ns: i128,
}

impl Window {
    /// A monotonic instant (a second's bound, a slow wait's end) on the
    /// wall clock.
    pub(crate) fn unix_ns(&self, mono_ns: u64) -> u64 {
        u64::try_from(i128::from(mono_ns) + self.mono_to_unix_ns).unwrap_or(0)
    }

    /// The series named in any second, the total first.
    pub(crate) fn series_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for s in &self.seconds {
            for (n, _) in &s.series {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }

    /// Intervals that start before the one before them ended, or end
    /// before they start: a dump of a schedlat that stamped seconds on the
    /// wall clock, which stepped back while it recorded, or an edited one.
    /// Their times cannot order them.
    pub(crate) fn out_of_order(&self) -> usize {
        let mut previous_end = 0;
        let mut n = 0;
        for s in &self.seconds {
            if s.end_mono_ns < s.start_mono_ns || s.start_mono_ns < previous_end {
                n += 1;
            }
            previous_end = s.end_mono_ns;
        }
        n
    }

    /// The merged waits of the series `names` over `seconds`; None when
    /// the counts add up past u64 (a damaged dump: each second was checked
    /// when read, their sum is checked here).
    pub(crate) fn merge<'a>(
        seconds: impl IntoIterator<Item = &'a Second>,
        names: &[String],
    ) -> Option<Waits> {
        let mut w = Waits::default();
        for s in seconds {
            w.try_merge(&s.waits_of(names)?)?;
        }
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, Extremes, bucket_index, log2_slot};

    use super::*;

    #[test]
    fn compact_round_trips_and_is_small() {
        let mut cpu = CpuStats::ZERO;
        for v in [1_000u64, 1_000, 50_000, 3_000_000] {
            cpu.buckets[bucket_index(v)] += 1;
            cpu.log2[log2_slot(v / 1000)] += 1;
            cpu.sum_ns += v;
        }
        let x = Extremes {
            min_ns: 1_000,
            max_ns: 3_000_000,
        };
        let w = Waits::from_cpus(&[cpu]).with_extremes(&[x]);
        let c = CompactWaits::of(&w);
        assert_eq!(c.waits(), w);
        assert_eq!(c.waits().count(), 4);
        assert!(c.bytes() < 200, "{}", c.bytes());
        assert!(c.bytes() <= MAX_SERIES_SECOND_BYTES);
    }
}
