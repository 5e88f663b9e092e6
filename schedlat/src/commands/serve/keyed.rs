//! Per-cgroup and per-process series (`serve --cgroups`, `serve --pids`)
//! under a cardinality limit (`--max-series`).
//!
//! The kernel keeps one cumulative histogram per key since load. Prometheus
//! treats every series as a counter: a value that goes down is a reset and
//! is read as a restart from zero, so each exported series must only grow.
//! That decides the rules:
//!
//! - Which keys get a series: the first ones seen, up to `--max-series`, and
//!   they keep it for their lifetime. Among the keys that first appear in
//!   the same scrape, those with the most total wait come first. A ranking
//!   redone at every scrape ("the N with the most wait") would move keys in
//!   and out of the overflow series, which would then go down.
//! - Every other key is folded into one overflow series (label value
//!   `__overflow__`), counted once in `schedlat_overflow_keys_total`, and
//!   stays there for its lifetime, even if a slot frees up later.
//! - A key whose task or cgroup is gone, with no new wait since the previous
//!   scrape, is exported one last time in that scrape, then deleted from the
//!   kernel map and from the output. A series that disappears is what
//!   Prometheus expects of a finished target (it marks it stale); its waits
//!   were all in earlier samples. Its slot goes to the next new key. A
//!   folded key's waits stay in the overflow series (`retired`), so the
//!   overflow series never goes down either.
//! - Labels are fixed when a key gets its series (a process' comm then, a
//!   cgroup's path then): a renamed cgroup or an exec keeps one series.

use std::collections::{HashMap, HashSet, hash_map::Entry};

use schedlat_common::scope::Breakdown;

use crate::collect::{histogram::Waits, keylabels::KeyLabels};

/// The label value of the overflow series.
pub const OVERFLOW: &str = "__overflow__";

