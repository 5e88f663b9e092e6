//! Renderings of an interval's waits: runqlat's text table, or JSON lines.

pub mod json;
pub mod text;

use crate::{histogram::Unit, histogram::Waits, loader::HookMode};

/// One interval's result, as every output sees it.
pub struct Report<'a> {
    pub hook: HookMode,
    pub unit: Unit,
    pub waits: &'a Waits,
    /// Wall-clock end of the interval.
    pub time: std::time::SystemTime,
    pub interval: std::time::Duration,
    /// True for the last report (Ctrl-C, SIGTERM, or COUNT reached).
    pub last: bool,
}
