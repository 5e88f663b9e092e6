//! The metrics of one scrape, and their encoding.
//!
//! The kernel's counters are already aggregated and cumulative, so there is
//! nothing for a client-side `Histogram` to observe: a `Snapshot` is read at
//! scrape time and written family by family to a `Sink` (sink.rs): for the
//! text formats, prometheus-client as a custom `Collector`, which writes it
//! with the library's own encoders (OpenMetrics or the classic text
//! format), names, suffixes and escaping included; for protobuf, the
//! `MetricFamily` messages of protobuf.rs, native histograms included.
//!
//! Label plumbing: histograms come in families, each a list of labelled
//! series. The whole system is one unlabelled series of its own family.
//! Per-cgroup or per-process series (`--cgroups`, `--pids`) go in a family
//! of their own (`schedlat_cgroup_runqueue_latency_seconds{cgroup=...}`,
//! `schedlat_process_runqueue_latency_seconds{pid=...,comm=...}`), never
//! next to the whole-system series, so that `sum()` over a family never
//! counts a wait twice; the overflow series of `--max-series` is one more
//! labelled series of that family (keyed.rs). The total uses the fine
//! layout, the per-key family `--key-buckets` (buckets.rs).
//!
//! Under a filter (`-p`, `-t`, `--comm`, `-c`, `--cpu`) every histogram
//! series has a `scope` label saying which waits it counts, so that a
//! dashboard cannot take it for the whole system.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, prometheus_text, text},
    registry::Registry,
};
use schedlat_common::scope::Breakdown;

pub use super::own::{BpfCost, ScrapeCost};
use super::{
    buckets::{KeyBuckets, LAYOUT, Layout},
    causes::{self, CauseSeries},
    keyed::{Folded, KeyedScrape},
    native::{self, NativeMap},
    negotiate::Format,
    own::{counter, encode_bpf, encode_cost, gauge},
    protobuf::Families,
    sink::{Sink, Value},
};
use crate::{collect::histogram::Waits, kernel::hook::HookMode};

/// Everything one scrape exports.
#[derive(Debug)]
pub struct Snapshot {
    pub hook: HookMode,
    pub histograms: Vec<HistogramFamily>,
    /// Loss counters, whole system (see docs/json.md for their meaning).
    pub untracked_tid: u64,
    pub discarded_negative: u64,
    /// None when the programs' stats could not be read at all.
    pub bpf: Option<BpfCost>,
    /// With `--cgroups` or `--pids`: the breakdown's own counters.
    pub keyed: Option<KeyedCounters>,
    /// With `-p`/`-t`: whether the target still runs.
    pub target_alive: Option<bool>,
    /// The previous scrape's cost, once there was one.
    pub cost: Option<ScrapeCost>,
    /// The cause split: of the whole system (or the filter's scope), and
    /// per cgroup with `--cgroups` (causes.rs).
    pub causes: CauseSeries,
    pub cgroup_causes: CauseSeries,
}

/// The counters that go with the per-key family.
#[derive(Debug)]
pub struct KeyedCounters {
    /// Waits in the total but in no key (kernel key map full).
    pub unkeyed: u64,
    /// Keys whose new waits went to the overflow series in this scrape.
    pub overflow_keys: u64,
    /// Per-key series in this scrape, overflow included.
    pub series: usize,
}

/// A histogram metric: one name, any number of labelled series.
#[derive(Debug)]
pub struct HistogramFamily {
    /// Without the unit: the encoder appends `_seconds`.
    pub name: &'static str,
    pub help: String,
    pub layout: &'static Layout,
    /// How the layout's buckets go into a native histogram (protobuf).
    pub native: &'static NativeMap,
    pub series: Vec<Series>,
}

