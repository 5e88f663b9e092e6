//! `--json`: one JSON object per interval, on one line (JSON Lines). The
//! schema is documented in docs/json.md; bump SCHEMA on incompatible changes.
//! The same types read recordings back for `schedlat compare` and
//! `replay`, bounded: at most one entry per bucket and slot, and the parts
//! no reader uses (a breakdown's per-key histograms, the shape's evidence
//! beyond the slice) skipped without being built, so a crafted line costs
//! no more memory than its own bytes.

use std::time::UNIX_EPOCH;

use serde::{Deserialize, Deserializer, Serialize};

use super::Report;
use crate::{
    analysis::{percentiles::Percentiles, shape::Shape},
    histogram::{NR_LOG2_SLOTS, Waits, log2_slot_bounds},
};

pub(crate) const SCHEMA: &str = "schedlat.histogram.v2";

/// Every schema of this object `compare` reads: v1 is v2 without `causes`.
pub(crate) const READS: [&str; 2] = ["schedlat.histogram.v1", SCHEMA];

#[derive(Serialize, Deserialize)]
pub(crate) struct Interval {
    pub schema: String,
    pub hook: String,
    pub unit: String,
    pub time_unix_ns: u128,
    pub interval_ns: u128,
    pub last: bool,
    pub count: u64,
    pub sum_ns: u64,
    pub mean_ns: Option<f64>,
    pub dropped: Dropped,
    pub discarded: Discarded,
    /// Null when there were no waits.
    pub percentiles: Option<Percentiles>,
    pub shape: Option<ShapeOut>,
    /// Fine (log-linear, ns) buckets with at least one wait.
    #[serde(deserialize_with = "at_most::<_, _, { schedlat_common::NR_BUCKETS }>")]
    pub buckets: Vec<Bucket>,
    /// runqlat's log2 view, in the display unit, up to the highest non-empty slot.
    #[serde(deserialize_with = "at_most::<_, _, NR_LOG2_SLOTS>")]
    pub log2: Vec<Log2Slot>,
    /// The cause split (docs/causes.md); null when the programs did not
    /// measure it, absent in objects written before it existed.
    #[serde(default)]
    pub causes: Option<super::causes::CausesOut>,
    /// The decision split (docs/decision.md); absent when
    /// the programs did not measure it. Not read back.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub decision: Option<serde_json::Value>,
    /// The kernel's scheduling context (docs/json.md); absent for
    /// recordings replayed. Not read back.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub kernel_context: Option<serde_json::Value>,
    /// Per-key histograms (`-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus`);
    /// not read back (a line of a million keys would be built in memory).
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<serde_json::Value>,
    /// Who waited behind whom (`--pairs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<serde_json::Value>,
    /// What was measured; absent in objects from before it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<super::recording::RecordedScope>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Dropped {
    pub untracked_tid: u64,
    /// Waits in the total but in no breakdown histogram (key map full).
    #[serde(default)]
    pub unkeyed: u64,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Discarded {
    pub negative_delta: u64,
}

/// The verdict as written; read back only for display.
#[derive(Serialize, Deserialize)]
pub(crate) struct ShapeOut {
    pub verdict: String,
    pub summary: String,
    /// Read back: only the slice it was judged against.
    #[serde(deserialize_with = "slice_evidence")]
    pub evidence: serde_json::Value,
}

/// A sequence of at most `N` elements; a longer one is refused when its
/// element `N + 1` is reached, before it is read.
fn at_most<'de, D: Deserializer<'de>, T: Deserialize<'de>, const N: usize>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    struct Bounded<T, const N: usize>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for Bounded<T, N> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {N} entries")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(N));
            while let Some(item) = seq.next_element()? {
                if out.len() == N {
                    return Err(serde::de::Error::custom(format_args!(
                        "more than {N} entries (one per bucket at most)"
                    )));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded::<T, N>(std::marker::PhantomData))
}

/// The shape's evidence as read back: its slice, the rest skipped unbuilt.
fn slice_evidence<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    // Fields not named here are skipped (serde's IgnoredAny), not built.
    #[derive(Deserialize)]
    struct SliceOnly {
        slice_ns: Option<u64>,
        slice_source: Option<String>,
    }
    Ok(match Option::<SliceOnly>::deserialize(d)? {
        Some(e) => serde_json::json!({"slice_ns": e.slice_ns, "slice_source": e.slice_source}),
        None => serde_json::Value::Null,
    })
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Bucket {
    pub low_ns: u64,
    /// None for the last bucket, which also holds everything above it.
    pub high_ns: Option<u64>,
    pub count: u64,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Log2Slot {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

pub(crate) fn shape_out(shape: &Shape) -> ShapeOut {
    ShapeOut {
        verdict: shape.verdict.as_str().to_string(),
        summary: shape.summary.clone(),
        evidence: serde_json::to_value(&shape.evidence).unwrap_or_default(),
    }
}

pub(crate) fn render(report: &Report) -> String {
    let mut line = serde_json::to_string(&interval(report)).expect("plain data serializes");
    line.push('\n');
    line
}

/// The interval object of a report (recorder dumps embed it).
pub(crate) fn interval(report: &Report) -> Interval {
    let w = report.waits;
    let buckets = w
        .nonempty_buckets()
        .map(|(bucket, count)| Bucket {
            low_ns: bucket.low_ns,
            high_ns: bucket.upper_ns(),
            count,
        })
        .collect();
    let log2 = w
        .log2_slots()
        .into_iter()
        .enumerate()
        .map(|(i, count)| {
            let (low, high) = log2_slot_bounds(i);
            Log2Slot { low, high, count }
        })
        .collect();
    Interval {
        schema: SCHEMA.to_string(),
        hook: report.hook.to_string(),
        unit: report.unit.label().to_string(),
        time_unix_ns: report
            .time
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        interval_ns: report.interval.as_nanos(),
        last: report.last,
        count: w.count(),
        sum_ns: w.sum_ns,
        mean_ns: w.mean_ns(),
        dropped: Dropped {
            untracked_tid: w.untracked_tid,
            unkeyed: w.unkeyed,
        },
        discarded: Discarded {
            negative_delta: w.discarded_negative,
        },
        percentiles: report.percentiles,
        shape: Some(shape_out(&report.shape)),
        buckets,
        log2,
        causes: super::causes::of(w).map(|c| super::causes::json(&c)),
        decision: super::decision::json(w),
        kernel_context: report.kernel.map(|k| super::kernel_context::json(k, w)),
        breakdown: report.breakdown.clone(),
        pairs: report.pairs.clone(),
        scope: report.scope.clone(),
    }
}

impl Interval {
    /// The waits this object describes (for merging recordings); None when
    /// its counts add up past u64, which no real recording does (a corrupt
    /// file: two buckets at one index, or counts near 2^64).
    pub(crate) fn waits(&self) -> Option<Waits> {
        let mut w = Waits::default();
        for b in &self.buckets {
            w.add_at(b.low_ns, b.count)?;
        }
        for (slot, s) in self.log2.iter().enumerate().take(NR_LOG2_SLOTS) {
            w.log2[slot] = s.count;
        }
        w.sum_ns = self.sum_ns;
        w.untracked_tid = self.dropped.untracked_tid;
        w.discarded_negative = self.discarded.negative_delta;
        w.unkeyed = self.dropped.unkeyed;
        if let Some(p) = &self.percentiles {
            w.min_ns = p.min_ns;
            w.max_ns = p.max_ns;
        }
        w.checked_count()?;
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use schedlat_common::{CpuStats, Extremes};

    use super::*;
    use crate::{
        histogram::{Unit, bucket_index, log2_slot},
        kernel::hook::HookMode,
        sys::slice::Slice,
    };

    fn sample() -> Waits {
        let mut cpu = CpuStats::ZERO;
        cpu.buckets[bucket_index(3_000_000)] = 2;
        cpu.log2[log2_slot(3000)] = 2;
        cpu.sum_ns = 6_000_000;
        cpu.untracked_tid = 1;
        let x = Extremes {
            min_ns: 2_990_000,
            max_ns: 3_010_000,
        };
        Waits::from_cpus(&[cpu]).with_extremes(&[x])
    }

    /// `waits` as one second's JSON interval, with a fixed 1.5 ms slice.
    fn rendered(waits: &Waits) -> String {
        let slice = Slice::fixed(1_500_000, "test");
        let report = Report::new(
            HookMode::Btf,
            Unit::Usecs,
            waits,
            &slice,
            Duration::from_secs(1),
            true,
        );
        render(&report)
    }

    #[test]
    fn interval_object_has_bounds_counts_losses_and_analysis() {
        let waits = sample();
        let v: serde_json::Value = serde_json::from_str(&rendered(&waits)).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["hook"], "tp_btf");
        assert_eq!(v["count"], 2);
        assert_eq!(v["mean_ns"], 3_000_000.0);
        assert_eq!(v["dropped"]["untracked_tid"], 1);
        let b = &v["buckets"][0];
        // 3 ms lies in [2883584, 3145727] ns: 2^21..2^22 in 8 parts of 2^18.
        assert_eq!(b["low_ns"], 2_883_584);
        assert_eq!(b["high_ns"], 3_145_727);
        assert_eq!(b["count"], 2);
        let slot = &v["log2"][11];
        assert_eq!(
            (slot["low"].as_u64(), slot["high"].as_u64()),
            (Some(2048), Some(4095))
        );
        assert_eq!(slot["count"], 2);
        assert_eq!(v["percentiles"]["max_ns"], 3_010_000);
        assert!(v["percentiles"]["p99_9_ns"].as_u64().unwrap() <= 3_010_000);
        assert_eq!(v["shape"]["verdict"], "insufficient-data");
        // Not measured: null, not absent (docs/json.md).
        assert_eq!(v.get("causes"), Some(&serde_json::Value::Null));
    }

    #[test]
    fn a_measured_split_is_the_causes_object() {
        use crate::histogram::{CauseCounts, CauseFacts};
        let mut waits = sample();
        let cpu = crate::output::causes::tests::sample_cpu();
        waits.causes = Some(CauseCounts::from_cpus(CauseFacts::default(), &[cpu]));
        let v: serde_json::Value = serde_json::from_str(&rendered(&waits)).unwrap();
        assert_eq!(v["causes"]["woken"]["count"], 900);
        assert_eq!(
            v["causes"]["overlap_ns"]["throttled"],
            serde_json::Value::Null
        );
        // An older reader's view: v1 objects have no `causes`.
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("causes");
        old["schema"] = "schedlat.histogram.v1".into();
        let back: Interval = serde_json::from_value(old).unwrap();
        assert!(back.causes.is_none());
        assert!(READS.contains(&back.schema.as_str()));
    }

    #[test]
    fn round_trips_the_waits() {
        let waits = sample();
        let back: Interval = serde_json::from_str(&rendered(&waits)).unwrap();
        assert_eq!(back.waits(), Some(waits));
    }
}
