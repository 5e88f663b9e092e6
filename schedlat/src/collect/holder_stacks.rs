//! The holder's stacks of the slow waits, taken beside another command's
//! own tracers (docs/stacks.md, "In diagnose", "In victims"): the slow
//! mode with the holder's stacks, loaded for the same filter, its ring
//! buffer drained by the command as often as it names the stacks, and its
//! losses counted per window. `diagnose` and `victims` fold what it reads
//! (analysis/hottest.rs).

use schedlat_common::names;

use crate::{
    collect::{
        slow::{SlowEvents, SlowRecord},
        tracer::Tracer,
    },
    histogram::Unit,
    kernel::{
        error::LoadError,
        filter::Filter,
        loader::KernelAccess,
        modes::{Modes, Stacks},
    },
};

/// The slow waits' tracer with the holder's stacks, and its ring buffer.
pub(crate) struct HolderStacksRing {
    tracer: Tracer,
    ring: SlowEvents,
    /// The kernel's count of lost events at the last `take_lost`.
    lost_base: u64,
}

impl HolderStacksRing {
    /// Loads and attaches the slow mode with the holder's stacks for the
    /// waits of at least `threshold_ns` within `filter`; why not, in one
    /// line, where the kernel refuses its programs (classic tracepoints,
    /// before 5.11). Without the decision split: the command's own
    /// tracers split the waits, and its programs would double the slow
    /// mode's cost.
    pub(crate) fn load(
        kernel: &KernelAccess,
        filter: &Filter,
        threshold_ns: u64,
    ) -> Result<HolderStacksRing, String> {
        let modes = Modes::slow(threshold_ns)
            .with_stacks(Some(Stacks::Holder))
            .without_causes();
        let unit = Unit::Usecs.ns();
        let mut tracer = Tracer::load_modes(kernel.hook, &kernel.sources, unit, filter, &modes)
            .map_err(|e| why_no_stacks(&e))?;
        let ring = SlowEvents::take(&mut tracer).map_err(|e| one_line(&format!("{e:#}")))?;
        Ok(HolderStacksRing {
            tracer,
            ring,
            lost_base: 0,
        })
    }

    /// The command's window starts: the events from before it are
    /// dropped, and its losses counted from here.
    pub(crate) fn start(&mut self) -> Result<(), String> {
        self.ring.drain();
        self.lost_base = self.lost()?;
        Ok(())
    }

    /// Every event in the ring buffer now. With stacks an event is ~2 KiB
    /// and its holder's process may be gone soon: the command drains and
    /// names them every 100 ms or so.
    pub(crate) fn drain(&mut self) -> Vec<SlowRecord> {
        self.ring.drain()
    }

    /// The events the ring buffer had no room for since `start` or the
    /// last call: a window's losses, the next window's counted from here.
    pub(crate) fn take_lost(&mut self) -> Result<u64, String> {
        let now = self.lost()?;
        let lost = now.saturating_sub(self.lost_base);
        self.lost_base = now;
        Ok(lost)
    }

    /// The kernel's count of events the ring buffer had no room for.
    fn lost(&self) -> Result<u64, String> {
        (self.tracer.mode_counters())
            .map(|c| c.slow_lost)
            .map_err(|e| one_line(&format!("reading the slow events' counters: {e}")))
    }
}

/// Why the kernel took no stacks, in one line for a report.
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

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_verifier_log_is_one_cut_line() {
        let log = "line one\n  line two\t".repeat(40);
        let line = one_line(&log);
        assert!(!line.contains('\n') && !line.contains('\t'), "{line}");
        assert!(
            line.ends_with("...") && line.chars().count() == 303,
            "{line}"
        );
        assert_eq!(one_line("short\nlog"), "short log");
    }
}
