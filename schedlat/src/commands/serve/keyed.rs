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
                .cgroup_path(key)
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
mod tests {
    use std::collections::{BTreeMap, HashMap, HashSet};

    use super::*;

    /// `count` waits of `each_us` us each, as the kernel keeps them.
    fn stats(count: u64, each_us: u64) -> KeyStats {
        let mut s = KeyStats::ZERO;
        s.buckets[schedlat_common::bucket_index(each_us * 1_000)] = count as u32;
        s.sum_ns = count * each_us * 1_000;
        s
    }

    fn labels(key: u64) -> Labels {
        vec![("cgroup", format!("/g{key}"))]
    }

    /// Names `/gKEY`; `alive` exist; deletes succeed unless `stuck`.
    #[derive(Default)]
    struct Names {
        alive: Vec<u64>,
        forgotten: Vec<u64>,
        stuck: bool,
    }

    impl KeyNames for Names {
        fn saw(&mut self, _: u64, _: &KeyStats) {}
        fn labels(&mut self, key: u64) -> Labels {
            labels(key)
        }
        fn exists(&mut self, key: u64) -> bool {
            self.alive.contains(&key)
        }
        fn forget(&mut self, key: u64) -> bool {
            self.forgotten.push(key);
            !self.stuck
        }
    }

    fn series(max: u32, pins: Pins) -> KeyedSeries {
        KeyedSeries::new(max, pins, &super::super::buckets::LOG2, None)
    }

    /// (label value, count) of each series.
    fn counts(scrape: &KeyedScrape) -> Vec<(String, u64)> {
        scrape
            .series
            .iter()
            .map(|(l, w)| (l[0].1.clone(), w.count()))
            .collect()
    }

    /// One scrape of cumulative `(key, count, each_us)`.
    fn scrape(s: &mut KeyedSeries, current: &[(u64, u64, u64)], names: &mut Names) -> KeyedScrape {
        let current: Vec<(u64, KeyStats)> = current
            .iter()
            .map(|&(k, n, us)| (k, stats(n, us)))
            .collect();
        s.scrape(
            current.iter().map(|(k, v)| (*k, v)),
            names,
            overflow_labels(Breakdown::Cgroup),
        )
    }

    #[test]
    fn the_keys_that_waited_most_get_the_series_and_idle_ones_are_left_out() {
        let mut s = series(2, Pins::default());
        let mut names = Names {
            alive: vec![1, 2, 3, 4],
            ..Names::default()
        };
        // Key 3 waited most (1 s), then 1 (20 ms); 2 (5 ms) overflows.
        let first = scrape(
            &mut s,
            &[(1, 10, 2_000), (2, 5, 1_000), (3, 1, 1_000_000)],
            &mut names,
        );
        assert_eq!(
            counts(&first),
            [("/g1".into(), 10), ("/g3".into(), 1), (OVERFLOW.into(), 5)]
        );
        assert_eq!(first.overflow_keys, 1);
        // Then key 2 waits far more and 4 appears; 3 is idle: 2 and 4 get
        // the series, 1's new wait overflows, 3 is left out.
        let second = scrape(
            &mut s,
            &[
                (1, 11, 2_000),
                (2, 1_005, 1_000),
                (3, 1, 1_000_000),
                (4, 7, 1_000),
            ],
            &mut names,
        );
        assert_eq!(
            counts(&second),
            [
                ("/g2".into(), 1_000),
                ("/g4".into(), 7),
                (OVERFLOW.into(), 6)
            ]
        );
        assert_eq!(second.overflow_keys, 1);
        assert!(names.forgotten.is_empty());
    }

    #[test]
    fn buckets_and_sums_are_the_intervals_added_up() {
        let mut s = series(5, Pins::default());
        let mut names = Names {
            alive: vec![1],
            ..Names::default()
        };
        scrape(&mut s, &[(1, 3, 10)], &mut names);
        // Cumulative in the kernel: 3 waits of 10 us, then 2 more of 3 ms.
        let mut kernel = stats(3, 10);
        kernel.buckets[schedlat_common::bucket_index(3_000_000)] = 2;
        kernel.sum_ns += 6_000_000;
        let out = s.scrape(
            [(1, &kernel)],
            &mut names,
            overflow_labels(Breakdown::Cgroup),
        );
        let mut expected = vec![0; s.layout.len()];
        s.layout.fold_into(&kernel.buckets, &mut expected);
        assert_eq!(out.series[0].1.buckets, expected);
        assert_eq!(out.series[0].1.sum_ns, kernel.sum_ns);
    }

