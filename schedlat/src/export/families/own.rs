//! schedlat's own metrics, so that its cost shows in the dashboards it
//! feeds: its BPF programs' run time, and what serving the previous scrape
//! took; its version and hook mode, and whether a -p/-t target still runs.

use crate::{
    collect::bpf_cost::ProgramCost,
    export::model::{Family, Labels, Metric, MetricUnit, Sample, Value, single},
    kernel::hook::HookMode,
};

/// What serving one scrape cost: read, encode, and the body's size.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScrapeCost {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub body_bytes: usize,
    /// Scrapes served so far, this one included.
    pub scrapes: u64,
}

#[derive(Debug)]
pub(crate) struct BpfCost {
    /// `kernel.bpf_stats_enabled`, if readable.
    pub stats_enabled: Option<bool>,
    pub programs: Vec<ProgramCost>,
}

fn gauge(name: &str, help: &str, value: Value) -> Family {
    single(name, help, Metric::Gauge, value)
}

/// serve's own cost, so that it shows in the dashboards it feeds.
pub(super) fn scrape_cost(cost: &ScrapeCost) -> [Family; 4] {
    [
        gauge(
            "schedlat_last_scrape_duration_seconds",
            "Wall time schedlat took to serve the previous scrape (kernel reads and encoding)",
            Value::Float(cost.seconds),
        ),
        gauge(
            "schedlat_last_scrape_cpu_seconds",
            "CPU time (user and system) schedlat's thread spent serving the previous scrape",
            Value::Float(cost.cpu_seconds),
        ),
        gauge(
            "schedlat_last_scrape_body_bytes",
            "Size of the previous scrape's body, in bytes",
            Value::Int(cost.body_bytes as i64),
        ),
        single(
            "schedlat_scrapes",
            "Scrapes served since schedlat started, this one included",
            Metric::Counter,
            Value::Count(cost.scrapes),
        ),
    ]
}

/// The programs' run time and runs, and whether the kernel counts them.
pub(super) fn bpf_cost(bpf: &BpfCost) -> Vec<Family> {
    // The HELP says when the numbers cannot be trusted to move.
    let caveat = match bpf.stats_enabled {
        Some(true) => "",
        Some(false) => {
            " (kernel.bpf_stats_enabled is 0: the kernel only counts while BPF stats are enabled, so this may stand still; enable with sysctl kernel.bpf_stats_enabled=1)"
        }
        None => " (kernel.bpf_stats_enabled unreadable: counted only while BPF stats are enabled)",
    };
    let mut out = Vec::new();
    if let Some(enabled) = bpf.stats_enabled {
        out.push(gauge(
            "schedlat_bpf_stats_enabled",
            "Value of kernel.bpf_stats_enabled: 1 when the kernel counts BPF program run time",
            Value::Int(i64::from(enabled)),
        ));
    }
    let samples = |value: &dyn Fn(&ProgramCost) -> Value| -> Vec<Sample> {
        (bpf.programs.iter())
            .map(|p| Sample {
                labels: vec![("program", p.name.clone())],
                value: value(p),
            })
            .collect()
    };
    out.push(Family {
        name: "schedlat_bpf_run_time".into(),
        help: format!(
            "CPU time spent in schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
        ),
        unit: Some(MetricUnit::Seconds),
        metric: Metric::Counter(samples(&|p| Value::Float(p.run_time_ns as f64 / 1e9))),
    });
    out.push(Family {
        name: "schedlat_bpf_runs".into(),
        help: format!(
            "Runs of schedlat's own BPF programs, by the tracepoint each is attached to{caveat}"
        ),
        unit: None,
        metric: Metric::Counter(samples(&|p| Value::Count(p.runs))),
    });
    out
}

/// With -p/-t: whether the target still runs.
pub(super) fn target_alive(alive: bool) -> Family {
    gauge(
        "schedlat_target_alive",
        "1 while the process or thread of -p/-t runs, 0 once it exited (schedlat keeps serving what it measured)",
        Value::Int(i64::from(alive)),
    )
}

/// `schedlat_info`: the version and the hook mode.
pub(super) fn info(hook: HookMode) -> Family {
    let labels: Labels = vec![
        ("hook", hook.to_string()),
        ("version", env!("CARGO_PKG_VERSION").to_string()),
    ];
    Family {
        name: "schedlat".into(),
        help: "schedlat's version and how it hooks the scheduler (tp_btf or tracepoint)".into(),
        unit: None,
        metric: Metric::Info(labels),
    }
}