#[derive(Debug)]
pub struct Series {
    pub labels: Vec<(&'static str, String)>,
    /// In the family's layout.
    pub waits: Folded,
    /// The kernel's own buckets, where the series has them (the total):
    /// its native histogram is made from them, at a finer grain.
    pub kernel: Option<Vec<u64>>,
}

fn system_help() -> String {
    format!(
        "Time runnable tasks waited on a CPU run queue (woken or preempted, until switched in), all CPUs, since schedlat started; under a filter only the waits in label scope (with -p also label pid); buckets: four per power of two, a histogram_quantile is within 25% of the true percentile; as a native histogram (protobuf, schema 3, from the kernel's 8 buckets per power of two) within {}",
        native::KERNEL.stated()
    )
}

const CGROUP_HELP: &str = "schedlat_runqueue_latency_seconds by cgroup of the task that waited (path in the hierarchy of -c, else of the cpu controller); a series is exported when its cgroup is pinned (--pin) or among the --max-series that waited most since the previous scrape, and counts the waits of those intervals; the others' in cgroup=\"__overflow__\"";
const PROCESS_HELP: &str = "schedlat_runqueue_latency_seconds by process (pid, and comm when first seen) of the task that waited; a series is exported when its process is pinned (--pin) or among the --max-series that waited most since the previous scrape, and counts the waits of those intervals; the others' in pid=\"__overflow__\"";

impl Snapshot {
    /// The one view the kernel side has today: every wait (unlabelled), or
    /// with `-p` one process's (`labels` = pid).
    pub fn system(
        hook: HookMode,
        waits: Waits,
        labels: Vec<(&'static str, String)>,
        bpf: Option<BpfCost>,
    ) -> Snapshot {
        let causes = CauseSeries {
            series: waits
                .causes
                .clone()
                .map(|c| (labels.clone(), c))
                .into_iter()
                .collect(),
        };
        Snapshot {
            hook,
            causes,
            cgroup_causes: CauseSeries::default(),
            untracked_tid: waits.untracked_tid,
            discarded_negative: waits.discarded_negative,
            histograms: vec![HistogramFamily {
                name: "schedlat_runqueue_latency",
                help: system_help(),
                layout: &LAYOUT,
                native: &native::FINE_MAP,
                series: vec![Series {
                    labels,
                    waits: Folded::of(&LAYOUT, &waits),
                    kernel: Some(waits.buckets.clone()),
                }],
            }],
            bpf,
            keyed: None,
            target_alive: None,
            cost: None,
        }
    }

    /// Adds the per-cgroup or per-process family (`--cgroups`, `--pids`);
    /// `scope` is the filter's label, if any.
    pub fn with_keyed(
        mut self,
        by: Breakdown,
        layout: KeyBuckets,
        keyed: KeyedScrape,
        unkeyed: u64,
        scope: Option<&(&'static str, String)>,
    ) -> Snapshot {
        let (name, help) = match by {
            Breakdown::Process => ("schedlat_process_runqueue_latency", PROCESS_HELP),
            _ => ("schedlat_cgroup_runqueue_latency", CGROUP_HELP),
        };
        let series: Vec<Series> = keyed
            .series
            .into_iter()
            .map(|(mut labels, waits)| {
                labels.extend(scope.cloned());
                Series {
                    labels,
                    waits,
                    kernel: None,
                }
            })
            .collect();
        if by == Breakdown::Cgroup {
            self.cgroup_causes.series = series
                .iter()
                .filter_map(|s| Some((s.labels.clone(), s.waits.causes.clone()?)))
                .collect();
        }
        self.keyed = Some(KeyedCounters {
            unkeyed,
            overflow_keys: keyed.overflow_keys,
            series: series.len(),
        });
        self.histograms.push(HistogramFamily {
            name,
            help: format!("{help}; {}", layout.help()),
            layout: layout.layout(),
            native: layout.native(),
            series,
        });
        self
    }

    /// A text exposition as a String (tests).
    #[cfg(test)]
    pub fn encode_text(self, format: Format) -> String {
        String::from_utf8(self.encode(format)).expect("text formats are UTF-8")
    }

    /// The exposition in `format`.
    pub fn encode(self, format: Format) -> Vec<u8> {
        if format == Format::Protobuf {
            let mut families = Families::default();
            self.write(&mut families)
                .expect("collecting families cannot fail");
            return families.encode();
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::with_capacity(16 * 1024);
        match format {
            Format::OpenMetrics { .. } => text::encode(&mut out, &registry),
            _ => prometheus_text::encode(&mut out, &registry),
        }
        .expect("writing to a String cannot fail");
        out.into_bytes()
    }
}

/// The cause split's counter families (causes.rs describes them), to any
/// sink.
fn write_counters(sink: &mut impl Sink, families: &[causes::CounterFamily]) -> std::fmt::Result {
    for f in families {
        let labels: Vec<Vec<(&str, &str)>> = (f.samples.iter())
            .map(|(l, _)| l.iter().map(|(k, v)| (*k, v.as_str())).collect())
            .collect();
        let samples: Vec<(&[(&str, &str)], Value)> = (labels.iter().zip(&f.samples))
            .map(|(l, (_, v))| {
                let value = match *v {
                    causes::Value::Count(n) => Value::Count(n),
                    causes::Value::Seconds(_) => Value::Float(v.as_f64()),
                };
                (&l[..], value)
            })
            .collect();
        sink.counter(&f.name, &f.help, f.unit.clone(), &samples)?;
    }
    Ok(())
}

impl Snapshot {
    /// Every family, to `sink`.
    fn write(&self, sink: &mut impl Sink) -> std::fmt::Result {
        for family in &self.histograms {
            sink.histogram(family)?;
        }

        write_counters(sink, &causes::system_families(&self.causes))?;
        write_counters(sink, &causes::cgroup_families(&self.cgroup_causes))?;

        counter(
            sink,
            "schedlat_dropped_untracked_tid",
            "Enqueues not timestamped because the TID exceeded the start array (pid_max raised after schedlat started): those waits are missing from the histogram",
            self.untracked_tid,
        )?;
        counter(
            sink,
            "schedlat_discarded_negative_delta",
            "Waits discarded because their end preceded their start (clock skew between CPUs); not in the histogram",
            self.discarded_negative,
        )?;

        if let Some(keyed) = &self.keyed {
            counter(
                sink,
                "schedlat_unkeyed_waits",
                "Waits in schedlat_runqueue_latency_seconds but in no per-cgroup or per-process series: the kernel's key map was full (raise --max-keys)",
                keyed.unkeyed,
            )?;
            gauge(
                sink,
                "schedlat_overflow_keys",
                "Cgroups or processes that waited since the previous scrape but got no series of their own in this one (not pinned, not among the --max-series that waited most): their waits went to __overflow__",
                Value::Int(keyed.overflow_keys as i64),
            )?;
            gauge(
                sink,
                "schedlat_keyed_series",
                "Per-cgroup or per-process series in this scrape, __overflow__ included",
                Value::Int(keyed.series as i64),
            )?;
        }
        if let Some(alive) = self.target_alive {
            gauge(
                sink,
                "schedlat_target_alive",
                "1 while the process or thread of -p/-t runs, 0 once it exited (schedlat keeps serving what it measured)",
                Value::Int(i64::from(alive)),
            )?;
        }
        if let Some(cost) = &self.cost {
            encode_cost(sink, cost)?;
        }

        sink.info(
            "schedlat",
            "schedlat's version and how it hooks the scheduler (tp_btf or tracepoint)",
            &[
                ("hook", &self.hook.to_string()),
                ("version", env!("CARGO_PKG_VERSION")),
            ],
        )?;

        if let Some(bpf) = &self.bpf {
            encode_bpf(sink, bpf)?;
        }
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.write(&mut encoder)
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index};

    use super::*;
    use crate::collect::bpf_cost::ProgramCost;

    /// Two CPUs: 3 waits of 3 ms, one of 1.5 us, one of 100 s (beyond the
    /// last boundary), 2 discarded, 1 untracked.
    fn known() -> Snapshot {
        let mut a = CpuStats::ZERO;
        let mut b = CpuStats::ZERO;
        for ns in [3_000_000, 3_000_000, 1_500] {
            a.buckets[bucket_index(ns)] += 1;
            a.sum_ns += ns;
        }
        for ns in [3_000_000, 100_000_000_000] {
            b.buckets[bucket_index(ns)] += 1;
            b.sum_ns += ns;
        }
        b.discarded_negative = 2;
        a.untracked_tid = 1;
        let bpf = BpfCost {
            stats_enabled: Some(false),
            programs: vec![ProgramCost {
                name: "sched_switch".into(),
                run_time_ns: 1_500_000_000,
                runs: 42,
            }],
        };
        Snapshot::system(
            HookMode::Btf,
            Waits::from_cpus(&[a, b]),
            Vec::new(),
            Some(bpf),
        )
    }

    fn lines_of(text: &str, prefix: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(String::from)
            .collect()
    }

    #[test]
    fn text_format_histogram_is_cumulative_in_seconds() {
        let out = known().encode_text(Format::Text);
        let h = "schedlat_runqueue_latency_seconds";
        assert!(out.contains(&format!("# TYPE {h} histogram\n")), "{out}");
        assert!(out.contains(&format!("{h}_count 5\n")), "{out}");
        assert!(out.contains(&format!("{h}_sum 100.0090015\n")), "{out}");
        let buckets = lines_of(&out, &format!("{h}_bucket{{"));
        assert_eq!(buckets.len(), 106, "105 boundaries and +Inf");
        // Under 1.024 us: none; 1.5 us is in (1.28, 1.536] us. (Small
        // bounds print in exponent form, as Go's clients print them.)
        assert_eq!(buckets[0], format!("{h}_bucket{{le=\"1.024e-06\"}} 0"));
        assert_eq!(buckets[1], format!("{h}_bucket{{le=\"1.28e-06\"}} 0"));
        assert_eq!(buckets[2], format!("{h}_bucket{{le=\"1.536e-06\"}} 1"));
        // 3 ms is in (2.62, 3.15] ms.
        assert!(buckets.contains(&format!("{h}_bucket{{le=\"0.00262144\"}} 1")));
        assert!(buckets.contains(&format!("{h}_bucket{{le=\"0.003145728\"}} 4")));
        // 100 s is beyond 68.7 s: only in +Inf.
        assert_eq!(buckets[104], format!("{h}_bucket{{le=\"68.719476736\"}} 4"));
        assert_eq!(buckets[105], format!("{h}_bucket{{le=\"+Inf\"}} 5"));
        let counts: Vec<u64> = buckets
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "cumulative");
    }

    #[test]
    fn text_format_counters_info_and_bpf_cost() {
        let out = known().encode_text(Format::Text);
        let info = format!(
            "schedlat_info{{hook=\"tp_btf\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        for line in [
            "# TYPE schedlat_dropped_untracked_tid_total counter",
            "schedlat_dropped_untracked_tid_total 1",
            "schedlat_discarded_negative_delta_total 2",
            &info,
            "schedlat_bpf_stats_enabled 0",
            "schedlat_bpf_run_time_seconds_total{program=\"sched_switch\"} 1.5",
            "schedlat_bpf_runs_total{program=\"sched_switch\"} 42",
        ] {
            assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
        }
        // Stats off: the HELP says so.
        let help = lines_of(&out, "# HELP schedlat_bpf_runs_total");
        assert!(
            help[0].contains("kernel.bpf_stats_enabled is 0"),
            "{help:?}"
        );
        assert!(!out.contains("# EOF"));
    }

    #[test]
    fn openmetrics_has_units_totals_and_eof() {
        let out = known().encode_text(Format::OpenMetrics { version: "1.0.0" });
        let h = "schedlat_runqueue_latency_seconds";
        for line in [
            format!("# TYPE {h} histogram"),
            format!("# UNIT {h} seconds"),
            format!("{h}_count 5"),
            format!("{h}_bucket{{le=\"+Inf\"}} 5"),
            "# TYPE schedlat_dropped_untracked_tid counter".into(),
            "schedlat_dropped_untracked_tid_total 1".into(),
            "# TYPE schedlat info".into(),
        ] {
            assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
        }
        assert!(out.ends_with("# EOF\n"));
    }

    #[test]
    fn bpf_cost_is_left_out_when_unreadable() {
        let mut s = known();
        s.bpf = None;
        let out = s.encode_text(Format::Text);
        assert!(!out.contains("schedlat_bpf_"), "{out}");
        let mut s = known();
        s.bpf.as_mut().unwrap().stats_enabled = Some(true);
        let out = s.encode_text(Format::Text);
        assert!(out.contains("schedlat_bpf_stats_enabled 1\n"));
        assert!(!out.contains("may stand still"));
    }

    #[test]
    fn keyed_family_is_its_own_with_overflow_and_counters() {
        let mut one = CpuStats::ZERO;
        one.buckets[bucket_index(3_000_000)] = 2;
        one.sum_ns = 6_000_000;
        let waits = Folded::of(KeyBuckets::Log2.layout(), &Waits::from_cpus(&[one]));
        let keyed = KeyedScrape {
            series: vec![
                (
                    vec![("pid", "7".into()), ("comm", "a \"b\"".into())],
                    waits.clone(),
                ),
                (
                    super::super::keyed::overflow_labels(Breakdown::Process),
                    waits,
                ),
            ],
            overflow_keys: 3,
        };
        let scope = ("scope", "cpu=0".to_string());
        let out = known()
            .with_keyed(Breakdown::Process, KeyBuckets::Log2, keyed, 4, Some(&scope))
            .encode_text(Format::Text);
        let h = "schedlat_process_runqueue_latency_seconds";
        for line in [
            format!("# TYPE {h} histogram"),
            format!("{h}_count{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\"}} 2"),
            format!("{h}_count{{pid=\"__overflow__\",comm=\"__overflow__\",scope=\"cpu=0\"}} 2"),
            format!("{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"+Inf\"}} 2"),
            // One boundary per power of two: 3 ms is in (2.10, 4.19] ms.
            format!(
                "{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"0.002097152\"}} 0"
            ),
            format!(
                "{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"0.004194304\"}} 2"
            ),
            "schedlat_unkeyed_waits_total 4".into(),
            "schedlat_overflow_keys 3".into(),
            "schedlat_keyed_series 2".into(),
            // The whole-system family is unchanged.
            "schedlat_runqueue_latency_seconds_count 5".into(),
        ] {
            assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
        }
        // Without a breakdown, no keyed counters.
        let out = known().encode_text(Format::Text);
        assert!(
            !out.contains("unkeyed") && !out.contains("overflow"),
            "{out}"
        );
    }
}
