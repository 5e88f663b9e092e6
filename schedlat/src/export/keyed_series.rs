//! Per-cgroup and per-process series (`serve --cgroups`, `serve --pids`)
//! under a cardinality limit (`--max-series`), for a Prometheus that
//! scrapes many hosts.
//!
//! The kernel keeps one cumulative histogram per key since load; the keyed
//! intervals (collect/key_intervals.rs) fold each into the per-key layout
//! (`--key-buckets`, histogram/layout.rs) and hand it out in intervals:
//! what a key waited since the previous scrape. The rules on top:
//!
//! - Who gets a series in a scrape: the pinned keys (`--pin`), whenever
//!   they have waited at all; then the keys that waited since the previous
//!   scrape, most wait (sum of wait time) first, up to `--max-series`. A
//!   key with nothing new is left out: its series has not changed, and
//!   Prometheus keeps its last value until it goes stale.
//! - Counters never go down: a key's series carries the waits of the
//!   intervals in which it had a series, so a key that comes back has its
//!   old value plus what it waited since. An interval's waits of a key
//!   without a series go to the overflow series (label value
//!   `__overflow__`), which only grows too. It is exported only once
//!   something went into it.
//! - So, at every scrape: the last value of every key's series, plus the
//!   overflow series, plus `schedlat_unkeyed_waits_total`, is the total.
//! - A key whose task or cgroup is gone, with no new wait for two scrapes,
//!   is deleted from the kernel map and forgotten (key_intervals.rs); all
//!   its waits were in earlier samples.
//! - Labels are fixed when a key first gets a series (a process' comm then,
//!   a cgroup's path and workload labels then): a renamed cgroup or an
//!   exec keeps one series. A container's names are read from its
//!   runtime's files as soon as its cgroup is seen (at start, as the
//!   kernel reports it made, at its first wait): a container whose files
//!   were not read by its first series keeps the labels of its path.

use super::{
    families::KeyedScrape,
    labels,
    model::{Folded, Labels},
    workload_labels::WorkloadLabels,
};
use crate::{
    collect::{
        key_intervals::{KeyRef, PerKey, Reading},
        keylabels::KeyLabels,
    },
    histogram::layout::Layout,
};

/// Which keys always get a series (`--pin`): PIDs, comms, cgroup paths,
/// or the names of cgroups as workloads.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pins {
    pub values: Vec<String>,
}

/// The labels a pin matches: those naming one key or one workload, not
/// those many share (`runtime`, `qos`, `slice`, `namespace`: a pin of
/// `containerd` would pin every container).
const PINNABLE: [&str; 8] = [
    "pid",
    "comm",
    "cgroup",
    "unit",
    "pod",
    "container",
    "pod_uid",
    "container_id",
];

impl Pins {
    /// Whether a key with these labels is pinned. A value matches a
    /// label's value exactly (pid, comm, cgroup path, unit, pod, container
    /// name or ID, pod UID).
    pub(crate) fn matches(&self, labels: &Labels) -> bool {
        (labels.iter())
            .filter(|(name, _)| PINNABLE.contains(name))
            .any(|(_, v)| self.values.iter().any(|p| p == v))
    }
}

/// A key's labels, from the names the keyed intervals carry; `workload`:
/// which of a cgroup's workload labels to give it.
pub(crate) trait SeriesLabels {
    fn labels(&mut self, key: u64, comm: &[u8; 16], workload: &WorkloadLabels) -> Labels;
}

impl SeriesLabels for KeyLabels {
    fn labels(&mut self, key: u64, comm: &[u8; 16], workload: &WorkloadLabels) -> Labels {
        labels::key(self, key, comm, workload)
    }
}

/// What is kept per key for its series.
#[derive(Debug, Default)]
pub(crate) struct SeriesState {
    /// Labels, once looked up (a pinned check or a first series).
    labels: Option<Labels>,
    /// Checked at the key's first reading (every new key has waited: the
    /// kernel makes its entry at its first wait).
    pinned: Option<bool>,
    /// The key's series: the waits of the intervals it had one.
    own: Option<Folded>,
}

impl PerKey for SeriesState {
    /// Pinned keys without new waits: shown as they were.
    fn shown_idle(&self) -> bool {
        self.pinned == Some(true)
    }
}

