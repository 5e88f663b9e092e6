//! Prometheus' protobuf exposition (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`): a stream
//! of `MetricFamily` messages, each preceded by its length as a varint.
//! The one format that carries native histograms (native.rs); Prometheus
//! asks for it when started with `--enable-feature=native-histograms`.
//!
//! The messages are the subset of io.prometheus.client's metrics.proto
//! (proto2) that schedlat writes, declared below with its field numbers.
//! Every histogram carries both the classic buckets (the same `le` as the
//! text formats) and the native ones (schema 3, with the zero bucket and
//! the positive spans and deltas), so a scraper that reads only one of
//! them finds what it needs.

use prometheus_client::registry::Unit;
use prost::Message;

use super::{
    metrics::HistogramFamily,
    native::{KERNEL, SCHEMA, ZERO_THRESHOLD},
    sink::{LabelRefs, Sink, Value},
};

/// The media type, as Prometheus asks for it and as it expects it back.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

#[derive(Clone, PartialEq, Message)]
pub struct MetricFamily {
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

const COUNTER: i32 = 0;
const GAUGE: i32 = 1;
const HISTOGRAM: i32 = 4;

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
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
pub struct LabelPair {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Counter {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Histogram {
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
}

#[derive(Clone, PartialEq, Message)]
pub struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    pub offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    pub length: Option<u32>,
}

/// The families of one scrape, written by the `Sink` calls.
#[derive(Default)]
pub struct Families(Vec<MetricFamily>);

fn label_pairs<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| LabelPair {
            name: Some(name.to_string()),
            value: Some(value.to_string()),
        })
        .collect()
}

fn family(name: String, help: &str, kind: i32, metric: Vec<Metric>) -> MetricFamily {
    MetricFamily {
        name: Some(name),
        help: Some(help.to_string()),
        r#type: Some(kind),
        metric,
    }
}

/// The name with the unit's suffix, as the text encoders write it.
fn with_unit(name: &str, unit: Option<Unit>) -> String {
    match unit {
        Some(unit) => format!("{name}_{}", unit.as_str()),
        None => name.to_string(),
    }
}

impl Families {
    /// The delimited stream.
    pub fn encode(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.iter().map(|f| f.encoded_len() + 4).sum());
        for f in &self.0 {
            f.encode_length_delimited(&mut out)
                .expect("a Vec grows as needed");
        }
        out
    }

    fn samples(
        &mut self,
        name: String,
        help: &str,
        kind: i32,
        samples: &[(LabelRefs, Value)],
        metric: impl Fn(f64) -> Metric,
    ) {
        let metrics = samples
            .iter()
            .map(|&(labels, value)| Metric {
                label: label_pairs(labels.iter().copied()),
                ..metric(value.as_f64())
            })
            .collect();
        self.0.push(family(name, help, kind, metrics));
    }
}

