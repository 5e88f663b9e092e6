//! The waits per CPU, as two counters labelled `cpu`: how many waits ended
//! on each CPU and their time. The kernel already keeps its statistics per
//! CPU (the sched_switch program runs on the CPU the waiting task is
//! switched in on), so this costs no kernel work: the scrape's one read of
//! the per-CPU statistics is summed for the histogram and kept per CPU
//! here. Counters, not one histogram per CPU: a 128-CPU host would export
//! 13,000 bucket series. `instance_cpu:` rules compare them with
//! node_exporter's `node_schedstat_waiting_seconds_total{cpu}` (the
//! kernel's own per-CPU sum, which also counts waits schedlat does not
//! time, e.g. before it started).

use schedlat_common::CpuStats;

use crate::export::model::{Family, Labels, MetricUnit, Value, counter};

/// One CPU's waits since load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuWaits {
    pub count: u64,
    pub sum_ns: u64,
}

/// Each possible CPU's waits, in CPU order, from the per-CPU statistics.
pub(crate) fn per_cpu(stats: &[CpuStats]) -> Vec<CpuWaits> {
    (stats.iter())
        .map(|s| CpuWaits {
            count: s.buckets.iter().sum(),
            sum_ns: s.sum_ns,
        })
        .collect()
}

/// The two families, labelled `cpu` and the total's labels (the filter's
/// `scope`, whose waits they count, and `pid` with -p); none when no CPU
/// was read.
pub(crate) fn families(cpus: &[CpuWaits], total: &Labels) -> Vec<Family> {
    if cpus.is_empty() {
        return Vec::new();
    }
    let each = |value: fn(&CpuWaits) -> Value| {
        (cpus.iter().enumerate())
            .map(|(cpu, w)| {
                let mut labels: Labels = vec![("cpu", cpu.to_string())];
                labels.extend(total.iter().cloned());
                (labels, value(w))
            })
            .collect()
    };
    vec![
        counter(
            "schedlat_cpu_runqueue_waits".into(),
            "Waits of schedlat_runqueue_latency_seconds by the CPU they ended on (the one the task was switched in on)".into(),
            None,
            each(|w| Value::Count(w.count)),
        ),
        counter(
            "schedlat_cpu_runqueue_wait".into(),
            "Their time (the sum of the waits), by the CPU they ended on; compare with node_exporter's node_schedstat_waiting_seconds_total{cpu}, which also counts what schedlat does not time".into(),
            Some(MetricUnit::Seconds),
            each(|w| Value::seconds_of_ns(w.sum_ns)),
        ),
    ]
}
