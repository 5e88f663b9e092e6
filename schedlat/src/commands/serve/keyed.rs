//! Per-cgroup and per-process series (`serve --cgroups`, `serve --pids`)
//! under a cardinality limit (`--max-series`), for a Prometheus that
//! scrapes many hosts.
//!
//! The kernel keeps one cumulative histogram per key since load; here each
//! is folded into the per-key layout (`--key-buckets`, buckets.rs) and
//! handed out in intervals: what a key waited since the previous scrape.
//! The rules:
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
//!   is deleted from the kernel map and forgotten; all its waits were in
//!   earlier samples. (Whether it is gone is asked after 2, 4, 8... idle
//!   scrapes: one syscall per key asked, and at ten thousand keys many
//!   sleep through an interval.)
//! - Labels are fixed when a key first gets a series (a process' comm then,
//!   a cgroup's path then): a renamed cgroup or an exec keeps one series.

use schedlat_common::scope::{Breakdown, KeyStats};

use super::{
    buckets::Layout,
    slots::{Key, Slots},
};
use crate::{
    collect::{causes::CauseCounts, histogram::Waits, keylabels::KeyLabels},
    kernel::causes::Measurable,
};

/// The label value of the overflow series.
pub const OVERFLOW: &str = "__overflow__";

pub type Labels = Vec<(&'static str, String)>;

/// Waits folded into an export layout: per bucket (the last `+Inf`) and
/// their sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
    /// The cause split of the same waits, where the kernel keeps it per
    /// key (per cgroup; causes.rs).
    pub causes: Option<CauseCounts>,
}

impl Folded {
    pub fn of(layout: &Layout, waits: &Waits) -> Folded {
        Folded {
            buckets: layout.counts(&waits.buckets),
            sum_ns: waits.sum_ns,
            causes: waits.causes.clone(),
        }
    }

