//! The family list: every family one scrape exports, in order, each from
//! the file of its concern. A new family is a function in its own file (or
//! in the file of its concern) and one line in [`Scrape::families`].
//!
//! Label plumbing: histograms come in families, each a list of labelled
//! series. The whole system is one unlabelled series of its own family.
//! Per-cgroup or per-process series (`--cgroups`, `--pids`) go in a family
//! of their own (`schedlat_cgroup_runqueue_latency_seconds{cgroup=...}`,
//! `schedlat_process_runqueue_latency_seconds{pid=...,comm=...}`), never
//! next to the whole-system series, so that `sum()` over a family never
//! counts a wait twice; the overflow series of `--max-series` is one more
//! labelled series of that family (labels.rs). The total uses the fine
//! layout, the per-key family `--key-buckets` (key_buckets.rs).
//!
//! Under a filter (`-p`, `-t`, `--comm`, `-c`, `--cpu`) every histogram
//! series has a `scope` label saying which waits it counts, so that a
//! dashboard cannot take it for the whole system.

mod accounting;
mod causes;
pub(crate) mod cpu;
pub(crate) mod decision;
mod latency;
mod neighbours;
mod otlp_push;
mod own;

use schedlat_common::scope::Breakdown;

pub(crate) use self::{
    accounting::KeyedCounters,
    neighbours::NeighbourScrape,
    own::{BpfCost, ScrapeCost},
};
use self::{causes::CauseSeries, cpu::CpuWaits};
use super::{
    cgroup_splits::CgroupSplits,
    encode::{self, Format},
    key_buckets::KeyBuckets,
    model::{Exemplar, Family, Folded, Labels, Metric},
    otlp::delivery::DeliveryCounts,
};
use crate::{histogram::Waits, kernel::hook::HookMode};

/// Everything one scrape exports.
#[derive(Debug)]
pub(crate) struct Scrape {
    pub hook: HookMode,
    pub histograms: Vec<Family>,
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
    /// The decision split of the whole system (or the filter's scope),
    /// and per cgroup with `--cgroups`: decision.rs.
    pub decision: decision::DecisionSeries,
    pub cgroup_decision: decision::DecisionSeries,
    /// How much of either split the per-cgroup series carry
    /// (`--cgroup-splits`).
    pub cgroup_splits: CgroupSplits,
    /// Each CPU's waits (cpu.rs), labelled as the total is besides `cpu`;
    /// none where the scrape did not read them per CPU.
    pub cpus: Vec<CpuWaits>,
    total_labels: Labels,
    /// With `--pairs`: who held the CPU, by name (neighbours.rs).
    pub neighbours: Option<NeighbourScrape>,
    /// The keys of the per-key family's series, in order (with_keyed).
    keys: Vec<u64>,
    /// With `--otlp-endpoint`: what became of the pushes (otlp_push.rs).
    pub otlp: Option<DeliveryCounts>,
}

/// One scrape's per-key series (`--cgroups`, `--pids`).
#[derive(Debug)]
pub(crate) struct KeyedScrape {
    /// The series in this scrape, ordered by key, then the overflow series
    /// (only once it holds a wait).
    pub series: Vec<(Labels, Folded)>,
    /// The key of each series but the overflow one, in the same order.
    pub keys: Vec<u64>,
    /// Keys that waited since the previous scrape but got no series.
    pub overflow_keys: u64,
}

impl Scrape {
    /// The one view the kernel side has today: every wait (unlabelled), or
    /// with `-p` one process's (`labels` = pid).
    pub(crate) fn system(
        hook: HookMode,
        waits: Waits,
        labels: Labels,
        bpf: Option<BpfCost>,
    ) -> Scrape {
        let causes = CauseSeries {
            series: waits
                .causes
                .clone()
                .map(|c| (labels.clone(), c))
                .into_iter()
                .collect(),
        };
        let decision = decision::DecisionSeries {
            series: (waits.decision.as_ref())
                .map(|d| (labels.clone(), d.marginals()))
                .into_iter()
                .collect(),
            facts: waits.decision.as_ref().map(|d| d.facts),
        };
        Scrape {
            hook,
            causes,
            cgroup_causes: CauseSeries::default(),
            decision,
            cgroup_decision: decision::DecisionSeries::default(),
            cgroup_splits: CgroupSplits::default(),
            untracked_tid: waits.untracked_tid,
            discarded_negative: waits.discarded_negative,
            histograms: vec![latency::system(&waits, labels.clone())],
            cpus: Vec::new(),
            total_labels: labels,
            neighbours: None,
            keys: Vec::new(),
            bpf,
            keyed: None,
            target_alive: None,
            cost: None,
            otlp: None,
        }
    }

