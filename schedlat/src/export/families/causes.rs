//! The cause split (docs/causes.md) as Prometheus counters: every wait of
//! the histogram counted once per split (`split` label: how it `began`,
//! its `placement`, who it was `held_by`, its `queue_depth`), with the
//! class as `cause`; a handful of label values each, never one per task.
//! The overlaps (steal, IRQ time, throttling) are seconds counters of
//! their own, with the measured waits they are a share of; a series is
//! absent, not 0, where the kernel lacks the accounting.
//!
//! Families, as for the histograms: the whole system (with the filter's
//! `scope` label) in `schedlat_runqueue_*`, and with `--cgroups` per
//! cgroup in `schedlat_cgroup_runqueue_*` (the held_by seconds and the
//! overlaps' seconds; every split with `--cgroup-splits full`:
//! export/cgroup_splits.rs), its series the keyed
//! histogram's (the same intervals, `__overflow__` included), so `sum()`
//! over a family never counts a wait twice. Not with `--pids`: a process
//! per series is unbounded, and a few dozen series per process would
//! multiply that.

use schedlat_common::causes::{Cause, DEPTH, OVERLAP_IRQ, OVERLAP_STEAL, OVERLAP_THROTTLED};

use crate::{
    export::{
        cgroup_splits::CgroupSplits,
        model::{Family, Labels, MetricUnit, Value, counter},
    },
    histogram::CauseCounts,
};

/// The split's series of one family: a label set (the scope, or the
/// cgroup) and its counters.
#[derive(Debug, Default)]
pub(crate) struct CauseSeries {
    pub series: Vec<(Labels, CauseCounts)>,
}

/// Each split with its classes, in the exposition's order (each class's
/// label value is its name, `Cause::name`).
const SPLITS: [(&str, &[Cause]); 4] = [
    ("began", &[Cause::Woken, Cause::New, Cause::Preempted]),
    (
        "placement",
        &[Cause::SameCpu, Cause::Migrated, Cause::PlacementUnknown],
    ),
    (
        "held_by",
        &[
            Cause::HeldBySameCgroup,
            Cause::HeldByOtherCgroup,
            Cause::HeldByKernel,
            Cause::HeldByHigherClass,
            Cause::HeldByIdle,
            Cause::HeldByUnknown,
        ],
    ),
    ("queue_depth", &DEPTH),
];

/// The migrated waits that crossed a last-level cache or a NUMA node: a
/// subset of `placement="migrated"`, so a split of its own (summing it
/// with the placement split would count those waits twice).
const CROSSED: [Cause; 2] = [Cause::CrossLlc, Cause::CrossNode];

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

/// A counter's value: waits, or nanoseconds exported as seconds.
fn count(n: u64) -> Value {
    Value::Count(n)
}

fn seconds(ns: u64) -> Value {
    Value::seconds_of_ns(ns)
}

/// The whole system's families (none without the split).
pub(super) fn system_families(series: &CauseSeries) -> Vec<Family> {
    families(&SYSTEM, series, CgroupSplits::Full)
}

/// The per-cgroup families (none without `--cgroups`): the seconds of
/// the splits `splits` keeps, and with `full` the counts.
pub(super) fn cgroup_families(series: &CauseSeries, splits: CgroupSplits) -> Vec<Family> {
    families(&CGROUP, series, splits)
}

