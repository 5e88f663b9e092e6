//! The encoder against prometheus-client's own text encoders (the
//! library it replaces, kept as a dev-dependency for this): random
//! families, every kind of value and label, escapes, exemplars and every
//! bucket layout, byte for byte in both formats.

use std::{
    collections::HashMap,
    time::{Duration, UNIX_EPOCH},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, prometheus_text, text as library_text},
    metrics::{
        MetricType, counter::ConstCounter, exemplar::Exemplar as LibraryExemplar, gauge::ConstGauge,
    },
    registry::{self, Registry},
};

use super::encode;
use crate::{
    export::{
        encode::random::{Rng, families},
        model::{Family, Folded, Histograms, Labels, Metric, Sample, Series, Unit, Value},
    },
    histogram::{layout::LOG2, native::FINE_MAP},
};

/// The families as the library writes them (the encoder this file
/// replaced).
fn library(families: Vec<Family>, openmetrics: bool) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition(families)));
    let mut out = String::new();
    if openmetrics {
        library_text::encode(&mut out, &registry)
    } else {
        prometheus_text::encode(&mut out, &registry)
    }
    .unwrap();
    out
}

#[derive(Debug)]
struct Exposition(Vec<Family>);

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
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
                        let exemplars: HashMap<usize, LibraryExemplar<Labels, f64>> = (s
                            .exemplars
                            .iter())
                        .map(|e| {
                            let at = UNIX_EPOCH + Duration::from_nanos(e.unix_ns);
                            let value = e.wait_ns as f64 / 1e9;
                            let library = LibraryExemplar::new(e.labels.clone(), value, Some(at));
                            (layout.bucket_of(e.wait_ns), library)
                        })
                        .collect();
                        metric.encode_family(&s.labels)?.encode_histogram(
                            w.sum_ns as f64 / 1e9,
                            w.count(),
                            &layout.with_bounds(&w.buckets),
                            Some(&exemplars),
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[test]
fn every_family_is_written_as_the_library_writes_it() {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    for round in 0..2_000 {
        let seed = rng.next();
        for openmetrics in [true, false] {
            let ours = encode(families(&mut Rng(seed)), openmetrics);
            let theirs = library(families(&mut Rng(seed)), openmetrics);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                theirs,
                "round {round}, seed {seed:#x}, openmetrics {openmetrics}"
            );
        }
    }
}

#[test]
fn a_series_reads_as_prometheus_expects() {
    let family = Family {
        name: "schedlat_cgroup_runqueue_latency".into(),
        help: "Waits.".into(),
        unit: Some(Unit::Seconds),
        metric: Metric::Histogram(Histograms {
            layout: &LOG2,
            native: &FINE_MAP,
            series: vec![Series {
                labels: vec![("cgroup", "/a\"b".into())],
                waits: Folded {
                    buckets: (0..=LOG2.edges_ns().len() as u64).collect(),
                    sum_ns: 1_500_000,
                    ..Folded::default()
                },
                kernel: None,
                exemplars: Vec::new(),
            }],
        }),
    };
    let text = String::from_utf8(encode(vec![family], true)).unwrap();
    assert!(
        text.starts_with(
            "# HELP schedlat_cgroup_runqueue_latency_seconds Waits.\n\
         # TYPE schedlat_cgroup_runqueue_latency_seconds histogram\n\
         # UNIT schedlat_cgroup_runqueue_latency_seconds seconds\n\
         schedlat_cgroup_runqueue_latency_seconds_sum{cgroup=\"/a\\\"b\"} 0.0015\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("_bucket{le=\"+Inf\",cgroup=\"/a\\\"b\"} "),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}
