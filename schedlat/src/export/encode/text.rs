//! The text formats: OpenMetrics 1.0.0 (`openmetrics`) or the classic
//! text format 0.0.4, written straight into the body.
//!
//! Written here rather than through prometheus-client's encoders, which
//! wrote every line from owned label sets one label at a time (each value
//! scanned for escapes, each `le` formatted again for every series): at
//! 100 per-cgroup series, about 3,000 histogram lines and 3,000 split
//! counters a scrape, that was a quarter of `serve --cgroups`' CPU. Here a
//! series' labels are escaped and joined once, and a family's `le` values
//! formatted once. The output is byte for byte the library's: the tests
//! encode random families both ways (the library is a dev-dependency).
//!
//! The formats' differences, as the library writes them (and Prometheus
//! and promtool read them): OpenMetrics announces `# UNIT`, writes a
//! histogram's `_sum` and `_count` before its buckets with `le` first in
//! the braces, carries exemplars and ends with `# EOF`; the classic format
//! names counters `_total` and info metrics `_info` in HELP and TYPE too
//! (info is a gauge there), escapes HELP, writes buckets first with `le`
//! last, and formats `le` as Go's clients do (`1e-05`, not `1e-5`).

use std::{cell::Cell, time::Duration};

use crate::{
    export::model::{
        Exemplar, Family, Folded, Histograms, Labels, Metric, MetricUnit, Sample, Series, Value,
    },
    histogram::layout::Layout,
};

/// The classic text format's media type.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

thread_local! {
    /// The last body's length: the next starts with that much room, so a
    /// body of a megabyte is not grown (and copied) a dozen times.
    static LAST_LEN: Cell<usize> = const { Cell::new(16 * 1024) };
}

/// `families` in OpenMetrics (`openmetrics`) or the classic text format.
pub(crate) fn encode(families: Vec<Family>, openmetrics: bool) -> Vec<u8> {
    let mut out = Body {
        buf: Vec::with_capacity(LAST_LEN.get() + LAST_LEN.get() / 8),
        openmetrics,
        labels: Vec::new(),
    };
    for family in &families {
        out.family(family);
    }
    if openmetrics {
        out.put("# EOF\n");
    }
    LAST_LEN.set(out.buf.len());
    out.buf
}

struct Body {
    buf: Vec<u8>,
    openmetrics: bool,
    /// One series' labels, escaped and joined (reused).
    labels: Vec<u8>,
}