    /// Adds the per-cgroup or per-process family (`--cgroups`, `--pids`);
    /// `scope` is the filter's label, if any; `splits`, how much of the
    /// cause and decision splits each cgroup's series carries.
    pub(crate) fn with_keyed(
        mut self,
        by: Breakdown,
        (layout, splits): (KeyBuckets, CgroupSplits),
        keyed: KeyedScrape,
        unkeyed: u64,
        scope: Option<&(&'static str, String)>,
    ) -> Scrape {
        let series: Vec<(Labels, Folded)> = keyed
            .series
            .into_iter()
            .map(|(mut labels, waits)| {
                labels.extend(scope.cloned());
                (labels, waits)
            })
            .collect();
        if by == Breakdown::Cgroup {
            self.cgroup_causes.series = series
                .iter()
                .filter_map(|(labels, waits)| Some((labels.clone(), waits.causes.clone()?)))
                .collect();
            self.cgroup_decision.series = series
                .iter()
                .filter_map(|(labels, waits)| Some((labels.clone(), waits.decision.clone()?)))
                .collect();
            self.cgroup_decision.facts = self.decision.facts;
            self.cgroup_splits = splits;
        }
        self.keys = keyed.keys;
        self.keyed = Some(KeyedCounters {
            unkeyed,
            overflow_keys: keyed.overflow_keys,
            series: series.len(),
        });
        self.histograms.push(latency::keyed(by, layout, series));
        self
    }

    /// Puts the exemplars on their series: the total's, and `keyed`'s of
    /// each per-key series' key (after [`Scrape::with_keyed`]).
    pub(crate) fn with_exemplars(
        mut self,
        total: Vec<Exemplar>,
        keyed: impl Fn(u64) -> Vec<Exemplar>,
    ) -> Scrape {
        let mut histograms = self.histograms.iter_mut().map(|f| match &mut f.metric {
            Metric::Histogram(h) => Some(&mut h.series),
            _ => None,
        });
        if let Some(Some(series)) = histograms.next()
            && let Some(series) = series.first_mut()
        {
            series.exemplars = total;
        }
        if let Some(Some(series)) = histograms.next() {
            for (series, &key) in series.iter_mut().zip(&self.keys) {
                series.exemplars = keyed(key);
            }
        }
        self
    }

    /// A text exposition as a String (tests).
    #[cfg(test)]
    pub(crate) fn encode_text(self, format: Format) -> String {
        String::from_utf8(self.encode(format)).expect("text formats are UTF-8")
    }

    /// The exposition in `format`.
    pub(crate) fn encode(self, format: Format) -> Vec<u8> {
        encode::encode(self.families(), format)
    }

    /// Every family, in the order they are exposed.
    pub(crate) fn families(self) -> Vec<Family> {
        let mut out = self.histograms;
        out.extend(causes::system_families(&self.causes));
        out.extend(causes::cgroup_families(
            &self.cgroup_causes,
            self.cgroup_splits,
        ));
        out.extend(decision::system_families(&self.decision));
        out.extend(decision::cgroup_families(
            &self.cgroup_decision,
            self.cgroup_splits,
        ));
        out.extend(cpu::families(&self.cpus, &self.total_labels));
        if let Some(neighbours) = &self.neighbours {
            out.extend(neighbours::families(neighbours));
        }
        out.extend(accounting::losses(
            self.untracked_tid,
            self.discarded_negative,
        ));
        if let Some(keyed) = &self.keyed {
            out.extend(accounting::keyed(keyed));
        }
        out.extend(self.target_alive.map(own::target_alive));
        if let Some(cost) = &self.cost {
            out.extend(own::scrape_cost(cost));
        }
        if let Some(otlp) = &self.otlp {
            out.extend(otlp_push::families(otlp));
        }
        out.push(own::info(self.hook));
        if let Some(bpf) = &self.bpf {
            out.extend(own::bpf_cost(bpf));
        }
        out
    }
}

#[cfg(test)]
mod tests;
