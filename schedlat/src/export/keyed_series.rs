//! Per-cgroup and per-process series (`serve --cgroups`, `serve --pids`)
//! under a cardinality limit (`--max-series`), for a Prometheus that
//! scrapes many hosts.
//!
//! A scrape reads every key's summary (collect/key_summaries.rs: its
//! waits and their sum, a 24-byte row read in place), and the whole
//! kernel histogram only of the keys that get a series; the overflow series is what the total
//! counted that no series did. So a scrape costs the keys that changed
//! and the series it exports, not the whole key map. The rules:
//!
//! - Who gets a series in a scrape: the pinned keys (`--pin`), whenever
//!   they have waited at all; then the keys that waited since the previous
//!   scrape, most wait (sum of wait time) first, up to `--max-series`. A
//!   key with nothing new is left out: its series has not changed, and
//!   Prometheus keeps its last value until it goes stale.
//! - A series counts from its creation: a key's first series holds all
//!   its waits when the key is new since the previous scrape, and starts
//!   from nothing otherwise (its earlier waits were in overflow). From
//!   then on each scrape that shows it adds what it waited since the
//!   previous one; a scrape in which it waits without a series leaves
//!   those waits in overflow, and the series, when shown again, goes on
//!   from its old value (it counts from that scrape). No counter goes
//!   down.
//! - The overflow series (label value `__overflow__`) is the total (read
//!   after the keys) less every series' value, bucket by bucket and
//!   counter by counter (with `--cgroups` the cause split's counters and
//!   the decision split's marginals too): every wait the series do not
//!   hold, the unkeyed ones (`schedlat_unkeyed_waits_total`, key map
//!   full) included. A wait that ends between the read of a key and the
//!   read of the total is in the total and not yet in the key's series:
//!   when the key's next read would move it from overflow into the series,
//!   and overflow would go down for it, the series holds it back instead
//!   (its kernel baseline stays behind by it, so it is counted later).
//!   It is exported once something went into it that no series will
//!   take: a key that waited without a series, unkeyed waits.
//! - So, at every scrape: the last value of every key's series, plus the
//!   overflow series, is the total.
//! - A key whose task or cgroup is gone, with no new wait for two scrapes,
//!   is deleted from the kernel maps and forgotten (key_summaries.rs); all
//!   its waits were in earlier samples, and its series' value stays
//!   counted against overflow.
//! - Labels are fixed when a key first gets a series (a process' comm then,
//!   a cgroup's path and workload labels then): a renamed cgroup or an
//!   exec keeps one series. A container's names are read from its
//!   runtime's files as soon as its cgroup is seen (at start, as the
//!   kernel reports it made, at its first wait): a container whose files
//!   are still being read when it would first get a series gets it one
//!   scrape later (its waits meanwhile in overflow, its series counting
//!   from there); one whose files are not read by then keeps the labels
//!   of its path.

use super::{
    families::KeyedScrape,
    keyed_words::Words,
    labels,
    model::{Folded, Labels},
    workload_labels::WorkloadLabels,
};
use crate::{
    collect::{
        error::ReadError,
        key_intervals::{KeyRef, PerKey},
        key_summaries::{Reading, WholeKey},
        keylabels::KeyLabels,
    },
    histogram::Waits,
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

    /// Whether names that would go into the key's labels are still being
    /// read (a container's, from its runtime's files).
    fn names_pending(&mut self, _key: u64) -> bool {
        false
    }
}

impl SeriesLabels for KeyLabels {
    fn labels(&mut self, key: u64, comm: &[u8; 16], workload: &WorkloadLabels) -> Labels {
        labels::key(self, key, comm, workload)
    }

    fn names_pending(&mut self, key: u64) -> bool {
        KeyLabels::names_pending(self, key)
    }
}