impl SeriesState {
    fn labels<'k, N: SeriesLabels>(
        key: &'k mut KeyRef<'_, SeriesState, N>,
        workload: &WorkloadLabels,
    ) -> &'k Labels {
        let (names, k, comm) = (&mut *key.names, key.key, key.comm);
        key.user
            .labels
            .get_or_insert_with(|| names.labels(k, &comm, workload))
    }
}

/// The state kept across scrapes, on top of the keyed intervals'.
pub(crate) struct KeyedSeries {
    max_series: usize,
    pins: Pins,
    workload: WorkloadLabels,
    width: usize,
    /// The overflow series: waits of intervals without a series.
    overflow: Folded,
    /// This scrape's keys that waited and are not pinned, as (new wait,
    /// key, index among those that waited); who of them gets a series;
    /// the slots shown.
    ranked: Vec<(u64, u64, usize)>,
    shown: Vec<bool>,
    slots: Vec<usize>,
}

impl KeyedSeries {
    /// `workload`: the workload labels of a cgroup's series.
    pub(crate) fn new(
        max_series: u32,
        pins: Pins,
        workload: WorkloadLabels,
        layout: &'static Layout,
    ) -> KeyedSeries {
        KeyedSeries {
            max_series: max_series as usize,
            pins,
            workload,
            width: layout.len(),
            overflow: Folded::empty(layout.len()),
            ranked: Vec::new(),
            shown: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// One scrape of the keyed intervals: ranks the keys that waited, adds
    /// each interval to its series or to overflow, and hands out the
    /// series (`overflow`: the overflow series' labels).
    pub(crate) fn scrape<N: SeriesLabels>(
        &mut self,
        reading: &mut Reading<'_, SeriesState, N>,
        overflow: Labels,
    ) -> KeyedScrape {
        let (pins, width, workload) = (&self.pins, self.width, &self.workload);
        self.ranked.clear();
        self.shown.clear();
        self.slots.clear();
        // Pinned keys get a series whenever they wait; the others are
        // ranked for the series left.
        let (ranked, shown) = (&mut self.ranked, &mut self.shown);
        reading.each_active(|a, _, mut key| {
            let pinned = match key.user.pinned {
                Some(pinned) => pinned,
                None => {
                    let pinned = !pins.values.is_empty()
                        && pins.matches(SeriesState::labels(&mut key, workload));
                    key.user.pinned = Some(pinned);
                    pinned
                }
            };
            if !pinned {
                ranked.push((a.new_sum_ns, a.key, shown.len()));
            }
            shown.push(pinned);
        });
        if ranked.len() > self.max_series && self.max_series > 0 {
            ranked.select_nth_unstable_by_key(self.max_series - 1, |&(sum, key, _)| {
                (std::cmp::Reverse(sum), key)
            });
        }
        let room = self.max_series.min(ranked.len());
        for &(_, _, i) in &ranked[..room] {
            shown[i] = true;
        }
        let overflow_keys = (ranked.len() - room) as u64;

        // Each active key's interval, added to its series or to overflow.
        let (mut i, slots, into_overflow) = (0, &mut self.slots, &mut self.overflow);
        reading.each_active(|a, new, key| {
            let into = if shown[i] {
                slots.push(a.slot);
                (key.user.own).get_or_insert_with(|| Folded::empty(width))
            } else {
                &mut *into_overflow
            };
            i += 1;
            for (sum, n) in into.buckets.iter_mut().zip(new) {
                *sum += n;
            }
            into.sum_ns += a.new_sum_ns;
            if let Some(c) = &a.new_causes {
                into.add_causes(c);
            }
            if let Some(d) = &a.new_decision {
                into.add_decision(d);
            }
        });

        self.slots.extend_from_slice(reading.idle_shown());
        self.slots.sort_unstable_by_key(|&slot| reading.key(slot));
        // The per-key walk of kernels without the batch read may return a
        // key twice when another is deleted meanwhile: one series each.
        self.slots.dedup();
        let mut series = Vec::with_capacity(self.slots.len() + 1);
        let mut keys = Vec::with_capacity(self.slots.len());
        for &slot in &self.slots {
            let mut key = reading.slot(slot);
            keys.push(key.key);
            let labels = SeriesState::labels(&mut key, &self.workload).clone();
            let own = key.user.own.get_or_insert_with(|| Folded::empty(width));
            series.push((labels, own.clone()));
        }
        if self.overflow.count() > 0 {
            series.push((overflow, self.overflow.clone()));
        }
        KeyedScrape {
            series,
            keys,
            overflow_keys,
        }
    }
}

#[cfg(test)]
mod tests;
