//! The holders' stacks of diagnose's window (docs/stacks.md, "In
//! diagnose"): the slow mode with the holder's stacks, loaded beside the
//! window's tracers for the same scope, its ring buffer drained at each
//! tick of the window and every batch named at once (a process's
//! addresses mean something only while it lives), then folded per holder
//! (analysis/diagnosis/hottest.rs).

use schedlat_common::names;

use crate::{
    analysis::{diagnosis::hottest::Folding, stacks::StackNamer},
    collect::{slow::SlowEvents, tracer::Tracer},
    histogram::Unit,
    kernel::{
        error::LoadError,
        filter::Filter,
        loader::KernelAccess,
        modes::{Modes, Stacks},
    },
};

/// The slow waits' tracer with the holder's stacks, and what it read.
pub(super) struct StackWatch {
    tracer: Tracer,
    ring: SlowEvents,
    namer: StackNamer,
    folding: Folding,
    /// The kernel's count of lost events when the window started.
    lost_base: u64,
}

impl StackWatch {
    /// Loads and attaches the slow mode with the holder's stacks for the
    /// waits of at least `threshold_ns` within `filter`; why not where the
    /// kernel refuses its programs (classic tracepoints, before 5.11).
    /// Without the decision split: the window's own tracers split the
    /// waits, and its programs would double the slow mode's cost.
    pub(super) fn load(
        kernel: &KernelAccess,
        filter: &Filter,
        threshold_ns: u64,
    ) -> Result<StackWatch, String> {
        let modes = Modes::slow(threshold_ns)
            .with_stacks(Some(Stacks::Holder))
            .without_causes();
        let unit = Unit::Usecs.ns();
        let mut tracer = Tracer::load_modes(kernel.hook, &kernel.sources, unit, filter, &modes)
            .map_err(|e| why_no_stacks(&e))?;
        let ring = SlowEvents::take(&mut tracer).map_err(|e| one_line(&format!("{e:#}")))?;
        Ok(StackWatch {
            tracer,
            ring,
            namer: StackNamer::new(),
            folding: Folding::new(threshold_ns),
            lost_base: 0,
        })
    }

    /// The window starts: the events from before it are dropped, and its
    /// losses counted from here.
    pub(super) fn start(&mut self) -> Result<(), String> {
        self.ring.drain();
        self.lost_base = self.lost()?;
        Ok(())
    }

    /// Names and folds the events in the ring buffer now. Called at each
    /// tick of the window (100 ms): with stacks an event is ~2 KiB, and
    /// its holder's process may be gone by the next.
    pub(super) fn drain(&mut self) {
        let records = self.ring.drain();
        if records.is_empty() {
            return;
        }
        let named = self.namer.name(&records);
        for (record, stacks) in records.iter().zip(named) {
            self.folding.add(&record.event, stacks);
        }
    }

    /// Ends the window: the last events, folded, and the events lost in it.
    pub(super) fn end(mut self) -> Result<(Folding, u64), String> {
        self.drain();
        let lost = self.lost()?.saturating_sub(self.lost_base);
        Ok((self.folding, lost))
    }

    /// The kernel's count of events the ring buffer had no room for.
    fn lost(&self) -> Result<u64, String> {
        (self.tracer.mode_counters())
            .map(|c| c.slow_lost)
            .map_err(|e| one_line(&format!("reading the slow events' counters: {e}")))
    }
}

/// Why the kernel took no stacks, in one line for the report.
fn why_no_stacks(e: &LoadError) -> String {
    match e {
        LoadError::NeedsBtf(_) => "the holder's stacks need the tp_btf hook mode (classic tracepoints do not pass task pointers): drop --hook tp".to_string(),
        // What they need before the kernel's words, which the cut may end.
        LoadError::Program { program, step, error, .. }
            if names::BTF_HOLDER_STACKS_PROGRAMS.iter().any(|(p, _)| p == program) =>
        {
            one_line(&format!(
                "the holder's stacks need kernel 5.11 or newer (bpf_get_task_stack of bpf_get_current_task_btf): `{program}` failed to {step}: {error}"
            ))
        }
        e => one_line(&e.to_string()),
    }
}

/// A message on one line, cut: a verifier's log is long.
fn one_line(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}