    /// No waits, in a layout of `width` buckets.
    fn empty(width: usize) -> Folded {
        Folded {
            buckets: vec![0; width],
            sum_ns: 0,
            causes: None,
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    fn add_causes(&mut self, more: &CauseCounts) {
        match &mut self.causes {
            Some(sum) => sum.merge(more),
            None => self.causes = Some(more.clone()),
        }
    }
}

/// Which keys always get a series (`--pin`): PIDs, comms, or cgroup paths.
#[derive(Clone, Debug, Default)]
pub struct Pins {
    pub values: Vec<String>,
}

impl Pins {
    /// Whether a key with these labels is pinned. A value matches a label's
    /// value exactly (pid, comm, or cgroup path).
    pub fn matches(&self, labels: &Labels) -> bool {
        (labels.iter()).any(|(_, v)| self.values.iter().any(|p| p == v))
    }
}

/// What the scrape needs to know about keys beyond the kernel's counts:
/// names, and whether a key's task or cgroup is still there.
pub trait KeyNames {
    /// A key is new; `stats` is its kernel entry (a comm, for a process
    /// that may be gone by the time it is named).
    fn saw(&mut self, key: u64, stats: &KeyStats);
    /// A key's labels.
    fn labels(&mut self, key: u64) -> Labels;
    /// Whether its task or cgroup still exists.
    fn exists(&mut self, key: u64) -> bool;
    /// Deletes it from the kernel map; false if that failed (the key is
    /// then kept and tried again next scrape).
    fn forget(&mut self, key: u64) -> bool;
}

/// The state kept across scrapes.
pub struct KeyedSeries {
    max_series: usize,
    pins: Pins,
    layout: &'static Layout,
    keys: Slots,
    /// The overflow series: waits of intervals without a series.
    overflow: Folded,
    /// Scrapes so far.
    round: u64,
    /// One key's folded buckets, reused.
    scratch: Vec<u64>,
    /// Each active key's new waits per bucket, one row per key, reused.
    news: Vec<u64>,
    /// Per key, the cause split too (per cgroup only: per process it
    /// would be unbounded).
    causes: Option<Measurable>,
    /// This scrape's keys that waited, slots shown, keys found gone.
    active: Vec<Active>,
    shown: Vec<usize>,
    gone: Vec<u64>,
}

/// One scrape's keyed series.
#[derive(Debug)]
pub struct KeyedScrape {
    /// The series in this scrape, ordered by key, then the overflow series
    /// (only once it holds a wait).
    pub series: Vec<(Labels, Folded)>,
    /// Keys that waited since the previous scrape but got no series.
    pub overflow_keys: u64,
}

/// The label names of a breakdown, and the values of its overflow series.
pub fn overflow_labels(by: Breakdown) -> Labels {
    match by {
        Breakdown::Process => vec![("pid", OVERFLOW.into()), ("comm", OVERFLOW.into())],
        _ => vec![("cgroup", OVERFLOW.into())],
    }
}

/// A key's labels as exported: `cgroup="/path"`, or `pid="1234",
/// comm="name"`.
pub fn key_labels(labels: &mut KeyLabels, key: u64) -> Labels {
    match labels.by() {
        Breakdown::Process => vec![("pid", key.to_string()), ("comm", labels.comm(key))],
        _ => {
            let path = labels
                .cgroup_name(key)
                .unwrap_or_else(|| format!("(removed, id {key})"));
            vec![("cgroup", path)]
        }
    }
}

/// A key with new waits in this scrape; its new waits per bucket are its
/// row of `KeyedSeries::news`.
struct Active {
    key: u64,
    slot: usize,
    /// Its wait since the previous scrape, the rank.
    new_sum_ns: u64,
    /// Its cause split since the previous scrape, when kept per key.
    new_causes: Option<CauseCounts>,
    shown: bool,
}

impl KeyedSeries {
    pub fn new(
        max_series: u32,
        pins: Pins,
        layout: &'static Layout,
        causes: Option<Measurable>,
    ) -> KeyedSeries {
        KeyedSeries {
            max_series: max_series as usize,
            pins,
            layout,
            keys: Slots::new(layout.len()),
            overflow: Folded::empty(layout.len()),
            round: 0,
            scratch: vec![0; layout.len()],
            news: Vec::new(),
            causes,
            active: Vec::new(),
            shown: Vec::new(),
            gone: Vec::new(),
        }
    }

    /// Takes the kernel's cumulative per-key entries (`begin`, `feed`
    /// each, `finish`, in one call).
    #[cfg(test)]
    pub fn scrape<'a>(
        &mut self,
        current: impl IntoIterator<Item = (u64, &'a KeyStats)>,
        names: &mut impl KeyNames,
        overflow: Labels,
    ) -> KeyedScrape {
        self.begin();
        for (key, stats) in current {
            self.feed(key, stats, names);
        }
        self.finish(names, overflow)
    }

    /// Starts a scrape.
    pub fn begin(&mut self) {
        self.round += 1;
        self.active.clear();
        self.news.clear();
        self.shown.clear();
        self.gone.clear();
        self.keys.begin();
    }

    /// One key's cumulative entry. The work is finding its slot (slots.rs:
    /// usually the one that followed the previous key's last time) and two
    /// compares, unless it waited: then one fold of its buckets, while the
    /// entry is still in the CPU's cache.
    pub fn feed(&mut self, key: u64, stats: &KeyStats, names: &mut impl KeyNames) {
        let (round, layout, pins) = (self.round, self.layout, &self.pins);
        let slot = self.keys.find(key, || {
            // The kernel's comm and a cgroup's path, while it is there to
            // be read: a key shown later is named from it.
            names.saw(key, stats);
            let labels = (!pins.values.is_empty()).then(|| names.labels(key));
            Key {
                key,
                seen: round,
                last_sum_ns: 0,
                last_zero: 0,
                idle: 0,
                last_causes: None,
                pinned: labels.as_ref().is_some_and(|l| pins.matches(l)),
                labels,
                own: None,
            }
        });
        let (state, last) = self.keys.with_last(slot);
        state.seen = round;
        let zero = stats.buckets[0];
        if stats.sum_ns == state.last_sum_ns && zero == state.last_zero {
            // Gone? Asked after two idle scrapes, then after 4, 8...: a
            // task that merely slept through one interval is not asked at
            // all, one idle for long is asked rarely.
            state.idle = state.idle.saturating_add(1);
            if state.idle >= 2 && state.idle.is_power_of_two() && !names.exists(key) {
                self.gone.push(key);
            }
            // Pinned keys without new waits: shown as they were.
            if state.pinned {
                self.shown.push(slot);
            }
            return;
        }
        layout.fold_into(&stats.buckets, &mut self.scratch);
        for (last, &now) in last.iter_mut().zip(&self.scratch) {
            self.news.push(now.saturating_sub(*last));
            *last = now;
        }
        let new_causes = self.causes.map(|m| {
            let now = CauseCounts::from_key(m, &stats.causes);
            let new = match &state.last_causes {
                Some(then) => now.since(then),
                None => now.clone(),
            };
            state.last_causes = Some(now);
            new
        });
        self.active.push(Active {
            key,
            slot,
            new_sum_ns: stats.sum_ns.saturating_sub(state.last_sum_ns),
            new_causes,
            shown: state.pinned,
        });
        state.last_sum_ns = stats.sum_ns;
        state.last_zero = zero;
        state.idle = 0;
    }

    /// Ends a scrape: ranks the keys that waited, adds each interval to
    /// its series or to overflow, and deletes the keys found gone.
    pub fn finish(&mut self, names: &mut impl KeyNames, overflow: Labels) -> KeyedScrape {
        let (round, width) = (self.round, self.layout.len());
        // The unpinned keys that waited most get the series left.
        let mut ranked: Vec<&mut Active> = self.active.iter_mut().filter(|a| !a.shown).collect();
        if ranked.len() > self.max_series && self.max_series > 0 {
            ranked.select_nth_unstable_by_key(self.max_series - 1, |a| {
                (std::cmp::Reverse(a.new_sum_ns), a.key)
            });
        }
        let room = self.max_series.min(ranked.len());
        for a in &mut ranked[..room] {
            a.shown = true;
        }
        let overflow_keys = (ranked.len() - room) as u64;

        // Each active key's interval, added to its series or to overflow.
        for (a, new) in self.active.iter().zip(self.news.chunks_exact(width)) {
            let into = if a.shown {
                self.shown.push(a.slot);
                (self.keys.key(a.slot).own).get_or_insert_with(|| Folded::empty(width))
            } else {
                &mut self.overflow
            };
            for (sum, n) in into.buckets.iter_mut().zip(new) {
                *sum += n;
            }
            into.sum_ns += a.new_sum_ns;
            if let Some(c) = &a.new_causes {
                into.add_causes(c);
            }
        }

        let mut shown = std::mem::take(&mut self.shown);
        shown.sort_unstable_by_key(|&slot| self.keys.key(slot).key);
        // The per-key walk of kernels without the batch read may return a
        // key twice when another is deleted meanwhile: one series each.
        shown.dedup();
        let mut series = Vec::with_capacity(shown.len() + 1);
        for &slot in &shown {
            let state = self.keys.key(slot);
            let key = state.key;
            let labels = state
                .labels
                .get_or_insert_with(|| names.labels(key))
                .clone();
            let own = state.own.get_or_insert_with(|| Folded::empty(width));
            series.push((labels, own.clone()));
        }
        self.shown = shown;
        if self.overflow.count() > 0 {
            series.push((overflow, self.overflow.clone()));
        }
        // Keys that left the map without a delete from here (none should).
        self.keys.retain(|k| k.seen == round);
        for &key in &self.gone {
            if names.forget(key) {
                self.keys.remove(key);
            }
        }
        KeyedScrape {
            series,
            overflow_keys,
        }
    }
}

#[cfg(test)]
mod tests;
