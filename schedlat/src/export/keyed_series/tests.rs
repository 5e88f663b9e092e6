//! The rules of keyed_series.rs (and of the key summaries under it), on
//! a made-up kernel: per key its histogram (a summary is its count and
//! sum), and the total, which may count waits the keys' read did not see.
use std::collections::{BTreeMap, HashMap, HashSet};

use schedlat_common::scope::{Breakdown, KeyStats, KeySummary};

use super::*;
use crate::{
    collect::{key_intervals::Existence, key_summaries::KeySummaries},
    export::labels::{OVERFLOW, overflow as overflow_labels},
    histogram::{NR_BUCKETS, layout::LOG2},
};

fn labels(key: u64) -> Labels {
    vec![("cgroup", format!("/g{key}"))]
}

/// The live system as the key summaries see it: the keys of `alive`
/// exist, and key K is named `/gK`.
#[derive(Default)]
struct Live {
    alive: Vec<u64>,
    /// Keys whose names are being read; those whose names were read
    /// (labelled `container = cK` then).
    pending: HashSet<u64>,
    named: HashSet<u64>,
}

impl Existence for Live {
    fn saw(&mut self, _: u64) {}
    fn exists(&mut self, key: u64) -> bool {
        self.alive.contains(&key)
    }
}

impl SeriesLabels for Live {
    fn labels(&mut self, key: u64, _: &[u8; 16], _: &WorkloadLabels) -> Labels {
        let mut l = labels(key);
        if self.named.contains(&key) {
            l.push(("container", format!("c{key}")));
        }
        l
    }

    fn names_pending(&mut self, key: u64) -> bool {
        self.pending.contains(&key)
    }
}

/// The kernel: per key its waits, each of `us` microseconds (as
/// (count, us) runs); the total, with the deleted keys' and the waits that
/// no key holds (unkeyed, or ended after the keys were read).
#[derive(Default)]
struct Kernel {
    keys: BTreeMap<u64, Vec<(u64, u64)>>,
    /// The total's waits beyond the keys': (count, us) runs.
    beyond: Vec<(u64, u64)>,
    /// Deletes fail.
    stuck: bool,
    forgotten: Vec<u64>,
}

impl Kernel {
    fn wait(&mut self, key: u64, count: u64, us: u64) {
        self.keys.entry(key).or_default().push((count, us));
    }

    fn stats(&self, key: u64) -> Option<KeyStats> {
        let runs = self.keys.get(&key)?;
        let mut s = KeyStats::ZERO;
        for &(n, us) in runs {
            s.buckets[schedlat_common::bucket_index(us * 1_000)] += n as u32;
            s.sum_ns += n * us * 1_000;
        }
        Some(s)
    }

    fn summaries(&self) -> Vec<(u64, KeySummary)> {
        (self.keys.keys())
            .map(|&k| {
                let s = self.stats(k).unwrap();
                let waits = s.buckets.iter().map(|&n| u64::from(n)).sum();
                (
                    k,
                    KeySummary {
                        key: k,
                        waits,
                        sum_ns: s.sum_ns,
                    },
                )
            })
            .collect()
    }

    fn total(&self) -> Waits {
        let mut buckets = vec![0; NR_BUCKETS];
        let mut sum_ns = 0;
        let runs = self.keys.values().flatten().chain(&self.beyond);
        for &(n, us) in runs {
            buckets[schedlat_common::bucket_index(us * 1_000)] += n;
            sum_ns += n * us * 1_000;
        }
        Waits {
            buckets,
            sum_ns,
            ..Waits::default()
        }
    }

    fn total_count(&self) -> u64 {
        self.total().buckets.iter().sum()
    }
}

/// Per-cgroup series of the key summaries, in the log2 layout.
struct Series {
    keys: KeySummaries<SeriesState, Live>,
    series: KeyedSeries,
}

fn series(max: u32, pins: Pins) -> Series {
    Series {
        keys: KeySummaries::with_names(Breakdown::Cgroup, Live::default()),
        series: KeyedSeries::new(
            max,
            pins,
            WorkloadLabels::default(),
            Words::new(&LOG2, None, false),
        ),
    }
}

