//! The run-queue latency histograms: the total (every wait, or the
//! filter's) and, with `--cgroups` or `--pids`, one family of per-key
//! series.

use schedlat_common::scope::Breakdown;

use crate::{
    export::{
        key_buckets::KeyBuckets,
        model::{Family, Folded, Histograms, Labels, Metric, MetricUnit, Series},
    },
    histogram::{
        Waits,
        layout::LAYOUT,
        native::{self, FINE_MAP},
    },
};

fn system_help() -> String {
    format!(
        "Time runnable tasks waited on a CPU run queue (woken or preempted, until switched in), all CPUs, since schedlat started; under a filter only the waits in label scope (with -p also label pid); buckets: four per power of two, a histogram_quantile is within 25% of the true percentile; as a native histogram (protobuf, schema 3, from the kernel's 8 buckets per power of two) within {}",
        native::KERNEL.stated()
    )
}

const CGROUP_HELP: &str = "schedlat_runqueue_latency_seconds by cgroup of the task that waited (path in the hierarchy of -c, else of the cpu controller); a series is exported when its cgroup is pinned (--pin) or among the --max-series that waited most since the previous scrape, and counts the waits of those intervals; the others' in cgroup=\"__overflow__\"";
const PROCESS_HELP: &str = "schedlat_runqueue_latency_seconds by process (pid, and comm when first seen) of the task that waited; a series is exported when its process is pinned (--pin) or among the --max-series that waited most since the previous scrape, and counts the waits of those intervals; the others' in pid=\"__overflow__\"";

/// `schedlat_runqueue_latency_seconds`: the total, one series.
pub(super) fn system(waits: &Waits, labels: Labels) -> Family {
    Family {
        name: "schedlat_runqueue_latency".into(),
        help: system_help(),
        unit: Some(MetricUnit::Seconds),
        metric: Metric::Histogram(Histograms {
            layout: &LAYOUT,
            native: &FINE_MAP,
            series: vec![Series {
                labels,
                waits: Folded::of(&LAYOUT, waits),
                kernel: Some(waits.buckets.clone()),
                exemplars: Vec::new(),
            }],
        }),
    }
}

/// The per-cgroup or per-process family.
pub(super) fn keyed(by: Breakdown, layout: KeyBuckets, series: Vec<(Labels, Folded)>) -> Family {
    let (name, help) = match by {
        Breakdown::Process => ("schedlat_process_runqueue_latency", PROCESS_HELP),
        _ => ("schedlat_cgroup_runqueue_latency", CGROUP_HELP),
    };
    Family {
        name: name.into(),
        help: format!("{help}; {}", layout.help()),
        unit: Some(MetricUnit::Seconds),
        metric: Metric::Histogram(Histograms {
            layout: layout.layout(),
            native: layout.native(),
            series: (series.into_iter())
                .map(|(labels, waits)| Series {
                    labels,
                    waits,
                    kernel: None,
                    exemplars: Vec::new(),
                })
                .collect(),
        }),
    }
}
