//! The neighbour-pair table (schedlat-ebpf/src/workload.rs): per pair of
//! cgroups, the time the first's tasks waited while a task of the second
//! held their CPU (each wait charged to every holder that ran during it,
//! by its time on the CPU inside the wait), and the waits each took part
//! in; and, in a second role, the time charged to the tasks that ran just
//! before a wait the fair class declined above the waiter's own queue
//! (the share of a group the waiter is in: `Pair::parent`). The kernel
//! counts leaf cgroups, cumulatively since
//! load; this module reads the table, turns two readings into an interval,
//! and removes the pairs of cgroups that are gone (after their last
//! interval), so the table holds the live pairs only. Rolling pairs up to
//! containers, pods or units is the analysis layer's.

use std::collections::HashMap;

use aya::maps::{MapData, PerCpuArray};
use schedlat_common::{
    names,
    workload::{
        HOLDER_IDLE, HOLDER_UNAPPORTIONED, HOLDER_WAITED, PairKey, PairStats, ShareKey,
        WorkloadCounters,
    },
};

use super::{
    batch::{self, Entries},
    tracer::Tracer,
};
use crate::collect::error::{InMap, ReadError};

/// Who held the CPU during a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Holder {
    /// Nobody: the CPU was idle (the wakeup's own latency onto it).
    Idle,
    /// A task of this cgroup (kernfs id; kernel threads are in the root).
    Cgroup(u64),
    /// The part of the waits the kernel could not charge: it began before
    /// the oldest run its CPU remembered, or on another CPU before a
    /// migration (never guessed).
    Unapportioned,
    /// In the second role's table only: not a holder but the waits
    /// themselves, those decided at the pair's group's level (their
    /// number and whole time), whoever ran before them.
    Waited,
}

/// One pair: the cgroup that waited, and the holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Pair {
    pub victim: u64,
    pub holder: Holder,
    /// None: the holder held the CPU during the waits. Some(group): the
    /// waits were declined above the victim's own queue, where that group
    /// of the victim's (a cgroup id of the cpu controller) lost, and the
    /// holder ran on the CPU just before them (it may have used the
    /// group's share: userspace keeps it only if it is inside the group).
    pub parent: Option<u64>,
}

impl Holder {
    /// The holder a key's id names.
    fn of_id(id: u64) -> Holder {
        match id {
            HOLDER_IDLE => Holder::Idle,
            HOLDER_UNAPPORTIONED => Holder::Unapportioned,
            HOLDER_WAITED => Holder::Waited,
            id => Holder::Cgroup(id),
        }
    }
}

impl From<PairKey> for Pair {
    fn from(k: PairKey) -> Pair {
        Pair {
            victim: k.victim,
            holder: Holder::of_id(k.holder),
            parent: None,
        }
    }
}

impl From<ShareKey> for Pair {
    fn from(k: ShareKey) -> Pair {
        Pair {
            victim: k.victim,
            holder: Holder::of_id(k.user),
            parent: Some(k.group),
        }
    }
}

impl Pair {
    fn holder_id(self) -> u64 {
        match self.holder {
            Holder::Idle => HOLDER_IDLE,
            Holder::Unapportioned => HOLDER_UNAPPORTIONED,
            Holder::Waited => HOLDER_WAITED,
            Holder::Cgroup(id) => id,
        }
    }

    fn key(self) -> PairKey {
        PairKey {
            victim: self.victim,
            holder: self.holder_id(),
        }
    }

    /// Its key in the second role's table (`parent` Some).
    fn share_key(self, group: u64) -> ShareKey {
        ShareKey {
            victim: self.victim,
            user: self.holder_id(),
            group,
        }
    }
}

/// A pair's charges: the waits the holder took part in, the time charged
/// to it (its time on the CPU inside them), and the longest of those
/// waits, whole (since load: the kernel keeps one maximum per pair, not
/// one per interval).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PairCounts {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

impl PairCounts {
    /// Adds another pair's counts (rolling pairs up): the longest wait is
    /// the longer of the two.
    pub(crate) fn add(&mut self, other: PairCounts) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

impl From<PairStats> for PairCounts {
    fn from(s: PairStats) -> PairCounts {
        PairCounts {
            count: s.count,
            sum_ns: s.sum_ns,
            max_ns: s.max_ns,
        }
    }
}

/// The kernel's table as read once: every pair, cumulative since load
/// (pairs removed because a cgroup went away are not in it any more).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PairsReading {
    pub pairs: Vec<(Pair, PairCounts)>,
    /// Waits of which a charge found no pair (the table was full:
    /// `--max-pairs`) and those charges' time, cumulative; their `max_ns`
    /// is 0 (not kept).
    pub overflow: PairCounts,
    /// Pairs the table holds at most.
    pub capacity: u32,
    /// Waits of which a second-role charge found no pair, cumulative.
    pub shares_overflow: u64,
}

