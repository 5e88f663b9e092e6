//! What an exposition is made of, independently of its encoding: families,
//! each a name, a help text, a unit and its labelled samples (a value, or
//! a histogram's folded buckets). The families (families/) build these and
//! the encoders (encode/) write them; neither knows the other.

use crate::histogram::{CauseCounts, KeyDecisionCounts, Waits, layout::Layout, native::NativeMap};

/// Label pairs of one sample, in the order they are written.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// One metric family.
#[derive(Debug)]
pub(crate) struct Family {
    /// Without the unit's suffix and without `_total`: the encoders add
    /// them as the format wants.
    pub name: String,
    pub help: String,
    pub unit: Option<MetricUnit>,
    pub metric: Metric,
}

/// A family's unit (the only one schedlat exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricUnit {
    Seconds,
}

/// A family's type and samples.
#[derive(Debug)]
pub(crate) enum Metric {
    Counter(Vec<Sample>),
    Gauge(Vec<Sample>),
    /// An info metric (`name_info`, value 1) with these labels.
    Info(Labels),
    Histogram(Histograms),
}

/// One labelled sample of a counter or a gauge.
#[derive(Debug)]
pub(crate) struct Sample {
    pub labels: Labels,
    pub value: Value,
}

/// A sample's value, typed as the text formats print it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    Int(i64),
    Count(u64),
    Float(f64),
}

impl Value {
    /// Nanoseconds, exported as seconds.
    pub(crate) fn seconds_of_ns(ns: u64) -> Value {
        Value::Float(ns as f64 / 1e9)
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Value::Int(v) => v as f64,
            Value::Count(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

/// A histogram family's series, all in one bucket layout.
#[derive(Debug)]
pub(crate) struct Histograms {
    pub layout: &'static Layout,
    /// How the layout's buckets go into a native histogram (protobuf).
    pub native: &'static NativeMap,
    pub series: Vec<Series>,
}

/// One histogram series.
#[derive(Debug)]
pub(crate) struct Series {
    pub labels: Labels,
    /// In the family's layout.
    pub waits: Folded,
    /// The kernel's own buckets, where the series has them (the total):
    /// its native histogram is made from them, at a finer grain.
    pub kernel: Option<Vec<u64>>,
    /// With `serve --exemplars`: the latest slow wait of each bucket that
    /// counted one, oldest first (an exemplar on that bucket).
    pub exemplars: Vec<Exemplar>,
}

/// One wait a series' bucket points to (an OpenMetrics exemplar): the
/// task that waited, how long, and when the wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exemplar {
    /// At most 128 characters, names and values together (OpenMetrics).
    pub labels: Labels,
    pub wait_ns: u64,
    /// When it ended, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// Waits folded into an export layout: per bucket (the last `+Inf`) and
/// their sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Folded {
    pub buckets: Vec<u64>,
    pub sum_ns: u64,
    /// The cause split of the same waits, where the kernel keeps it per
    /// key (per cgroup; families/causes.rs).
    pub causes: Option<CauseCounts>,
    /// The decision split of the same waits, where the kernel keeps it
    /// per key (per cgroup; families/decision.rs).
    pub decision: Option<KeyDecisionCounts>,
}

impl Folded {
    pub(crate) fn of(layout: &Layout, waits: &Waits) -> Folded {
        Folded {
            buckets: layout.counts(&waits.buckets),
            sum_ns: waits.sum_ns,
            causes: waits.causes.clone(),
            decision: waits.key_decision.clone(),
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// A family of one unlabelled sample.
pub(crate) fn single(
    name: &str,
    help: &str,
    metric: fn(Vec<Sample>) -> Metric,
    value: Value,
) -> Family {
    Family {
        name: name.to_string(),
        help: help.to_string(),
        unit: None,
        metric: metric(vec![Sample {
            labels: Labels::new(),
            value,
        }]),
    }
}

/// A counter family of these labelled samples.
pub(crate) fn counter(
    name: String,
    help: String,
    unit: Option<MetricUnit>,
    samples: Vec<(Labels, Value)>,
) -> Family {
    Family {
        name,
        help,
        unit,
        metric: Metric::Counter(
            (samples.into_iter())
                .map(|(labels, value)| Sample { labels, value })
                .collect(),
        ),
    }
}
