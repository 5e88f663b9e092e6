//! The decision split's read from the kernel (docs/decision.md): the
//! per-CPU totals, summed.

use aya::maps::{MapData, PerCpuArray};
use schedlat_common::{decision::DecisionStats, names};

use super::{error::ReadError, tracer::Tracer};
use crate::histogram::DecisionCounts;

impl Tracer {
    /// The cumulative decision split; None when it is off.
    pub(crate) fn read_decision(&self) -> Result<Option<DecisionCounts>, ReadError> {
        let Some(facts) = self.decision else {
            return Ok(None);
        };
        let name = names::MAP_DECISIONS;
        let map = self.ebpf.map(name).ok_or(ReadError::MissingMap(name))?;
        let stats = PerCpuArray::<&MapData, DecisionStats>::try_from(map)
            .and_then(|m| m.get(&0, 0))
            .map_err(|error| ReadError::Map { name, error })?;
        let cpus: Vec<DecisionStats> = stats.iter().copied().collect();
        Ok(Some(DecisionCounts::from_cpus(facts, &cpus)))
    }
}
