//! The cause split's load-time side (docs/causes.md): which parts this
//! kernel lets the programs measure, the maps they need sized, the CPUs'
//! topology written before the programs attach.

use std::path::Path;

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, MapData},
};
use schedlat_common::{
    causes::{CpuTopology, SLOTS_PER_CPU},
    kconfig::{CauseOffsets, Compute, RqOffsets},
    names,
    start::MAX_CPUS,
};

use crate::{
    histogram::CauseFacts,
    kernel::hook::HookMode,
    sys::topology::{self, SYSFS},
};

/// The split as this load sets it up.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    on: bool,
    cpus: u32,
    offsets: Option<CauseOffsets>,
    /// The run-queue chain (task->se.cfs_rq->rq) is in this kernel.
    chain: bool,
    topology: Option<Vec<CpuTopology>>,
    /// `--waking`: sched_waking is attached (set by the loader).
    pub(crate) waking: bool,
    /// The decision split keeps its state in the snapshot slots (set by
    /// the loader).
    pub(crate) decision: bool,
}

impl Setup {
    /// `on` when the modes ask for the split; `offsets` and `rq` as BTF
    /// resolved them (None without tp_btf).
    pub(crate) fn new(
        on: bool,
        offsets: Option<CauseOffsets>,
        rq: Option<RqOffsets>,
        cpus: u32,
    ) -> Setup {
        // CPUs the start word cannot name would read as migrations.
        let topology = (on && cpus < MAX_CPUS)
            .then(|| topology::read(Path::new(SYSFS), cpus as usize))
            .flatten();
        Setup {
            on,
            cpus,
            offsets: offsets.filter(|_| on),
            chain: rq.is_some_and(|rq| rq.resolved != 0),
            topology,
            waking: false,
            decision: false,
        }
    }

    /// The overlaps need the chain, rq->cpu and one piece of accounting.
    fn overlaps(&self) -> bool {
        self.chain
            && self.offsets.is_some_and(|o| {
                o.has_rq_cpu != 0 && (o.has_steal | o.has_irq | o.has_throttled) != 0
            })
    }

    /// The decision split's state has its snapshot slots: the split is
    /// on and rq->cpu finds a queue's slots (the chain is the decision's
    /// own requirement).
    pub(crate) fn decision_slots(&self) -> bool {
        self.on && self.decision && self.offsets.is_some_and(|o| o.has_rq_cpu != 0)
    }

    /// The offsets global, as the programs read it.
    pub(crate) fn offsets(&self) -> CauseOffsets {
        self.offsets.unwrap_or(CauseOffsets::ZERO)
    }

    /// Sizes the split's maps and sets its switches in `compute`.
    pub(crate) fn configure(&self, loader: &mut EbpfLoader<'_>, compute: &mut Compute) {
        compute.causes = u64::from(self.on);
        compute.overlaps = u64::from(self.on && self.overlaps());
        compute.topology = u64::from(self.topology.is_some());
        compute.waking = u64::from(self.on && self.waking);
        let slots = if compute.overlaps != 0 || self.decision_slots() {
            self.cpus.saturating_mul(SLOTS_PER_CPU)
        } else {
            1
        };
        loader.map_max_entries(names::MAP_CAUSE_SLOTS, slots);
        let cpus = self.topology.as_ref().map_or(1, |_| self.cpus.max(1));
        loader.map_max_entries(names::MAP_TOPOLOGY, cpus);
    }

    /// Writes the topology into its map (before the programs attach).
    pub(crate) fn fill(&mut self, ebpf: &mut Ebpf) -> Option<String> {
        let cpus = self.topology.as_ref()?;
        let written = ebpf
            .map_mut(names::MAP_TOPOLOGY)
            .ok_or_else(|| "no map".to_string())
            .and_then(|map| {
                let mut array =
                    Array::<&mut MapData, CpuTopology>::try_from(map).map_err(|e| e.to_string())?;
                for (cpu, topology) in cpus.iter().enumerate() {
                    array
                        .set(cpu as u32, *topology, 0)
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            });
        match written {
            Ok(()) => None,
            Err(e) => {
                self.topology = None;
                Some(format!(
                    "cause split: cannot write the CPU topology ({e}): no cache or node crossings"
                ))
            }
        }
    }

    /// What the programs measure, attached in `mode`; None when the split
    /// is off.
    pub(crate) fn measurable(&self, mode: HookMode) -> Option<CauseFacts> {
        if !self.on {
            return None;
        }
        let btf = mode == HookMode::Btf;
        let overlaps = btf && self.overlaps();
        let has =
            |f: fn(&CauseOffsets) -> u64| overlaps && self.offsets.is_some_and(|o| f(&o) != 0);
        Some(CauseFacts {
            steal: has(|o| o.has_steal),
            irq: has(|o| o.has_irq),
            throttled: has(|o| o.has_throttled),
            queue_depth: btf && self.chain,
            held_by: btf && self.offsets.is_some(),
            topology: self.topology.is_some(),
            waking: self.waking,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(steal: u64, irq: u64, throttled: u64) -> CauseOffsets {
        CauseOffsets {
            task_flags: 44,
            task_group: 2000,
            has_rq_cpu: 1,
            rq_cpu: 3000,
            has_steal: steal,
            has_irq: irq,
            has_throttled: throttled,
            ..CauseOffsets::ZERO
        }
    }

    const CHAIN: Option<RqOffsets> = Some(RqOffsets {
        resolved: 1,
        task_cfs_rq: 0,
        cfs_rq_rq: 0,
        rq_nr_running: 0,
        delayed: 0,
        cfs_counter_a: 0,
        cfs_counter_b: 0,
    });

    #[test]
    fn what_is_measurable_follows_the_kernel_and_the_hook() {
        let s = Setup::new(true, Some(offsets(0, 1, 1)), CHAIN, 2);
        let m = s.measurable(HookMode::Btf).unwrap();
        assert!(!m.steal && m.irq && m.throttled && m.queue_depth && m.held_by);
        // Classic tracepoints: how it began and where it ended only.
        let m = s.measurable(HookMode::Tracepoint).unwrap();
        assert!(!m.irq && !m.throttled && !m.queue_depth && !m.held_by);
        // No accounting at all, or no chain: no overlaps.
        let none = Setup::new(true, Some(offsets(0, 0, 0)), CHAIN, 2);
        assert!(!none.overlaps());
        assert!(!Setup::new(true, Some(offsets(1, 1, 1)), None, 2).overlaps());
        assert_eq!(
            Setup::new(false, Some(offsets(1, 1, 1)), CHAIN, 2).measurable(HookMode::Btf),
            None
        );
        // The wakeup path only with --waking, in either hook mode.
        assert!(!m.waking);
        let mut w = Setup::new(true, Some(offsets(0, 1, 1)), CHAIN, 2);
        w.waking = true;
        assert!(w.measurable(HookMode::Tracepoint).unwrap().waking);
        assert!(w.measurable(HookMode::Btf).unwrap().waking);
    }
}
