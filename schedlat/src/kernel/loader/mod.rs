//! Loading the embedded eBPF object and attaching it in one of two hook modes,
//! with everything kernel-specific resolved at load time.

mod access;
mod attach;
mod cast;
mod embedded;
mod globals;
mod load_times;
mod parallel;
mod plan;
mod release;

pub(crate) use access::{KernelAccess, KernelSources};
use aya::{Ebpf, EbpfLoader};
use embedded::EBPF_OBJECT;
use globals::KernelConfig;
use plan::{Plan, cgroup_hierarchy};
use schedlat_common::names;

use crate::{
    histogram::{CauseFacts, DecisionFacts},
    kernel::{
        causes::Setup,
        cgroupfs::Hierarchy,
        decision,
        error::LoadError,
        filter::Filter,
        hook::{HookChoice, HookMode},
        modes::Modes,
        privileges,
    },
};

/// The loaded and attached object, handed to the collect layer
/// (collect::Tracer), which alone reads its maps.
pub(crate) struct Loaded {
    pub ebpf: Ebpf,
    pub mode: HookMode,
    /// The attached programs and the tracepoint each hooks.
    pub programs: Vec<(&'static str, &'static str)>,
    /// Lines worth telling the user on stderr (fallbacks, sources).
    pub notes: Vec<String>,
    /// The hierarchy cgroup ids refer to, when `-c` or `--cgroups` is on.
    pub cgroup_hierarchy: Option<Hierarchy>,
    /// What the cause split measures; None when it is off.
    pub measurable: Option<CauseFacts>,
    /// What the decision split measures; None when it is off.
    pub decision: Option<DecisionFacts>,
}

/// Loads the object with `unit_ns` nanoseconds per histogram unit,
/// computing `modes` in the kernel, and attaches it in the hook mode
/// `choice` resolves to on this kernel.
pub(crate) fn load(
    choice: HookChoice,
    sources: &KernelSources,
    unit_ns: u64,
    filter: &Filter,
    modes: &Modes,
) -> Result<Loaded, LoadError> {
    if EBPF_OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    // Without the histogram (slow), the cause split is on only for the
    // decision split's state: --no-decision turns both off.
    let modes = &match sources.no_causes || (sources.no_decision && !modes.histogram) {
        true => modes.without_causes(),
        false => *modes,
    };
    let cpus = aya::util::nr_cpus().map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
    // The keys' decision split doubles as an upper bound (off on a
    // kernel without its fields).
    let decides = modes.decides() && !sources.no_decision;
    let memory_notes =
        crate::kernel::map_memory::check(modes, (cpus, decides), sources.force_memory)
            .map_err(LoadError::MapMemory)?;
    if !privileges::can_trace() {
        return Err(LoadError::NoPrivileges);
    }
    crate::sys::own_limits::raise_open_files();
    // The patched aya (vendor/aya/PATCHED.md) parses the kernel's BTF only
    // for CO-RE relocations, which Rust eBPF objects do not have: the
    // loader costs nothing until `load`.
    let hierarchy = cgroup_hierarchy(filter, modes)?;
    let plan = Plan::resolve(choice, sources, filter, modes, hierarchy.as_ref())?;
    let mut loader = EbpfLoader::new();
    let mut compute = modes.configure(&mut loader, unit_ns)?;
    let mut causes = Setup::new(modes.causes, plan.globals.cause, plan.globals.rq, cpus);
    causes.waking = plan.waking;
    let mut decision_notes = Vec::new();
    let decision = decision::Setup::new(plan.globals.decision.as_ref(), &mut decision_notes);
    causes.decision = decision.offsets().task_se != 0;
    causes.configure(&mut loader, &mut compute);
    let max_keys = modes.keyed.map(|k| k.max_keys);
    let slots = causes.decision_slots();
    decision.configure(&mut loader, &mut compute, (slots, cpus, max_keys));
    let config = KernelConfig::new(
        &plan.globals,
        filter,
        compute,
        (causes.offsets(), decision.offsets()),
    );
    config.configure(&mut loader)?;
    let mut ebpf = loader.load(EBPF_OBJECT).map_err(|e| {
        let sizes: Vec<String> = crate::kernel::map_memory::costs(modes, (cpus, decides))
            .iter()
            .map(|c| c.describe())
            .collect();
        LoadError::limit("loading the eBPF object", &e, &sizes)
            .unwrap_or_else(|| LoadError::Object(Box::new(e)))
    })?;
    let topology_note = causes.fill(&mut ebpf);
    if let Some(keyed) = modes.keyed {
        free_summary_rows(&mut ebpf, keyed.max_keys.max(1))?;
    }
    let btf_programs = plan.btf_programs.clone();
    let waking = plan.waking;
    let (mode, mut notes) = plan.attach_first_working(choice, &mut ebpf)?;
    notes.extend(memory_notes);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    notes.extend(filter.offline_note(&online));
    notes.extend(topology_note);
    notes.extend(decision_notes);
    let mut programs = match mode {
        HookMode::Btf => btf_programs,
        HookMode::Tracepoint => names::TP_PROGRAMS.to_vec(),
    };
    if waking && mode == HookMode::Tracepoint {
        programs.push(names::TP_WAKING);
    }
    release::startup_memory(EBPF_OBJECT);
    Ok(Loaded {
        ebpf,
        mode,
        programs,
        notes,
        cgroup_hierarchy: hierarchy,
        measurable: causes.measurable(mode),
        decision: decision
            .facts()
            .filter(|_| mode == HookMode::Btf && compute.decision != 0),
    })
}

/// Queues every row of the breakdown keys' summaries (`KEY_FREE`) before
/// the programs attach: a key is inserted only with a free row, and a wait
/// before the queue is filled would be unkeyed.
fn free_summary_rows(ebpf: &mut Ebpf, rows: u32) -> Result<(), LoadError> {
    let name = names::MAP_KEY_FREE;
    let map = ebpf.map_mut(name).ok_or(LoadError::NoObject)?;
    let failed = |e: aya::maps::MapError| LoadError::Object(Box::new(aya::EbpfError::MapError(e)));
    let mut queue =
        aya::maps::Queue::<&mut aya::maps::MapData, u32>::try_from(map).map_err(failed)?;
    for row in 0..rows {
        queue.push(row, 0).map_err(failed)?;
    }
    Ok(())
}
