//! The holders' stacks of diagnose's window (docs/stacks.md, "In
//! diagnose"): the slow mode with the holder's stacks loaded beside the
//! window's tracers for the same scope (collect/holder_stacks.rs), its
//! ring buffer drained at each tick of the window and every batch named at
//! once (a process's addresses mean something only while it lives), then
//! folded per holder (analysis/hottest.rs).

use crate::{
    analysis::{hottest::Folding, stacks::StackNamer},
    collect::holder_stacks::HolderStacksRing,
    kernel::{filter::Filter, loader::KernelAccess},
};

/// The slow waits' tracer with the holder's stacks, and what it read.
pub(super) struct StackWatch {
    ring: HolderStacksRing,
    namer: StackNamer,
    folding: Folding,
}

impl StackWatch {
    /// Loads the holder's stacks of the waits of at least `threshold_ns`
    /// within `filter`; why not where the kernel refuses them.
    pub(super) fn load(
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
    pub(super) fn start(&mut self) -> Result<(), String> {
        self.ring.start()
    }

    /// Names and folds the events in the ring buffer now. Called at each
    /// tick of the window (100 ms).
    pub(super) fn drain(&mut self) {
        let records = self.ring.drain();
        self.folding.add_records(&self.namer, &records);
    }

    /// Ends the window: the last events, folded, and the events lost in it.
    pub(super) fn end(mut self) -> Result<(Folding, u64), String> {
        self.drain();
        let lost = self.ring.take_lost()?;
        Ok((self.folding, lost))
    }
}
