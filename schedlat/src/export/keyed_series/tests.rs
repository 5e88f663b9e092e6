//! The rules of keyed_series.rs (and of the keyed intervals under it), on
//! made-up kernel entries.
use std::collections::{BTreeMap, HashMap, HashSet};

use schedlat_common::scope::{Breakdown, KeyStats};

use super::*;
use crate::{
    collect::key_intervals::{Existence, Kept, KeyIntervals},
    export::labels::{OVERFLOW, overflow as overflow_labels},
    histogram::{Measurable, layout::LOG2},
};

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

/// `alive` exist; deletes succeed unless `stuck`.
#[derive(Default)]
struct Names {
    alive: Vec<u64>,
    forgotten: Vec<u64>,
    stuck: bool,
}

/// The live system as the keyed intervals see it: the keys of `alive`
/// exist, and key K is named `/gK`.
#[derive(Default)]
struct Live {
    alive: Vec<u64>,
}

impl Existence for Live {
    fn saw(&mut self, _: u64) {}
    fn exists(&mut self, key: u64) -> bool {
        self.alive.contains(&key)
    }
}

impl SeriesLabels for Live {
    fn labels(&mut self, key: u64, _: &[u8; 16], _: &WorkloadLabels) -> Labels {
        labels(key)
    }
}

/// Per-cgroup series of the keyed intervals, in the log2 layout.
struct Series {
    keys: KeyIntervals<SeriesState, Live>,
    series: KeyedSeries,
    layout: &'static Layout,
}

fn series(max: u32, pins: Pins) -> Series {
    with_causes(max, pins, None)
}

fn with_causes(max: u32, pins: Pins, causes: Option<Measurable>) -> Series {
    Series {
        keys: KeyIntervals::with_names(
            Breakdown::Cgroup,
            Live::default(),
            Kept::Folded(&LOG2),
            causes,
        ),
        series: KeyedSeries::new(max, pins, WorkloadLabels::default(), &LOG2),
        layout: &LOG2,
    }
}

impl Series {
    /// One scrape of the kernel's cumulative entries `current`.
    fn scrape<'e>(
        &mut self,
        current: impl IntoIterator<Item = (u64, &'e KeyStats)>,
        names: &mut Names,
    ) -> KeyedScrape {
        self.keys.names_mut().alive = names.alive.clone();
        let series = &mut self.series;
        let forget = |key| {
            names.forgotten.push(key);
            !names.stuck
        };
        self.keys.interval_of(current, forget, |reading| {
            series.scrape(reading, overflow_labels(Breakdown::Cgroup))
        })
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

/// One scrape of cumulative `(key, count, each_us)`.
fn scrape(s: &mut Series, current: &[(u64, u64, u64)], names: &mut Names) -> KeyedScrape {
    let current: Vec<(u64, KeyStats)> = current
        .iter()
        .map(|&(k, n, us)| (k, stats(n, us)))
        .collect();
    s.scrape(current.iter().map(|(k, v)| (*k, v)), names)
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
    let out = s.scrape([(1, &kernel)], &mut names);
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
    let mut s = with_causes(1, Pins::default(), Some(Measurable::default()));
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
        let out = s.scrape(entries.iter().map(|(k, v)| (*k, v)), &mut names);
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
    let out = s.scrape([(1, &kernel)], &mut names);
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