fn families(names: &Names, family: &CauseSeries, extent: CgroupSplits) -> Vec<Family> {
    if family.series.is_empty() {
        return Vec::new();
    }
    let prefix = names.prefix;
    let whose = names.whose;
    let splits = "split began (woken, new, preempted), placement (same_cpu, migrated, unknown: against the CPU the task last ran on), held_by (who held the CPU when the wait ended: same_cgroup, other_cgroup, kernel, higher_class, idle, unknown) or queue_depth (other tasks queued when it was queued: 0, 1, 2, 3-4, 5-8, 9+, unknown); each wait is in one cause of every split (docs/causes.md)";
    let crossed = family.series.iter().any(|(_, c)| c.measurable.topology);
    let crossed = crossed && extent.cause_split("crossed");
    let split_note = if crossed {
        "; split crossed (llc, node): the migrated waits that crossed a last-level cache or a NUMA node, a subset of placement migrated"
    } else {
        ""
    };
    let split_note = format!("{split_note}{}", extent.help());
    // Waits per class, then their time.
    let by_class = |value: fn(&CauseCounts, usize) -> Value| {
        let mut samples = Vec::new();
        for (labels, counts) in &family.series {
            for (split, classes) in SPLITS {
                if !extent.cause_split(split) {
                    continue;
                }
                for &class in classes {
                    let sample = (
                        with(labels, split, class.name()),
                        value(counts, class as usize),
                    );
                    samples.push(sample);
                }
            }
            if counts.measurable.topology && extent.cause_split("crossed") {
                for class in CROSSED {
                    let sample = (
                        with(labels, "crossed", class.name()),
                        value(counts, class as usize),
                    );
                    samples.push(sample);
                }
            }
        }
        samples
    };
    let mut out = Vec::new();
    if extent.counts() {
        out.push(counter(
            format!("{prefix}_waits_by_cause"),
            format!("{whose} counted by cause: {splits}{split_note}"),
            None,
            by_class(|c, i| count(c.count[i])),
        ));
    }
    out.push(counter(
        format!("{prefix}_wait_by_cause"),
        format!("{whose} summed as time (the sum of the waits) by cause: {splits}{split_note}"),
        Some(MetricUnit::Seconds),
        by_class(|c, i| seconds(c.sum_ns[i])),
    ));
    out.extend(overlaps(prefix, family, extent));
    out
}

/// What else took the CPU during same-CPU waits, and those waits; none
/// when no overlap is measurable on this kernel (absent, not 0).
fn overlaps(prefix: &str, family: &CauseSeries, extent: CgroupSplits) -> Vec<Family> {
    let measured = |c: &CauseCounts| [c.measurable.steal, c.measurable.irq, c.measurable.throttled];
    if family
        .series
        .iter()
        .all(|(_, c)| !measured(c).contains(&true))
    {
        return Vec::new();
    }
    let mut covered = Vec::new();
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
                covered.push((l, seconds(counts.overlap_ns[i])));
            }
        }
    }
    let each = |value: fn(&CauseCounts) -> Value| {
        (family.series.iter())
            .map(|(labels, counts)| (labels.clone(), value(counts)))
            .collect()
    };
    let mut out = vec![
        counter(
            format!("{prefix}_wait_overlap"),
            "Time of the waits that began and ended on one CPU covered by steal (the hypervisor ran another vCPU; CONFIG_PARAVIRT_TIME_ACCOUNTING), irq (interrupt time; CONFIG_IRQ_TIME_ACCOUNTING) or throttled (the waiter's task group was throttled by its CPU quota; CONFIG_CFS_BANDWIDTH), each capped at its wait; a series is absent where the kernel lacks that accounting. Divide by the _wait_overlap_measured_seconds_total of the same labels for the share".into(),
            Some(MetricUnit::Seconds),
            covered,
        ),
        counter(
            format!("{prefix}_wait_overlap_measured"),
            "Time of the waits whose overlap was measured: those that began and ended on one CPU".into(),
            Some(MetricUnit::Seconds),
            each(|c| seconds(c.overlap_wait_ns)),
        ),
    ];
    if extent.counts() {
        out.push(counter(
            format!("{prefix}_wait_overlap_measured_waits"),
            "Waits whose overlap was measured: those that began and ended on one CPU".into(),
            None,
            each(|c| count(c.overlap_waits)),
        ));
    }
    out
}

fn with(labels: &Labels, split: &'static str, cause: &str) -> Labels {
    let mut l = labels.clone();
    l.push(("split", split.into()));
    l.push(("cause", cause.into()));
    l
}

#[cfg(test)]
mod tests;