impl Body {
    fn put(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn family(&mut self, f: &Family) {
        let unit = f.unit.map(|MetricUnit::Seconds| "seconds");
        let base = match unit {
            Some(unit) => format!("{}_{unit}", f.name),
            None => f.name.clone(),
        };
        self.descriptor(f, &base, unit);
        match &f.metric {
            Metric::Counter(samples) => {
                for Sample { labels, value } in samples {
                    self.put(&base);
                    self.put("_total");
                    self.braced(labels);
                    self.put(" ");
                    match *value {
                        Value::Count(v) => self.int(v),
                        Value::Int(v) => self.int(v.max(0) as u64),
                        Value::Float(v) => self.float(v),
                    }
                    self.put("\n");
                }
            }
            Metric::Gauge(samples) => {
                for Sample { labels, value } in samples {
                    self.put(&base);
                    self.braced(labels);
                    self.put(" ");
                    match *value {
                        Value::Int(v) => self.int(v),
                        Value::Count(v) => self.int(v as i64),
                        Value::Float(v) => self.float(v),
                    }
                    self.put("\n");
                }
            }
            Metric::Info(labels) => {
                self.put(&base);
                self.put("_info");
                self.braced(labels);
                self.put(" 1\n");
            }
            Metric::Histogram(h) => self.histograms(&base, h),
        }
    }

    /// HELP, TYPE and (OpenMetrics) UNIT.
    fn descriptor(&mut self, f: &Family, base: &str, unit: Option<&str>) {
        let (kind, suffix) = match (&f.metric, self.openmetrics) {
            (Metric::Counter(_), true) => ("counter", ""),
            (Metric::Counter(_), false) => ("counter", "_total"),
            (Metric::Gauge(_), _) => ("gauge", ""),
            (Metric::Info(_), true) => ("info", ""),
            (Metric::Info(_), false) => ("gauge", "_info"),
            (Metric::Histogram(_), _) => ("histogram", ""),
        };
        self.put("# HELP ");
        self.put(base);
        self.put(suffix);
        self.put(" ");
        if self.openmetrics {
            self.put(&f.help);
        } else {
            escape_into(&mut self.buf, &f.help, false);
        }
        self.put("\n# TYPE ");
        self.put(base);
        self.put(suffix);
        self.put(" ");
        self.put(kind);
        self.put("\n");
        if let (Some(unit), true) = (unit, self.openmetrics) {
            self.put("# UNIT ");
            self.put(base);
            self.put(" ");
            self.put(unit);
            self.put("\n");
        }
    }

    fn histograms(&mut self, base: &str, h: &Histograms) {
        // Each bound's `le`, once for the family; the last is +Inf, which
        // both formats need.
        let bounds = h.layout.bounds_seconds().chain([f64::INFINITY]);
        let les: Vec<String> = bounds
            .map(|bound| match bound {
                f64::INFINITY => "+Inf".to_string(),
                b if self.openmetrics => dtoa::Buffer::new().format(b).to_string(),
                b => go_float(b),
            })
            .collect();
        for series in &h.series {
            self.labels.clear();
            join_into(&mut self.labels, &series.labels);
            if self.openmetrics {
                self.openmetrics_series(base, series, h.layout, &les);
            } else {
                self.classic_series(base, series, &les);
            }
        }
    }

    fn openmetrics_series(&mut self, base: &str, s: &Series, layout: &Layout, les: &[String]) {
        let w = &s.waits;
        self.sum_and_count(base, w);
        let mut cumulative = 0;
        for (i, (le, n)) in les.iter().zip(&w.buckets).enumerate() {
            cumulative += n;
            self.put(base);
            self.put("_bucket{le=\"");
            self.put(le);
            self.put("\"");
            if !self.labels.is_empty() {
                self.put(",");
                self.buf.extend_from_slice(&self.labels);
            }
            self.put("} ");
            self.int(cumulative);
            // The latest of the bucket's exemplars, as a map of them
            // by bucket would keep.
            if let Some(e) = s
                .exemplars
                .iter()
                .rev()
                .find(|e| layout.bucket_of(e.wait_ns) == i)
            {
                self.exemplar(e);
            }
            self.put("\n");
        }
    }

    fn classic_series(&mut self, base: &str, s: &Series, les: &[String]) {
        let w = &s.waits;
        let mut cumulative = 0;
        for (le, n) in les.iter().zip(&w.buckets) {
            cumulative += n;
            self.put(base);
            self.put("_bucket{");
            if !self.labels.is_empty() {
                self.buf.extend_from_slice(&self.labels);
                self.put(",");
            }
            self.put("le=\"");
            self.put(le);
            self.put("\"} ");
            self.int(cumulative);
            self.put("\n");
        }
        self.sum_and_count(base, w);
    }

    /// A series' `_sum` (in seconds) and `_count` lines.
    fn sum_and_count(&mut self, base: &str, w: &Folded) {
        self.line_start(base, "_sum");
        self.float(w.sum_ns as f64 / 1e9);
        self.put("\n");
        self.line_start(base, "_count");
        self.int(w.count());
        self.put("\n");
    }

    /// `base` and `suffix`, the series' joined labels in braces, a space.
    fn line_start(&mut self, base: &str, suffix: &str) {
        self.put(base);
        self.put(suffix);
        if !self.labels.is_empty() {
            self.put("{");
            self.buf.extend_from_slice(&self.labels);
            self.put("}");
        }
        self.put(" ");
    }

    /// ` # {labels} value timestamp`: the wait in seconds, its end.
    fn exemplar(&mut self, e: &Exemplar) {
        self.put(" # {");
        join_into(&mut self.buf, &e.labels);
        self.put("} ");
        self.float(e.wait_ns as f64 / 1e9);
        self.put(" ");
        self.float(Duration::from_nanos(e.unix_ns).as_secs_f64());
    }

    fn braced(&mut self, labels: &Labels) {
        if !labels.is_empty() {
            self.put("{");
            join_into(&mut self.buf, labels);
            self.put("}");
        }
    }

    fn int(&mut self, v: impl itoa::Integer) {
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    fn float(&mut self, v: f64) {
        let mut b = dtoa::Buffer::new();
        let s = match (v.is_finite(), self.openmetrics) {
            (true, _) | (false, true) => b.format(v),
            (false, false) if v.is_nan() => "NaN",
            (false, false) if v > 0.0 => "+Inf",
            (false, false) => "-Inf",
        };
        self.buf.extend_from_slice(s.as_bytes());
    }
}

/// `name="value"` pairs, comma-separated, values escaped.
fn join_into(out: &mut Vec<u8>, labels: &Labels) {
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"=\"");
        escape_into(out, value, true);
        out.push(b'"');
    }
}

/// `s` with backslashes and newlines escaped, and (in a label value)
/// double quotes.
fn escape_into(out: &mut Vec<u8>, s: &str, quotes: bool) {
    let special = |b: u8| b == b'\\' || b == b'\n' || (quotes && b == b'"');
    if !s.bytes().any(special) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for b in s.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quotes => out.extend_from_slice(b"\\\""),
            b => out.push(b),
        }
    }
}

/// A bound as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes it, as
/// client_golang's `le` labels are: whole numbers below a million plain,
/// exponents outside [1e-4, 1e6) as `1e-05`.
fn go_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e6 {
        return (v as i64).to_string();
    }
    if (1e-4..1e6).contains(&v.abs()) {
        return v.to_string();
    }
    let sci = format!("{v:e}");
    match sci.split_once('e') {
        Some((mantissa, exponent)) => {
            let exponent: i32 = exponent.parse().unwrap_or(0);
            format!("{mantissa}e{exponent:+03}")
        }
        None => sci,
    }
}

#[cfg(test)]
mod tests;
