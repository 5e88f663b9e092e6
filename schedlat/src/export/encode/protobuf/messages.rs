//! The messages of io.prometheus.client's metrics.proto (proto2) that the
//! exposition writes, as prost structs with their field numbers, and the
//! encoder that built them and let prost write them: the writer's test
//! oracle (protobuf/tests.rs) and what the tests decode a body with.

use prost::Message;

use super::{COUNTER, GAUGE, HISTOGRAM, with_unit};
use crate::{
    export::model::{self, Family, Histograms, Labels, Metric as Samples, Sample, Value},
    histogram::native::{KERNEL, SCHEMA, ZERO_THRESHOLD},
};

#[derive(Clone, PartialEq, Message)]
pub(crate) struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub help: Option<String>,
    /// MetricType: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Counter>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LabelPair {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Gauge {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Counter {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    pub sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub sample_sum: Option<f64>,
    /// Classic buckets, cumulative, finite upper bounds only.
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    #[prost(sint32, optional, tag = "5")]
    pub schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    pub zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    pub zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    /// proto2 repeated scalars are not packed unless declared so.
    #[prost(sint64, repeated, packed = "false", tag = "13")]
    pub positive_delta: Vec<i64>,
    /// The native histogram's exemplars (timestamped, as Prometheus
    /// requires there).
    #[prost(message, repeated, tag = "16")]
    pub exemplars: Vec<Exemplar>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
    #[prost(message, optional, tag = "3")]
    pub exemplar: Option<Exemplar>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Exemplar {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
    #[prost(message, optional, tag = "3")]
    pub timestamp: Option<Timestamp>,
}

/// google.protobuf.Timestamp.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    pub offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    pub length: Option<u32>,
}

/// The delimited stream of `families`, through prost's structs.
pub(crate) fn encode(families: Vec<Family>) -> Vec<u8> {
    let messages: Vec<MetricFamily> = families.iter().map(message).collect();
    let mut out = Vec::with_capacity(messages.iter().map(|f| f.encoded_len() + 4).sum());
    for f in &messages {
        f.encode_length_delimited(&mut out)
            .expect("a Vec grows as needed");
    }
    out
}

fn label_pairs(labels: &Labels) -> Vec<LabelPair> {
    labels
        .iter()
        .map(|(name, value)| LabelPair {
            name: Some(name.to_string()),
            value: Some(value.clone()),
        })
        .collect()
}

fn message(f: &Family) -> MetricFamily {
    let (name, kind, metric) = match &f.metric {
        Samples::Counter(samples) => (
            format!("{}_total", with_unit(&f.name, f.unit)),
            COUNTER,
            each(samples, |v| Metric {
                counter: Some(Counter { value: Some(v) }),
                ..Metric::default()
            }),
        ),
        Samples::Gauge(samples) => (with_unit(&f.name, f.unit), GAUGE, each(samples, gauge)),
        Samples::Info(labels) => (
            format!("{}_info", f.name),
            GAUGE,
            vec![Metric {
                label: label_pairs(labels),
                ..gauge(1.0)
            }],
        ),
        Samples::Histogram(h) => (with_unit(&f.name, f.unit), HISTOGRAM, histograms(h)),
    };
    MetricFamily {
        name: Some(name),
        help: Some(f.help.clone()),
        r#type: Some(kind),
        metric,
    }
}

fn gauge(v: f64) -> Metric {
    Metric {
        gauge: Some(Gauge { value: Some(v) }),
        ..Metric::default()
    }
}

fn each(samples: &[Sample], metric: impl Fn(f64) -> Metric) -> Vec<Metric> {
    samples
        .iter()
        .map(|s: &Sample| Metric {
            label: label_pairs(&s.labels),
            ..metric(Value::as_f64(s.value))
        })
        .collect()
}

/// An exemplar as a message.
fn exemplar(e: &model::Exemplar) -> Exemplar {
    Exemplar {
        label: label_pairs(&e.labels),
        value: Some(e.wait_ns as f64 / 1e9),
        timestamp: Some(Timestamp {
            seconds: (e.unix_ns / 1_000_000_000) as i64,
            nanos: (e.unix_ns % 1_000_000_000) as i32,
        }),
    }
}

fn histograms(f: &Histograms) -> Vec<Metric> {
    f.series
        .iter()
        .map(|series| {
            let w = &series.waits;
            // Each exemplar on its classic bucket (none on +Inf, which
            // protobuf leaves implicit), and all in the native histogram.
            let exemplars: Vec<(usize, Exemplar)> = (series.exemplars.iter())
                .map(|e| (f.layout.bucket_of(e.wait_ns), exemplar(e)))
                .collect();
            let mut cumulative = 0;
            let bucket = (f.layout.with_bounds(&w.buckets).into_iter())
                .filter(|(le, _)| le.is_finite())
                .enumerate()
                .map(|(i, (le, n))| {
                    cumulative += n;
                    Bucket {
                        cumulative_count: Some(cumulative),
                        upper_bound: Some(le),
                        exemplar: (exemplars.iter())
                            .find(|(at, _)| *at == i)
                            .map(|(_, e)| e.clone()),
                    }
                })
                .collect();
            // The kernel's own buckets where the series has them (the
            // total), else the family's layout.
            let native = match &series.kernel {
                Some(kernel) => KERNEL.buckets(kernel),
                None => f.native.buckets(&w.buckets),
            };
            Metric {
                label: label_pairs(&series.labels),
                histogram: Some(Histogram {
                    sample_count: Some(w.count()),
                    sample_sum: Some(w.sum_ns as f64 / 1e9),
                    bucket,
                    schema: Some(SCHEMA),
                    zero_threshold: Some(ZERO_THRESHOLD),
                    zero_count: Some(native.zero_count),
                    positive_span: (native.spans.into_iter())
                        .map(|(offset, length)| BucketSpan {
                            offset: Some(offset),
                            length: Some(length),
                        })
                        .collect(),
                    positive_delta: native.deltas,
                    exemplars: exemplars.into_iter().map(|(_, e)| e).collect(),
                }),
                ..Metric::default()
            }
        })
        .collect()
}