pub type Labels = Vec<(&'static str, String)>;

/// The state kept across scrapes.
pub struct KeyedSeries {
    max_series: usize,
    /// Keys with a series of their own: labels and the last waits exported.
    own: HashMap<u64, (Labels, Waits)>,
    /// Keys folded into the overflow series: the last waits read.
    folded: HashMap<u64, Waits>,
    /// Waits of folded keys since deleted.
    retired: Waits,
    /// Keys ever folded.
    overflow_keys: u64,
}

/// One scrape's keyed series.
#[derive(Debug)]
pub struct KeyedScrape {
    /// The keys' own series, ordered by key, then the overflow series.
    pub series: Vec<(Labels, Waits)>,
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
    pub fn new(max_series: u32) -> KeyedSeries {
        KeyedSeries {
            max_series: max_series as usize,
            own: HashMap::new(),
            folded: HashMap::new(),
            retired: Waits::default(),
            overflow_keys: 0,
        }
    }

    /// Takes the kernel's cumulative per-key waits. `label` names a key
    /// getting a series; `exists` says whether a key's task or cgroup is
    /// still there; `forget` deletes a key from the kernel map (false if
    /// that failed: the key is then kept and tried again next scrape).
    pub fn scrape(
        &mut self,
        current: Vec<(u64, Waits)>,
        mut label: impl FnMut(u64) -> Labels,
        mut exists: impl FnMut(u64) -> bool,
        mut forget: impl FnMut(u64) -> bool,
        overflow: Labels,
    ) -> KeyedScrape {
        // New keys: the ones that waited most take the free slots first.
        let mut new: Vec<&(u64, Waits)> = current
            .iter()
            .filter(|(k, _)| !self.own.contains_key(k) && !self.folded.contains_key(k))
            .collect();
        new.sort_by_key(|(k, w)| (std::cmp::Reverse(w.sum_ns), *k));
        for (key, _) in new {
            if self.own.len() < self.max_series {
                self.own.insert(*key, (label(*key), Waits::default()));
            } else {
                self.folded.insert(*key, Waits::default());
                self.overflow_keys += 1;
            }
        }

        // Keys that left the map without a delete from here (none should).
        let present: HashSet<u64> = current.iter().map(|(k, _)| *k).collect();
        let vanished: Vec<u64> = (self.own.keys().chain(self.folded.keys()))
            .filter(|k| !present.contains(k))
            .copied()
            .collect();
        for key in vanished {
            self.drop_key(key);
        }

        let mut series = Vec::new();
        let mut overflow_waits = self.retired.clone();
        let mut gone = Vec::new();
        for (key, now) in current {
            let last = match self.own.get_mut(&key) {
                Some((labels, last)) => {
                    series.push((key, labels.clone(), now.clone()));
                    last
                }
                None => {
                    let last = self.folded.get_mut(&key).expect("every key is assigned");
                    overflow_waits.merge(&now);
                    last
                }
            };
            // Idle since the last scrape (a new key's `last` is empty).
            let idle = last.count() > 0 && now.count() == last.count();
            *last = now;
            if idle && !exists(key) {
                gone.push(key);
            }
        }
        for key in gone {
            if forget(key) {
                self.drop_key(key);
            }
        }
        series.sort_by_key(|(key, ..)| *key);
        let mut series: Vec<(Labels, Waits)> = series.into_iter().map(|(_, l, w)| (l, w)).collect();
        series.push((overflow, overflow_waits));
        KeyedScrape {
            series,
            overflow_keys: self.overflow_keys,
        }
    }

    /// Drops a deleted key's series; a folded key's waits stay in overflow.
    fn drop_key(&mut self, key: u64) {
        if self.own.remove(&key).is_none()
            && let Entry::Occupied(folded) = self.folded.entry(key)
        {
            self.retired.merge(&folded.remove());
        }
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::bucket_index;

    use super::*;

    fn waits(count: u64, each_ns: u64) -> Waits {
        let mut w = Waits::default();
        w.buckets[bucket_index(each_ns)] = count;
        w.sum_ns = count * each_ns;
        w
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

    fn scrape(
        s: &mut KeyedSeries,
        current: &[(u64, u64, u64)],
        alive: &[u64],
        forgotten: &mut Vec<u64>,
    ) -> KeyedScrape {
        let current = current
            .iter()
            .map(|&(k, n, ns)| (k, waits(n, ns)))
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
    fn the_first_keys_keep_their_series_and_the_rest_overflow() {
        let mut s = KeyedSeries::new(2);
        let mut forgotten = Vec::new();
        let alive = [1, 2, 3, 4];
        // First scrape: key 3 waited most, then 1; 2 overflows.
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
        // Later, key 2 waits far more and key 4 appears: no slot moves.
        let second = scrape(
            &mut s,
            &[
                (1, 11, 2_000),
                (2, 1_000, 1_000_000),
                (3, 1, 1_000_000),
                (4, 7, 1_000),
            ],
            &alive,
            &mut forgotten,
        );
        assert_eq!(
            counts(&second),
            [
                ("/g1".into(), 11),
                ("/g3".into(), 1),
                (OVERFLOW.into(), 1_007)
            ]
        );
        assert_eq!(second.overflow_keys, 2);
        assert!(forgotten.is_empty());
    }

    #[test]
    fn gone_keys_are_exported_once_more_then_dropped_and_overflow_never_falls() {
        let mut s = KeyedSeries::new(1);
        let mut forgotten = Vec::new();
        scrape(
            &mut s,
            &[(1, 3, 10_000), (2, 4, 1_000)],
            &[1, 2],
            &mut forgotten,
        );
        // Both gone, but key 1 waited since: only 2 (idle) is deleted, and
        // still exported in this scrape.
        let out = scrape(
            &mut s,
            &[(1, 5, 10_000), (2, 4, 1_000)],
            &[],
            &mut forgotten,
        );
        assert_eq!(counts(&out), [("/g1".into(), 5), (OVERFLOW.into(), 4)]);
        assert_eq!(forgotten, [2]);
        // Key 2 is gone from the kernel map: overflow keeps its 4 waits.
        let out = scrape(
            &mut s,
            &[(1, 5, 10_000), (3, 2, 1_000)],
            &[3],
            &mut forgotten,
        );
        assert_eq!(counts(&out), [("/g1".into(), 5), (OVERFLOW.into(), 6)]);
        assert_eq!(forgotten, [2, 1]);
        // Key 1's slot is free again: the next new key takes it; key 3
        // stays folded.
        let out = scrape(
            &mut s,
            &[(3, 2, 1_000), (5, 1, 1_000)],
            &[3, 5],
            &mut forgotten,
        );
        assert_eq!(counts(&out), [("/g5".into(), 1), (OVERFLOW.into(), 6)]);
        assert_eq!(out.overflow_keys, 2);
    }

    #[test]
    fn a_failed_delete_keeps_the_key() {
        let mut s = KeyedSeries::new(1);
        let current = || vec![(1, waits(2, 1_000))];
        let over = || overflow_labels(Breakdown::Process);
        s.scrape(current(), labels, |_| false, |_| false, over());
        let out = s.scrape(current(), labels, |_| false, |_| false, over());
        assert_eq!(out.series.len(), 2);
        let out = s.scrape(current(), labels, |_| false, |_| true, over());
        assert_eq!(out.series.len(), 2, "exported the last time");
        let out = s.scrape(Vec::new(), labels, |_| false, |_| true, over());
        assert_eq!(out.series.len(), 1, "only the overflow series");
        assert_eq!(out.series[0].0, over());
    }
}
