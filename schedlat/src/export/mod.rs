//! The Prometheus/OpenMetrics exposition: what schedlat's measurements
//! look like to a scraper, independent of how they are served.
//!
//! - model: families, samples, labels and folded buckets, the leaf the
//!   others share;
//! - families/: the family list of a scrape (`Scrape::families`), one
//!   file per concern: latency histograms, the cause split, the waits per
//!   CPU, the neighbour pairs, what was not counted, schedlat's own cost;
//! - labels: the `scope` of a filter, the key of a per-key series, the
//!   holder side of a neighbour pair, the overflow series;
//! - workload_labels: what a cgroup's series says of its workload (pod,
//!   container, unit... in cAdvisor's spelling), on either side of a pair;
//! - key_buckets: the per-key families' layout (`--key-buckets`); the
//!   layouts and their native-histogram translation are histogram/'s;
//! - cgroup_splits: how much of the cause and decision splits a
//!   per-cgroup series carries (`--cgroup-splits`), and the decision
//!   classes this kernel can produce;
//! - keyed_series: which keys get a series of their own in a scrape
//!   (`--max-series`, `--pin`) and the overflow series, on top of the
//!   keyed intervals of collect/;
//! - exemplars: the longest slow wait of each series since the previous
//!   scrape, as an exemplar on its bucket (`--exemplars`);
//! - neighbour_series: which neighbour pairs (`--pairs`) get a series of
//!   their own in a scrape (`--max-pair-series`) and the overflow pair;
//! - encode/: one encoder per format (the text formats, written
//!   directly; protobuf with native histograms);
//! - negotiate: which format a scraper asked for; content_coding:
//!   whether its body goes out gzip-compressed (`Accept-Encoding`);
//! - otlp/: the same families pushed to an OpenTelemetry collector
//!   (`serve --otlp-endpoint`): OTLP messages, mapping, delivery.
//!
//! Where new work goes: a family is a function in families/ (a file of
//! its own for a new concern) and a line in `Scrape::families`; a label
//! of the per-key series is labels.rs; an encoding is a file in encode/
//! and a `Format` variant.

pub(crate) mod cgroup_splits;
pub(crate) mod content_coding;
pub(crate) mod encode;
pub(crate) mod exemplars;
pub(crate) mod families;
pub(crate) mod key_buckets;
pub(crate) mod keyed_series;
pub(crate) mod keyed_words;
pub(crate) mod labels;
pub(crate) mod model;
pub(crate) mod negotiate;
pub(crate) mod neighbour_series;
pub(crate) mod otlp;
pub(crate) mod workload_labels;
