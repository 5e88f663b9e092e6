//! Where a scrape's metrics are written: one description of every family
//! (metrics.rs, own.rs), two writers. prometheus-client's text encoders
//! write OpenMetrics and the classic text format; protobuf.rs writes
//! Prometheus' protobuf, the one format with native histograms.

use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

use super::metrics::HistogramFamily;

/// A sample's value, typed as the text formats print it.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    Int(i64),
    Count(u64),
    Float(f64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(v) => v as f64,
            Value::Count(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

/// Label pairs of one sample.
pub type LabelRefs<'a> = &'a [(&'a str, &'a str)];

/// A writer of metric families.
pub trait Sink {
    fn histogram(&mut self, family: &HistogramFamily) -> std::fmt::Result;
    /// A counter family; `name` without `_total` (and without the unit).
    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: &[(LabelRefs, Value)],
    ) -> std::fmt::Result;
    fn gauge(&mut self, name: &str, help: &str, samples: &[(LabelRefs, Value)])
    -> std::fmt::Result;
    /// An info metric (`name_info`, value 1).
    fn info(&mut self, name: &str, help: &str, labels: LabelRefs) -> std::fmt::Result;
}

/// One unlabelled sample.
pub fn one(value: Value) -> [(LabelRefs<'static>, Value); 1] {
    [(&[], value)]
}

impl Sink for DescriptorEncoder<'_> {
    fn histogram(&mut self, family: &HistogramFamily) -> std::fmt::Result {
        let mut metric = self.encode_descriptor(
            family.name,
            &family.help,
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for series in &family.series {
            let w = &series.waits;
            let buckets = family.layout.with_bounds(&w.buckets);
            let sum_seconds = w.sum_ns as f64 / 1e9;
            metric
                .encode_family(&series.labels)?
                .encode_histogram::<NoLabelSet>(sum_seconds, w.count(), &buckets, None)?;
        }
        Ok(())
    }

    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: &[(LabelRefs, Value)],
    ) -> std::fmt::Result {
        let mut metric = self.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        for &(labels, value) in samples {
            // An empty set prints no braces.
            let encoder = metric.encode_family(&labels)?;
            match value {
                Value::Count(v) => ConstCounter::new(v).encode(encoder)?,
                Value::Int(v) => ConstCounter::new(v.max(0) as u64).encode(encoder)?,
                Value::Float(v) => ConstCounter::new(v).encode(encoder)?,
            }
        }
        Ok(())
    }

    fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: &[(LabelRefs, Value)],
    ) -> std::fmt::Result {
        let mut metric = self.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for &(labels, value) in samples {
            // An empty set prints no braces.
            let encoder = metric.encode_family(&labels)?;
            match value {
                Value::Int(v) => ConstGauge::new(v).encode(encoder)?,
                Value::Count(v) => ConstGauge::new(v as i64).encode(encoder)?,
                Value::Float(v) => ConstGauge::new(v).encode(encoder)?,
            }
        }
        Ok(())
    }

    fn info(&mut self, name: &str, help: &str, labels: LabelRefs) -> std::fmt::Result {
        self.encode_descriptor(name, help, None, MetricType::Info)?
            .encode_info(&labels)
    }
}