/// What is kept per key for its series.
#[derive(Debug, Default)]
pub(crate) struct SeriesState {
    /// Labels, once looked up (a pinned check or a first series).
    labels: Option<Labels>,
    /// Checked at the key's first reading.
    pinned: Option<bool>,
    /// Its first series was put off a scrape: its names were pending.
    delayed: bool,
    /// The key's series, as words (keyed_words.rs), once it has one.
    own: Option<Vec<u64>>,
    /// The kernel's cumulative words the series has counted up to; None
    /// once the key waited in a scrape without its series (its next read
    /// starts from there).
    base: Option<Vec<u64>>,
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

/// The state kept across scrapes, on top of the key summaries'.
pub(crate) struct KeyedSeries {
    max_series: usize,
    pins: Pins,
    workload: WorkloadLabels,
    words: Words,
    /// Every series' value, summed (forgotten keys' included): what the
    /// total less overflow is.
    series_sum: Vec<u64>,
    /// The overflow series' value at the last scrape.
    overflow: Vec<u64>,
    /// Whether anything went into overflow that no series takes: then it
    /// is exported.
    spilled: bool,
    /// This scrape's keys that waited and are not pinned, as (new wait,
    /// key, index among those that waited); who of them gets a series;
    /// the slots shown.
    ranked: Vec<(u64, u64, usize)>,
    shown: Vec<bool>,
    slots: Vec<usize>,
    /// This scrape's reads: slot, and what it added to the series (rows
    /// of `words.width()`).
    added: Vec<usize>,
    added_words: Vec<u64>,
    /// One key's kernel words, reused.
    now: Vec<u64>,
}

impl KeyedSeries {
    /// `workload`: the workload labels of a cgroup's series; `words`: the
    /// layout and the splits a series counts.
    pub(crate) fn new(
        max_series: u32,
        pins: Pins,
        workload: WorkloadLabels,
        words: Words,
    ) -> KeyedSeries {
        KeyedSeries {
            max_series: max_series as usize,
            pins,
            workload,
            series_sum: words.zero(),
            overflow: words.zero(),
            now: words.zero(),
            words,
            spilled: false,
            ranked: Vec::new(),
            shown: Vec::new(),
            slots: Vec::new(),
            added: Vec::new(),
            added_words: Vec::new(),
        }
    }

    /// A scrape's first half: ranks the keys that waited, reads the whole
    /// entry of each that gets a series (`whole`) and adds what it waited
    /// to its series. Returns the keys that waited without one; then the
    /// total is read, and [`KeyedSeries::finish`] hands out the series.
    pub(crate) fn read<N: SeriesLabels>(
        &mut self,
        reading: &mut Reading<'_, SeriesState, N>,
        mut whole: impl FnMut(u64) -> Result<Option<WholeKey>, ReadError>,
    ) -> Result<u64, ReadError> {
        let overflow_keys = self.rank(reading);
        self.added.clear();
        self.added_words.clear();
        self.slots.clear();
        for i in 0..reading.active().len() {
            let w = reading.active()[i];
            if !self.shown[i] {
                // Its waits stay in overflow: its next read starts there.
                reading.slot(w.slot).user.base = None;
                self.spilled = true;
                continue;
            }
            self.slots.push(w.slot);
            let Some(entry) = whole(w.key)? else {
                continue;
            };
            reading.set_comm(w.slot, entry.stats.comm);
            self.words.of_key(&entry, &mut self.now);
            let key = reading.slot(w.slot);
            let added = add_read(key.user, &self.now, w.new_key, &self.words);
            match added {
                Some(added) => {
                    for (sum, n) in self.series_sum.iter_mut().zip(&added) {
                        *sum += n;
                    }
                    self.added.push(w.slot);
                    self.added_words.extend_from_slice(&added);
                }
                None => self.spilled = true,
            }
        }
        Ok(overflow_keys)
    }

    /// The scrape's second half, given the total read after the keys: the
    /// overflow series, and the series (`overflow`: the overflow series'
    /// labels; `overflow_keys`: [`KeyedSeries::read`]'s).
    pub(crate) fn finish<N: SeriesLabels>(
        &mut self,
        reading: &mut Reading<'_, SeriesState, N>,
        total: &Waits,
        overflow: Labels,
        overflow_keys: u64,
    ) -> KeyedScrape {
        self.settle(reading, total);
        self.series(reading, overflow, overflow_keys)
    }

    /// Who of the keys that waited gets a series: pinned ones whenever
    /// they wait, the others most wait first. Returns how many waited and
    /// got none.
    fn rank<N: SeriesLabels>(&mut self, reading: &mut Reading<'_, SeriesState, N>) -> u64 {
        let (pins, workload) = (&self.pins, &self.workload);
        self.ranked.clear();
        self.shown.clear();
        for i in 0..reading.active().len() {
            let w = reading.active()[i];
            let mut key = reading.slot(w.slot);
            // Labels are fixed at a key's first series (and a pin is
            // checked once): while its container's names are being read,
            // both wait one scrape, its waits in overflow meanwhile, so
            // the names are not left out for good.
            if key.user.own.is_none()
                && key.user.pinned.is_none()
                && !key.user.delayed
                && key.names.names_pending(key.key)
            {
                key.user.delayed = true;
                key.user.labels = None;
                self.shown.push(false);
                continue;
            }
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
                self.ranked.push((w.new_sum_ns, w.key, self.shown.len()));
            }
            self.shown.push(pinned);
        }
        if self.ranked.len() > self.max_series && self.max_series > 0 {
            self.ranked
                .select_nth_unstable_by_key(self.max_series - 1, |&(sum, key, _)| {
                    (std::cmp::Reverse(sum), key)
                });
        }
        let room = self.max_series.min(self.ranked.len());
        for &(_, _, i) in &self.ranked[..room] {
            self.shown[i] = true;
        }
        (self.ranked.len() - room) as u64
    }