impl Sink for Families {
    fn histogram(&mut self, f: &HistogramFamily) -> std::fmt::Result {
        let metrics = f
            .series
            .iter()
            .map(|series| {
                let w = &series.waits;
                let mut cumulative = 0;
                let bucket = (f.layout.with_bounds(&w.buckets).into_iter())
                    .filter(|(le, _)| le.is_finite())
                    .map(|(le, n)| {
                        cumulative += n;
                        Bucket {
                            cumulative_count: Some(cumulative),
                            upper_bound: Some(le),
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
                    label: label_pairs(series.labels.iter().map(|(k, v)| (*k, v.as_str()))),
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
                    }),
                    ..Metric::default()
                }
            })
            .collect();
        let name = with_unit(f.name, Some(Unit::Seconds));
        self.0.push(family(name, &f.help, HISTOGRAM, metrics));
        Ok(())
    }

    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: &[(LabelRefs, Value)],
    ) -> std::fmt::Result {
        let name = format!("{}_total", with_unit(name, unit));
        self.samples(name, help, COUNTER, samples, |v| Metric {
            counter: Some(Counter { value: Some(v) }),
            ..Metric::default()
        });
        Ok(())
    }

    fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: &[(LabelRefs, Value)],
    ) -> std::fmt::Result {
        self.samples(name.to_string(), help, GAUGE, samples, |v| Metric {
            gauge: Some(Gauge { value: Some(v) }),
            ..Metric::default()
        });
        Ok(())
    }

    fn info(&mut self, name: &str, help: &str, labels: LabelRefs) -> std::fmt::Result {
        let name = format!("{name}_info");
        self.samples(name, help, GAUGE, &[(labels, Value::Int(1))], |v| Metric {
            gauge: Some(Gauge { value: Some(v) }),
            ..Metric::default()
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index};

    use super::*;
    use crate::{
        collect::histogram::Waits,
        commands::serve::{metrics::Snapshot, negotiate::Format},
        kernel::hook::HookMode,
    };

    /// The families of a delimited stream.
    fn decode(mut body: &[u8]) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        while !body.is_empty() {
            out.push(MetricFamily::decode_length_delimited(&mut body).unwrap());
        }
        out
    }

    /// Waits of 3 ms (x3), 1.5 us and 100 s; one unlabelled series.
    fn snapshot() -> Snapshot {
        let mut cpu = CpuStats::ZERO;
        for ns in [3_000_000, 3_000_000, 3_000_000, 1_500, 100_000_000_000] {
            cpu.buckets[bucket_index(ns)] += 1;
            cpu.sum_ns += ns;
        }
        cpu.untracked_tid = 2;
        Snapshot::system(HookMode::Btf, Waits::from_cpus(&[cpu]), Vec::new(), None)
    }

    #[test]
    fn histograms_carry_classic_and_native_buckets() {
        let families = decode(&snapshot().encode(Format::Protobuf));
        let h = &families[0];
        assert_eq!(h.name.as_deref(), Some("schedlat_runqueue_latency_seconds"));
        assert_eq!(h.r#type, Some(HISTOGRAM));
        assert!(h.help.as_deref().unwrap().contains("within 12.2%"));
        let hist = h.metric[0].histogram.as_ref().unwrap();
        assert_eq!(hist.sample_count, Some(5));
        assert!((hist.sample_sum.unwrap() - 100.0090015).abs() < 1e-9);
        // Classic: the text formats' 105 finite boundaries, cumulative; the
        // 100 s wait only in the implicit +Inf.
        assert_eq!(hist.bucket.len(), 105);
        assert_eq!(hist.bucket.last().unwrap().cumulative_count, Some(4));
        assert_eq!(hist.bucket[0].upper_bound, Some(1.024e-6));
        // Native: schema 3; three buckets with 1, 3 and 1 waits.
        assert_eq!(hist.schema, Some(3));
        assert_eq!(hist.zero_count, Some(0));
        let mut counts = Vec::new();
        let mut n = 0;
        for d in &hist.positive_delta {
            n += d;
            counts.push(n);
        }
        assert_eq!(counts, [1, 3, 1]);
        let lengths: u32 = hist.positive_span.iter().map(|s| s.length.unwrap()).sum();
        assert_eq!(lengths, 3);
        // 3 ms lies in its native bucket (b^(i-1), b^i].
        let first = hist.positive_span[0].offset.unwrap();
        let second = first + hist.positive_span[1].offset.unwrap() + 1;
        let b = 2f64.powf(1.0 / 8.0);
        assert!(b.powi(second - 1) < 0.003 && 0.003 <= b.powi(second) * 1.13);
    }

    #[test]
    fn counters_gauges_and_info_keep_the_text_formats_names() {
        let families = decode(&snapshot().encode(Format::Protobuf));
        let by_name = |name: &str| {
            families
                .iter()
                .find(|f| f.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let untracked = by_name("schedlat_dropped_untracked_tid_total");
        assert_eq!(untracked.r#type, Some(COUNTER));
        assert_eq!(
            untracked.metric[0].counter.as_ref().unwrap().value,
            Some(2.0)
        );
        let info = by_name("schedlat_info");
        assert_eq!(info.r#type, Some(GAUGE));
        let labels: Vec<_> = (info.metric[0].label.iter())
            .map(|l| (l.name.clone().unwrap(), l.value.clone().unwrap()))
            .collect();
        assert_eq!(labels[0], ("hook".into(), "tp_btf".into()));
    }
}
