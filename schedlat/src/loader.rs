//! Loading the embedded eBPF object and attaching it in one of two hook modes,
//! with everything kernel-specific resolved at load time.

use std::{
    fmt, fs,
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuArray},
    programs::{BtfTracePoint, ProgramError, TracePoint},
};
use schedlat_common::{CpuStats, names};
use thiserror::Error;

use crate::{
    btf::{self, BtfError, TaskOffsets, VMLINUX_BTF},
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

/// The loaded and attached programs, and the maps userspace reads.
pub struct Tracer {
    ebpf: Ebpf,
    mode: HookMode,
    /// Lines worth telling the user on stderr (fallbacks, sources).
    pub notes: Vec<String>,
}

impl Tracer {
    /// Loads the object with `unit_ns` nanoseconds per histogram unit, and
    /// attaches it in the mode `choice` resolves to on this kernel.
    pub fn load(
        choice: HookChoice,
        sources: &KernelSources,
        unit_ns: u64,
    ) -> Result<Tracer, LoadError> {
        if EBPF_OBJECT.is_empty() {
            return Err(LoadError::NoObject);
        }
        if !privileges::can_trace() {
            return Err(LoadError::NoPrivileges);
        }
        let btf_path = sources.btf.clone().unwrap_or_else(|| VMLINUX_BTF.into());
        let mut notes = Vec::new();
        let mut globals = Globals::default();

        // Resolve what each candidate mode needs; in auto mode a failure only
        // removes that candidate (with a note), otherwise it is the error.
        let mut candidates = match choice {
            HookChoice::Btf => vec![HookMode::Btf],
            HookChoice::Tp => vec![HookMode::Tracepoint],
            HookChoice::Auto => vec![HookMode::Btf, HookMode::Tracepoint],
        };
        if candidates.contains(&HookMode::Btf) {
            match btf::open(&btf_path).and_then(|b| btf::task_offsets(&b, &btf_path)) {
                Ok(offsets) => globals.task = Some(offsets),
                // An explicit --btf that fails is an error even in auto mode.
                Err(e) if choice == HookChoice::Auto && sources.btf.is_none() => {
                    notes.push(format!("not using tp_btf: {e}"));
                    candidates.retain(|m| *m != HookMode::Btf);
                }
                Err(e) => return Err(e.into()),
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

        let wants_btf = candidates.contains(&HookMode::Btf);
        let parse_btf = || {
            aya::Btf::parse_file(&btf_path, aya::Endianness::default()).map_err(|error| {
                LoadError::LoaderBtf {
                    path: btf_path.clone(),
                    error,
                }
            })
        };
        let (mut ebpf, attach_btf) = if sources.btf.is_some() {
            // A custom BTF must be in the loader before it loads.
            let btf = if wants_btf { Some(parse_btf()?) } else { None };
            let ebpf = configure_loader(&globals, btf.as_ref(), unit_ns)?
                .load(EBPF_OBJECT)
                .map_err(|e| LoadError::Object(Box::new(e)))?;
            (ebpf, btf)
        } else {
            // aya 0.14's EbpfLoader::new() parses the kernel BTF itself and
            // cannot share it, and attaching tp_btf programs needs a parsed
            // copy too. Each parse takes ~18 ms here, so the attach copy is
            // parsed on a second thread while the loader does its work.
            std::thread::scope(|scope| {
                let parser = wants_btf.then(|| scope.spawn(parse_btf));
                let ebpf = configure_loader(&globals, None, unit_ns)?
                    .load(EBPF_OBJECT)
                    .map_err(|e| LoadError::Object(Box::new(e)))?;
                let btf = match parser {
                    Some(handle) => Some(handle.join().expect("BTF parser thread panicked")?),
                    None => None,
                };
                Ok::<_, LoadError>((ebpf, btf))
            })?
        };

        let mut failures = Vec::new();
        for mode in candidates {
            match attach(&mut ebpf, mode, attach_btf.as_ref()) {
                Ok(()) => {
                    notes.extend(failures.iter().map(|f| format!("{f}; fell back to {mode}")));
                    return Ok(Tracer { ebpf, mode, notes });
                }
                Err(e) if choice != HookChoice::Auto => return Err(e),
                Err(e) => failures.push(e.to_string()),
            }
        }
        notes.extend(failures);
        Err(LoadError::NoHookMode(notes))
    }

    pub fn mode(&self) -> HookMode {
        self.mode
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

fn configure_loader<'a>(
    globals: &'a Globals,
    btf: Option<&'a aya::Btf>,
    unit_ns: u64,
) -> Result<EbpfLoader<'a>, LoadError> {
    let mut loader = EbpfLoader::new();
    if btf.is_some() {
        loader.btf(btf);
    }
    // One start slot per possible TID (see schedlat-ebpf/src/wait.rs).
    loader.map_max_entries(names::MAP_START, pid_max()?);
    // Globals are owned here so the loader can borrow them.
    let values: Vec<(&'static str, u64)> = [
        Some((names::GLOBAL_UNIT_NS, unit_ns)),
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
    .collect();
    for (name, value) in values {
        // aya copies the bytes; a leaked u64 per global keeps the borrow simple.
        let value: &'static u64 = Box::leak(Box::new(value));
        loader.override_global(name, value, true);
    }
    Ok(loader)
}

/// The kernel's TID limit, to size the start array (one u64 per TID).
fn pid_max() -> Result<u32, LoadError> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = fs::read_to_string(PATH).map_err(|error| LoadError::Proc { path: PATH, error })?;
    text.trim().parse().map_err(|_| LoadError::Proc {
        path: PATH,
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, text.trim().to_string()),
    })
}

fn attach(ebpf: &mut Ebpf, mode: HookMode, btf: Option<&aya::Btf>) -> Result<(), LoadError> {
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
            for (program, tracepoint) in names::BTF_PROGRAMS {
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