    /// Overflow from the total: its words less every series'. Where that
    /// would be less than the last scrape's overflow (waits that ended
    /// between a key's read and the total's read last time, now read with
    /// the key), this scrape's reads hold them back: those keys' series
    /// and baselines stay behind by them, so overflow never goes down and
    /// the series and overflow add up to the total.
    fn settle<N>(&mut self, reading: &mut Reading<'_, SeriesState, N>, total: &Waits) {
        let width = self.words.width();
        let mut words = self.words.zero();
        self.words.of_total(total, &mut words);
        if total.unkeyed > 0 {
            self.spilled = true;
        }
        // Until then every series is its key's whole kernel count, read
        // before the total: never more than it, and nothing to hold back
        // (what ended after the reads is in the keys' next reads).
        if !self.spilled {
            return;
        }
        for w in 0..width {
            let have = self.overflow[w];
            let mut short = (have + self.series_sum[w]).saturating_sub(words[w]);
            // Taken back from this scrape's reads, which added at least
            // that much (the total only grows).
            for (row, &slot) in self.added.iter().enumerate() {
                if short == 0 {
                    break;
                }
                let added = &mut self.added_words[row * width + w];
                let back = short.min(*added);
                if back == 0 {
                    continue;
                }
                *added -= back;
                short -= back;
                self.series_sum[w] -= back;
                let key = reading.slot(slot);
                if let Some(own) = &mut key.user.own {
                    own[w] -= back;
                }
                if let Some(base) = &mut key.user.base {
                    base[w] -= back;
                }
            }
            self.overflow[w] = words[w].saturating_sub(self.series_sum[w]).max(have);
        }
    }

    /// The series shown, by key, then overflow once something went in.
    fn series<N: SeriesLabels>(
        &mut self,
        reading: &mut Reading<'_, SeriesState, N>,
        overflow: Labels,
        overflow_keys: u64,
    ) -> KeyedScrape {
        self.slots.extend_from_slice(reading.idle_shown());
        self.slots.sort_unstable_by_key(|&slot| reading.key(slot));
        self.slots.dedup();
        let mut series = Vec::with_capacity(self.slots.len() + 1);
        let mut keys = Vec::with_capacity(self.slots.len());
        for &slot in &self.slots {
            let mut key = reading.slot(slot);
            let Some(own) = &key.user.own else {
                continue;
            };
            let value = self.words.folded(own);
            keys.push(key.key);
            let labels = SeriesState::labels(&mut key, &self.workload).clone();
            series.push((labels, value));
        }
        let overflow_value: Folded = self.words.folded(&self.overflow);
        if self.spilled && overflow_value.count() > 0 {
            series.push((overflow, overflow_value));
        }
        KeyedScrape {
            series,
            keys,
            overflow_keys,
        }
    }
}

/// What a read of a key whose series is shown adds to it (`now`: the
/// kernel's cumulative words; `new_key`: every wait it has is since the
/// previous scrape); None when it adds nothing that the key waited since
/// (a series started from nothing, or restarted after waits in overflow).
fn add_read(
    state: &mut SeriesState,
    now: &[u64],
    new_key: bool,
    words: &Words,
) -> Option<Vec<u64>> {
    let added = match (&mut state.own, &state.base) {
        (None, _) if new_key => {
            state.own = Some(now.to_vec());
            Some(now.to_vec())
        }
        (None, _) => {
            state.own = Some(words.zero());
            None
        }
        (Some(own), Some(base)) => {
            let added: Vec<u64> = now
                .iter()
                .zip(base)
                .map(|(n, b)| n.saturating_sub(*b))
                .collect();
            for (o, a) in own.iter_mut().zip(&added) {
                *o += a;
            }
            Some(added)
        }
        (Some(_), None) => None,
    };
    state.base = Some(now.to_vec());
    added
}

#[cfg(test)]
mod tests;
