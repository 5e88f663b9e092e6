//! Renderings for people and machines: an interval's waits (runqlat's text
//! table, or JSON lines), the cause split, the victims tables, slow events,
//! the diagnosis, recordings and dumps, and `schedlat top`'s terminal view.

pub(crate) mod breakdown;
pub(crate) mod brief;
pub(crate) mod causes;
pub(crate) mod check;
pub(crate) mod compare;
pub(crate) mod decision;
pub(crate) mod diagnosis;
pub(crate) mod dump;
pub(crate) mod escape;
pub(crate) mod flame;
pub(crate) mod hlog;
pub(crate) mod hottest;
pub(crate) mod json;
pub(crate) mod kernel_context;
pub(crate) mod pairs;
pub(crate) mod perfetto;
pub(crate) mod recording;
pub(crate) mod replay;
pub(crate) mod slow;
pub(crate) mod stacks;
pub(crate) mod text;
pub(crate) mod top;
pub(crate) mod verdict;
pub(crate) mod victims;
pub(crate) mod workload;

use crate::{
    analysis::{percentiles::Percentiles, shape, shape::Shape},
    histogram::{Unit, Waits},
    kernel::hook::HookMode,
    sys::{sched_context::SchedContext, slice::Slice},
};

/// One interval's result, as every output sees it.
pub(crate) struct Report<'a> {
    pub hook: HookMode,
    pub unit: Unit,
    pub waits: &'a Waits,
    /// Wall-clock end of the interval.
    pub time: std::time::SystemTime,
    pub interval: std::time::Duration,
    /// True for the last report (Ctrl-C, SIGTERM, or COUNT reached).
    pub last: bool,
    pub percentiles: Option<Percentiles>,
    pub shape: Shape,
    /// The per-key histograms, when a breakdown is on (JSON form).
    pub breakdown: Option<serde_json::Value>,
    /// The neighbour-pair table, with `--pairs` (JSON form).
    pub pairs: Option<serde_json::Value>,
    /// What was measured (filters, breakdown, kernel, host), for compare.
    pub scope: Option<recording::RecordedScope>,
    /// The kernel's scheduling context, where the command read it (a live
    /// run, not a recording).
    pub kernel: Option<&'a SchedContext>,
}

impl<'a> Report<'a> {
    /// Computes the analysis every output shows.
    pub(crate) fn new(
        hook: HookMode,
        unit: Unit,
        waits: &'a Waits,
        slice: &Slice,
        interval: std::time::Duration,
        last: bool,
    ) -> Report<'a> {
        Report {
            hook,
            unit,
            waits,
            time: std::time::SystemTime::now(),
            interval,
            last,
            percentiles: Percentiles::of(waits),
            shape: shape::classify(waits, slice),
            breakdown: None,
            pairs: None,
            scope: None,
            kernel: None,
        }
    }
}
