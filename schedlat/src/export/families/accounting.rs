//! What the histograms do not hold, counted: waits the kernel could not
//! time or discarded, and with `--cgroups`/`--pids` the waits in no key
//! and the keys without a series of their own.

use crate::export::model::{Family, Metric, Value, single};

/// The counters that go with the per-key family.
#[derive(Debug)]
pub(crate) struct KeyedCounters {
    /// Waits in the total but in no key (kernel key map full).
    pub unkeyed: u64,
    /// Keys whose new waits went to the overflow series in this scrape.
    pub overflow_keys: u64,
    /// Per-key series in this scrape, overflow included.
    pub series: usize,
}

/// The loss counters of the whole system.
pub(super) fn losses(untracked_tid: u64, discarded_negative: u64) -> [Family; 2] {
    [
        single(
            "schedlat_dropped_untracked_tid",
            "Enqueues not timestamped because the TID exceeded the start array (pid_max raised after schedlat started): those waits are missing from the histogram",
            Metric::Counter,
            Value::Count(untracked_tid),
        ),
        single(
            "schedlat_discarded_negative_delta",
            "Waits discarded because their end preceded their start (clock skew between CPUs); not in the histogram",
            Metric::Counter,
            Value::Count(discarded_negative),
        ),
    ]
}

/// The per-key family's counters.
pub(super) fn keyed(keyed: &KeyedCounters) -> [Family; 3] {
    [
        single(
            "schedlat_unkeyed_waits",
            "Waits in schedlat_runqueue_latency_seconds but in no per-cgroup or per-process series: the kernel's key map was full (raise --max-keys)",
            Metric::Counter,
            Value::Count(keyed.unkeyed),
        ),
        single(
            "schedlat_overflow_keys",
            "Cgroups or processes that waited since the previous scrape but got no series of their own in this one (not pinned, not among the --max-series that waited most): their waits went to __overflow__",
            Metric::Gauge,
            Value::Int(keyed.overflow_keys as i64),
        ),
        single(
            "schedlat_keyed_series",
            "Per-cgroup or per-process series in this scrape, __overflow__ included",
            Metric::Gauge,
            Value::Int(keyed.series as i64),
        ),
    ]
}
