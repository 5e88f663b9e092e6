//! Loading the embedded eBPF object and attaching it in one of two hook modes,
//! with everything kernel-specific resolved at load time.

mod attach;
mod globals;
mod maps;
mod plan;

use std::{fmt, path::PathBuf};

use aya::{Ebpf, EbpfLoader, programs::ProgramError};
use thiserror::Error;

use crate::{
    kernel::btf::BtfError, kernel::btf_prefix, kernel::cgroupfs::Hierarchy, kernel::filter::Filter,
    kernel::modes::Modes, kernel::privileges, kernel::tracefs::TracefsError,
};

use globals::configure_loader;
pub(crate) use globals::pid_max;
use plan::{Plan, cgroup_hierarchy};

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
    /// A size option past the kernel memory bound (a bad command line).
    #[error("{0}")]
    MapMemory(String),
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
    /// Allow maps larger than map_memory::LIMIT_BYTES.
    pub force_memory: bool,
}

impl LoadError {
    /// Whether the command line is at fault (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, LoadError::MapMemory(_))
    }
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
        let cpus = aya::util::nr_cpus().map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
        let memory_notes = super::map_memory::check(modes, cpus, sources.force_memory)
            .map_err(LoadError::MapMemory)?;
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
                .map(|(mode, mut notes)| Tracer {
                    ebpf,
                    mode,
                    notes: {
                        notes.extend(memory_notes);
                        notes
                    },
                    cgroup_hierarchy: hierarchy,
                })
        })
    }

    pub fn mode(&self) -> HookMode {
        self.mode
    }

    /// The loaded object, for the modes that read maps of their own
    /// (collect/victims.rs, commands/slow/mod.rs).
    pub fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.ebpf
    }
}
