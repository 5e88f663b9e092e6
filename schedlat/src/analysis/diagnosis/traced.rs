//! What eBPF measured of the window (root only): the sample the diagnosis
//! judges beside the kernel's own accounting.

use std::time::Duration;

use super::{priority::Attribution, waiting::EbpfWaiting};
use crate::{
    analysis::{hottest, percentiles::Percentiles, shape, shape::Shape},
    histogram::Waits,
    sys::{findings::Findings, sched_context::SchedContext, slice::Slice},
};

/// What eBPF measured over the window (root only).
pub(crate) struct Traced {
    pub hook: String,
    pub waits: Waits,
    pub percentiles: Option<Percentiles>,
    pub shape: Shape,
    /// Who waited and who held the CPU instead, or why not measured.
    pub victims: Result<Attribution, String>,
    /// The kernel's scheduling context, as the command read it.
    pub kernel: Option<SchedContext>,
    /// The hottest stacks behind the holders of the window's slow waits,
    /// or why the kernel took none; None when not asked for (`--no-stacks`).
    pub stacks: Option<Result<hottest::Window, String>>,
}

impl Traced {
    /// The window's histogram (its percentiles and shape against `slice`)
    /// and its victims tables, as attributed.
    pub(crate) fn new(
        hook: String,
        waits: Waits,
        victims: Result<Attribution, String>,
        slice: &Slice,
    ) -> Traced {
        Traced {
            hook,
            percentiles: Percentiles::of(&waits),
            shape: shape::classify(&waits, slice),
            waits,
            victims,
            kernel: None,
            stacks: None,
        }
    }

    /// The scope's waiting as measured here: its histogram's sum, and its
    /// most-waiting task from the victims tables.
    pub(crate) fn waiting(&self, findings: &Findings) -> EbpfWaiting {
        let window = Duration::from_nanos(findings.window_ns);
        let most_task = self.victims.as_ref().ok().map(|a| a.max_task_share(window));
        EbpfWaiting::new(self.waits.sum_ns, most_task, findings)
    }
}
