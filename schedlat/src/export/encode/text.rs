//! The text formats, written by prometheus-client's own encoders
//! (OpenMetrics, or the classic text format 0.0.4), names, suffixes and
//! escaping included: the families are handed to its registry as one
//! custom `Collector`. The kernel's counters are already aggregated and
//! cumulative, so there is nothing for a client-side metric to observe.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet, prometheus_text, text},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::{self, Registry},
};

use crate::export::model::{Family, Histograms, Metric, Sample, Unit, Value};

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
                metric
                    .encode_family(&s.labels)?
                    .encode_histogram::<NoLabelSet>(sum_seconds, w.count(), &buckets, None)?;
            }
        }
    }
    Ok(())
}
