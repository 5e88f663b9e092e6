//! Who held the CPU, by name (`serve --pairs`): the time one cgroup's
//! tasks waited while a task of another cgroup held their CPU (each wait
//! charged to every holder by its time on the CPU inside it), and the
//! waits it took part in, as two counters per pair, labelled with the victim's labels (those of the
//! per-cgroup family: `cgroup`, and its workload's where known) and the
//! holder's under the same names prefixed `holder_`. The series are the
//! top pairs of each scrape (export/neighbour_series.rs), the rest summed
//! into one pair labelled `__overflow__` on both sides; waits the kernel's
//! table had no room for are counted apart, and so is the time the kernel
//! could not charge (unapportioned). A cgroup's waits behind its own tasks
//! or behind an idle CPU are no neighbour's: they are in the cause split's
//! `held_by` (same_cgroup, idle), not here.

use crate::{
    collect::pairs::PairCounts,
    export::model::{Family, Labels, Metric, MetricUnit, Value, counter, single},
};

/// One scrape's neighbour pairs.
#[derive(Debug, Default)]
pub(crate) struct NeighbourScrape {
    /// The pairs in this scrape, then the overflow pair (once it holds a
    /// wait); counts are cumulative over the scrapes the pair had a series.
    pub series: Vec<(Labels, PairCounts)>,
    /// Pairs that waited since the previous scrape without a series of
    /// their own in this one.
    pub overflow_pairs: u64,
    /// Waits in no pair since load: the kernel's table was full.
    pub unpaired: PairCounts,
    /// The wait time no holder was charged with since load (every
    /// cgroup's): it reached back past the runs its CPU remembered, or
    /// it was queued on another CPU before a migration.
    pub unapportioned: PairCounts,
    /// The second role's series (labels as the pairs', and `group`):
    /// counts cumulative over the scrapes each had a series.
    pub shares: Vec<(Labels, PairCounts)>,
    /// Where waits were decided: per waiting cgroup (its labels) and
    /// `group`, its waits decided at that group's level, cumulative as the
    /// shares'.
    pub levels: Vec<(Labels, PairCounts)>,
}

const HOW: &str = "a series is exported when the pair is among the --max-pair-series that waited most since the previous scrape, and counts the waits of those intervals; the others' in cgroup=\"__overflow__\",holder_cgroup=\"__overflow__\"; waits behind the cgroup's own tasks or an idle CPU are not a neighbour's and are not here (schedlat_cgroup_runqueue_wait_by_cause_seconds_total{split=\"held_by\"} has them)";

const SHARE_HOW: &str = "EEVDF kernels with the decision split on; a series is exported as the pairs' are (--max-pair-series of them per scrape, the rest in cgroup=\"__overflow__\"); docs/containers.md, \"The share of a group\"";

pub(super) fn families(scrape: &NeighbourScrape) -> Vec<Family> {
    vec![
        counter(
            "schedlat_neighbour_share_waits".into(),
            format!(
                "Waits of the tasks of cgroup whose wakeup the fair class declined (not eligible, a later deadline, the holder's protected slice) or passed over at a queue above their own, where the entity of group (a cgroup they are in) lost, and before which a task of holder_cgroup (inside group, not cgroup itself) ran on their CPU: it had used group's share; {SHARE_HOW}"
            ),
            None,
            values(&scrape.shares, count),
        ),
        counter(
            "schedlat_neighbour_share".into(),
            format!(
                "The time holder_cgroup's tasks ran on the CPU just before those waits (in a window as long as each wait): its use of group's share; the waits' holders are in schedlat_neighbour_wait_seconds_total; {SHARE_HOW}"
            ),
            Some(MetricUnit::Seconds),
            values(&scrape.shares, seconds),
        ),
        counter(
            "schedlat_neighbour_level_waits".into(),
            format!(
                "Waits of the tasks of cgroup decided above their own queue: their wakeup was declined (not eligible, a later deadline, the holder's protected slice) or passed over at the queue where the entity of group (a cgroup they are in) lost; counted whoever ran before them; a cgroup with no series here lost, if at all, at its own queue; {SHARE_HOW}"
            ),
            None,
            values(&scrape.levels, count),
        ),
        counter(
            "schedlat_neighbour_level_wait".into(),
            format!(
                "The whole time of those waits (schedlat_neighbour_level_waits_total); divide by the cgroup's schedlat_cgroup_runqueue_latency_seconds_sum for the part of its waiting decided at group's level; {SHARE_HOW}"
            ),
            Some(MetricUnit::Seconds),
            values(&scrape.levels, seconds),
        ),
        counter(
            "schedlat_neighbour_waits".into(),
            format!(
                "Waits of the tasks of cgroup (labels as schedlat_cgroup_runqueue_latency_seconds) during which a task of holder_cgroup (its labels prefixed holder_) held their CPU; {HOW}"
            ),
            None,
            values(&scrape.series, count),
        ),
        counter(
            "schedlat_neighbour_wait".into(),
            format!(
                "The time charged to holder_cgroup: its tasks' time on the CPU inside those waits (each wait is charged to every holder that ran during it, by that time); divide by the victim's schedlat_cgroup_runqueue_wait_by_cause_seconds_total{{split=\"held_by\"}} for the neighbour's share of its wait time; {HOW}"
            ),
            Some(MetricUnit::Seconds),
            values(&scrape.series, seconds),
        ),
        single(
            "schedlat_unpaired_waits",
            "Waits in no neighbour pair because the kernel's pair table was full (raise --max-pairs)",
            Metric::Counter,
            Value::Count(scrape.unpaired.count),
        ),
        single(
            "schedlat_unapportioned_wait_seconds",
            "Wait time (every cgroup's) charged to no holder: the wait began before the oldest of the last 32 runs its CPU remembers, or on another CPU before a migration",
            Metric::Counter,
            Value::seconds_of_ns(scrape.unapportioned.sum_ns),
        ),
        single(
            "schedlat_overflow_pairs",
            "Neighbour pairs that waited since the previous scrape but got no series of their own in this one (beyond --max-pair-series): their waits went to the __overflow__ pair",
            Metric::Gauge,
            Value::Int(scrape.overflow_pairs as i64),
        ),
    ]
}

/// One value of each series: `count` or `seconds` of its counts.
fn values(
    series: &[(Labels, PairCounts)],
    value: fn(&PairCounts) -> Value,
) -> Vec<(Labels, Value)> {
    (series.iter())
        .map(|(labels, counts)| (labels.clone(), value(counts)))
        .collect()
}

fn count(c: &PairCounts) -> Value {
    Value::Count(c.count)
}

fn seconds(c: &PairCounts) -> Value {
    Value::seconds_of_ns(c.sum_ns)
}
