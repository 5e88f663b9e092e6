//! A scrape's families (model.rs) as OTLP metrics: the same names, values
//! and labels as the Prometheus exposition, each histogram series an
//! exponential histogram with the native histogram's buckets, every
//! point cumulative since schedlat attached.
//!
//! - Names are the exposition's, unit suffix and `_total` included
//!   (`schedlat_runqueue_latency_seconds`, unit `s`): a collector's
//!   Prometheus exporter or remote write then gives back the names the
//!   scrape has (it adds a suffix only where it is missing), and one
//!   dashboard reads both paths.
//! - Counters are monotonic cumulative sums, gauges gauges, an info family
//!   a gauge `<name>_info` of 1.
//! - A histogram series is an exponential histogram at the native
//!   histogram's scale (schema 3 = scale 3: 8 buckets per power of two)
//!   with the same zero bucket and counts. The bucket indices differ by
//!   one: Prometheus' native bucket `i` holds `(2^((i-1)/8), 2^(i/8)]`,
//!   OTLP's `(2^(i/8), 2^((i+1)/8)]`, so OTLP's offset is Prometheus'
//!   first index minus one, and the counts are absolute and dense (a gap
//!   between spans is zeros) where Prometheus' are deltas over spans.
//! - The labels are the data points' attributes. A per-cgroup series'
//!   workload (namespace, pod, container, ...) also makes its resource:
//!   one `ResourceMetrics` per workload, with the semantic conventions'
//!   `k8s.*` and `container.*` attributes besides the host's, so a
//!   collector sees which pod the waits are of as it sees it of the pod's
//!   own metrics.

use std::collections::BTreeMap;

use super::proto::{
    self, CUMULATIVE, Data, ExponentialHistogram, ExponentialHistogramDataPoint, KeyValue, Number,
    NumberDataPoint, ResourceMetrics, ScopeMetrics,
};
use crate::{
    export::{
        encode::protobuf::with_unit,
        model::{Family, Histograms, Labels, Metric, MetricUnit, Sample, Series, Value},
    },
    histogram::native::{KERNEL, NativeBuckets, SCHEMA, ZERO_THRESHOLD},
};

/// The workload labels of a per-cgroup series (workload_labels.rs) that
/// name its resource, with their semantic-convention attribute.
const RESOURCE_LABELS: [(&str, &str); 6] = [
    ("namespace", "k8s.namespace.name"),
    ("pod", "k8s.pod.name"),
    ("pod_uid", "k8s.pod.uid"),
    ("container", "k8s.container.name"),
    ("container_id", "container.id"),
    ("runtime", "container.runtime"),
];

/// A series' resource attributes from its workload labels; empty: the
/// host's resource.
type Workload = Vec<(&'static str, String)>;

/// When the points' cumulative values started and when they were read,
/// nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Times {
    pub start_unix_ns: u64,
    pub now_unix_ns: u64,
}

/// The request of one push: `families` under the host's `resource`
/// attributes (and their workloads' own resources).
pub(crate) fn resource_metrics(
    families: &[Family],
    resource: &[(String, String)],
    times: Times,
) -> Vec<ResourceMetrics> {
    // Resource (its workload attributes; empty: the host's) -> metric name
    // -> the metric, in the families' order.
    let mut resources: BTreeMap<Workload, Vec<proto::Metric>> = BTreeMap::new();
    for family in families {
        for (workload, metric) in metrics(family, times) {
            let metrics = resources.entry(workload).or_default();
            match metrics.iter_mut().find(|m| m.name == metric.name) {
                Some(same) => merge(same, metric),
                None => metrics.push(metric),
            }
        }
    }
    resources
        .into_iter()
        .map(|(workload, metrics)| {
            let attributes = (resource.iter())
                .map(|(k, v)| KeyValue::string(k, v))
                .chain(workload.iter().map(|(k, v)| KeyValue::string(k, v)))
                .collect();
            ResourceMetrics {
                resource: Some(proto::Resource { attributes }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(proto::InstrumentationScope {
                        name: "schedlat".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                    }),
                    metrics,
                }],
            }
        })
        .collect()
}

/// The semantic-convention attributes of a series' workload labels.
fn workload_of(labels: &Labels) -> Workload {
    RESOURCE_LABELS
        .iter()
        .filter_map(|&(label, attribute)| {
            let (_, value) = labels.iter().find(|(name, _)| *name == label)?;
            Some((attribute, value.clone()))
        })
        .collect()
}

/// Adds `more`'s points to `into`, the same metric in the same resource.
fn merge(into: &mut proto::Metric, more: proto::Metric) {
    match (&mut into.data, more.data) {
        (Some(Data::Gauge(a)), Some(Data::Gauge(b))) => a.data_points.extend(b.data_points),
        (Some(Data::Sum(a)), Some(Data::Sum(b))) => a.data_points.extend(b.data_points),
        (Some(Data::ExponentialHistogram(a)), Some(Data::ExponentialHistogram(b))) => {
            a.data_points.extend(b.data_points);
        }
        _ => unreachable!("one family, one kind of metric"),
    }
}

