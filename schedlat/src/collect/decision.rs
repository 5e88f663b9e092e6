//! The decision split's reads from the kernel (docs/decision.md): the
//! per-CPU totals, summed, and the breakdown keys' splits.

use std::collections::HashMap;

use aya::maps::{MapData, MapError, PerCpuArray};
use schedlat_common::{
    decision::{DecisionStats, KeyDecision},
    names,
};

use super::{
    batch,
    error::{InMap, ReadError},
    tracer::Tracer,
};
use crate::histogram::DecisionCounts;

/// The breakdown keys' cumulative decision splits, read whole once a
/// reading (a few batch syscalls) and looked up by key; the buffers are
/// kept between readings.
#[derive(Default)]
pub(super) struct KeyDecisions {
    entries: batch::Entries<u64, KeyDecision>,
    by_key: HashMap<u64, KeyDecision>,
}

impl KeyDecisions {
    /// The kernel's entry of `key`, as last read (None: no wait of the key
    /// was split, or it was not read).
    pub(super) fn get(&self, key: u64) -> Option<&KeyDecision> {
        self.by_key.get(&key)
    }

    /// Entries given here (tests).
    #[cfg(test)]
    pub(super) fn of(entries: impl IntoIterator<Item = (u64, KeyDecision)>) -> Self {
        KeyDecisions {
            by_key: entries.into_iter().collect(),
            ..KeyDecisions::default()
        }
    }
}

impl Tracer {
    /// The cumulative decision split; None when it is off.
    pub(crate) fn read_decision(&self) -> Result<Option<DecisionCounts>, ReadError> {
        let Some(facts) = self.decision else {
            return Ok(None);
        };
        let name = names::MAP_DECISIONS;
        let map = self.ebpf.map(name).in_map(name)?;
        let stats = PerCpuArray::<&MapData, DecisionStats>::try_from(map)
            .and_then(|m| m.get(&0, 0))
            .in_map(name)?;
        let cpus: Vec<DecisionStats> = stats.iter().copied().collect();
        Ok(Some(DecisionCounts::from_cpus(facts, &cpus)))
    }

    /// Reads every key's decision split into `into`.
    pub(super) fn read_key_decisions(&self, into: &mut KeyDecisions) -> Result<(), ReadError> {
        let name = names::MAP_KEY_DECISIONS;
        let map = self.ebpf.map(name).in_map(name)?;
        batch::read(map, &mut into.entries).in_map(name)?;
        into.by_key.clear();
        into.by_key
            .extend(into.entries.iter().map(|(&k, &v)| (k, v)));
        Ok(())
    }

    /// One key's decision split; None when it has none.
    pub(crate) fn key_decision_entry(&self, key: u64) -> Result<Option<KeyDecision>, ReadError> {
        let name = names::MAP_KEY_DECISIONS;
        let map = self.ebpf.map(name).in_map(name)?;
        let split = aya::maps::HashMap::<&MapData, u64, KeyDecision>::try_from(map).in_map(name)?;
        match split.get(&key, 0) {
            Ok(d) => Ok(Some(d)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(error) => Err(error).in_map(name),
        }
    }

    /// Deletes one key's decision split (its task or cgroup is gone); a key
    /// that never had one is no error.
    pub(super) fn forget_key_decision(&mut self, key: u64) -> Result<(), ReadError> {
        let name = names::MAP_KEY_DECISIONS;
        let map = self.ebpf.map_mut(name).in_map(name)?;
        let mut split =
            aya::maps::HashMap::<&mut MapData, u64, KeyDecision>::try_from(map).in_map(name)?;
        match split.remove(&key) {
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            other => other.in_map(name),
        }
    }
}
