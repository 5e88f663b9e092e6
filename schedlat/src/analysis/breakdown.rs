//! Breakdowns (`-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus`): each key's
//! waits in an interval (collect/key_intervals.rs), with its percentiles
//! and shape, sorted by relevance and cut to `--top N`; labelled like
//! runqlat's (`pid = 1234 comm`). output/breakdown.rs renders them.

use std::collections::HashMap;

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
    /// The level cgroups are named and rolled up at: the pairs' and
    /// `--cgroups`' keys (`--by pod` sums the cgroups of each pod).
    pub by: Level,
}

/// How keys are ordered: by what they waited in the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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
    /// A cgroup key as a workload (its path, labels and names); for a
    /// row rolled up (`--by`), its first cgroup's.
    pub workload: Option<Workload>,
    /// A row rolled up at `--by`'s level: that level, and the paths of
    /// the cgroups it adds up (those that waited in the interval).
    pub rolled_up: Option<(Level, Vec<String>)>,
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
            rolled_up: None,
            percentiles: Percentiles::of(&waits),
            shape: shape::classify(&waits, slice),
            waits,
        }
    }
}

/// How a breakdown is ordered, cut and rolled up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shown {
    pub sort: KeySort,
    /// Only the first N rows.
    pub top: Option<u32>,
    /// Cgroup keys added up per container, pod or unit (`--by`).
    pub by: Level,
}

/// The breakdown of one reading of the keyed intervals (kept whole):
/// every key that waited (cgroups rolled up at `shown.by`), ordered and
/// cut as `shown` says, the rows shown labelled. `unkeyed` is the
/// interval's count of waits without a key; `keyed` what the kernel keys
/// by, and how many keys fit.
pub(crate) fn report(
    reading: &mut Reading<'_, ()>,
    keyed: Keyed,
    shown: Shown,
    unkeyed: u64,
    slice: &Slice,
) -> KeyedReport {
    let sort = shown.sort;
    let mut rows: Vec<(KeyRow, Option<usize>)> =
        if keyed.by == Breakdown::Cgroup && shown.by != Level::Cgroup {
            roll_up(reading, shown.by, slice)
                .into_iter()
                .map(|row| (row, None))
                .collect()
        } else {
            (reading.active())
                .map(|(a, new)| (KeyRow::of(a.key, a.waits(new), slice), Some(a.slot)))
                .collect()
        };
    let keys_with_waits = rows.len();
    sort_rows(&mut rows, sort);
    if let Some(top) = shown.top {
        rows.truncate(top as usize);
    }
    // Keys are named once shown (a rolled-up row is named already).
    let rows = (rows.into_iter())
        .map(|(mut row, slot)| {
            if let Some(slot) = slot {
                row.label = reading.text(slot);
                row.workload = reading.workload(slot);
            }
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

/// The cgroup keys that waited, added up per workload at `level`: the
/// cgroups with one identity there (`Workload::identity_at`: a container's
/// ID or a pod's UID in its own cgroup, a unit) make one row, its waits their waits merged,
/// labelled `pod = shop/web-1 (2 cgroups)` by the first of them whose
/// runtime named it (else the first). A cgroup that is no such workload
/// (or was gone before it was named) stays its own row, labelled as usual.
fn roll_up(reading: &mut Reading<'_, ()>, level: Level, slice: &Slice) -> Vec<KeyRow> {
    /// One workload's cgroups so far; `label` set for a cgroup of its own.
    struct Group {
        key: u64,
        waits: Waits,
        workload: Option<Workload>,
        paths: Vec<String>,
        label: Option<String>,
    }
    let named = |w: &Option<Workload>| w.as_ref().is_some_and(|w| w.names.is_some());
    let active: Vec<(u64, Waits, usize)> = (reading.active())
        .map(|(a, new)| (a.key, a.waits(new), a.slot))
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (key, waits, slot) in active {
        let workload = reading.workload(slot);
        let Some(identity) = workload.as_ref().and_then(|w| w.identity_at(level)) else {
            let label = Some(reading.text(slot));
            let paths = Vec::new();
            groups.push(Group {
                key,
                waits,
                workload,
                paths,
                label,
            });
            continue;
        };
        let path = workload.as_ref().map(|w| w.path.clone());
        if let Some(&i) = index.get(&identity) {
            let group = &mut groups[i];
            group.key = group.key.min(key);
            group.waits.merge(&waits);
            if !named(&group.workload) && named(&workload) {
                group.workload = workload;
            }
            group.paths.extend(path);
            continue;
        }
        index.insert(identity, groups.len());
        let paths = path.into_iter().collect();
        groups.push(Group {
            key,
            waits,
            workload,
            paths,
            label: None,
        });
    }
    // Workloads that share a name (a container and its restart) are
    // told apart by what is theirs alone: `container = shop/web-1/nginx
    // (9a8b7c6d5e4f)`.
    let name_of = |g: &Group| (g.workload.as_ref()).map_or_else(String::new, |w| w.name_at(level));
    let mut of_name: HashMap<String, usize> = HashMap::new();
    for g in groups.iter().filter(|g| g.label.is_none()) {
        *of_name.entry(name_of(g)).or_default() += 1;
    }
    (groups.into_iter())
        .map(|mut g| {
            let (label, rolled_up) = match g.label {
                Some(label) => (label, None),
                None => {
                    g.paths.sort();
                    let mut name = name_of(&g);
                    if of_name.get(&name).is_some_and(|&n| n > 1)
                        && let Some(w) = &g.workload
                    {
                        name = format!("{name} ({})", w.distinct_at(level));
                    }
                    let more = match g.paths.len() {
                        0 | 1 => String::new(),
                        n => format!(" ({n} cgroups)"),
                    };
                    (
                        format!("{} = {name}{more}", level.as_str()),
                        Some((level, g.paths)),
                    )
                }
            };
            KeyRow {
                label,
                workload: g.workload,
                rolled_up,
                ..KeyRow::of(g.key, g.waits, slice)
            }
        })
        .collect()
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
