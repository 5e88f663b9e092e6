//! `--json`: one JSON object per interval, on one line (JSON Lines). The
//! schema is documented in docs/json.md; bump SCHEMA on incompatible changes.

use std::time::UNIX_EPOCH;

use serde::Serialize;

use super::Report;

pub const SCHEMA: &str = "schedlat.histogram.v1";

#[derive(Serialize)]
struct Interval {
    schema: &'static str,
    hook: crate::loader::HookMode,
    unit: &'static str,
    time_unix_ns: u128,
    interval_ns: u128,
    last: bool,
    count: u64,
    sum_ns: u64,
    mean_ns: Option<f64>,
    dropped: Dropped,
    discarded: Discarded,
    /// Fine (log-linear) buckets with at least one wait.
    buckets: Vec<Bucket>,
    /// runqlat's log2 view, in the display unit, up to the highest non-empty slot.
    log2: Vec<Log2Slot>,
}

#[derive(Serialize)]
struct Dropped {
    untracked_tid: u64,
}

#[derive(Serialize)]
struct Discarded {
    negative_delta: u64,
}

#[derive(Serialize)]
struct Bucket {
    low_ns: u64,
    /// None for the last bucket, which also holds everything above it.
    high_ns: Option<u64>,
    count: u64,
}

#[derive(Serialize)]
struct Log2Slot {
    low: u64,
    high: u64,
    count: u64,
}

pub fn render(report: &Report) -> String {
    let unit_ns = report.unit.ns();
    let w = report.waits;
    let buckets = w
        .nonempty_buckets()
        .map(|(index, low, high, count)| Bucket {
            // The kernel divides by the unit, so value v covers
            // [v * unit, (v + 1) * unit) nanoseconds.
            low_ns: low * unit_ns,
            high_ns: (index + 1 < schedlat_common::NR_BUCKETS).then(|| (high + 1) * unit_ns - 1),
            count,
        })
        .collect();
    let log2 = w
        .log2_slots()
        .into_iter()
        .enumerate()
        .map(|(i, count)| {
            let low = if i == 0 { 0 } else { 1u64 << i };
            Log2Slot {
                low,
                high: (1u64 << (i + 1)) - 1,
                count,
            }
        })
        .collect();
    let record = Interval {
        schema: SCHEMA,
        hook: report.hook,
        unit: report.unit.label(),
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
        },
        discarded: Discarded {
            negative_delta: w.discarded_negative,
        },
        buckets,
        log2,
    };
    let mut line = serde_json::to_string(&record).expect("plain data serializes");
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        histogram::{Unit, Waits},
        loader::HookMode,
    };
    use schedlat_common::{CpuStats, bucket_index};
    use std::time::{Duration, SystemTime};

    #[test]
    fn interval_object_has_bounds_counts_and_losses() {
        let mut cpu = CpuStats::ZERO;
        cpu.buckets[bucket_index(3000)] = 2; // 3000 us
        cpu.sum_ns = 6_000_000;
        cpu.untracked_tid = 1;
        let waits = Waits::from_cpus(&[cpu]);
        let report = Report {
            hook: HookMode::Btf,
            unit: Unit::Usecs,
            waits: &waits,
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(5),
            interval: Duration::from_secs(1),
            last: true,
        };
        let v: serde_json::Value = serde_json::from_str(&render(&report)).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["hook"], "tp_btf");
        assert_eq!(v["count"], 2);
        assert_eq!(v["mean_ns"], 3_000_000.0);
        assert_eq!(v["dropped"]["untracked_tid"], 1);
        let b = &v["buckets"][0];
        // 3000 lies in [2816, 3071] us (8 sub-buckets of 256 us above 2048).
        assert_eq!(b["low_ns"], 2_816_000);
        assert_eq!(b["high_ns"], 3_071_999);
        assert_eq!(b["count"], 2);
        let slot = &v["log2"][11];
        assert_eq!(
            (slot["low"].as_u64(), slot["high"].as_u64()),
            (Some(2048), Some(4095))
        );
        assert_eq!(slot["count"], 2);
    }
}
