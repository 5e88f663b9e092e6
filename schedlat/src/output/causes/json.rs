//! The `causes` object of a JSON interval or breakdown key (docs/json.md):
//! the report's split under the names the schema gives it.

use serde::{Deserialize, Serialize};

use crate::analysis::causes::{Causes, Counted, Summary};

/// One class with percentiles (null for a breakdown key, or without waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SummaryOut {
    pub count: u64,
    pub sum_ns: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CountedOut {
    pub count: u64,
    pub sum_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PlacementOut {
    pub same_cpu: SummaryOut,
    pub migrated: SummaryOut,
    pub cross_llc: Option<CountedOut>,
    pub cross_node: Option<CountedOut>,
    pub unknown: CountedOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OverlapOut {
    pub steal: Option<u64>,
    pub irq: Option<u64>,
    pub throttled: Option<u64>,
    pub measured_waits: u64,
    pub measured_wait_ns: u64,
}

/// Waits per depth class, named by
/// [`DEPTH_LABELS`](crate::analysis::causes::DEPTH_LABELS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueDepthOut {
    #[serde(rename = "0")]
    pub d0: u64,
    #[serde(rename = "1")]
    pub d1: u64,
    #[serde(rename = "2")]
    pub d2: u64,
    #[serde(rename = "3-4")]
    pub d3_4: u64,
    #[serde(rename = "5-8")]
    pub d5_8: u64,
    #[serde(rename = "9+")]
    pub d9_plus: u64,
    pub unknown: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldByOut {
    pub same_cgroup: CountedOut,
    pub other_cgroup: CountedOut,
    pub kernel: CountedOut,
    pub higher_class: CountedOut,
    pub idle: CountedOut,
    pub unknown: CountedOut,
}

/// The `causes` object (docs/json.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CausesOut {
    pub woken: SummaryOut,
    pub new: SummaryOut,
    pub preempted: SummaryOut,
    pub placement: PlacementOut,
    pub overlap_ns: OverlapOut,
    pub queue_depth: QueueDepthOut,
    pub held_by: HeldByOut,
    pub waking: Option<SummaryOut>,
}

impl From<Summary> for SummaryOut {
    fn from(s: Summary) -> Self {
        SummaryOut {
            count: s.count,
            sum_ns: s.sum_ns,
            p50_ns: s.p50_ns,
            p99_ns: s.p99_ns,
        }
    }
}

impl From<Counted> for CountedOut {
    fn from(c: Counted) -> Self {
        CountedOut {
            count: c.count,
            sum_ns: c.sum_ns,
        }
    }
}

/// The JSON object of a split.
pub(crate) fn json(c: &Causes) -> CausesOut {
    let p = &c.placement;
    let h = &c.held_by;
    let d = c.queue_depth.map(|c| c.count);
    CausesOut {
        woken: c.woken.into(),
        new: c.new.into(),
        preempted: c.preempted.into(),
        placement: PlacementOut {
            same_cpu: p.same_cpu.into(),
            migrated: p.migrated.into(),
            cross_llc: p.cross_llc.map(Into::into),
            cross_node: p.cross_node.map(Into::into),
            unknown: p.unknown.into(),
        },
        overlap_ns: OverlapOut {
            steal: c.overlap.steal_ns,
            irq: c.overlap.irq_ns,
            throttled: c.overlap.throttled_ns,
            measured_waits: c.overlap.measured.count,
            measured_wait_ns: c.overlap.measured.sum_ns,
        },
        queue_depth: QueueDepthOut {
            d0: d[0],
            d1: d[1],
            d2: d[2],
            d3_4: d[3],
            d5_8: d[4],
            d9_plus: d[5],
            unknown: d[6],
        },
        held_by: HeldByOut {
            same_cgroup: h.same_cgroup.into(),
            other_cgroup: h.other_cgroup.into(),
            kernel: h.kernel.into(),
            higher_class: h.higher_class.into(),
            idle: h.idle.into(),
            unknown: h.unknown.into(),
        },
        waking: c.waking.map(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use schedlat_common::causes::{BEGAN, Cause, DEPTH, HELD_BY, PLACEMENT};

    use super::json;
    use crate::analysis::causes::Causes;

    /// The keys of a JSON object.
    fn keys(v: &serde_json::Value) -> BTreeSet<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    }

    fn names(classes: &[Cause]) -> BTreeSet<String> {
        classes.iter().map(|c| c.name().to_string()).collect()
    }

    /// The schema's keys are the classes' names (`Cause::name`), as the
    /// exposition's label values are: one name per class everywhere.
    #[test]
    fn every_key_is_its_class_name() {
        let v = serde_json::to_value(json(&Causes::default())).unwrap();
        for class in BEGAN {
            assert!(v.get(class.name()).is_some(), "{} in {v}", class.name());
        }
        let mut placement = names(&PLACEMENT);
        placement
            .extend([Cause::CrossLlc, Cause::CrossNode].map(|c| format!("cross_{}", c.name())));
        assert_eq!(keys(&v["placement"]), placement);
        assert_eq!(keys(&v["held_by"]), names(&HELD_BY));
        assert_eq!(keys(&v["queue_depth"]), names(&DEPTH));
    }
}
