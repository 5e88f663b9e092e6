//! Reading the maps userspace drains: the per-CPU statistics and extremes
//! at each interval end, and the breakdown's per-key histograms.

use aya::maps::{Array, MapData, MapError, PerCpuArray, PerCpuValues};
use schedlat_common::{
    CpuStats, Extremes,
    causes::CauseStats,
    names,
    scope::{KeyStats, KeySummary},
};

use super::{
    batch::{self, Entries},
    tracer::Tracer,
    whole,
};
use crate::{
    collect::error::{InMap, ReadError},
    histogram::{CauseCounts, Waits},
};

impl Tracer {
    /// Ends the current interval: flips the kernel's extremes epoch, then
    /// returns the cumulative waits (with their cause split) and the per-CPU extremes of
    /// the interval that just ended (cleared for its next turn). A wait that
    /// ends within the few microseconds of the flip may have its extremes
    /// land in the neighbouring interval; its count is never lost.
    pub(crate) fn end_interval(&mut self) -> Result<(Waits, Vec<Extremes>), ReadError> {
        let epoch = {
            let name = names::MAP_EPOCH;
            let map = self.ebpf.map_mut(name).in_map(name)?;
            let mut epoch = Array::<&mut MapData, u32>::try_from(map).in_map(name)?;
            let current = epoch.get(&0, 0).in_map(name)?;
            epoch.set(0, current.wrapping_add(1), 0).in_map(name)?;
            current & 1
        };
        let stats = self.read_waits()?;
        let name = names::MAP_EXTREMES;
        let map = self.ebpf.map_mut(name).in_map(name)?;
        let mut extremes = PerCpuArray::<&mut MapData, Extremes>::try_from(map).in_map(name)?;
        let ended: Vec<Extremes> = extremes
            .get(&epoch, 0)
            .in_map(name)?
            .iter()
            .copied()
            .collect();
        let zeros = PerCpuValues::try_from(vec![Extremes::default(); ended.len()])
            .map_err(|io_error| {
                MapError::SyscallError(aya::sys::SyscallError {
                    call: "build per-CPU zeros",
                    io_error,
                })
            })
            .in_map(name)?;
        extremes.set(epoch, zeros, 0).in_map(name)?;
        Ok((stats, ended))
    }

    /// Every key's cumulative histogram (`--pids`, `--cgroups`...), all
    /// at once: the live tests' view; everything else reads them a chunk
    /// at a time through the keyed intervals.
    #[cfg(test)]
    pub(crate) fn read_keyed(&self) -> Result<Vec<(u64, KeyStats)>, ReadError> {
        let mut entries = Entries::default();
        let name = names::MAP_KEYED;
        let map = self.ebpf.map(name).in_map(name)?;
        batch::read(map, &mut entries).in_map(name)?;
        Ok(entries.iter().map(|(k, v)| (*k, *v)).collect())
    }

    /// Every key's cumulative histogram handed to `each`, `chunk` keys per
    /// syscall through `buf` (batch.rs): what a scrape of thousands of
    /// keys needs.
    pub(crate) fn for_each_keyed(
        &mut self,
        buf: &mut Entries<u64, KeyStats>,
        chunk: usize,
        each: impl FnMut(&u64, &KeyStats),
    ) -> Result<(), ReadError> {
        // The rows of keys deleted in the previous reading are freed here
        // too (the summary rows' reading does it for serve).
        if let Some(rows) = self.summary_rows.as_mut() {
            let name = names::MAP_KEY_FREE;
            rows.recycle().in_map(name)?;
        }
        let name = names::MAP_KEYED;
        let map = self.ebpf.map(name).in_map(name)?;
        batch::for_each(map, buf, chunk, each).in_map(name)
    }

    /// Every key's summary (its waits and their sum) handed to `each`,
    /// read in place from the mapped rows (summary_rows.rs): what a
    /// scrape reads of every key.
    pub(crate) fn for_each_key_summary(
        &mut self,
        each: impl FnMut(&KeySummary),
    ) -> Result<(), ReadError> {
        let name = names::MAP_KEY_SUMMARY;
        let rows = self.summary_rows.as_mut().in_map(name)?;
        rows.for_each(each).in_map(name)
    }

    /// One key's histogram; None when it has none.
    pub(crate) fn key_entry(&self, key: u64) -> Result<Option<KeyStats>, ReadError> {
        let name = names::MAP_KEYED;
        let map = self.ebpf.map(name).in_map(name)?;
        let keyed = aya::maps::HashMap::<&MapData, u64, KeyStats>::try_from(map).in_map(name)?;
        match keyed.get(&key, 0) {
            Ok(stats) => Ok(Some(stats)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(error) => Err(error).in_map(name),
        }
    }

    /// Deletes one key's histogram (its task or cgroup is gone), and
    /// frees its summary row (at the next reading: summary_rows.rs).
    pub(crate) fn forget_key(&mut self, key: u64) -> Result<(), ReadError> {
        let row = self.key_entry(key)?.map(|stats| stats.summary_slot);
        let name = names::MAP_KEYED;
        let map = self.ebpf.map_mut(name).in_map(name)?;
        let mut keyed =
            aya::maps::HashMap::<&mut MapData, u64, KeyStats>::try_from(map).in_map(name)?;
        keyed.remove(&key).in_map(name)?;
        if let (Some(row), Some(rows)) = (row, self.summary_rows.as_mut()) {
            rows.forget(row);
        }
        Ok(())
    }

    /// The cumulative waits summed over CPUs, with their cause and
    /// decision splits when they are on.
    pub(crate) fn read_waits(&self) -> Result<Waits, ReadError> {
        Ok(self.read_waits_and_cpus()?.0)
    }

    /// The same, and the per-CPU statistics they are the sum of (one
    /// read: the sum is of exactly these).
    pub(crate) fn read_waits_and_cpus(&self) -> Result<(Waits, Vec<CpuStats>), ReadError> {
        let cpus = self.read_stats()?;
        let mut waits = Waits::from_cpus(&cpus);
        waits.causes = self.read_causes()?;
        waits.decision = self.read_decision()?;
        Ok((waits, cpus))
    }

    /// The cumulative cause split, summed over CPUs; None when it is off.
    pub(crate) fn read_causes(&self) -> Result<Option<CauseCounts>, ReadError> {
        let Some(measurable) = self.measurable else {
            return Ok(None);
        };
        let name = names::MAP_CAUSES;
        let map = self.ebpf.map(name).in_map(name)?;
        let causes = PerCpuArray::<&MapData, CauseStats>::try_from(map).in_map(name)?;
        let values = causes.get(&0, 0).in_map(name)?;
        let cpus: Vec<CauseStats> = values.iter().copied().collect();
        Ok(Some(CauseCounts::from_cpus(measurable, &cpus)))
    }

    /// Per-CPU statistics, one element per possible CPU, each a whole
    /// copy (whole.rs: a copy taken while the CPU adds a wait is read again).
    pub(crate) fn read_stats(&self) -> Result<Vec<CpuStats>, ReadError> {
        let name = names::MAP_STATS;
        let map = self.ebpf.map(name).in_map(name)?;
        let stats = PerCpuArray::<&MapData, CpuStats>::try_from(map).in_map(name)?;
        whole::read(|| {
            let values = stats.get(&0, 0).in_map(name)?;
            Ok(values.iter().copied().collect())
        })
    }
}
