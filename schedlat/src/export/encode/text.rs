//! The text formats, written by prometheus-client's own encoders
//! (OpenMetrics, or the classic text format 0.0.4), names, suffixes and
//! escaping included: the families are handed to its registry as one
//! custom `Collector`. The kernel's counters are already aggregated and
//! cumulative, so there is nothing for a client-side metric to observe.
//! Exemplars (OpenMetrics only) are made with the constructor the vendored
//! crate adds (vendor/prometheus-client/PATCHED.md).

use std::{
    collections::HashMap,
    time::{Duration, UNIX_EPOCH},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, prometheus_text, text},
    metrics::{
        MetricType, counter::ConstCounter, exemplar::Exemplar as LibraryExemplar, gauge::ConstGauge,
    },
    registry::{self, Registry},
};

use crate::{
    export::model::{Exemplar, Family, Histograms, Labels, Metric, Sample, Unit, Value},
    histogram::layout::Layout,
};

/// OpenMetrics 1.0.0 (`openmetrics`) or the classic text format.
pub(crate) fn encode(families: Vec<Family>, openmetrics: bool) -> Vec<u8> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition(families)));
    let mut out = String::with_capacity(16 * 1024);
    if openmetrics {
        text::encode(&mut out, &registry)
    } else {
        prometheus_text::encode(&mut out, &registry)
    }
    .expect("writing to a String cannot fail");
    out.into_bytes()
}

/// The classic text format's media type.
pub(crate) const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

#[derive(Debug)]
struct Exposition(Vec<Family>);

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0 {
            write_family(&mut encoder, family)?;
        }
        Ok(())
    }
}

fn write_family(encoder: &mut DescriptorEncoder, f: &Family) -> std::fmt::Result {
    let unit = f.unit.map(|Unit::Seconds| registry::Unit::Seconds);
    let kind = match &f.metric {
        Metric::Counter(_) => MetricType::Counter,
        Metric::Gauge(_) => MetricType::Gauge,
        Metric::Info(_) => MetricType::Info,
        Metric::Histogram(_) => MetricType::Histogram,
    };
    let mut metric = encoder.encode_descriptor(&f.name, &f.help, unit.as_ref(), kind)?;
    match &f.metric {
        Metric::Counter(samples) => {
            for Sample { labels, value } in samples {
                // An empty set prints no braces.
                let encoder = metric.encode_family(labels)?;
                match *value {
                    Value::Count(v) => ConstCounter::new(v).encode(encoder)?,
                    Value::Int(v) => ConstCounter::new(v.max(0) as u64).encode(encoder)?,
                    Value::Float(v) => ConstCounter::new(v).encode(encoder)?,
                }
            }
        }
        Metric::Gauge(samples) => {
            for Sample { labels, value } in samples {
                let encoder = metric.encode_family(labels)?;
                match *value {
                    Value::Int(v) => ConstGauge::new(v).encode(encoder)?,
                    Value::Count(v) => ConstGauge::new(v as i64).encode(encoder)?,
                    Value::Float(v) => ConstGauge::new(v).encode(encoder)?,
                }
            }
        }
        Metric::Info(labels) => metric.encode_info(labels)?,
        Metric::Histogram(Histograms { layout, series, .. }) => {
            for s in series {
                let w = &s.waits;
                let buckets = layout.with_bounds(&w.buckets);
                let sum_seconds = w.sum_ns as f64 / 1e9;
                // The classic text format has no exemplars: the library
                // drops them there.
                let exemplars = exemplars(layout, &s.exemplars);
                metric.encode_family(&s.labels)?.encode_histogram(
                    sum_seconds,
                    w.count(),
                    &buckets,
                    Some(&exemplars),
                )?;
            }
        }
    }
    Ok(())
}

/// Each exemplar on the bucket that counts its wait, as the library takes
/// them: the value in seconds, the timestamp the wait's end.
fn exemplars(layout: &Layout, all: &[Exemplar]) -> HashMap<usize, LibraryExemplar<Labels, f64>> {
    (all.iter())
        .map(|e| {
            let at = UNIX_EPOCH + Duration::from_nanos(e.unix_ns);
            let value = LibraryExemplar::new(e.labels.clone(), e.wait_ns as f64 / 1e9, Some(at));
            (layout.bucket_of(e.wait_ns), value)
        })
        .collect()
}