    /// With the split kept per key (cgroups), each series carries the
    /// split of the same intervals as its buckets, overflow included: the
    /// counts of a cause add up to the kernel's over every series.
    #[test]
    fn cause_counts_follow_their_series_and_overflow() {
        let mut s = KeyedSeries::new(
            1,
            Pins::default(),
            &super::super::buckets::LOG2,
            Some(Measurable::default()),
        );
        let mut names = Names::default();
        let with_cause = |count: u64, each_us: u64, cause: usize| {
            let mut k = stats(count, each_us);
            k.causes.count[cause] = count as u32;
            k
        };
        let mut last: HashMap<String, u64> = HashMap::new();
        let mut kernel = (0u64, 0u64);
        for (a, b) in [(5, 1), (6, 9), (20, 9)] {
            kernel = (a, b);
            let entries = [(1, with_cause(a, 1_000, 0)), (2, with_cause(b, 1_000, 0))];
            let out = s.scrape(
                entries.iter().map(|(k, v)| (*k, v)),
                &mut names,
                overflow_labels(Breakdown::Cgroup),
            );
            for (labels, folded) in &out.series {
                let c = folded.causes.as_ref().expect("a split per series");
                assert_eq!(c.count[0], folded.count(), "{labels:?}");
                last.insert(labels[0].1.clone(), c.count[0]);
            }
        }
        assert_eq!(last.values().sum::<u64>(), kernel.0 + kernel.1);
        assert!(last.contains_key(OVERFLOW), "{last:?}");
    }

    #[test]
    fn a_wait_of_zero_ns_is_not_taken_for_idle() {
        let mut s = series(5, Pins::default());
        let mut names = Names::default();
        scrape(&mut s, &[(1, 3, 10)], &mut names);
        let mut kernel = stats(3, 10);
        kernel.buckets[0] += 1;
        let out = s.scrape(
            [(1, &kernel)],
            &mut names,
            overflow_labels(Breakdown::Cgroup),
        );
        assert_eq!(counts(&out), [("/g1".into(), 4)]);
        assert!(names.forgotten.is_empty(), "it waited: not deleted");
    }

    #[test]
    fn overflow_is_left_out_until_something_overflows() {
        let mut s = series(5, Pins::default());
        let mut names = Names {
            alive: vec![1],
            ..Names::default()
        };
        let out = scrape(&mut s, &[(1, 3, 10)], &mut names);
        assert_eq!(counts(&out), [("/g1".into(), 3)]);
        assert_eq!(out.overflow_keys, 0);
    }

    #[test]
    fn pinned_keys_always_have_a_series() {
        let pins = Pins {
            values: vec!["/g9".into()],
        };
        let mut s = series(1, pins);
        let mut names = Names {
            alive: vec![1, 9],
            ..Names::default()
        };
        let out = scrape(&mut s, &[(1, 100, 1_000), (9, 1, 10)], &mut names);
        assert_eq!(counts(&out), [("/g1".into(), 100), ("/g9".into(), 1)]);
        // Idle, still there.
        let out = scrape(&mut s, &[(1, 200, 1_000), (9, 1, 10)], &mut names);
        assert_eq!(counts(&out), [("/g1".into(), 200), ("/g9".into(), 1)]);
    }

    /// Keys come and go at random, with a small cap: every series only
    /// grows, and the last value of every series seen, plus overflow, is
    /// the kernel's total at every scrape.
    #[test]
    fn series_never_go_down_and_add_up_to_the_total() {
        let mut s = series(3, Pins::default());
        let mut kernel: BTreeMap<u64, u64> = BTreeMap::new();
        let mut last_seen: HashMap<String, u64> = HashMap::new();
        let mut deleted_total = 0;
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut deleted: HashSet<u64> = HashSet::new();
        for round in 0..300 {
            // Some keys wait (never a deleted one again: that would be a
            // reused PID), some die.
            for _ in 0..(next() % 6) {
                let key = round / 10 + next() % 12;
                if !deleted.contains(&key) {
                    *kernel.entry(key).or_default() += 1 + next() % 5;
                }
            }
            let mut names = Names {
                alive: (kernel.keys().copied())
                    .filter(|k| (k + round) % 7 != 0)
                    .collect(),
                ..Names::default()
            };
            let current: Vec<(u64, u64, u64)> = kernel.iter().map(|(&k, &n)| (k, n, 1)).collect();
            let out = scrape(&mut s, &current, &mut names);
            for (name, n) in counts(&out) {
                let before = last_seen.insert(name.clone(), n).unwrap_or(0);
                assert!(n >= before, "{name}: {before} -> {n} in round {round}");
            }
            let total = kernel.values().sum::<u64>() + deleted_total;
            assert_eq!(last_seen.values().sum::<u64>(), total, "round {round}");
            for k in names.forgotten {
                deleted_total += kernel.remove(&k).unwrap();
                deleted.insert(k);
            }
        }
    }

    #[test]
    fn a_failed_delete_keeps_the_key() {
        let mut s = series(1, Pins::default());
        let mut names = Names {
            stuck: true,
            ..Names::default()
        };
        let out = scrape(&mut s, &[(1, 2, 1)], &mut names);
        assert_eq!(out.series.len(), 1, "new waits: exported");
        let out = scrape(&mut s, &[(1, 2, 1)], &mut names);
        assert!(out.series.is_empty(), "idle: left out");
        assert!(names.forgotten.is_empty(), "idle once: not asked yet");
        scrape(&mut s, &[(1, 2, 1)], &mut names);
        assert_eq!(names.forgotten, [1], "idle twice and gone: deleted");
        assert_eq!(s.keys.len(), 1, "deleting failed: still there");
        names.stuck = false;
        for _ in 0..2 {
            scrape(&mut s, &[(1, 2, 1)], &mut names);
        }
        assert_eq!(names.forgotten, [1, 1], "asked again after 4 idle scrapes");
        assert_eq!(s.keys.len(), 0, "deleted now");
    }
}