impl Series {
    /// One scrape; `between` runs after the keys' read and before the
    /// total's (waits that end meanwhile). Keys not in `alive` are gone.
    fn scrape_between(
        &mut self,
        kernel: &mut Kernel,
        alive: &[u64],
        between: impl FnOnce(&mut Kernel),
    ) -> KeyedScrape {
        self.keys.names_mut().alive = alive.to_vec();
        let series = &mut self.series;
        let current = kernel.summaries();
        let kernel = std::cell::RefCell::new(kernel);
        self.keys.interval_of(
            current,
            |key| {
                let mut k = kernel.borrow_mut();
                k.forgotten.push(key);
                if k.stuck {
                    return false;
                }
                // Its waits stay in the total.
                if let Some(runs) = k.keys.remove(&key) {
                    k.beyond.extend(runs);
                }
                true
            },
            |reading| {
                let left = series
                    .read(reading, |key| {
                        Ok(kernel.borrow().stats(key).map(|stats| WholeKey {
                            stats,
                            decision: None,
                        }))
                    })
                    .unwrap();
                between(&mut kernel.borrow_mut());
                let total = kernel.borrow().total();
                series.finish(reading, &total, overflow_labels(Breakdown::Cgroup), left)
            },
        )
    }

    fn scrape(&mut self, kernel: &mut Kernel, alive: &[u64]) -> KeyedScrape {
        self.scrape_between(kernel, alive, |_| ())
    }
}

/// (label value, count) of each series.
fn counts(scrape: &KeyedScrape) -> Vec<(String, u64)> {
    scrape
        .series
        .iter()
        .map(|(l, w)| (l[0].1.clone(), w.count()))
        .collect()
}

#[test]
fn the_keys_that_waited_most_get_the_series_and_idle_ones_are_left_out() {
    let mut s = series(2, Pins::default());
    let mut k = Kernel::default();
    // Key 3 waited most (1 s), then 1 (20 ms); 2 (5 ms) overflows.
    k.wait(1, 10, 2_000);
    k.wait(2, 5, 1_000);
    k.wait(3, 1, 1_000_000);
    let first = s.scrape(&mut k, &[1, 2, 3]);
    assert_eq!(
        counts(&first),
        [("/g1".into(), 10), ("/g3".into(), 1), (OVERFLOW.into(), 5)]
    );
    assert_eq!(first.keys, [1, 3]);
    assert_eq!(first.overflow_keys, 1);
    // Only key 2 waits: it has a series now, counting from its creation
    // (its first 5 waits and these 4 stay in overflow); 1 and 3 are left
    // out.
    k.wait(2, 4, 1_000);
    let second = s.scrape(&mut k, &[1, 2, 3]);
    assert_eq!(counts(&second), [("/g2".into(), 0), (OVERFLOW.into(), 9)]);
    k.wait(2, 3, 1_000);
    let third = s.scrape(&mut k, &[1, 2, 3]);
    assert_eq!(counts(&third), [("/g2".into(), 3), (OVERFLOW.into(), 9)]);
    assert_eq!(third.overflow_keys, 0);
}

#[test]
fn overflow_is_left_out_until_something_overflows() {
    let mut s = series(5, Pins::default());
    let mut k = Kernel::default();
    k.wait(1, 3, 10);
    // A wait after the keys' read: in the total only, for now.
    let out = s.scrape_between(&mut k, &[1], |k| k.wait(1, 1, 10));
    assert_eq!(counts(&out), [("/g1".into(), 3)]);
    assert_eq!(out.overflow_keys, 0);
    let out = s.scrape(&mut k, &[1]);
    assert_eq!(counts(&out), [("/g1".into(), 4)]);
}

#[test]
fn pinned_keys_always_have_a_series() {
    let pins = Pins {
        values: vec!["/g9".into()],
    };
    let mut s = series(1, pins);
    let mut k = Kernel::default();
    k.wait(1, 100, 1_000);
    k.wait(9, 1, 10);
    let out = s.scrape(&mut k, &[1, 9]);
    assert_eq!(counts(&out), [("/g1".into(), 100), ("/g9".into(), 1)]);
    // Idle, still there.
    k.wait(1, 100, 1_000);
    let out = s.scrape(&mut k, &[1, 9]);
    assert_eq!(counts(&out), [("/g1".into(), 200), ("/g9".into(), 1)]);
}

