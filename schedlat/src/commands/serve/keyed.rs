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
//! - A key whose task or cgroup is gone, with no new wait since the
//!   previous scrape, is deleted from the kernel map and forgotten; all its
//!   waits were in earlier samples.
//! - Labels are fixed when a key first gets a series (a process' comm then,
//!   a cgroup's path then): a renamed cgroup or an exec keeps one series.

use std::collections::{HashMap, HashSet};

use schedlat_common::scope::Breakdown;

use super::buckets::Layout;
use crate::collect::{causes::CauseCounts, histogram::Waits, keylabels::KeyLabels};

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

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What `self` has more than `earlier` (per bucket; the kernel's
    /// counts only grow).
    fn since(&self, earlier: &Folded) -> Folded {
        Folded {
            buckets: (self.buckets.iter().enumerate())
                .map(|(i, &n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
                .collect(),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            causes: match (&self.causes, &earlier.causes) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
        }
    }

    fn add(&mut self, other: &Folded) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.sum_ns += other.sum_ns;
        match (&mut self.causes, &other.causes) {
            (Some(sum), Some(more)) => sum.merge(more),
            (None, Some(more)) => self.causes = Some(more.clone()),
            (_, None) => {}
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

/// One key's state across scrapes.
struct Key {
    /// The kernel's cumulative waits at the previous scrape, folded.
    last: Folded,
    /// Labels, once looked up (a pinned check or a first series).
    labels: Option<Labels>,
    pinned: bool,
    /// The key's series: the waits of the intervals it had one.
    own: Option<Folded>,
}

/// The state kept across scrapes.
pub struct KeyedSeries {
    max_series: usize,
    pins: Pins,
    keys: HashMap<u64, Key>,
    /// The overflow series: waits of intervals without a series.
    overflow: Folded,
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

impl KeyedSeries {
    pub fn new(max_series: u32, pins: Pins) -> KeyedSeries {
        KeyedSeries {
            max_series: max_series as usize,
            pins,
            keys: HashMap::new(),
            overflow: Folded::default(),
        }
    }

    /// Takes the kernel's cumulative per-key waits, folded. `label` names a
    /// key; `exists` says whether a key's task or cgroup is still there;
    /// `forget` deletes a key from the kernel map (false if that failed:
    /// the key is then kept and tried again next scrape).
    pub fn scrape(
        &mut self,
        current: Vec<(u64, Folded)>,
        mut label: impl FnMut(u64) -> Labels,
        mut exists: impl FnMut(u64) -> bool,
        mut forget: impl FnMut(u64) -> bool,
        overflow: Labels,
    ) -> KeyedScrape {
        // Keys that left the map without a delete from here (none should).
        let present: HashSet<u64> = current.iter().map(|(k, _)| *k).collect();
        self.keys.retain(|k, _| present.contains(k));

        // Each key's interval; pinned keys are in whatever it holds.
        let mut shown: Vec<(u64, Folded)> = Vec::new();
        let mut ranked: Vec<(u64, Folded)> = Vec::new();
        let mut gone = Vec::new();
        for (key, now) in current {
            let state = self.keys.entry(key).or_insert_with(|| {
                let labels = (!self.pins.values.is_empty()).then(|| label(key));
                Key {
                    last: Folded::default(),
                    pinned: labels.as_ref().is_some_and(|l| self.pins.matches(l)),
                    labels,
                    own: None,
                }
            });
            let new = now.since(&state.last);
            state.last = now;
            let idle = new.count() == 0;
            if idle && !exists(key) {
                gone.push(key);
            }
            if state.pinned {
                shown.push((key, new));
            } else if !idle {
                ranked.push((key, new));
            }
        }
        ranked.sort_unstable_by_key(|(k, new)| (std::cmp::Reverse(new.sum_ns), *k));
        let room = self.max_series.min(ranked.len());
        let folded = ranked.split_off(room);
        shown.extend(ranked);
        let overflow_keys = folded.len() as u64;
        for (_, new) in &folded {
            self.overflow.add(new);
        }

        let mut series = Vec::with_capacity(shown.len() + 1);
        shown.sort_unstable_by_key(|(k, _)| *k);
        for (key, new) in shown {
            let state = self.keys.get_mut(&key).expect("every key has a state");
            let labels = state.labels.get_or_insert_with(|| label(key)).clone();
            let own = state.own.get_or_insert_with(Folded::default);
            own.add(&new);
            series.push((labels, own.clone()));
        }
        if self.overflow.count() > 0 {
            series.push((overflow, self.overflow.clone()));
        }
        for key in gone {
            if forget(key) {
                self.keys.remove(&key);
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
    use std::collections::BTreeMap;

    use super::*;

    /// `count` waits of about `each_us` us, in a 4-bucket layout where the
    /// bucket is the wait's decimal order of magnitude in us.
    fn folded(count: u64, each_us: u64) -> Folded {
        let mut buckets = vec![0; 4];
        buckets[(each_us.max(1).ilog10() as usize).min(3)] = count;
        Folded {
            buckets,
            sum_ns: count * each_us * 1_000,
            causes: None,
        }
    }

    fn labels(key: u64) -> Labels {
        vec![("cgroup", format!("/g{key}"))]
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
    fn scrape(
        s: &mut KeyedSeries,
        current: &[(u64, u64, u64)],
        alive: &[u64],
        forgotten: &mut Vec<u64>,
    ) -> KeyedScrape {
        let current = current
            .iter()
            .map(|&(k, n, us)| (k, folded(n, us)))
            .collect();
        s.scrape(
            current,
            labels,
            |k| alive.contains(&k),
            |k| {
                forgotten.push(k);
                true
            },
            overflow_labels(Breakdown::Cgroup),
        )
    }

    #[test]
    fn the_keys_that_waited_most_get_the_series_and_idle_ones_are_left_out() {
        let mut s = KeyedSeries::new(2, Pins::default());
        let mut forgotten = Vec::new();
        let alive = [1, 2, 3, 4];
        // Key 3 waited most (1 s), then 1 (20 ms); 2 (5 ms) overflows.
        let first = scrape(
            &mut s,
            &[(1, 10, 2_000), (2, 5, 1_000), (3, 1, 1_000_000)],
            &alive,
            &mut forgotten,
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
            &alive,
            &mut forgotten,
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
        assert!(forgotten.is_empty());
    }

    #[test]
    fn overflow_is_left_out_until_something_overflows() {
        let mut s = KeyedSeries::new(5, Pins::default());
        let out = scrape(&mut s, &[(1, 3, 10)], &[1], &mut Vec::new());
        assert_eq!(counts(&out), [("/g1".into(), 3)]);
        assert_eq!(out.overflow_keys, 0);
    }

    #[test]
    fn pinned_keys_always_have_a_series() {
        let pins = Pins {
            values: vec!["/g9".into()],
        };
        let mut s = KeyedSeries::new(1, pins);
        let mut forgotten = Vec::new();
        let out = scrape(
            &mut s,
            &[(1, 100, 1_000), (9, 1, 10)],
            &[1, 9],
            &mut forgotten,
        );
        assert_eq!(counts(&out), [("/g1".into(), 100), ("/g9".into(), 1)]);
        // Idle, still there.
        let out = scrape(
            &mut s,
            &[(1, 200, 1_000), (9, 1, 10)],
            &[1, 9],
            &mut forgotten,
        );
        assert_eq!(counts(&out), [("/g1".into(), 200), ("/g9".into(), 1)]);
    }

    /// Keys come and go at random, with a small cap: every series only
    /// grows, and the last value of every series seen, plus overflow, is
    /// the kernel's total at every scrape.
    #[test]
    fn series_never_go_down_and_add_up_to_the_total() {
        let mut s = KeyedSeries::new(3, Pins::default());
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
            let alive: Vec<u64> = (kernel.keys().copied())
                .filter(|k| (k + round) % 7 != 0)
                .collect();
            let current: Vec<(u64, u64, u64)> = kernel.iter().map(|(&k, &n)| (k, n, 1)).collect();
            let mut forgotten = Vec::new();
            let out = scrape(&mut s, &current, &alive, &mut forgotten);
            for (name, n) in counts(&out) {
                let before = last_seen.insert(name.clone(), n).unwrap_or(0);
                assert!(n >= before, "{name}: {before} -> {n} in round {round}");
            }
            let total = kernel.values().sum::<u64>() + deleted_total;
            assert_eq!(last_seen.values().sum::<u64>(), total, "round {round}");
            for k in forgotten {
                deleted_total += kernel.remove(&k).unwrap();
                deleted.insert(k);
            }
        }
    }

    #[test]
    fn a_failed_delete_keeps_the_key() {
        let mut s = KeyedSeries::new(1, Pins::default());
        let current = || vec![(1, folded(2, 1))];
        let over = || overflow_labels(Breakdown::Process);
        let out = s.scrape(current(), labels, |_| false, |_| false, over());
        assert_eq!(out.series.len(), 1, "new waits: exported");
        let out = s.scrape(current(), labels, |_| false, |_| false, over());
        assert!(out.series.is_empty(), "idle: left out");
        assert_eq!(s.keys.len(), 1, "deleting failed: still there");
        s.scrape(current(), labels, |_| false, |_| true, over());
        assert!(s.keys.is_empty(), "deleted now");
    }
}
