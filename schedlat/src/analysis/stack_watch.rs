//! The holder's stacks of the slow waits, watched beside another command's
//! tracers (docs/stacks.md, "In diagnose", "In victims"): the slow mode
//! with the holder's stacks loaded for the same filter
//! (collect/holder_stacks.rs), its ring buffer drained every
//! `DRAIN_EVERY` and every batch named at once (a process's addresses
//! mean something only while it lives), then folded per holder
//! (hottest.rs). `diagnose` folds one window; `victims` one per interval.

use std::time::Duration;

use super::{
    hottest::{Folding, Window},
    stacks::StackNamer,
};
use crate::{
    collect::holder_stacks::HolderStacksRing,
    kernel::{filter::Filter, loader::KernelAccess},
    sys::cgroup_of::TaskCgroups,
};

/// How often the ring buffer is drained and named: with stacks an event
/// is ~3 KiB, and its holder's process may be gone by the window's end
/// (its addresses then name nothing).
pub(crate) const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// The slow waits' tracer with the holder's stacks, and what it read.
pub(crate) struct StackWatch {
    ring: HolderStacksRing,
    namer: StackNamer,
    folding: Folding,
}

impl StackWatch {
    /// Loads the holder's stacks of the waits of at least `threshold_ns`
    /// within `filter`; why not where the kernel refuses them.
    pub(crate) fn load(
        kernel: &KernelAccess,
        filter: &Filter,
        threshold_ns: u64,
    ) -> Result<StackWatch, String> {
        Ok(StackWatch {
            ring: HolderStacksRing::load(kernel, filter, threshold_ns)?,
            namer: StackNamer::new(),
            folding: Folding::new(threshold_ns),
        })
    }

    /// The window starts: the events from before it are dropped, and its
    /// losses counted from here.
    pub(crate) fn start(&mut self) -> Result<(), String> {
        self.ring.start()
    }

    /// Names and folds the events in the ring buffer now.
    pub(crate) fn drain(&mut self) {
        let records = self.ring.drain();
        self.folding.add_records(&self.namer, &records);
    }

    /// Ends the window: its last events folded, and the events lost in
    /// it (the caller reads the holders' cgroups before it folds them).
    pub(crate) fn end(mut self) -> Result<(Folding, u64), String> {
        self.drain();
        let lost = self.ring.take_lost()?;
        Ok((self.folding, lost))
    }

    /// Ends an interval: its last events folded, its hottest stacks and
    /// losses; the next interval folds from nothing. Per task only (no
    /// cgroup is read).
    pub(crate) fn interval(&mut self) -> Result<Window, String> {
        self.drain();
        let lost = self.ring.take_lost()?;
        Ok(self.folding.next_window(lost, &TaskCgroups::default()))
    }
}
