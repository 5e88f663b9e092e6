//! The encoder against prometheus-client's own text encoders (the
//! library it replaces, kept as a dev-dependency for this): random
//! families, every kind of value and label, escapes, exemplars and every
//! bucket layout, byte for byte in both formats.
//!
//! The published library makes an exemplar only inside its own
//! `HistogramWithExemplars`, which counts its own observations: it cannot
//! hand over the kernel's counts with exemplars attached. So the library
//! writes each family without exemplars, and each exemplar alone, as the
//! one observation of a histogram of its own; the test puts the latter
//! where the former's bucket lines end and compares the whole.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, prometheus_text, text as library_text},
    metrics::{
        MetricType, counter::ConstCounter, exemplar::HistogramWithExemplars, gauge::ConstGauge,
    },
    registry::{self, Registry},
};

use super::encode;
use crate::{
    export::{
        encode::random::{Rng, families},
        model::{
            Exemplar, Family, Folded, Histograms, Labels, Metric, MetricUnit, Sample, Series, Value,
        },
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
            let unit = f.unit.map(|MetricUnit::Seconds| registry::Unit::Seconds);
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
                        metric
                            .encode_family(&s.labels)?
                            .encode_histogram::<Labels>(
                                w.sum_ns as f64 / 1e9,
                                w.count(),
                                &layout.with_bounds(&w.buckets),
                                None,
                            )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What the library writes after an OpenMetrics bucket's count for this
/// exemplar (` # {labels} value timestamp`): the one bucket line of a
/// histogram that observed nothing else.
fn library_exemplar(e: &Exemplar) -> String {
    let histogram = HistogramWithExemplars::new(std::iter::empty());
    let at: SystemTime = UNIX_EPOCH + Duration::from_nanos(e.unix_ns);
    histogram.observe(e.wait_ns as f64 / 1e9, Some(e.labels.clone()), Some(at));
    let mut registry = Registry::default();
    registry.register("x", "", histogram);
    let mut out = String::new();
    library_text::encode(&mut out, &registry).unwrap();
    let line = (out.lines())
        .find_map(|l| l.strip_prefix("x_bucket{le=\"+Inf\"} 1"))
        .unwrap_or_else(|| panic!("no bucket line: {out}"));
    line.to_string()
}

/// Per histogram series of `families`, in the order they are written,
/// the name its bucket lines start with and, per bucket, the exemplar the
/// library writes after it (the last of the series' exemplars in that
/// bucket, as the encoder keeps).
fn exemplar_slots(families: &[Family]) -> Vec<(String, Vec<Option<String>>)> {
    let mut slots = Vec::new();
    for f in families {
        let Metric::Histogram(Histograms { layout, series, .. }) = &f.metric else {
            continue;
        };
        let unit = f.unit.map_or("", |MetricUnit::Seconds| "_seconds");
        let prefix = format!("{}{unit}_bucket{{le=\"", f.name);
        for s in series {
            let kept: BTreeMap<usize, &Exemplar> = (s.exemplars.iter())
                .map(|e| (layout.bucket_of(e.wait_ns), e))
                .collect();
            let buckets = (0..=layout.edges_ns().len())
                .map(|i| kept.get(&i).map(|e| library_exemplar(e)))
                .collect();
            slots.push((prefix.clone(), buckets));
        }
    }
    slots
}

/// `ours` with the exemplars the library would write taken off its bucket
/// lines (each checked, byte for byte, where it must be), to compare with
/// the library's body without exemplars.
fn without_exemplars(ours: &str, families: &[Family]) -> String {
    let mut slots = (exemplar_slots(families).into_iter())
        .flat_map(|(prefix, buckets)| buckets.into_iter().map(move |b| (prefix.clone(), b)))
        .peekable();
    let mut left = String::new();
    for line in ours.split_inclusive('\n') {
        let Some((_, exemplar)) = slots.next_if(|(prefix, _)| line.starts_with(prefix.as_str()))
        else {
            left.push_str(line);
            continue;
        };
        let body = line.strip_suffix('\n').unwrap_or(line);
        match exemplar {
            Some(exemplar) => {
                let kept = (body.strip_suffix(exemplar.as_str()))
                    .unwrap_or_else(|| panic!("{body:?} does not end with {exemplar:?}"));
                left.push_str(kept);
                left.push('\n');
            }
            None => left.push_str(line),
        }
    }
    assert_eq!(slots.next(), None, "bucket lines missing from {ours}");
    left
}

#[test]
fn every_family_is_written_as_the_library_writes_it() {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    for round in 0..2_000 {
        let seed = rng.next();
        for openmetrics in [true, false] {
            let ours = String::from_utf8(encode(families(&mut Rng(seed)), openmetrics)).unwrap();
            let theirs = library(families(&mut Rng(seed)), openmetrics);
            // The classic format has no exemplars.
            let ours = if openmetrics {
                without_exemplars(&ours, &families(&mut Rng(seed)))
            } else {
                ours
            };
            assert_eq!(
                ours, theirs,
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
        unit: Some(MetricUnit::Seconds),
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
