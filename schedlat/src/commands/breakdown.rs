//! Breakdowns (`-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus`): one histogram
//! per key of the task that waited, kept by the kernel (schedlat-ebpf
//! scope.rs), differenced per interval, labelled like runqlat's
//! (`pid = 1234 comm`), sorted by relevance and cut to `--top N`.

use std::{collections::HashMap, fmt::Write as _};

use schedlat_common::scope::Breakdown;
use serde_json::json;

use crate::{
    analysis::{percentiles::Percentiles, shape, shape::Shape},
    collect::{
        error::ReadError,
        histogram::{Unit, Waits},
        keylabels::{KeyLabels, waits_of},
        tracer::Tracer,
    },
    kernel::modes::Keyed,
    output,
    output::text,
    sys::slice::Slice,
};

/// Default size of the kernel's key map (`--max-keys`): 4096 keys, 5.6 MiB.
pub const DEFAULT_MAX_KEYS: u32 = 4096;

/// The breakdown asked for: what the kernel keys by, and how the keys are
/// ordered and cut.
#[derive(Debug, Clone, Default)]
pub struct BreakdownOptions {
    pub keyed: Option<Keyed>,
    pub sort: KeySort,
    /// Only the first N keys of each interval.
    pub top: Option<u32>,
    /// Count who waited behind whom, in a table of this many pairs.
    pub pairs: Option<u32>,
    /// The level the pairs' cgroups are named and rolled up at.
    pub by: crate::sys::workload::level::Level,
}

/// How keys are ordered: by what they waited in the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeySort {
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
pub struct KeyRow {
    pub key: u64,
    pub label: String,
    pub waits: Waits,
    pub percentiles: Option<Percentiles>,
    pub shape: Shape,
}

/// The per-key state across intervals.
pub struct KeyedView {
    by: Breakdown,
    sort: KeySort,
    top: Option<usize>,
    max_keys: u32,
    /// Cumulative histograms at the last interval end.
    previous: HashMap<u64, Waits>,
    labels: KeyLabels,
}

/// An interval's breakdown: the rows shown, and what was left out.
pub struct KeyedReport {
    pub by: Breakdown,
    pub sort: KeySort,
    pub rows: Vec<KeyRow>,
    /// Keys with waits in the interval, shown or not.
    pub keys_with_waits: usize,
    /// Waits in the total but in no key (map full, `--max-keys`).
    pub unkeyed: u64,
    pub max_keys: u32,
}

impl KeyedView {
    pub fn new(args: &BreakdownOptions, keyed: Keyed, tracer: &Tracer) -> KeyedView {
        KeyedView {
            by: keyed.by,
            sort: args.sort,
            top: args.top.map(|n| n as usize),
            max_keys: keyed.max_keys,
            previous: HashMap::new(),
            labels: tracer.key_labels(keyed.by),
        }
    }

    /// Reads the kernel's per-key histograms; the first call sets the
    /// baseline. `unkeyed` is the interval's count of waits without a key.
    pub fn interval(
        &mut self,
        tracer: &mut Tracer,
        unkeyed: u64,
        slice: &Slice,
    ) -> Result<KeyedReport, ReadError> {
        let mut current = HashMap::new();
        for (key, stats) in tracer.read_keyed()? {
            self.labels.saw(key, &stats);
            current.insert(key, waits_of(&stats, tracer.measurable));
        }
        let mut rows = Vec::new();
        for (key, now) in &current {
            let waits = match self.previous.get(key) {
                Some(before) => now.since(before),
                None => now.clone(),
            };
            if waits.count() == 0 {
                continue;
            }
            rows.push(KeyRow {
                key: *key,
                label: String::new(),
                percentiles: Percentiles::of(&waits),
                shape: shape::classify(&waits, slice),
                waits,
            });
        }
        self.forget_gone_keys(tracer, &mut current, &rows);
        self.previous = current;
        let keys_with_waits = rows.len();
        sort_rows(&mut rows, self.sort);
        if let Some(top) = self.top {
            rows.truncate(top);
        }
        for row in &mut rows {
            row.label = self.label(row.key);
        }
        Ok(KeyedReport {
            by: self.by,
            sort: self.sort,
            rows,
            keys_with_waits,
            unkeyed,
            max_keys: self.max_keys,
        })
    }

