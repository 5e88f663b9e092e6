//! Loading the embedded eBPF object and attaching it in one of two hook modes,
//! with everything kernel-specific resolved at load time.

use std::{
    fmt, fs,
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, MapData, PerCpuArray, PerCpuValues},
    programs::{BtfTracePoint, ProgramError, TracePoint},
};
use schedlat_common::{
    CpuStats, Extremes, names,
    scope::{Breakdown, KeyStats},
};
use thiserror::Error;

use crate::{
    btf::{
        self, BtfError, CgroupOffsets, CssChoice, PidnsOffsets, RqOffsets, TaskOffsets, VMLINUX_BTF,
    },
    btf_prefix,
    cgroupfs::{Hierarchy, Mounts},
    filter::Filter,
    modes::Modes,
    privileges,
    tracefs::{self, Format, TracefsError},
};

static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/schedlat"));

/// What the user asked for with `--hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookChoice {
    /// tp_btf when the kernel has BTF and supports it, classic tracepoints otherwise.
    Auto,
    /// BTF-typed tracepoints (tp_btf): cheapest; needs kernel BTF (5.5+).
    Btf,
    /// Classic tracepoints, offsets from tracefs format files: any kernel.
    Tp,
}

/// The hook mode in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum HookMode {
    #[serde(rename = "tp_btf")]
    Btf,
    #[serde(rename = "tracepoint")]
    Tracepoint,
}

impl fmt::Display for HookMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HookMode::Btf => "tp_btf",
            HookMode::Tracepoint => "tracepoint",
        })
    }
}

