//! The decision split as the kernel counted it (docs/decision.md), summed
//! over CPUs, with what the kernel reported of its need-resched bits.

use aya::maps::{MapData, PerCpuArray};
use schedlat_common::{
    NR_BUCKETS,
    bucket::bucket_bounds,
    decision::{
        Decision, DecisionStats, NR_DECISIONS, NR_OUTCOMES, NR_PASS_CLASSES, NR_REQUESTS, Outcome,
        REQUEST, ReschedSet, TABLE_STRIDE,
    },
    names,
};

use super::{error::ReadError, tracer::Tracer};
use crate::kernel::decision::DecisionFacts;

/// Cumulative since load, summed over CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionCounts {
    pub facts: DecisionFacts,
    pub count: [u64; NR_DECISIONS],
    pub sum_ns: [u64; NR_DECISIONS],
    /// Fine histograms of the outcomes.
    pub outcome_buckets: Vec<[u64; NR_BUCKETS]>,
    /// Request class x pass-over class (`Decision::Passed0`..).
    pub table_count: [[u64; NR_PASS_CLASSES]; NR_REQUESTS],
    pub table_sum_ns: [[u64; NR_PASS_CLASSES]; NR_REQUESTS],
    pub passes: u64,
    pub predicted_waits: u64,
    pub predicted_ns: u64,
    pub predicted_actual_ns: u64,
    pub beyond_prediction: u64,
    /// The TIF bits the kernel reported setting (sched_set_need_resched_tp),
    /// as masks: any set, and sets on idle tasks (the full bit).
    pub tif_seen: TifSeen,
}

/// TIF bit masks the kernel reported (0 without the tracepoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TifSeen {
    pub any: u64,
    pub on_idle: u64,
}

impl DecisionCounts {
    pub fn from_cpus(facts: DecisionFacts, cpus: &[DecisionStats], sets: &[ReschedSet]) -> Self {
        let mut d = DecisionCounts {
            facts,
            count: [0; NR_DECISIONS],
            sum_ns: [0; NR_DECISIONS],
            outcome_buckets: vec![[0; NR_BUCKETS]; NR_OUTCOMES],
            table_count: [[0; NR_PASS_CLASSES]; NR_REQUESTS],
            table_sum_ns: [[0; NR_PASS_CLASSES]; NR_REQUESTS],
            passes: 0,
            predicted_waits: 0,
            predicted_ns: 0,
            predicted_actual_ns: 0,
            beyond_prediction: 0,
            tif_seen: TifSeen::default(),
        };
        for cpu in cpus {
            for i in 0..NR_DECISIONS {
                d.count[i] += cpu.count[i];
                d.sum_ns[i] += cpu.sum_ns[i];
            }
            for (mine, theirs) in d.outcome_buckets.iter_mut().zip(&cpu.outcome_buckets) {
                for (m, t) in mine.iter_mut().zip(theirs) {
                    *m += t;
                }
            }
            for r in 0..NR_REQUESTS {
                for p in 0..NR_PASS_CLASSES {
                    d.table_count[r][p] += cpu.table_count[r * TABLE_STRIDE + p];
                    d.table_sum_ns[r][p] += cpu.table_sum_ns[r * TABLE_STRIDE + p];
                }
            }
            d.passes += cpu.passes;
            d.predicted_waits += cpu.predicted_waits;
            d.predicted_ns += cpu.predicted_ns;
            d.predicted_actual_ns += cpu.predicted_actual_ns;
            d.beyond_prediction += cpu.beyond_prediction;
        }
        for set in sets {
            d.tif_seen.any |= set.tif_any;
            d.tif_seen.on_idle |= set.tif_on_idle;
        }
        d
    }

    pub fn count_of(&self, class: Decision) -> u64 {
        self.count[class as usize]
    }

    /// Waits counted (every wait is in one request class).
    pub fn waits(&self) -> u64 {
        REQUEST.iter().map(|&c| self.count_of(c)).sum()
    }

    /// Waits of outcome `outcome` at or above `min_ns` (and below
    /// `max_ns`), from its fine histogram (bucket lower bounds).
    pub fn outcome_between(&self, outcome: Outcome, min_ns: u64, max_ns: u64) -> u64 {
        between(&self.outcome_buckets[outcome as usize], min_ns, max_ns)
    }

    /// All outcomes' waits between `min_ns` and `max_ns`.
    pub fn all_between(&self, min_ns: u64, max_ns: u64) -> u64 {
        self.outcome_buckets
            .iter()
            .map(|h| between(h, min_ns, max_ns))
            .sum()
    }

    /// The counts since `before` (an earlier reading of the same load).
    pub fn since(&self, before: &DecisionCounts) -> DecisionCounts {
        let mut d = self.clone();
        for i in 0..NR_DECISIONS {
            d.count[i] -= before.count[i];
            d.sum_ns[i] -= before.sum_ns[i];
        }
        for (m, t) in d.outcome_buckets.iter_mut().zip(&before.outcome_buckets) {
            for (a, b) in m.iter_mut().zip(t) {
                *a -= b;
            }
        }
        for r in 0..NR_REQUESTS {
            for p in 0..NR_PASS_CLASSES {
                d.table_count[r][p] -= before.table_count[r][p];
                d.table_sum_ns[r][p] -= before.table_sum_ns[r][p];
            }
        }
        d.passes -= before.passes;
        d.predicted_waits -= before.predicted_waits;
        d.predicted_ns -= before.predicted_ns;
        d.predicted_actual_ns -= before.predicted_actual_ns;
        d.beyond_prediction -= before.beyond_prediction;
        d
    }
}

fn between(buckets: &[u64], min_ns: u64, max_ns: u64) -> u64 {
    buckets
        .iter()
        .enumerate()
        .filter(|&(i, _)| {
            let low = bucket_bounds(i).0;
            low >= min_ns && low < max_ns
        })
        .map(|(_, n)| n)
        .sum()
}

impl Tracer {
    /// The cumulative decision split; None when it is off.
    pub fn read_decision(&self) -> Result<Option<DecisionCounts>, ReadError> {
        let Some(facts) = self.decision else {
            return Ok(None);
        };
        let read = |name: &'static str| -> Result<&aya::maps::Map, ReadError> {
            self.ebpf.map(name).ok_or(ReadError::MissingMap(name))
        };
        let name = names::MAP_DECISIONS;
        let stats = PerCpuArray::<&MapData, DecisionStats>::try_from(read(name)?)
            .and_then(|m| m.get(&0, 0))
            .map_err(|error| ReadError::Map { name, error })?;
        let name = names::MAP_RESCHED_SETS;
        let sets = PerCpuArray::<&MapData, ReschedSet>::try_from(read(name)?)
            .and_then(|m| m.get(&0, 0))
            .map_err(|error| ReadError::Map { name, error })?;
        let cpus: Vec<DecisionStats> = stats.iter().copied().collect();
        let sets: Vec<ReschedSet> = sets.iter().copied().collect();
        Ok(Some(DecisionCounts::from_cpus(facts, &cpus, &sets)))
    }
}