impl Tracer {
    /// Reads the neighbour-pair table (cumulative since load).
    pub(crate) fn read_pairs(
        &self,
        out: &mut Entries<PairKey, PairStats>,
    ) -> Result<PairsReading, ReadError> {
        let name = names::MAP_PAIRS;
        let map = self.ebpf.map(name).in_map(name)?;
        batch::read(map, out).in_map(name)?;
        let counters = self.workload_counters()?;
        let capacity = match map {
            aya::maps::Map::HashMap(data) => data.info().map_or(0, |i| i.max_entries()),
            _ => 0,
        };
        Ok(PairsReading {
            pairs: out
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            overflow: PairCounts {
                count: counters.pairs_overflow,
                sum_ns: counters.pairs_overflow_ns,
                max_ns: 0,
            },
            capacity,
            shares_overflow: counters.shares_overflow,
        })
    }

    /// Reads the second role's table (cumulative since load).
    pub(crate) fn read_shares(
        &self,
        out: &mut Entries<ShareKey, PairStats>,
    ) -> Result<Vec<(Pair, PairCounts)>, ReadError> {
        let name = names::MAP_SHARES;
        batch::read(self.ebpf.map(name).in_map(name)?, out).in_map(name)?;
        Ok(out
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect())
    }

    /// Removes `pair` from the kernel's table of its role (a cgroup of it
    /// is gone).
    pub(crate) fn forget_pair(&mut self, pair: Pair) -> Result<(), ReadError> {
        match pair.parent {
            None => self.forget(names::MAP_PAIRS, pair.key()),
            Some(group) => self.forget(names::MAP_SHARES, pair.share_key(group)),
        }
    }

    fn forget<K: aya::Pod>(&mut self, name: &'static str, key: K) -> Result<(), ReadError> {
        let map = self.ebpf.map_mut(name).in_map(name)?;
        let mut pairs =
            aya::maps::HashMap::<&mut MapData, K, PairStats>::try_from(map).in_map(name)?;
        match pairs.remove(&key) {
            // Another reader removed it first: the same outcome.
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            other => other.in_map(name),
        }
    }

    /// The workload views' counters, summed over CPUs (cumulative).
    pub(crate) fn workload_counters(&self) -> Result<WorkloadCounters, ReadError> {
        let name = names::MAP_WORKLOAD_COUNTERS;
        let map = self.ebpf.map(name).in_map(name)?;
        let counters = PerCpuArray::<&MapData, WorkloadCounters>::try_from(map).in_map(name)?;
        let values = counters.get(&0, 0).in_map(name)?;
        Ok(values
            .iter()
            .fold(WorkloadCounters::default(), |mut sum, c| {
                sum.pairs_overflow += c.pairs_overflow;
                sum.pairs_overflow_ns += c.pairs_overflow_ns;
                sum.names_lost += c.names_lost;
                sum.shares_overflow += c.shares_overflow;
                sum
            }))
    }
}

/// One interval of the pair table: what each pair added since the
/// previous reading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PairsInterval {
    /// Pairs that held the CPU (`parent` None) with waits in the interval;
    /// `max_ns` is the pair's longest wait since load.
    pub pairs: Vec<(Pair, PairCounts)>,
    /// The pairs of the second role (`parent` Some), as charged: whether
    /// the holder is inside the parent group is not told yet. No maximum.
    pub shares: Vec<(Pair, PairCounts)>,
    /// Waits of the interval of which a second-role charge found no pair.
    pub shares_overflow: u64,
    /// Per (victim, group) (`Pair::holder` `Waited`), the waits of the
    /// victim decided at the group's level: their number and whole time.
    pub levels: Vec<(Pair, PairCounts)>,
    /// Waits of the interval no pair could take.
    pub overflow: PairCounts,
    pub capacity: u32,
}

/// Turns cumulative readings into intervals, and removes from the kernel
/// the pairs whose cgroups are gone once their last waits are counted.
#[derive(Default)]
pub(crate) struct PairIntervals {
    previous: HashMap<Pair, PairCounts>,
    previous_overflow: PairCounts,
    previous_shares_overflow: u64,
    entries: Entries<PairKey, PairStats>,
    share_entries: Entries<ShareKey, PairStats>,
}