#[derive(Debug, Error)]
pub enum LoadError {
    #[error(
        "this schedlat was built without its eBPF object (AYA_BUILD_SKIP was set): rebuild with `cargo xtask build`"
    )]
    NoObject,
    #[error("{}", privileges::NEED_PRIVILEGES)]
    NoPrivileges,
    #[error(transparent)]
    Btf(#[from] BtfError),
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error(transparent)]
    BtfPrefix(#[from] btf_prefix::PrefixError),
    #[error("cannot read {path}: {error}")]
    Proc {
        path: &'static str,
        error: std::io::Error,
    },
    #[error("loading the eBPF object failed: {0}")]
    Object(Box<aya::EbpfError>),
    #[error("no hook mode works on this kernel:\n  - {}", .0.join("\n  - "))]
    NoHookMode(Vec<String>),
    #[error("cannot parse BTF {path} for the loader: {error}")]
    LoaderBtf { path: PathBuf, error: aya::BtfError },
    #[error("{mode} program `{program}` failed to {step}: {error}{hint}")]
    Program {
        mode: HookMode,
        program: &'static str,
        step: &'static str,
        error: Box<ProgramError>,
        hint: &'static str,
    },
    #[error(
        "{0} needs the tp_btf hook mode (classic tracepoints carry thread ids only, not the task pointers it reads process, name, cgroup or policy from): drop --hook tp"
    )]
    NeedsBtf(&'static str),
    #[error("{0}: no cgroup hierarchy is mounted")]
    NoCgroupMount(&'static str),
    #[error("eBPF map {0} is missing from the object")]
    MissingMap(&'static str),
    #[error("eBPF map {name}: {error}")]
    Map {
        name: &'static str,
        error: aya::maps::MapError,
    },
}

/// Where kernel facts come from; each `None` means "the usual place".
#[derive(Debug, Clone, Default)]
pub struct KernelSources {
    pub btf: Option<PathBuf>,
    pub tracefs: Option<PathBuf>,
}

/// The load-time facts the programs need, for the chosen mode(s).
#[derive(Debug, Clone, Default)]
struct Globals {
    task: Option<TaskOffsets>,
    /// Only resolved when the mode wants it (slow events' run-queue length).
    rq: Option<RqOffsets>,
    /// Only with `-c` or `--cgroups`.
    cgroup: Option<CgroupOffsets>,
    /// Only with `--pidnss`.
    pidns: Option<PidnsOffsets>,
    tp: Option<TpOffsets>,
}

#[derive(Debug, Clone, Copy)]
struct TpOffsets {
    switch_prev_pid: u64,
    switch_prev_state: u64,
    switch_next_pid: u64,
    wakeup_pid: u64,
    exit_pid: u64,
    state_mask: u64,
}

impl TpOffsets {
    fn read(tracefs: &Path) -> Result<TpOffsets, TracefsError> {
        let switch = Format::read(tracefs, "sched", "sched_switch")?;
        let wakeup = Format::read(tracefs, "sched", "sched_wakeup")?;
        let exit = Format::read(tracefs, "sched", "sched_process_exit")?;
        Ok(TpOffsets {
            switch_prev_pid: switch.offset("prev_pid")?,
            switch_prev_state: switch.offset("prev_state")?,
            switch_next_pid: switch.offset("next_pid")?,
            wakeup_pid: wakeup.offset("pid")?,
            exit_pid: exit.offset("pid")?,
            // TASK_REPORT_MAX has been 0x100 since 4.14; older print formats
            // are parsed, and this is the fallback.
            state_mask: tracefs::runnable_state_mask(&switch).unwrap_or(0xff),
        })
    }
}

/// What loading needs to know about this kernel, resolved before the
/// object is loaded: the candidate modes, their globals, the attach BTF.
struct Plan {
    candidates: Vec<HookMode>,
    /// The tp_btf (program, tracepoint) pairs of the chosen modes.
    btf_programs: [(&'static str, &'static str); 4],
    globals: Globals,
    attach_btf: Option<aya::Btf>,
    notes: Vec<String>,
}

impl Plan {
    /// In auto mode a failure only removes that candidate (with a note);
    /// otherwise it is the error.
    fn resolve(
        choice: HookChoice,
        sources: &KernelSources,
        filter: &Filter,
        modes: &Modes,
        cgroup_hierarchy: Option<&Hierarchy>,
    ) -> Result<Plan, LoadError> {
        let btf_path = sources.btf.clone().unwrap_or_else(|| VMLINUX_BTF.into());
        let mut notes = Vec::new();
        let mut globals = Globals::default();
        let mut attach_btf = None;
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
        let wants = BtfWants {
            rq_len: modes.wants_rq_len(),
            cgroups: cgroup_hierarchy.map(|h| h.css.clone()),
            pidns: modes.keyed.is_some_and(|k| k.by == Breakdown::PidNamespace),
        };
        if candidates.contains(&HookMode::Btf) {
            match resolve_btf(&btf_path, &wants) {
                Ok(facts) => {
                    globals.task = Some(facts.task);
                    globals.rq = facts.rq;
                    globals.cgroup = facts.cgroup;
                    globals.pidns = facts.pidns;
                    attach_btf = Some(facts.attach_btf);
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
                tracefs::locate(sources.tracefs.as_deref()).and_then(|dir| TpOffsets::read(&dir));
            match offsets {
                Ok(offsets) => globals.tp = Some(offsets),
                // Only fatal when it is the last way left.
                Err(e) if candidates.len() > 1 => {
                    notes.push(format!("classic tracepoints unavailable: {e}"));
                    candidates.retain(|m| *m != HookMode::Tracepoint);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Plan {
            candidates,
            btf_programs: modes.btf_programs(),
            globals,
            attach_btf,
            notes,
        })
    }

    /// Attaches in the first candidate mode that works.
    fn attach_first_working(
        self,
        choice: HookChoice,
        ebpf: &mut Ebpf,
    ) -> Result<(HookMode, Vec<String>), LoadError> {
        let mut notes = self.notes;
        let mut failures = Vec::new();
        for mode in self.candidates {
            match attach(ebpf, mode, self.attach_btf.as_ref(), &self.btf_programs) {
                Ok(()) => {
                    notes.extend(failures.iter().map(|f| format!("{f}; fell back to {mode}")));
                    return Ok((mode, notes));
                }
                Err(e) if choice != HookChoice::Auto => return Err(e),
                Err(e) => failures.push(e.to_string()),
            }
        }
        notes.extend(failures);
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
}

struct BtfFacts {
    task: TaskOffsets,
    rq: Option<RqOffsets>,
    cgroup: Option<CgroupOffsets>,
    pidns: Option<PidnsOffsets>,
    attach_btf: aya::Btf,
}

/// task_struct offsets, and the BTF the tp_btf attach needs (a prefix of the
/// kernel's, see btf_prefix.rs), from the BTF at `path`; and the chains
/// `wants` names (the run-queue length only if this kernel has it).
fn resolve_btf(path: &Path, wants: &BtfWants) -> Result<BtfFacts, LoadError> {
    let btf = btf::open(path)?;
    let task = btf::task_offsets(&btf, path)?;
    let rq = wants.rq_len.then(|| btf::rq_offsets(&btf, path)).flatten();
    let cgroup = match &wants.cgroups {
        Some(css) => Some(btf::cgroup_offsets(&btf, path, css)?),
        None => None,
    };
    let pidns = match wants.pidns {
        true => Some(btf::pidns_offsets(&btf, path)?),
        false => None,
    };
    let tracepoints = names::BTF_PROGRAMS.map(|(_, tp)| tp);
    let last_id = btf::last_tracepoint_id(&btf, path, &tracepoints)?;
    let blob = btf_prefix::prefix_blob(path, last_id)?;
    let attach_btf = aya::Btf::parse(&blob, aya::Endianness::default()).map_err(|error| {
        LoadError::LoaderBtf {
            path: path.to_path_buf(),
            error,
        }
    })?;
    Ok(BtfFacts {
        task,
        rq,
        cgroup,
        pidns,
        attach_btf,
    })
}

/// The loaded and attached programs, and the maps userspace reads.
pub struct Tracer {
    ebpf: Ebpf,
    mode: HookMode,
    /// Lines worth telling the user on stderr (fallbacks, sources).
    pub notes: Vec<String>,
    /// The hierarchy cgroup ids refer to, when `-c` or `--cgroups` is on.
    pub cgroup_hierarchy: Option<Hierarchy>,
}

impl Tracer {
    /// Loads the object with `unit_ns` nanoseconds per histogram unit, and
    /// attaches it in the mode `choice` resolves to on this kernel.
    pub fn load(
        choice: HookChoice,
        sources: &KernelSources,
        unit_ns: u64,
        filter: &Filter,
    ) -> Result<Tracer, LoadError> {
        Tracer::load_modes(choice, sources, unit_ns, filter, &Modes::HISTOGRAM)
    }

    /// As `load`, computing `modes` in the kernel (victims, slow events).
    pub fn load_modes(
        choice: HookChoice,
        sources: &KernelSources,
        unit_ns: u64,
        filter: &Filter,
        modes: &Modes,
    ) -> Result<Tracer, LoadError> {
        if EBPF_OBJECT.is_empty() {
            return Err(LoadError::NoObject);
        }
        if !privileges::can_trace() {
            return Err(LoadError::NoPrivileges);
        }
        std::thread::scope(|scope| {
            // aya 0.14's EbpfLoader::new() parses all of the kernel's BTF
            // (~17 ms here) before anything can be configured. Nothing below
            // needs it until the object is loaded, so it runs on a second
            // thread while this one resolves offsets and the attach BTF.
            let loader = scope.spawn(EbpfLoader::new);
            let hierarchy = cgroup_hierarchy(filter, modes)?;
            let plan = Plan::resolve(choice, sources, filter, modes, hierarchy.as_ref())?;
            let mut loader = loader.join().expect("EbpfLoader::new panicked");
            // A custom BTF replaces the one the loader parsed from sysfs. The
            // loader only uses it for CO-RE relocations, which Rust eBPF
            // objects do not have, so the prefix serves.
            if sources.btf.is_some() {
                loader.btf(plan.attach_btf.as_ref());
            }
            configure_loader(&mut loader, &plan.globals, unit_ns, filter)?;
            let globals = &plan.globals;
            modes.configure(&mut loader, globals.task.as_ref(), globals.rq.as_ref())?;
            let mut ebpf = loader
                .load(EBPF_OBJECT)
                .map_err(|e| LoadError::Object(Box::new(e)))?;
            plan.attach_first_working(choice, &mut ebpf)
                .map(|(mode, notes)| Tracer {
                    ebpf,
                    mode,
                    notes,
                    cgroup_hierarchy: hierarchy,
                })
        })
    }

    pub fn mode(&self) -> HookMode {
        self.mode
    }

    /// The loaded object, for the modes that read maps of their own
    /// (victims/collect.rs, slow/mod.rs).
    pub fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.ebpf
    }

    /// Ends the current interval: flips the kernel's extremes epoch, then
    /// returns the cumulative per-CPU statistics and the per-CPU extremes of
    /// the interval that just ended (cleared for its next turn). A wait that
    /// ends within the few microseconds of the flip may have its extremes
    /// land in the neighbouring interval; its count is never lost.
    pub fn end_interval(&mut self) -> Result<(Vec<CpuStats>, Vec<Extremes>), LoadError> {
        let epoch = {
            let name = names::MAP_EPOCH;
            let map = self.ebpf.map_mut(name).ok_or(LoadError::MissingMap(name))?;
            let mut epoch = Array::<&mut MapData, u32>::try_from(map)
                .map_err(|error| LoadError::Map { name, error })?;
            let current = epoch
                .get(&0, 0)
                .map_err(|error| LoadError::Map { name, error })?;
            epoch
                .set(0, current.wrapping_add(1), 0)
                .map_err(|error| LoadError::Map { name, error })?;
            current & 1
        };
        let stats = self.read_stats()?;
        let name = names::MAP_EXTREMES;
        let map = self.ebpf.map_mut(name).ok_or(LoadError::MissingMap(name))?;
        let mut extremes = PerCpuArray::<&mut MapData, Extremes>::try_from(map)
            .map_err(|error| LoadError::Map { name, error })?;
        let ended: Vec<Extremes> = extremes
            .get(&epoch, 0)
            .map_err(|error| LoadError::Map { name, error })?
            .iter()
            .copied()
            .collect();
        let zeros =
            PerCpuValues::try_from(vec![Extremes::default(); ended.len()]).map_err(|error| {
                LoadError::Map {
                    name,
                    error: aya::maps::MapError::SyscallError(aya::sys::SyscallError {
                        call: "build per-CPU zeros",
                        io_error: error,
                    }),
                }
            })?;
        extremes
            .set(epoch, zeros, 0)
            .map_err(|error| LoadError::Map { name, error })?;
        Ok((stats, ended))
    }

    /// Every key's cumulative histogram (`--pids`, `--cgroups`...): empty
    /// unless a breakdown is on.
    pub fn read_keyed(&self) -> Result<Vec<(u64, KeyStats)>, LoadError> {
        let name = names::MAP_KEYED;
        let map = self.ebpf.map(name).ok_or(LoadError::MissingMap(name))?;
        let keyed = aya::maps::HashMap::<&MapData, u64, KeyStats>::try_from(map)
            .map_err(|error| LoadError::Map { name, error })?;
        keyed
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| LoadError::Map { name, error })
    }

    /// Deletes one key's histogram (its task or cgroup is gone).
    pub fn forget_key(&mut self, key: u64) -> Result<(), LoadError> {
        let name = names::MAP_KEYED;
        let map = self.ebpf.map_mut(name).ok_or(LoadError::MissingMap(name))?;
        let mut keyed = aya::maps::HashMap::<&mut MapData, u64, KeyStats>::try_from(map)
            .map_err(|error| LoadError::Map { name, error })?;
        keyed
            .remove(&key)
            .map_err(|error| LoadError::Map { name, error })
    }

    /// Per-CPU statistics, one element per possible CPU.
    pub fn read_stats(&self) -> Result<Vec<CpuStats>, LoadError> {
        let name = names::MAP_STATS;
        let map = self.ebpf.map(name).ok_or(LoadError::MissingMap(name))?;
        let stats = PerCpuArray::<&MapData, CpuStats>::try_from(map)
            .map_err(|error| LoadError::Map { name, error })?;
        let values = stats
            .get(&0, 0)
            .map_err(|error| LoadError::Map { name, error })?;
        Ok(values.iter().copied().collect())
    }
}

/// The hierarchy cgroup ids are read in: `-c`'s, else for `--cgroups` the
/// one holding the cpu controller (cgroupfs.rs).
fn cgroup_hierarchy(filter: &Filter, modes: &Modes) -> Result<Option<Hierarchy>, LoadError> {
    if let Some(target) = &filter.cgroup {
        return Ok(Some(target.hierarchy.clone()));
    }
    if modes.keyed.is_some_and(|k| k.by == Breakdown::Cgroup) {
        return Mounts::read()
            .default_hierarchy()
            .map(Some)
            .ok_or(LoadError::NoCgroupMount("--cgroups"));
    }
    Ok(None)
}

/// Sizes the start array and sets the read-only globals.
fn configure_loader(
    loader: &mut EbpfLoader<'_>,
    globals: &Globals,
    unit_ns: u64,
    filter: &Filter,
) -> Result<(), LoadError> {
    // One start slot per possible TID (see schedlat-ebpf/src/wait.rs).
    loader.map_max_entries(names::MAP_START, pid_max()?);
    // Globals are owned here so the loader can borrow them.
    let values: Vec<(&'static str, u64)> = [
        Some((names::GLOBAL_UNIT_NS, unit_ns)),
        Some((names::GLOBAL_FILTER_TGID, filter.tgid.map_or(0, u64::from))),
        Some((names::GLOBAL_FILTER_TID, filter.tid.map_or(0, u64::from))),
        filter.comm.map(|_| (names::GLOBAL_FILTER_COMM, 1)),
        filter
            .comm
            .map(|c| (names::GLOBAL_FILTER_COMM_LO, comm_word(&c, 0))),
        filter
            .comm
            .map(|c| (names::GLOBAL_FILTER_COMM_HI, comm_word(&c, 1))),
        filter
            .cgroup
            .as_ref()
            .map(|c| (names::GLOBAL_FILTER_CGROUP_ID, c.id)),
        filter.cpus.as_ref().map(|_| (names::GLOBAL_FILTER_CPUS, 1)),
        globals.task.map(|t| (names::GLOBAL_TASK_TGID_OFF, t.tgid)),
        globals.task.map(|t| (names::GLOBAL_TASK_PID_OFF, t.pid)),
        globals
            .task
            .map(|t| (names::GLOBAL_TASK_STATE_OFF, t.state)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_SWITCH_PREV_PID_OFF, t.switch_prev_pid)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_SWITCH_PREV_STATE_OFF, t.switch_prev_state)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_SWITCH_NEXT_PID_OFF, t.switch_next_pid)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_WAKEUP_PID_OFF, t.wakeup_pid)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_EXIT_PID_OFF, t.exit_pid)),
        globals
            .tp
            .map(|t| (names::GLOBAL_TP_STATE_MASK, t.state_mask)),
    ]
    .into_iter()
    .flatten()
    .chain(globals.cgroup.iter().flat_map(cgroup_globals))
    .chain(globals.pidns.iter().flat_map(pidns_globals))
    .collect();
    for (name, value) in values {
        // aya copies the bytes; a leaked u64 per global keeps the borrow simple.
        let value: &'static u64 = Box::leak(Box::new(value));
        loader.override_global(name, value, true);
    }
    if let Some(mask) = filter.cpu_mask() {
        let mask: &'static [u64; schedlat_common::scope::CPU_MASK_WORDS] =
            Box::leak(Box::new(mask));
        loader.override_global(names::GLOBAL_FILTER_CPU_MASK, mask, true);
    }
    Ok(())
}

