//! What loading needs to know about this kernel before the object is
//! loaded: the candidate hook modes, the offsets and chains the programs
//! read, and the BTF the tp_btf programs attach with.

use std::path::Path;

use aya::Ebpf;
use schedlat_common::{
    cast,
    kconfig::{
        CauseOffsets, CgroupOffsets, DecisionOffsets, PidnsOffsets, RqOffsets, TaskOffsets,
        TpOffsets,
    },
    names,
    scope::Breakdown,
};

use super::{access::KernelSources, attach::attach};
use crate::{
    kernel::{
        attach_btf,
        btf::{self, CssChoice, VMLINUX_BTF},
        cgroupfs::{self, Hierarchy},
        error::{LoadError, SEE_CHECK},
        filter::Filter,
        hook::{HookChoice, HookMode},
        modes::Modes,
        tracefs::{self, Format, TracefsError},
    },
    sys::mounts::Mounts,
};

/// Said where the decision split cannot tell a holder's yield at the
/// switch (no bpf_task_pt_regs(), before 5.15, or another architecture
/// than x86-64 and arm64): no system call of any process is traced to
/// learn it instead.
pub(crate) const NO_YIELDS: &str = "the decision split counts a holder that yielded as preempted here: telling a yield at the switch needs bpf_task_pt_regs() (Linux 5.15+) on x86-64 or arm64";

/// The load-time facts the programs need, for the chosen mode(s).
#[derive(Debug, Clone, Default)]
pub(super) struct Globals {
    pub(super) task: Option<TaskOffsets>,
    /// Only resolved when the mode wants it (slow events' run-queue length).
    pub(super) rq: Option<RqOffsets>,
    /// Only with `-c` or `--cgroups`.
    pub(super) cgroup: Option<CgroupOffsets>,
    /// Only with `--pidnss`.
    pub(super) pidns: Option<PidnsOffsets>,
    pub(super) tp: Option<TpOffsets>,
    /// Only with the cause split.
    pub(super) cause: Option<CauseOffsets>,
    /// Only with the decision split, on a kernel that has its fields.
    pub(super) decision: Option<DecisionOffsets>,
}

/// The classic tracepoints' record offsets, from their tracefs format files.
fn tp_offsets(tracefs: &Path) -> Result<TpOffsets, TracefsError> {
    let switch = Format::read(tracefs, "sched", "sched_switch")?;
    let wakeup = Format::read(tracefs, "sched", "sched_wakeup")?;
    let exit = Format::read(tracefs, "sched", "sched_process_exit")?;
    for format in [&switch, &wakeup, &exit] {
        format.validate()?;
    }
    // pid_t is 4 bytes; prev_state is a long (4 on 32-bit kernels).
    Ok(TpOffsets {
        switch_prev_pid: switch.offset_sized("prev_pid", &[4])?,
        switch_prev_state: switch.offset_sized("prev_state", &[4, 8])?,
        switch_next_pid: switch.offset_sized("next_pid", &[4])?,
        wakeup_pid: wakeup.offset_sized("pid", &[4])?,
        exit_pid: exit.offset_sized("pid", &[4])?,
        // TASK_REPORT_MAX has been 0x100 since 4.14; older print formats
        // are parsed, and this is the fallback.
        state_mask: tracefs::runnable_state_mask(&switch).unwrap_or(0xff),
    })
}

/// What loading needs to know about this kernel, resolved before the
/// object is loaded: the candidate modes, their globals, the attach BTF.
pub(super) struct Plan {
    pub(super) candidates: Vec<HookMode>,
    /// The tp_btf (program, tracepoint) pairs of the chosen modes.
    /// With `--waking`, sched_waking's last.
    pub(super) btf_programs: Vec<(&'static str, &'static str)>,
    /// `--waking` with the cause split: sched_waking is attached.
    pub(super) waking: bool,
    pub(super) globals: Globals,
    pub(super) attach_btf: Option<aya::Btf>,
    /// The ids that turn the programs' marks into casts
    /// (schedlat_common::cast); None where the kernel cannot cast, or the
    /// BTF is not the running kernel's (`--btf`).
    pub(super) casts: Option<cast::Ids>,
    pub(super) notes: Vec<String>,
    /// Why a fallback mode is unavailable: said only if the modes before it
    /// fail, since a run on tp_btf does not need tracefs at all.
    pub(super) fallback_notes: Vec<String>,
    /// The offsets come from `--btf`, not the running kernel's BTF.
    pub(super) custom_btf: bool,
}

