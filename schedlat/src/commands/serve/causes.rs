//! The cause split (docs/causes.md) as Prometheus counters: every wait of
//! the histogram counted once per split (`split` label: how it `began`,
//! its `placement`, who it was `held_by`, its `queue_depth`), with the
//! class as `cause`; a handful of label values each, never one per task.
//! The overlaps (steal, IRQ time, throttling) are seconds counters of
//! their own, with the measured waits they are a share of; a series is
//! absent, not 0, where the kernel lacks the accounting.
//!
//! Families, as for the histograms: the whole system (with the filter's
//! `scope` label) in `schedlat_runqueue_*`, and with `--cgroups` the same
//! per cgroup in `schedlat_cgroup_runqueue_*`, its series the keyed
//! histogram's (keyed.rs: the same intervals, `__overflow__` included), so
//! `sum()` over a family never counts a wait twice. Not with `--pids`: a
//! process per series is unbounded, and a dozen series per process would
//! multiply that.

use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter},
    registry::Unit,
};
use schedlat_common::causes::{Cause, OVERLAP_IRQ, OVERLAP_STEAL, OVERLAP_THROTTLED};

use crate::{analysis::causes::DEPTH_LABELS, collect::causes::CauseCounts};

pub type Labels = Vec<(&'static str, String)>;

/// The split's series of one family: a label set (the scope, or the
/// cgroup) and its counters.
#[derive(Debug, Default)]
pub struct CauseSeries {
    pub series: Vec<(Labels, CauseCounts)>,
}

/// Each split with its classes, as label values.
const SPLITS: [(&str, &[(&str, Cause)]); 4] = [
    (
        "began",
        &[
            ("woken", Cause::Woken),
            ("new", Cause::New),
            ("preempted", Cause::Preempted),
        ],
    ),
    (
        "placement",
        &[
            ("same_cpu", Cause::SameCpu),
            ("migrated", Cause::Migrated),
            ("unknown", Cause::PlacementUnknown),
        ],
    ),
    (
        "held_by",
        &[
            ("same_cgroup", Cause::HeldBySameCgroup),
            ("other_cgroup", Cause::HeldByOtherCgroup),
            ("kernel", Cause::HeldByKernel),
            ("higher_class", Cause::HeldByHigherClass),
            ("idle", Cause::HeldByIdle),
            ("unknown", Cause::HeldByUnknown),
        ],
    ),
    (
        "queue_depth",
        &[
            (DEPTH_LABELS[0], Cause::Depth0),
            (DEPTH_LABELS[1], Cause::Depth1),
            (DEPTH_LABELS[2], Cause::Depth2),
            (DEPTH_LABELS[3], Cause::Depth3To4),
            (DEPTH_LABELS[4], Cause::Depth5To8),
            (DEPTH_LABELS[5], Cause::Depth9Plus),
            (DEPTH_LABELS[6], Cause::DepthUnknown),
        ],
    ),
];

/// The migrated waits that crossed a last-level cache or a NUMA node: a
/// subset of `placement="migrated"`, so a split of its own (summing it
/// with the placement split would count those waits twice).
const CROSSED: [(&str, Cause); 2] = [("llc", Cause::CrossLlc), ("node", Cause::CrossNode)];

/// One family's names and help, whole system or per cgroup.
struct Names {
    prefix: &'static str,
    whose: &'static str,
}

const SYSTEM: Names = Names {
    prefix: "schedlat_runqueue",
    whose: "Waits of schedlat_runqueue_latency_seconds",
};
const CGROUP: Names = Names {
    prefix: "schedlat_cgroup_runqueue",
    whose: "Waits of schedlat_cgroup_runqueue_latency_seconds, by cgroup as that family (its series and __overflow__),",
};

pub fn encode_system(
    encoder: &mut DescriptorEncoder,
    series: &CauseSeries,
) -> Result<(), std::fmt::Error> {
    encode(encoder, &SYSTEM, series)
}

pub fn encode_cgroups(
    encoder: &mut DescriptorEncoder,
    series: &CauseSeries,
) -> Result<(), std::fmt::Error> {
    encode(encoder, &CGROUP, series)
}

fn encode(
    encoder: &mut DescriptorEncoder,
    names: &Names,
    family: &CauseSeries,
) -> Result<(), std::fmt::Error> {
    if family.series.is_empty() {
        return Ok(());
    }
    let prefix = names.prefix;
    let whose = names.whose;
    let splits = "split began (woken, new, preempted), placement (same_cpu, migrated, unknown: against the CPU the task last ran on), held_by (who held the CPU when the wait ended: same_cgroup, other_cgroup, kernel, higher_class, idle, unknown) or queue_depth (other tasks queued when it was queued: 0, 1, 2, 3-4, 5-8, 9+, unknown); each wait is in one cause of every split (docs/causes.md)";
    let crossed = family.series.iter().any(|(_, c)| c.measurable.topology);
    let split_note = if crossed {
        "; split crossed (llc, node): the migrated waits that crossed a last-level cache or a NUMA node, a subset of placement migrated"
    } else {
        ""
    };
    // Waits per class, then their time.
    for (name, unit, help, value) in [
        (
            format!("{prefix}_waits_by_cause"),
            None,
            format!("{whose} counted by cause: {splits}{split_note}"),
            (|c: &CauseCounts, i: usize| Value::Count(c.count[i]))
                as fn(&CauseCounts, usize) -> Value,
        ),
        (
            format!("{prefix}_wait_by_cause"),
            Some(Unit::Seconds),
            format!("Their time (the sum of the waits) by cause: {splits}{split_note}"),
            |c: &CauseCounts, i: usize| Value::Seconds(c.sum_ns[i]),
        ),
    ] {
        let mut metric =
            encoder.encode_descriptor(&name, &help, unit.as_ref(), MetricType::Counter)?;
        for (labels, counts) in &family.series {
            for (split, classes) in SPLITS {
                for &(cause, class) in classes {
                    let l = with(labels, split, cause);
                    value(counts, class as usize).encode(metric.encode_family(&l)?)?;
                }
            }
            if counts.measurable.topology {
                for (cause, class) in CROSSED {
                    let l = with(labels, "crossed", cause);
                    value(counts, class as usize).encode(metric.encode_family(&l)?)?;
                }
            }
        }
    }
    encode_overlaps(encoder, names, family)
}

/// What else took the CPU during same-CPU waits, and those waits.
fn encode_overlaps(
    encoder: &mut DescriptorEncoder,
    names: &Names,
    family: &CauseSeries,
) -> Result<(), std::fmt::Error> {
    let prefix = names.prefix;
    let (overlap, measured_time, measured_waits) = (
        format!("{prefix}_wait_overlap"),
        format!("{prefix}_wait_overlap_measured"),
        format!("{prefix}_wait_overlap_measured_waits"),
    );
    let measured = |c: &CauseCounts| [c.measurable.steal, c.measurable.irq, c.measurable.throttled];
    if family
        .series
        .iter()
        .all(|(_, c)| !measured(c).contains(&true))
    {
        // No overlap measurable on this kernel: the families are absent.
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(
        &overlap,
        "Time of the waits that began and ended on one CPU covered by steal (the hypervisor ran another vCPU; CONFIG_PARAVIRT_TIME_ACCOUNTING), irq (interrupt time; CONFIG_IRQ_TIME_ACCOUNTING) or throttled (the waiter's task group was throttled by its CPU quota; CONFIG_CFS_BANDWIDTH), each capped at its wait; a series is absent where the kernel lacks that accounting. Divide by the _wait_overlap_measured_seconds_total of the same labels for the share",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for (labels, counts) in &family.series {
        let on = measured(counts);
        for (i, overlap) in [
            (OVERLAP_STEAL, "steal"),
            (OVERLAP_IRQ, "irq"),
            (OVERLAP_THROTTLED, "throttled"),
        ] {
            if on[i] {
                let mut l = labels.clone();
                l.push(("overlap", overlap.into()));
                Value::Seconds(counts.overlap_ns[i]).encode(metric.encode_family(&l)?)?;
            }
        }
    }
    let mut metric = encoder.encode_descriptor(
        &measured_time,
        "Time of the waits whose overlap was measured: those that began and ended on one CPU",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for (labels, counts) in &family.series {
        Value::Seconds(counts.overlap_wait_ns).encode(metric.encode_family(labels)?)?;
    }
    let mut metric = encoder.encode_descriptor(
        &measured_waits,
        "Waits whose overlap was measured: those that began and ended on one CPU",
        None,
        MetricType::Counter,
    )?;
    for (labels, counts) in &family.series {
        Value::Count(counts.overlap_waits).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn with(labels: &Labels, split: &'static str, cause: &str) -> Labels {
    let mut l = labels.clone();
    l.push(("split", split.into()));
    l.push(("cause", cause.into()));
    l
}

/// A counter's value: waits, or nanoseconds exported as seconds.
enum Value {
    Count(u64),
    Seconds(u64),
}

impl Value {
    fn encode(
        self,
        metric: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        match self {
            Value::Count(n) => ConstCounter::new(n).encode(metric),
            Value::Seconds(ns) => ConstCounter::new(ns as f64 / 1e9).encode(metric),
        }
    }
}

#[cfg(test)]
mod tests;