/// The cgroup chain's globals (schedlat-ebpf scope.rs).
fn cgroup_globals(c: &CgroupOffsets) -> [(&'static str, u64); 6] {
    [
        (names::GLOBAL_TASK_CGROUPS_OFF, c.task_cgroups),
        (names::GLOBAL_CSET_CSS_OFF, c.cset_css),
        (names::GLOBAL_CSS_CGROUP_OFF, c.css_cgroup),
        (names::GLOBAL_CSS_PARENT_OFF, c.css_parent),
        (names::GLOBAL_CGROUP_KN_OFF, c.cgroup_kn),
        (names::GLOBAL_KN_ID_OFF, c.kn_id),
    ]
}

/// The PID namespace chain's globals (schedlat-ebpf scope.rs).
fn pidns_globals(p: &PidnsOffsets) -> [(&'static str, u64); 6] {
    [
        (names::GLOBAL_TASK_THREAD_PID_OFF, p.task_thread_pid),
        (names::GLOBAL_PID_LEVEL_OFF, p.pid_level),
        (names::GLOBAL_PID_NUMBERS_OFF, p.pid_numbers),
        (names::GLOBAL_UPID_SIZE, p.upid_size),
        (names::GLOBAL_UPID_NS_OFF, p.upid_ns),
        (names::GLOBAL_PIDNS_INUM_OFF, p.pidns_inum),
    ]
}

/// Word `i` of a comm as the kernel side loads it (native-endian u64s).
fn comm_word(comm: &[u8; 16], i: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&comm[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(word)
}

/// The kernel's TID limit, to size the start array (one u64 per TID).
pub(crate) fn pid_max() -> Result<u32, LoadError> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = fs::read_to_string(PATH).map_err(|error| LoadError::Proc { path: PATH, error })?;
    text.trim().parse().map_err(|_| LoadError::Proc {
        path: PATH,
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, text.trim().to_string()),
    })
}

fn attach(
    ebpf: &mut Ebpf,
    mode: HookMode,
    btf: Option<&aya::Btf>,
    btf_programs: &[(&'static str, &'static str)],
) -> Result<(), LoadError> {
    let fail = |program, step, error, hint| LoadError::Program {
        mode,
        program,
        step,
        error: Box::new(error),
        hint,
    };
    match mode {
        HookMode::Btf => {
            let btf = btf.expect("BTF is parsed whenever tp_btf is a candidate");
            const HINT: &str = " (the kernel may lack tp_btf support, 5.5+; try --hook tp)";
            for &(program, tracepoint) in btf_programs {
                let prog: &mut BtfTracePoint = program_mut(ebpf, mode, program)?;
                prog.load(tracepoint, btf)
                    .map_err(|e| fail(program, "load", e, HINT))?;
                prog.attach()
                    .map_err(|e| fail(program, "attach", e, HINT))?;
            }
        }
        HookMode::Tracepoint => {
            const HINT: &str =
                " (is tracefs mounted? `mount -t tracefs nodev /sys/kernel/tracing`)";
            for (program, tracepoint) in names::TP_PROGRAMS {
                let prog: &mut TracePoint = program_mut(ebpf, mode, program)?;
                prog.load().map_err(|e| fail(program, "load", e, ""))?;
                prog.attach("sched", tracepoint)
                    .map_err(|e| fail(program, "attach", e, HINT))?;
            }
        }
    }
    Ok(())
}

fn program_mut<'a, T>(
    ebpf: &'a mut Ebpf,
    mode: HookMode,
    name: &'static str,
) -> Result<&'a mut T, LoadError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    let program = ebpf.program_mut(name).ok_or(LoadError::Program {
        mode,
        program: name,
        step: "find",
        error: Box::new(ProgramError::InvalidName {
            name: name.to_string(),
        }),
        hint: " (the embedded object is stale: rebuild)",
    })?;
    program.try_into().map_err(|error| LoadError::Program {
        mode,
        program: name,
        step: "find",
        error: Box::new(error),
        hint: "",
    })
}