/// Keys come and go at random, with a small cap, and waits end between
/// the keys' read and the total's: every series only grows, and once
/// something overflowed the last value of every series seen, plus
/// overflow, is the total at every scrape (before, at most the total).
#[test]
fn series_never_go_down_and_add_up_to_the_total() {
    let mut s = series(3, Pins::default());
    let mut k = Kernel::default();
    let mut last_seen: HashMap<String, u64> = HashMap::new();
    let mut rng = 12345u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut deleted: HashSet<u64> = HashSet::new();
    let mut overflowed = false;
    for round in 0..300 {
        // Some keys wait (never a deleted one again: that would be a
        // reused PID), some die.
        let mut waits = Vec::new();
        for _ in 0..(next() % 6) {
            let key = round / 10 + next() % 12;
            if !deleted.contains(&key) {
                waits.push((key, 1 + next() % 5, 1 + next() % 3_000));
            }
        }
        let late = (next() % 3 == 0).then(|| waits.pop()).flatten();
        for &(key, n, us) in &waits {
            k.wait(key, n, us);
        }
        let alive: Vec<u64> = (k.keys.keys().copied())
            .filter(|key| (key + round) % 7 != 0)
            .collect();
        let out = s.scrape_between(&mut k, &alive, |k| {
            if let Some((key, n, us)) = late {
                k.wait(key, n, us);
            }
        });
        for (name, n) in counts(&out) {
            let before = last_seen.insert(name.clone(), n).unwrap_or(0);
            assert!(n >= before, "{name}: {before} -> {n} in round {round}");
        }
        overflowed |= last_seen.contains_key(OVERFLOW);
        let (sum, total) = (last_seen.values().sum::<u64>(), k.total_count());
        if overflowed {
            assert_eq!(sum, total, "round {round}: {last_seen:?}");
        } else {
            assert!(sum <= total, "round {round}: {sum} > {total}");
        }
        for key in std::mem::take(&mut k.forgotten) {
            deleted.insert(key);
        }
    }
    assert!(overflowed);
}

#[test]
fn a_failed_delete_keeps_the_key() {
    let mut s = series(1, Pins::default());
    let mut k = Kernel {
        stuck: true,
        ..Kernel::default()
    };
    k.wait(1, 2, 1);
    let out = s.scrape(&mut k, &[]);
    assert_eq!(out.series.len(), 1, "new waits: exported");
    let out = s.scrape(&mut k, &[]);
    assert!(out.series.is_empty(), "idle: left out");
    assert!(k.forgotten.is_empty(), "idle once: not asked yet");
    s.scrape(&mut k, &[]);
    assert_eq!(k.forgotten, [1], "idle twice and gone: deleted");
    assert_eq!(s.keys.len(), 1, "deleting failed: still there");
    k.stuck = false;
    for _ in 0..2 {
        s.scrape(&mut k, &[]);
    }
    assert_eq!(k.forgotten, [1, 1], "asked again after 4 idle scrapes");
    assert_eq!(s.keys.len(), 0, "deleted now");
}

/// Issue 48 item 10: labels are fixed at a key's first series, and a
/// container whose names were still being read then (thousands of them
/// at once) kept its path's labels for good. Its first series waits one
/// scrape while they are pending (its waits in overflow meanwhile, the
/// series counting from there), then has them; a key not pending is not
/// held back, and one pending for longer is held back once only.
#[test]
fn a_first_series_waits_one_scrape_for_pending_names() {
    let mut s = series(10, Pins::default());
    let mut k = Kernel::default();
    s.keys.names_mut().pending = HashSet::from([1, 3]);
    k.wait(1, 5, 1_000);
    k.wait(2, 2, 1_000);
    k.wait(3, 4, 1_000);
    let first = s.scrape(&mut k, &[1, 2, 3]);
    assert_eq!(counts(&first), [("/g2".into(), 2), (OVERFLOW.into(), 9)]);
    assert_eq!(first.overflow_keys, 0);
    // Key 1's names are read by the next scrape; key 3's never are.
    let live = s.keys.names_mut();
    live.pending.remove(&1);
    live.named.insert(1);
    k.wait(1, 3, 1_000);
    k.wait(3, 1, 1_000);
    let second = s.scrape(&mut k, &[1, 2, 3]);
    let labelled: Vec<(Labels, u64)> = (second.series.iter())
        .map(|(l, w)| (l.clone(), w.count()))
        .collect();
    assert_eq!(
        labelled,
        [
            (
                vec![("cgroup", "/g1".to_string()), ("container", "c1".into())],
                0
            ),
            (vec![("cgroup", "/g3".to_string())], 0),
            (overflow_labels(Breakdown::Cgroup), 13),
        ]
    );
    k.wait(1, 1, 1_000);
    let third = s.scrape(&mut k, &[1, 2, 3]);
    assert_eq!(counts(&third), [("/g1".into(), 1), (OVERFLOW.into(), 13)]);
    assert_eq!(third.series[0].0[1], ("container", "c1".to_string()));
}
