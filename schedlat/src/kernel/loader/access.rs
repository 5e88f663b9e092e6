//! What a command is told about reaching the kernel: the hook mode asked
//! for and where the kernel's facts come from (the command line's
//! `--hook`, `--btf`, `--tracefs`, `--force-memory`, `--no-causes`,
//! `--waking`, `--no-decision`).

use std::path::PathBuf;

use crate::kernel::hook::HookChoice;

/// Where kernel facts come from; each `None` means "the usual place".
#[derive(Debug, Clone, Default)]
pub(crate) struct KernelSources {
    pub btf: Option<PathBuf>,
    pub tracefs: Option<PathBuf>,
    /// Allow maps larger than map_memory::LIMIT_BYTES (`--force-memory`).
    pub force_memory: bool,
    /// No cause split whatever the modes say (`--no-causes`).
    pub no_causes: bool,
    /// Time the wakeup path before the queue too (`--waking`): attaches
    /// sched_waking; only with the cause split.
    pub waking: bool,
    /// No decision split (`--no-decision`); without the cause split there
    /// is none either.
    pub no_decision: bool,
}

/// How to reach the kernel (`--hook`, `--btf`, `--tracefs`).
#[derive(Debug, Clone)]
pub(crate) struct KernelAccess {
    pub hook: HookChoice,
    pub sources: KernelSources,
}
