//! serve's own metrics, so that its cost shows in the dashboards it feeds:
//! its BPF programs' run time, and what serving the previous scrape took;
//! and the small encoding helpers for plain counters and gauges.

use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

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

pub fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(metric)
}

pub fn gauge<N: EncodeGaugeValue + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// serve's own cost, so that it shows in the dashboards it feeds.
pub fn encode_cost(
    encoder: &mut DescriptorEncoder,
    cost: &ScrapeCost,
) -> Result<(), std::fmt::Error> {
    gauge(
        encoder,
        "schedlat_last_scrape_duration_seconds",
        "Wall time schedlat took to serve the previous scrape (kernel reads and encoding)",
        cost.seconds,
    )?;
    gauge(
        encoder,
        "schedlat_last_scrape_cpu_seconds",
        "CPU time (user and system) schedlat's thread spent serving the previous scrape",
        cost.cpu_seconds,
    )?;
    gauge(
        encoder,
        "schedlat_last_scrape_body_bytes",
        "Size of the previous scrape's body, in bytes",
        cost.body_bytes as i64,
    )?;
    counter(
        encoder,
        "schedlat_scrapes",
        "Scrapes served since schedlat started, this one included",
        cost.scrapes,
    )
}

pub fn encode_bpf(encoder: &mut DescriptorEncoder, bpf: &BpfCost) -> Result<(), std::fmt::Error> {
    // The HELP says when the numbers cannot be trusted to move.
    let caveat = match bpf.stats_enabled {
        Some(true) => "",
        Some(false) => {
            " (kernel.bpf_stats_enabled is 0: the kernel only counts while BPF stats are enabled, so this may stand still; enable with sysctl kernel.bpf_stats_enabled=1)"
        }
        None => " (kernel.bpf_stats_enabled unreadable: counted only while BPF stats are enabled)",
    };
    if let Some(enabled) = bpf.stats_enabled {
        let metric = encoder.encode_descriptor(
            "schedlat_bpf_stats_enabled",
            "Value of kernel.bpf_stats_enabled: 1 when the kernel counts BPF program run time",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from(enabled)).encode(metric)?;
    }

    let help = format!(
        "CPU time spent in schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
    );
    let mut metric = encoder.encode_descriptor(
        "schedlat_bpf_run_time",
        &help,
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for p in &bpf.programs {
        let labels = [("program", p.name.as_str())];
        ConstCounter::new(p.run_time_ns as f64 / 1e9).encode(metric.encode_family(&labels)?)?;
    }

    let help = format!(
        "Runs of schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
    );
    let mut metric =
        encoder.encode_descriptor("schedlat_bpf_runs", &help, None, MetricType::Counter)?;
    for p in &bpf.programs {
        let labels = [("program", p.name.as_str())];
        ConstCounter::new(p.runs).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}