impl Plan {
    /// In auto mode a failure only removes that candidate (with a note);
    /// otherwise it is the error.
    pub(super) fn resolve(
        choice: HookChoice,
        sources: &KernelSources,
        filter: &Filter,
        modes: &Modes,
        cgroup_hierarchy: Option<&Hierarchy>,
    ) -> Result<Plan, LoadError> {
        let btf_path = sources.btf.clone().unwrap_or_else(|| VMLINUX_BTF.into());
        let mut notes = Vec::new();
        let mut fallback_notes = Vec::new();
        let mut globals = Globals::default();
        let mut attach_btf = None;
        let mut casts = None;
        let mut candidates = match choice {
            HookChoice::Btf => vec![HookMode::Btf],
            HookChoice::Tp => vec![HookMode::Tracepoint],
            HookChoice::Auto => vec![HookMode::Btf, HookMode::Tracepoint],
        };
        // Classic tracepoints carry TIDs only: the filters and modes that
        // read the waiting task's task_struct need tp_btf.
        if let Some(what) = filter.needs_btf().or(modes.needs_btf()) {
            match choice {
                HookChoice::Tp => return Err(LoadError::NeedsBtf(what)),
                _ => candidates.retain(|m| *m == HookMode::Btf),
            }
        }
        let waking = sources.waking && modes.causes;
        // The hierarchy's number, which the cgroup_mkdir program compares:
        // without it, no cgroup is named at its creation.
        let naming = modes
            .names_cgroups()
            .then(|| cgroup_hierarchy.and_then(Hierarchy::number))
            .flatten();
        let wants = BtfWants {
            waking,
            decision: modes.decides() && !sources.no_decision,
            cgroup_mkdir: naming.is_some(),
            rq_len: modes.wants_rq_len(),
            cgroups: cgroup_hierarchy.map(|h| h.css.clone()),
            pidns: modes.keyed.is_some_and(|k| k.by == Breakdown::PidNamespace),
            causes: modes.causes,
            casts: sources.btf.is_none(),
        };
        if candidates.contains(&HookMode::Btf) {
            match resolve_btf(&btf_path, &wants) {
                Ok(facts) => {
                    globals.task = Some(facts.task);
                    globals.rq = facts.rq;
                    globals.cgroup = facts.cgroup.map(|c| CgroupOffsets {
                        hierarchy_id: naming.unwrap_or(0),
                        ..c
                    });
                    globals.pidns = facts.pidns;
                    globals.cause = facts.cause;
                    globals.decision = facts.decision;
                    notes.extend(facts.notes);
                    attach_btf = Some(facts.attach_btf);
                    casts = super::cast::usable(facts.casts);
                }
                // An explicit --btf that fails is an error even in auto mode.
                Err(e) if choice == HookChoice::Auto && sources.btf.is_none() => {
                    notes.push(format!("not using tp_btf: {e}"));
                    candidates.retain(|m| *m != HookMode::Btf);
                }
                Err(e) => return Err(e),
            }
        }
        if candidates.contains(&HookMode::Tracepoint) {
            let offsets =
                tracefs::locate(sources.tracefs.as_deref()).and_then(|dir| tp_offsets(&dir));
            match offsets {
                Ok(offsets) => globals.tp = Some(offsets),
                // Only fatal when it is the last way left.
                Err(e) if candidates.len() > 1 => {
                    fallback_notes.push(format!("classic tracepoints unavailable: {e}"));
                    candidates.retain(|m| *m != HookMode::Tracepoint);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut btf_programs = modes.btf_programs().to_vec();
        if globals.decision.is_some() {
            // The split's own programs (schedlat-ebpf main.rs says why).
            swap_twins(&mut btf_programs, &names::BTF_DECISION_PROGRAMS);
        }
        // After the decision's swap: each switch has a pairs twin, a
        // stacks twin, and the histogram's switches a twin with both.
        if modes.pairs.is_some() {
            swap_twins(&mut btf_programs, &names::BTF_PAIRS_PROGRAMS);
        }
        if let Some(stacks) = modes.stacks {
            let holder = match modes.pairs {
                Some(_) => &names::BTF_PAIRS_STACKS_PROGRAMS,
                None => &names::BTF_HOLDER_STACKS_PROGRAMS,
            };
            swap_twins(&mut btf_programs, holder);
            if stacks.wakers() {
                swap_twins(&mut btf_programs, &names::BTF_WAKER_STACKS_PROGRAMS);
            }
        }
        if waking {
            btf_programs.push(names::BTF_WAKING);
        }
        if naming.is_some() {
            btf_programs.push(names::BTF_CGROUP_MKDIR);
        }
        Ok(Plan {
            candidates,
            btf_programs,
            waking,
            globals,
            attach_btf,
            casts,
            notes,
            fallback_notes,
            custom_btf: sources.btf.is_some(),
        })
    }

    /// Attaches in the first candidate mode that works.
    pub(super) fn attach_first_working(
        self,
        choice: HookChoice,
        ebpf: &mut Ebpf,
    ) -> Result<(HookMode, Vec<String>), LoadError> {
        let mut notes = self.notes;
        let mut failures = Vec::new();
        for mode in self.candidates {
            match attach(
                ebpf,
                mode,
                self.attach_btf.as_ref(),
                self.custom_btf,
                self.casts.as_ref(),
                &self.btf_programs,
                self.waking,
            ) {
                Ok(attach_notes) => {
                    notes.extend(attach_notes);
                    if mode == HookMode::Btf
                        && self.globals.decision.is_some_and(|d| d.yield_nr == 0)
                    {
                        notes.push(NO_YIELDS.to_string());
                    }
                    notes.extend(failures.iter().map(|f| format!("{f}; fell back to {mode}")));
                    return Ok((mode, notes));
                }
                Err(e) if choice != HookChoice::Auto => return Err(e),
                // Another mode needs the same descriptors and memory.
                Err(e @ LoadError::Limit { .. }) => return Err(e),
                // Said once, at the end of the whole error.
                Err(e) => failures.push(e.to_string().replace(SEE_CHECK, "")),
            }
        }
        notes.extend(failures);
        notes.extend(self.fallback_notes);
        Err(LoadError::NoHookMode(notes))
    }
}

/// The optional kernel chains a run needs besides task_struct's fields.
struct BtfWants {
    /// The slow events' run-queue length.
    rq_len: bool,
    /// A task's cgroup id in this hierarchy (`-c`, `--cgroups`).
    cgroups: Option<CssChoice>,
    /// A task's PID namespace (`--pidnss`).
    pidns: bool,
    /// The cause split's fields.
    causes: bool,
    /// sched_waking's BTF id (`--waking`).
    waking: bool,
    /// The decision split's fields.
    decision: bool,
    /// cgroup_mkdir's BTF id (cgroups named at their creation).
    cgroup_mkdir: bool,
    /// The casts' ids: only from the running kernel's own BTF.
    casts: bool,
}

struct BtfFacts {
    task: TaskOffsets,
    rq: Option<RqOffsets>,
    cgroup: Option<CgroupOffsets>,
    pidns: Option<PidnsOffsets>,
    cause: Option<CauseOffsets>,
    decision: Option<DecisionOffsets>,
    notes: Vec<String>,
    attach_btf: aya::Btf,
    casts: Option<cast::Ids>,
}

/// Replaces each program that has a twin in `twins` (twin, the program it
/// replaces) by that twin: the same code with one more part compiled in.
fn swap_twins(programs: &mut [(&'static str, &'static str)], twins: &[(&'static str, &str)]) {
    for (program, _) in programs {
        if let Some(&(twin, _)) = twins.iter().find(|(_, plain)| plain == program) {
            *program = twin;
        }
    }
}

/// task_struct offsets, and the BTF the tp_btf attach needs (a stand-in
/// with the kernel's ids, see attach_btf.rs), from the BTF at `path`; and
/// the chains `wants` names (the run-queue length only if this kernel has
/// it).
fn resolve_btf(path: &Path, wants: &BtfWants) -> Result<BtfFacts, LoadError> {
    let (btf, ids) = btf::open_indexed(path)?;
    // Every offset set below reads its structs through this one cache.
    let layouts = btf::Layouts::indexed(&btf, path, ids);
    let task = btf::task_offsets(&layouts)?;
    // Without fault injection, which replaces the pid offset on purpose.
    #[cfg(not(feature = "fault-injection"))]
    {
        use crate::kernel::btf_check;
        btf_check::check_plausible(&task, btf::task_struct_size(&layouts)?, path)?;
        btf_check::check_against_running(&task, path)?;
    }
    let rq = wants.rq_len.then(|| btf::rq_offsets(&layouts)).flatten();
    let cgroup = match &wants.cgroups {
        Some(css) => Some(btf::cgroup_offsets(&layouts, css)?),
        None => None,
    };
    let pidns = match wants.pidns {
        true => Some(btf::pidns_offsets(&layouts)?),
        false => None,
    };
    let mut notes = Vec::new();
    // The split's optional parts are optional: a kernel without them
    // measures the rest.
    let cause = match wants.causes.then(|| btf::cause_offsets(&layouts)) {
        Some(Ok(offsets)) => Some(offsets),
        Some(Err(e)) => {
            notes.push(format!("cause split without who held the CPU: {e}"));
            None
        }
        None => None,
    };
    let decision = wants
        .decision
        .then(|| btf::decision_offsets(&layouts))
        .flatten();
    if wants.decision && decision.is_none() {
        notes.push(
            "decision split off: this kernel's BTF lacks rq->curr, rq->nr_switches or task->thread_info.flags".to_string(),
        );
    }
    let mut tracepoints = names::BTF_PROGRAMS.map(|(_, tp)| tp).to_vec();
    if wants.waking {
        tracepoints.push(names::BTF_WAKING.1);
    }
    if wants.cgroup_mkdir {
        tracepoints.push(names::BTF_CGROUP_MKDIR.1);
    }
    let ids = btf::tracepoint_ids(&layouts, &tracepoints)?;
    let casts = wants.casts.then(|| btf::cast_ids(&layouts)).flatten();
    // The parse (and its mapping of the file) is not needed past here.
    drop(layouts);
    drop(btf);
    let attach_btf = attach_btf::stand_in(&ids).map_err(|error| LoadError::LoaderBtf {
        path: path.to_path_buf(),
        error,
    })?;
    Ok(BtfFacts {
        task,
        rq,
        cgroup,
        pidns,
        cause,
        decision,
        notes,
        attach_btf,
        casts,
    })
}

/// The hierarchy cgroup ids are read in: `-c`'s, else for `--cgroups` the
/// one holding the cpu controller (cgroupfs.rs).
pub(super) fn cgroup_hierarchy(
    filter: &Filter,
    modes: &Modes,
) -> Result<Option<Hierarchy>, LoadError> {
    if let Some(target) = &filter.cgroup {
        return Ok(Some(target.hierarchy.clone()));
    }
    if modes.names_cgroups() {
        return cgroupfs::default_hierarchy(&Mounts::read())
            .map(Some)
            .ok_or(LoadError::NoCgroupMount("--cgroups"));
    }
    Ok(None)
}
