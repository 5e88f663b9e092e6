//! `victims --stacks` (docs/victims.md, "The holder's stacks"): the slow
//! mode with the holder's stacks loaded beside the victims tables for the
//! same filter (collect/holder_stacks.rs), drained and named every
//! `DRAIN_EVERY` between the intervals' ends, and folded per holder task
//! (analysis/hottest.rs), each interval's folds its own.

use std::time::Duration;

use crate::{
    analysis::{
        hottest::{Folding, Window},
        stacks::StackNamer,
    },
    collect::holder_stacks::HolderStacksRing,
    kernel::{filter::Filter, loader::KernelAccess},
    sys::cgroup_of::TaskCgroups,
};

/// How often the ring buffer is drained and named, as diagnose's window
/// ticks: with stacks an event is ~2 KiB, and its holder's process may be
/// gone by the interval's end (its addresses then name nothing).
pub(super) const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// The holder's stacks of the slow waits, folded per interval.
pub(super) struct IntervalStacks {
    ring: HolderStacksRing,
    namer: StackNamer,
    folding: Folding,
}

impl IntervalStacks {
    /// Loads the holder's stacks of the waits of at least `threshold_ns`
    /// within `filter`; why not where the kernel refuses them.
    pub(super) fn load(
        kernel: &KernelAccess,
        filter: &Filter,
        threshold_ns: u64,
    ) -> Result<IntervalStacks, String> {
        Ok(IntervalStacks {
            ring: HolderStacksRing::load(kernel, filter, threshold_ns)?,
            namer: StackNamer::new(),
            folding: Folding::new(threshold_ns),
        })
    }

    /// The first interval starts: the events from before it are dropped.
    pub(super) fn start(&mut self) -> Result<(), String> {
        self.ring.start()
    }

    /// Names and folds the events in the ring buffer now.
    pub(super) fn drain(&mut self) {
        let records = self.ring.drain();
        self.folding.add_records(&self.namer, &records);
    }

    /// Ends the interval: its last events folded, its hottest stacks and
    /// losses; the next interval folds from nothing. Per task only: a
    /// culprit row is a task, so no cgroup is read.
    pub(super) fn interval(&mut self) -> Result<Window, String> {
        self.drain();
        let lost = self.ring.take_lost()?;
        Ok(self.folding.next_window(lost, &TaskCgroups::default()))
    }
}