/// `family` as one metric per workload its series belong to.
fn metrics(family: &Family, times: Times) -> Vec<(Workload, proto::Metric)> {
    let named = |name: String, data: Data| proto::Metric {
        name,
        description: family.help.clone(),
        unit: match family.unit {
            Some(MetricUnit::Seconds) => "s".into(),
            None => String::new(),
        },
        data: Some(data),
    };
    let base = with_unit(&family.name, family.unit);
    match &family.metric {
        Metric::Counter(samples) => by_workload(samples, |s| &s.labels, |s| number(s, times))
            .into_iter()
            .map(|(workload, data_points)| {
                let sum = proto::Sum {
                    data_points,
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: true,
                };
                (workload, named(format!("{base}_total"), Data::Sum(sum)))
            })
            .collect(),
        Metric::Gauge(samples) => by_workload(samples, |s| &s.labels, |s| number(s, times))
            .into_iter()
            .map(|(workload, data_points)| {
                let gauge = proto::Gauge { data_points };
                (workload, named(base.clone(), Data::Gauge(gauge)))
            })
            .collect(),
        Metric::Info(labels) => {
            let one = Sample {
                labels: labels.clone(),
                value: Value::Int(1),
            };
            let gauge = proto::Gauge {
                data_points: vec![number(&one, times)],
            };
            vec![(
                Vec::new(),
                named(format!("{}_info", family.name), Data::Gauge(gauge)),
            )]
        }
        Metric::Histogram(h) => by_workload(&h.series, |s| &s.labels, |s| histogram(h, s, times))
            .into_iter()
            .map(|(workload, data_points)| {
                let histogram = ExponentialHistogram {
                    data_points,
                    aggregation_temporality: CUMULATIVE,
                };
                let data = Data::ExponentialHistogram(histogram);
                (workload, named(base.clone(), data))
            })
            .collect(),
    }
}

/// `items` as points, grouped by their workload, in the order the
/// workloads first appear.
fn by_workload<T, P>(
    items: &[T],
    labels: impl Fn(&T) -> &Labels,
    point: impl Fn(&T) -> P,
) -> Vec<(Workload, Vec<P>)> {
    let mut out: Vec<(Workload, Vec<P>)> = Vec::new();
    for item in items {
        let workload = workload_of(labels(item));
        let p = point(item);
        match out.iter_mut().find(|(w, _)| *w == workload) {
            Some((_, points)) => points.push(p),
            None => out.push((workload, vec![p])),
        }
    }
    out
}

fn attributes(labels: &Labels) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(name, value)| KeyValue::string(name, value))
        .collect()
}

fn number(sample: &Sample, times: Times) -> NumberDataPoint {
    NumberDataPoint {
        attributes: attributes(&sample.labels),
        start_time_unix_nano: times.start_unix_ns,
        time_unix_nano: times.now_unix_ns,
        value: Some(match sample.value {
            Value::Int(v) => Number::AsInt(v),
            Value::Count(v) => Number::AsInt(i64::try_from(v).unwrap_or(i64::MAX)),
            Value::Float(v) => Number::AsDouble(v),
        }),
    }
}

/// The dense OTLP buckets of native buckets: `(offset, counts)`, the
/// offset one below Prometheus' first index (the module's docs).
pub(crate) fn dense(native: &NativeBuckets) -> (i32, Vec<u64>) {
    let Some(&(first, _)) = native.spans.first() else {
        return (0, Vec::new());
    };
    let mut counts = Vec::new();
    let mut deltas = native.deltas.iter();
    let mut count = 0i64;
    for (i, &(offset, length)) in native.spans.iter().enumerate() {
        if i > 0 {
            counts.extend(std::iter::repeat_n(0, offset as usize));
        }
        for _ in 0..length {
            count += deltas.next().expect("a delta per bucket");
            counts.push(count as u64);
        }
    }
    (first - 1, counts)
}

fn histogram(h: &Histograms, series: &Series, times: Times) -> ExponentialHistogramDataPoint {
    let waits = &series.waits;
    // As the protobuf exposition: the kernel's own buckets where the
    // series has them (the total), else the family's layout.
    let native = match &series.kernel {
        Some(kernel) => KERNEL.buckets(kernel),
        None => h.native.buckets(&waits.buckets),
    };
    let (offset, bucket_counts) = dense(&native);
    ExponentialHistogramDataPoint {
        attributes: attributes(&series.labels),
        start_time_unix_nano: times.start_unix_ns,
        time_unix_nano: times.now_unix_ns,
        count: waits.count(),
        sum: Some(waits.sum_ns as f64 / 1e9),
        scale: SCHEMA,
        zero_count: native.zero_count,
        positive: Some(proto::Buckets {
            offset,
            bucket_counts,
        }),
        exemplars: (series.exemplars.iter())
            .map(|e| proto::Exemplar {
                filtered_attributes: attributes(&e.labels),
                time_unix_nano: e.unix_ns,
                as_double: e.wait_ns as f64 / 1e9,
            })
            .collect(),
        zero_threshold: ZERO_THRESHOLD,
    }
}
