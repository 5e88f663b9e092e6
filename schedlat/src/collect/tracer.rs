//! The attached eBPF object as the rest of schedlat sees it: loaded by the
//! kernel layer, then owned here, so that every read of its maps and
//! programs goes through the collect layer (maps.rs, victims.rs, slow.rs,
//! bpf_cost.rs) and no command touches a map.

use aya::Ebpf;
use schedlat_common::{names, scope::Breakdown};

use super::{
    cgroup_names::CgroupNames, error::InMap, keylabels::KeyLabels, summary_rows::SummaryRows,
};
use crate::{
    histogram::{CauseFacts, DecisionFacts, Unit},
    kernel::{
        cgroupfs::Hierarchy,
        error::LoadError,
        filter::Filter,
        hook::{HookChoice, HookMode},
        loader::{self, KernelAccess, KernelSources, Loaded},
        modes::Modes,
    },
};

/// The loaded and attached programs, and the maps userspace reads.
pub(crate) struct Tracer {
    /// Private to the collect layer: the maps are read through its modules.
    pub(super) ebpf: Ebpf,
    mode: HookMode,
    /// The attached programs and the tracepoint each hooks.
    pub(super) programs: Vec<(&'static str, &'static str)>,
    /// Lines worth telling the user on stderr (fallbacks, sources).
    pub notes: Vec<String>,
    /// The hierarchy cgroup ids refer to, when `-c` or `--cgroups` is on.
    pub cgroup_hierarchy: Option<Hierarchy>,
    /// What the cause split measures; None when it is off.
    pub measurable: Option<CauseFacts>,
    /// What the decision split measures; None when it is off.
    pub decision: Option<DecisionFacts>,
    /// The cgroups' names as the kernel made them, when cgroups are named
    /// (cgroup keys, neighbour pairs).
    pub cgroup_names: Option<CgroupNames>,
    /// With a breakdown: the keys' summary rows, mapped (summary_rows.rs).
    pub(super) summary_rows: Option<SummaryRows>,
}

impl Tracer {
    /// Loads the object with `unit_ns` nanoseconds per histogram unit, and
    /// attaches it in the mode `choice` resolves to on this kernel.
    pub(crate) fn load(
        choice: HookChoice,
        sources: &KernelSources,
        unit_ns: u64,
        filter: &Filter,
    ) -> Result<Tracer, LoadError> {
        Tracer::load_modes(choice, sources, unit_ns, filter, &Modes::HISTOGRAM)
    }

    /// As `load`, computing `modes` in the kernel (victims, slow events).
    pub(crate) fn load_modes(
        choice: HookChoice,
        sources: &KernelSources,
        unit_ns: u64,
        filter: &Filter,
        modes: &Modes,
    ) -> Result<Tracer, LoadError> {
        let Loaded {
            ebpf,
            mode,
            programs,
            notes,
            cgroup_hierarchy,
            measurable,
            decision,
        } = loader::load(choice, sources, unit_ns, filter, modes)?;
        let mut tracer = Tracer {
            ebpf,
            mode,
            programs,
            notes,
            cgroup_hierarchy,
            measurable,
            decision,
            cgroup_names: None,
            summary_rows: None,
        };
        // New keys take a summary row from the queue: every row is free.
        if modes.keyed.is_some() {
            let name = names::MAP_KEY_SUMMARY;
            let free = tracer.ebpf.take_map(names::MAP_KEY_FREE);
            let rows = match (tracer.ebpf.map(name), free) {
                (Some(map), Some(free)) => {
                    SummaryRows::map(map, free).map_err(|error| LoadError::Summaries {
                        name,
                        error: Some(error),
                    })
                }
                _ => Err(LoadError::Summaries { name, error: None }),
            };
            tracer.summary_rows = Some(rows?);
        }
        // When the object names cgroups (its cgroup_mkdir program is
        // attached), the names it sends are read from now on.
        if tracer.programs.contains(&names::BTF_CGROUP_MKDIR) {
            let name = names::MAP_CGROUP_NAMES;
            let started = tracer
                .ebpf
                .take_map(name)
                .in_map(name)
                .and_then(CgroupNames::start);
            match started {
                Ok(names) => tracer.cgroup_names = Some(names),
                Err(e) => tracer
                    .notes
                    .push(format!("cgroups removed before a scan stay unnamed: {e}")),
            }
        }
        Ok(tracer)
    }

    /// The labels of breakdown keys `by` this tracer's keys: cgroups
    /// named in its hierarchy, and from the names the kernel sent.
    pub(crate) fn key_labels(&self, by: Breakdown) -> KeyLabels {
        KeyLabels::new(by, self.cgroup_hierarchy.clone()).with_names(self.cgroup_names.clone())
    }

    /// Loads the histogram with the victims tables (Modes::
    /// histogram_and_victims: `schedlat top`, `schedlat diagnose`), or, where
    /// they cannot load (classic tracepoints, a kernel before 5.12), the
    /// histogram alone and why there are no victims. An error is the
    /// histogram's own: without it there is nothing to show.
    /// `pairs`: with the neighbour-pair table of that many pairs (which
    /// the victims' programs count).
    pub(crate) fn load_with_victims(
        kernel: &KernelAccess,
        filter: &Filter,
        max_tasks: u32,
        pairs: Option<u32>,
    ) -> Result<(Tracer, Result<(), String>), LoadError> {
        let (sources, unit) = (&kernel.sources, Unit::Usecs.ns());
        let victims = if kernel.hook == HookChoice::Tp {
            Err(LoadError::NeedsBtf("the victims tables"))
        } else {
            let mut modes = Modes::histogram_and_victims(max_tasks);
            if let Some(max) = pairs {
                modes = modes.with_pairs(max);
            }
            Tracer::load_modes(kernel.hook, sources, unit, filter, &modes)
        };
        match victims {
            Ok(tracer) => Ok((tracer, Ok(()))),
            Err(e) => {
                let tracer = Tracer::load(kernel.hook, sources, unit, filter)?;
                Ok((tracer, Err(why_no_victims(&e))))
            }
        }
    }

    pub(crate) fn mode(&self) -> HookMode {
        self.mode
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if let Some(names) = &self.cgroup_names {
            names.stop();
        }
    }
}

/// A load error of the victims tables: one line (a verifier log is long),
/// cut.
fn why_no_victims(e: &LoadError) -> String {
    let text = match e {
        LoadError::NeedsBtf(_) => {
            "they need the tp_btf hook mode (classic tracepoints do not pass task pointers): drop --hook tp".to_string()
        }
        e => format!(
            "{} (they need tp_btf and kernel 5.12+)",
            e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
        ),
    };
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}