/// Both roles' tables as read at an interval's end, before the interval
/// is made of them ([`PairIntervals::settle`]).
pub(crate) struct PairsRead {
    reading: PairsReading,
    charged: Vec<(Pair, PairCounts)>,
}

impl PairIntervals {
    /// The interval since the previous call (since load at the first):
    /// [`PairIntervals::read`], then [`PairIntervals::settle`] (tests).
    #[cfg(test)]
    pub(crate) fn next(
        &mut self,
        tracer: &mut Tracer,
        exists: impl FnMut(u64) -> bool,
    ) -> Result<PairsInterval, ReadError> {
        let read = self.read(tracer)?;
        self.settle(tracer, read, exists)
    }

    /// Reads both roles' tables, and nothing else: a caller that reads
    /// other maps of the same interval reads them right after, and only
    /// then settles (whether a cgroup is still there can take a walk of
    /// the hierarchy, and waits go on ending meanwhile).
    pub(crate) fn read(&mut self, tracer: &Tracer) -> Result<PairsRead, ReadError> {
        Ok(PairsRead {
            reading: tracer.read_pairs(&mut self.entries)?,
            charged: tracer.read_shares(&mut self.share_entries)?,
        })
    }

    /// The interval of `read` since the previous one. `exists` says
    /// whether a cgroup id is still there: a pair with a side gone is
    /// reported one last time, then removed from the kernel.
    pub(crate) fn settle(
        &mut self,
        tracer: &mut Tracer,
        read: PairsRead,
        mut exists: impl FnMut(u64) -> bool,
    ) -> Result<PairsInterval, ReadError> {
        let PairsRead { reading, charged } = read;
        let mut now = HashMap::with_capacity(reading.pairs.len() + charged.len());
        let (mut pairs, mut shares, mut levels) = (Vec::new(), Vec::new(), Vec::new());
        let mut gone = Vec::new();
        for (pair, counts) in reading.pairs.into_iter().chain(charged) {
            let before = self.previous.get(&pair).copied().unwrap_or_default();
            let delta = PairCounts {
                count: counts.count.saturating_sub(before.count),
                sum_ns: counts.sum_ns.saturating_sub(before.sum_ns),
                max_ns: counts.max_ns,
            };
            if delta.count > 0 {
                match (pair.parent, pair.holder) {
                    (None, _) => pairs.push((pair, delta)),
                    (Some(_), Holder::Waited) => levels.push((pair, delta)),
                    (Some(_), _) => shares.push((pair, delta)),
                }
            }
            let holder_gone = matches!(pair.holder, Holder::Cgroup(id) if !exists(id));
            let parent_gone = pair.parent.is_some_and(|id| !exists(id));
            if !exists(pair.victim) || holder_gone || parent_gone {
                gone.push(pair);
            } else {
                now.insert(pair, counts);
            }
        }
        for pair in gone {
            tracer.forget_pair(pair)?;
        }
        self.previous = now;
        let overflow = PairCounts {
            count: reading
                .overflow
                .count
                .saturating_sub(self.previous_overflow.count),
            sum_ns: reading
                .overflow
                .sum_ns
                .saturating_sub(self.previous_overflow.sum_ns),
            max_ns: 0,
        };
        self.previous_overflow = reading.overflow;
        let shares_overflow =
            (reading.shares_overflow).saturating_sub(self.previous_shares_overflow);
        self.previous_shares_overflow = reading.shares_overflow;
        for list in [&mut pairs, &mut shares, &mut levels] {
            list.sort_by(|a, b| b.1.sum_ns.cmp(&a.1.sum_ns).then(a.0.cmp(&b.0)));
        }
        Ok(PairsInterval {
            pairs,
            shares,
            shares_overflow,
            levels,
            overflow,
            capacity: reading.capacity,
        })
    }
}

/// The holder of the time a CPU was idle during waits.
pub(crate) const IDLE: &str = "(idle CPU)";

/// The holder of the time the kernel could not charge.
pub(crate) const UNAPPORTIONED: &str = "(unapportioned)";

#[cfg(test)]
mod tests {
    use super::*;

    /// Each role and holder survives the kernel's key and back.
    #[test]
    fn pairs_and_keys_round_trip_in_both_roles() {
        for holder in [Holder::Idle, Holder::Unapportioned, Holder::Cgroup(42)] {
            let pair = Pair {
                victim: 9,
                holder,
                parent: None,
            };
            assert_eq!(Pair::from(pair.key()), pair);
        }
        for holder in [Holder::Cgroup(42), Holder::Waited] {
            let shared = Pair {
                victim: 9,
                holder,
                parent: Some(7),
            };
            assert_eq!(Pair::from(shared.share_key(7)), shared);
        }
    }
}
