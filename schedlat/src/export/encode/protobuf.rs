//! Prometheus' protobuf exposition (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`): a stream
//! of `MetricFamily` messages, each preceded by its length as a varint.
//! The one format that carries native histograms (histogram/native.rs);
//! Prometheus asks for it when started with
//! `--enable-feature=native-histograms`.
//!
//! The messages are the subset of io.prometheus.client's metrics.proto
//! (proto2) that schedlat writes: the functions below write their fields
//! by number, and protobuf/messages.rs declares them as prost structs (the
//! tests' oracle and decoder).
//! Every histogram carries both the classic buckets (the same `le` as the
//! text formats) and the native ones (schema 3, with the zero bucket and
//! the positive spans and deltas), so a scraper that reads only one of
//! them finds what it needs. Exemplars (`--exemplars`) go on their classic
//! bucket and, all of them, in the native histogram's list, where
//! Prometheus wants them timestamped.

use self::wire::Wire;
use crate::{
    export::model::{self, Family, Histograms, Labels, Metric, MetricUnit, Series, Value},
    histogram::native::{KERNEL, SCHEMA, ZERO_THRESHOLD},
};

mod wire;

/// The messages as prost structs, for the tests (imported from there by
/// path: this file imports nothing of it, so the two are no cycle).
#[cfg(test)]
pub(crate) mod messages;

/// The media type, as Prometheus asks for it and as it expects it back.
pub(crate) const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// MetricType: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
pub(crate) const COUNTER: i32 = 0;
pub(crate) const GAUGE: i32 = 1;
pub(crate) const HISTOGRAM: i32 = 4;

thread_local! {
    /// The last body's length: the next starts with that much room.
    static LAST_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(16 * 1024) };
}

/// The delimited stream of `families`, written straight into the body
/// (wire.rs). Each family is a `MetricFamily` (name 1, help 2, type 3,
/// metric 4); each sample a `Metric` (label 1, gauge 2, counter 3,
/// histogram 7), fields in the order of their numbers, as prost writes
/// them: the tests compare with prost's encoding of the same messages.
pub(crate) fn encode(families: Vec<Family>) -> Vec<u8> {
    let mut out = Wire::with_capacity(LAST_LEN.get() + LAST_LEN.get() / 8);
    for f in &families {
        out.delimited(|w| family(w, f));
    }
    LAST_LEN.set(out.buf.len());
    out.buf
}

/// The name with the unit's suffix, as the text encoders write it.
pub(crate) fn with_unit(name: &str, unit: Option<MetricUnit>) -> String {
    match unit {
        Some(MetricUnit::Seconds) => format!("{name}_seconds"),
        None => name.to_string(),
    }
}

fn family(w: &mut Wire, f: &Family) {
    let (name, kind) = match &f.metric {
        Metric::Counter(_) => (format!("{}_total", with_unit(&f.name, f.unit)), COUNTER),
        Metric::Gauge(_) => (with_unit(&f.name, f.unit), GAUGE),
        Metric::Info(_) => (format!("{}_info", f.name), GAUGE),
        Metric::Histogram(_) => (with_unit(&f.name, f.unit), HISTOGRAM),
    };
    w.string(1, &name);
    w.string(2, &f.help);
    w.int(3, i64::from(kind));
    match &f.metric {
        Metric::Counter(samples) | Metric::Gauge(samples) => {
            // Counter 3 or Gauge 2, each a message of one double (1).
            let field = if kind == COUNTER { 3 } else { 2 };
            for s in samples {
                w.message(4, |w| {
                    labels(w, 1, &s.labels);
                    w.message(field, |w| w.double(1, Value::as_f64(s.value)));
                });
            }
        }
        Metric::Info(l) => w.message(4, |w| {
            labels(w, 1, l);
            w.message(2, |w| w.double(1, 1.0));
        }),
        Metric::Histogram(h) => {
            for series in &h.series {
                w.message(4, |w| {
                    labels(w, 1, &series.labels);
                    w.message(7, |w| histogram(w, h, series));
                });
            }
        }
    }
}

/// Each label a `LabelPair` (name 1, value 2) in field `tag`.
fn labels(w: &mut Wire, tag: u32, labels: &Labels) {
    for (name, value) in labels {
        w.message(tag, |w| {
            w.string(1, name);
            w.string(2, value);
        });
    }
}

/// A `Histogram`: count 1, sum 2, the classic buckets 3 (cumulative,
/// finite bounds only, each with the first exemplar of its bucket), then
/// the native histogram (schema 5, zero threshold 6, zero count 7, spans
/// 12, deltas 13 unpacked) and every exemplar (16), which Prometheus
/// wants timestamped there.
fn histogram(w: &mut Wire, h: &Histograms, series: &Series) {
    let folded = &series.waits;
    w.uint(1, folded.count());
    w.double(2, folded.sum_ns as f64 / 1e9);
    let mut cumulative = 0;
    let finite = h.layout.bounds_seconds();
    for (i, (le, n)) in finite.zip(&folded.buckets).enumerate() {
        cumulative += n;
        w.message(3, |w| {
            w.uint(1, cumulative);
            w.double(2, le);
            let first = (series.exemplars.iter()).find(|e| h.layout.bucket_of(e.wait_ns) == i);
            if let Some(e) = first {
                w.message(3, |w| exemplar(w, e));
            }
        });
    }
    // The kernel's own buckets where the series has them (the total),
    // else the family's layout.
    let native = match &series.kernel {
        Some(kernel) => KERNEL.buckets(kernel),
        None => h.native.buckets(&folded.buckets),
    };
    w.sint(5, i64::from(SCHEMA));
    w.double(6, ZERO_THRESHOLD);
    w.uint(7, native.zero_count);
    for &(offset, length) in &native.spans {
        w.message(12, |w| {
            w.sint(1, i64::from(offset));
            w.uint(2, u64::from(length));
        });
    }
    for &delta in &native.deltas {
        w.sint(13, delta);
    }
    for e in &series.exemplars {
        w.message(16, |w| exemplar(w, e));
    }
}

/// An `Exemplar`: labels 1, value 2, timestamp 3 (a proto3
/// `Timestamp`: seconds 1 and nanos 2, each left out when 0).
fn exemplar(w: &mut Wire, e: &model::Exemplar) {
    labels(w, 1, &e.labels);
    w.double(2, e.wait_ns as f64 / 1e9);
    w.message(3, |w| {
        let (seconds, nanos) = (e.unix_ns / 1_000_000_000, e.unix_ns % 1_000_000_000);
        if seconds != 0 {
            w.int(1, seconds as i64);
        }
        if nanos != 0 {
            w.int(2, nanos as i64);
        }
    });
}

#[cfg(test)]
mod tests;