    /// Deletes the kernel entries of processes, threads and cgroups that no
    /// longer exist and had no wait this interval, so that a long run does
    /// not fill the map with the dead. Their waits were all reported.
    fn forget_gone_keys(
        &mut self,
        tracer: &mut Tracer,
        current: &mut HashMap<u64, Waits>,
        rows: &[KeyRow],
    ) {
        let active: std::collections::HashSet<u64> = rows.iter().map(|r| r.key).collect();
        let idle: Vec<u64> = current
            .keys()
            .filter(|k| !active.contains(k) && self.previous.contains_key(k))
            .copied()
            .collect();
        for key in idle {
            // A failed delete only leaves the entry for the next try.
            if !self.labels.exists(key) && tracer.forget_key(key).is_ok() {
                // A reused TID or id starts again from zero.
                self.labels.forget(key);
                current.remove(&key);
            }
        }
    }

    fn label(&mut self, key: u64) -> String {
        self.labels.text(key)
    }
}

fn sort_rows(rows: &mut [KeyRow], sort: KeySort) {
    let p = |r: &KeyRow, f: fn(&Percentiles) -> u64| r.percentiles.as_ref().map_or(0, f);
    match sort {
        KeySort::Key => rows.sort_by_key(|r| r.key),
        KeySort::Total => rows.sort_by_key(|r| std::cmp::Reverse((r.waits.sum_ns, r.key))),
        KeySort::Count => rows.sort_by_key(|r| std::cmp::Reverse((r.waits.count(), r.key))),
        KeySort::P99 => rows.sort_by_key(|r| std::cmp::Reverse((p(r, |p| p.p99_ns), r.key))),
        KeySort::P50 => rows.sort_by_key(|r| std::cmp::Reverse((p(r, |p| p.p50_ns), r.key))),
        KeySort::Mean => rows.sort_by(|a, b| {
            let mean = |r: &KeyRow| r.waits.mean_ns().unwrap_or(0.0);
            mean(b).total_cmp(&mean(a)).then(a.key.cmp(&b.key))
        }),
    }
}

impl KeyedReport {
    /// runqlat's per-key layout: a label line, then the table; schedlat adds
    /// each key's count and mean, percentiles and verdict; then a footer.
    pub fn render_text(&self, unit: Unit) -> String {
        let mut out = String::new();
        for row in &self.rows {
            let _ = writeln!(out, "\n{}", row.label);
            out.push_str(&text::log2_table(&row.waits.log2_slots(), unit.label()));
            let mean = text::mean_in_unit(&row.waits, unit);
            let _ = writeln!(out, "total {} waits, mean {mean}", row.waits.count());
            // No per-key extremes are kept: the line stops at p99.9.
            if let Some(p) = &row.percentiles {
                let _ = writeln!(out, "{}", text::quantiles(p));
            }
            let _ = writeln!(out, "shape: {}", row.shape.summary);
            if let Some(causes) = output::causes::of(&row.waits) {
                out.push_str(&output::causes::text(&causes));
            }
        }
        let _ = writeln!(
            out,
            "\n{} {} with waits, {} shown (by {}); {} waits unkeyed (key map full, --max-keys {})",
            self.keys_with_waits,
            key_noun(self.by),
            self.rows.len(),
            sort_name(self.sort),
            self.unkeyed,
            self.max_keys
        );
        out
    }

    /// The `breakdown` member of a JSON interval (docs/json.md).
    pub fn to_json(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "key": r.key,
                    "label": r.label,
                    "count": r.waits.count(),
                    "sum_ns": r.waits.sum_ns,
                    "mean_ns": r.waits.mean_ns(),
                    "percentiles": r.percentiles,
                    "shape": output::json::shape_out(&r.shape),
                    "log2": r.waits.log2_slots(),
                    "causes": output::causes::of(&r.waits).map(|c| output::causes::json(&c)),
                })
            })
            .collect();
        json!({
            "by": key_noun(self.by),
            "sort": self.sort,
            "keys_with_waits": self.keys_with_waits,
            "unkeyed": self.unkeyed,
            "max_keys": self.max_keys,
            "keys": keys,
        })
    }
}

pub fn key_noun(by: Breakdown) -> &'static str {
    match by {
        Breakdown::Process => "pids",
        Breakdown::Thread => "tids",
        Breakdown::PidNamespace => "pidnss",
        Breakdown::Cgroup => "cgroups",
        Breakdown::Cpu => "cpus",
        Breakdown::None => "keys",
    }
}

