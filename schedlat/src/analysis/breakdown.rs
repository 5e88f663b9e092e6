//! Breakdowns (`-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus`): each key's
//! waits in an interval (collect/key_intervals.rs), with its percentiles
//! and shape, sorted by relevance and cut to `--top N`; labelled like
//! runqlat's (`pid = 1234 comm`). output/breakdown.rs renders them.

use schedlat_common::scope::Breakdown;

use crate::{
    analysis::{
        percentiles::Percentiles,
        shape::{self, Shape},
    },
    collect::key_intervals::Reading,
    histogram::Waits,
    kernel::modes::Keyed,
    sys::{
        slice::Slice,
        workload::level::{Level, Workload},
    },
};

/// The breakdown asked for: what the kernel keys by, and how the keys are
/// ordered and cut.
#[derive(Debug, Clone, Default)]
pub(crate) struct BreakdownOptions {
    pub keyed: Option<Keyed>,
    pub sort: KeySort,
    /// Only the first N keys of each interval.
    pub top: Option<u32>,
    /// Count who waited behind whom, in a table of this many pairs.
    pub pairs: Option<u32>,
    /// The level the pairs' cgroups are named and rolled up at.
    pub by: Level,
}

/// How keys are ordered: by what they waited in the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum KeySort {
    /// Total wait (sum), the default: who lost the most time
    #[default]
    Total,
    /// 99th percentile wait
    P99,
    /// Median wait
    P50,
    /// Mean wait
    Mean,
    /// Number of waits
    Count,
    /// The key itself (PID, CPU...), ascending
    Key,
}

/// One key's waits in an interval, with its label and analysis.
pub(crate) struct KeyRow {
    pub key: u64,
    pub label: String,
    /// A cgroup key as a workload (its path, labels and names).
    pub workload: Option<Workload>,
    pub waits: Waits,
    pub percentiles: Option<Percentiles>,
    pub shape: Shape,
}

/// An interval's breakdown: the rows shown, and what was left out.
pub(crate) struct KeyedReport {
    pub by: Breakdown,
    pub sort: KeySort,
    pub rows: Vec<KeyRow>,
    /// Keys with waits in the interval, shown or not.
    pub keys_with_waits: usize,
    /// Waits in the total but in no key (map full, `--max-keys`).
    pub unkeyed: u64,
    pub max_keys: u32,
}

impl KeyRow {
    fn of(key: u64, waits: Waits, slice: &Slice) -> KeyRow {
        KeyRow {
            key,
            label: String::new(),
            workload: None,
            percentiles: Percentiles::of(&waits),
            shape: shape::classify(&waits, slice),
            waits,
        }
    }
}

/// The breakdown of one reading of the keyed intervals (kept whole):
/// every key that waited, ordered and cut as `sort` and `top` say, the
/// rows shown labelled. `unkeyed` is the interval's count of waits
/// without a key; `keyed` what the kernel keys by, and how many keys fit.
pub(crate) fn report(
    reading: &mut Reading<'_, ()>,
    keyed: Keyed,
    sort: KeySort,
    top: Option<u32>,
    unkeyed: u64,
    slice: &Slice,
) -> KeyedReport {
    let mut rows: Vec<(KeyRow, usize)> = reading
        .active()
        .map(|(a, new)| (KeyRow::of(a.key, a.waits(new), slice), a.slot))
        .collect();
    let keys_with_waits = rows.len();
    sort_rows(&mut rows, sort);
    if let Some(top) = top {
        rows.truncate(top as usize);
    }
    let rows = (rows.into_iter())
        .map(|(mut row, slot)| {
            row.label = reading.text(slot);
            row.workload = reading.workload(slot);
            row
        })
        .collect();
    KeyedReport {
        by: keyed.by,
        sort,
        rows,
        keys_with_waits,
        unkeyed,
        max_keys: keyed.max_keys,
    }
}

fn sort_rows<T>(rows: &mut [(KeyRow, T)], sort: KeySort) {
    let p = |r: &KeyRow, f: fn(&Percentiles) -> u64| r.percentiles.as_ref().map_or(0, f);
    match sort {
        KeySort::Key => rows.sort_by_key(|(r, _)| r.key),
        KeySort::Total => rows.sort_by_key(|(r, _)| std::cmp::Reverse((r.waits.sum_ns, r.key))),
        KeySort::Count => rows.sort_by_key(|(r, _)| std::cmp::Reverse((r.waits.count(), r.key))),
        KeySort::P99 => rows.sort_by_key(|(r, _)| std::cmp::Reverse((p(r, |p| p.p99_ns), r.key))),
        KeySort::P50 => rows.sort_by_key(|(r, _)| std::cmp::Reverse((p(r, |p| p.p50_ns), r.key))),
        KeySort::Mean => rows.sort_by(|(a, _), (b, _)| {
            let mean = |r: &KeyRow| r.waits.mean_ns().unwrap_or(0.0);
            mean(b).total_cmp(&mean(a)).then(a.key.cmp(&b.key))
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use schedlat_common::scope::KeyStats;

    use super::*;
    use crate::collect::key_intervals::waits_of;

    /// A row of `waits_us` microseconds (tests of this and of output/).
    pub(crate) fn row(key: u64, waits_us: &[u64]) -> KeyRow {
        let mut stats = KeyStats::ZERO;
        for &us in waits_us {
            stats.buckets[schedlat_common::bucket_index(us * 1000)] += 1;
            stats.log2[schedlat_common::log2_slot(us)] += 1;
            stats.sum_ns += us * 1000;
        }
        KeyRow {
            label: format!("pid = {key} x"),
            ..KeyRow::of(key, waits_of(&stats, None), &Slice::detect())
        }
    }

    #[test]
    fn sorts_by_the_chosen_relevance() {
        // key 1: many short waits; key 2: one long; key 3: medium.
        let mut rows = vec![
            (row(1, &[10; 50]), ()),
            (row(2, &[5000]), ()),
            (row(3, &[100, 200]), ()),
        ];
        let order = |rows: &[(KeyRow, ())]| rows.iter().map(|(r, _)| r.key).collect::<Vec<_>>();
        sort_rows(&mut rows, KeySort::Total);
        assert_eq!(order(&rows), [2, 1, 3]);
        sort_rows(&mut rows, KeySort::Count);
        assert_eq!(order(&rows), [1, 3, 2]);
        sort_rows(&mut rows, KeySort::P99);
        assert_eq!(order(&rows), [2, 3, 1]);
        sort_rows(&mut rows, KeySort::Key);
        assert_eq!(order(&rows), [1, 2, 3]);
    }
}
