//! serve's own metrics, so that its cost shows in the dashboards it feeds:
//! its BPF programs' run time, and what serving the previous scrape took;
//! and the small encoding helpers for plain counters and gauges.

use prometheus_client::registry::Unit;

use super::sink::{LabelRefs, Sink, Value, one};
use crate::collect::bpf_cost::ProgramCost;

/// What serving one scrape cost: read, encode, and the body's size.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScrapeCost {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub body_bytes: usize,
    /// Scrapes served so far, this one included.
    pub scrapes: u64,
}

#[derive(Debug)]
pub struct BpfCost {
    /// `kernel.bpf_stats_enabled`, if readable.
    pub stats_enabled: Option<bool>,
    pub programs: Vec<ProgramCost>,
}

pub fn counter(sink: &mut impl Sink, name: &str, help: &str, value: u64) -> std::fmt::Result {
    sink.counter(name, help, None, &one(Value::Count(value)))
}

pub fn gauge(sink: &mut impl Sink, name: &str, help: &str, value: Value) -> std::fmt::Result {
    sink.gauge(name, help, &one(value))
}

/// serve's own cost, so that it shows in the dashboards it feeds.
pub fn encode_cost(sink: &mut impl Sink, cost: &ScrapeCost) -> std::fmt::Result {
    gauge(
        sink,
        "schedlat_last_scrape_duration_seconds",
        "Wall time schedlat took to serve the previous scrape (kernel reads and encoding)",
        Value::Float(cost.seconds),
    )?;
    gauge(
        sink,
        "schedlat_last_scrape_cpu_seconds",
        "CPU time (user and system) schedlat's thread spent serving the previous scrape",
        Value::Float(cost.cpu_seconds),
    )?;
    gauge(
        sink,
        "schedlat_last_scrape_body_bytes",
        "Size of the previous scrape's body, in bytes",
        Value::Int(cost.body_bytes as i64),
    )?;
    counter(
        sink,
        "schedlat_scrapes",
        "Scrapes served since schedlat started, this one included",
        cost.scrapes,
    )
}

pub fn encode_bpf(sink: &mut impl Sink, bpf: &BpfCost) -> std::fmt::Result {
    // The HELP says when the numbers cannot be trusted to move.
    let caveat = match bpf.stats_enabled {
        Some(true) => "",
        Some(false) => {
            " (kernel.bpf_stats_enabled is 0: the kernel only counts while BPF stats are enabled, so this may stand still; enable with sysctl kernel.bpf_stats_enabled=1)"
        }
        None => " (kernel.bpf_stats_enabled unreadable: counted only while BPF stats are enabled)",
    };
    if let Some(enabled) = bpf.stats_enabled {
        gauge(
            sink,
            "schedlat_bpf_stats_enabled",
            "Value of kernel.bpf_stats_enabled: 1 when the kernel counts BPF program run time",
            Value::Int(i64::from(enabled)),
        )?;
    }

    let labels: Vec<[(&str, &str); 1]> = (bpf.programs.iter())
        .map(|p| [("program", p.name.as_str())])
        .collect();
    let samples = |value: &dyn Fn(&ProgramCost) -> Value| -> Vec<(LabelRefs, Value)> {
        (labels.iter().zip(&bpf.programs))
            .map(|(l, p)| (&l[..], value(p)))
            .collect()
    };
    let help = format!(
        "CPU time spent in schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
    );
    sink.counter(
        "schedlat_bpf_run_time",
        &help,
        Some(Unit::Seconds),
        &samples(&|p| Value::Float(p.run_time_ns as f64 / 1e9)),
    )?;
    let help = format!(
        "Runs of schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
    );
    sink.counter(
        "schedlat_bpf_runs",
        &help,
        None,
        &samples(&|p| Value::Count(p.runs)),
    )
}