fn sort_name(sort: KeySort) -> &'static str {
    match sort {
        KeySort::Total => "total wait",
        KeySort::P99 => "p99",
        KeySort::P50 => "p50",
        KeySort::Mean => "mean wait",
        KeySort::Count => "count",
        KeySort::Key => "key",
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::scope::KeyStats;

    use super::*;

    fn row(key: u64, waits_us: &[u64]) -> KeyRow {
        let mut stats = KeyStats::ZERO;
        for &us in waits_us {
            stats.buckets[schedlat_common::bucket_index(us * 1000)] += 1;
            stats.log2[schedlat_common::log2_slot(us)] += 1;
            stats.sum_ns += us * 1000;
        }
        let waits = waits_of(&stats, None);
        KeyRow {
            key,
            label: format!("pid = {key} x"),
            percentiles: Percentiles::of(&waits),
            shape: shape::classify(&waits, &Slice::detect()),
            waits,
        }
    }

    #[test]
    fn sorts_by_the_chosen_relevance() {
        // key 1: many short waits; key 2: one long; key 3: medium.
        let mut rows = vec![row(1, &[10; 50]), row(2, &[5000]), row(3, &[100, 200])];
        let order = |rows: &[KeyRow]| rows.iter().map(|r| r.key).collect::<Vec<_>>();
        sort_rows(&mut rows, KeySort::Total);
        assert_eq!(order(&rows), [2, 1, 3]);
        sort_rows(&mut rows, KeySort::Count);
        assert_eq!(order(&rows), [1, 3, 2]);
        sort_rows(&mut rows, KeySort::P99);
        assert_eq!(order(&rows), [2, 3, 1]);
        sort_rows(&mut rows, KeySort::Key);
        assert_eq!(order(&rows), [1, 2, 3]);
    }

    #[test]
    fn text_has_runqlat_labels_tables_and_a_footer() {
        let report = KeyedReport {
            by: Breakdown::Process,
            sort: KeySort::Total,
            rows: vec![row(42, &[3, 5, 9])],
            keys_with_waits: 7,
            unkeyed: 2,
            max_keys: 4096,
        };
        let out = report.render_text(Unit::Usecs);
        assert!(
            out.starts_with("\npid = 42 x\n     usecs               : count    distribution\n"),
            "{out}"
        );
        assert!(out.contains("total 3 waits, mean 5.7 usecs"), "{out}");
        assert!(
            out.contains("7 pids with waits, 1 shown (by total wait); 2 waits unkeyed"),
            "{out}"
        );
        let json = report.to_json();
        assert_eq!(json["keys"][0]["count"], 3);
        assert_eq!(json["by"], "pids");
        // Not measured: no causes line, a null object.
        assert!(!out.contains("causes:"), "{out}");
        assert_eq!(json["keys"][0]["causes"], serde_json::Value::Null);
    }

    #[test]
    fn each_key_gets_its_causes_line_and_object() {
        use schedlat_common::causes::{Cause, KeyCauses};

        use crate::collect::causes::{CauseCounts, Measurable};
        let mut r = row(42, &[3, 5, 9]);
        let mut key = KeyCauses::ZERO;
        key.count[Cause::Preempted as usize] = 3;
        key.sum_ns[Cause::Preempted as usize] = 17_000;
        key.count[Cause::Depth2 as usize] = 3;
        key.count[Cause::HeldBySameCgroup as usize] = 3;
        key.sum_ns[Cause::HeldBySameCgroup as usize] = 17_000;
        r.waits.causes = Some(CauseCounts::from_key(Measurable::default(), &key));
        let report = KeyedReport {
            by: Breakdown::Process,
            sort: KeySort::Total,
            rows: vec![r],
            keys_with_waits: 1,
            unkeyed: 0,
            max_keys: 4096,
        };
        let out = report.render_text(Unit::Usecs);
        let after_shape = out.split_once("\nshape: ").unwrap().1;
        let causes = after_shape.lines().nth(1).unwrap();
        assert_eq!(
            causes,
            "causes: woken 0% of waits, 0% of time; preempted 100%, 100%"
        );
        assert!(out.contains("queue depth 2: 100%; held by same cgroup 100% of wait time"));
        let json = report.to_json();
        let c = &json["keys"][0]["causes"];
        assert_eq!(c["preempted"]["count"], 3);
        assert_eq!(c["preempted"]["p99_ns"], serde_json::Value::Null);
        assert_eq!(c["queue_depth"]["2"], 3);
    }
}
