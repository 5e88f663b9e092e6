//! Why loading, attaching or reading the eBPF object failed, in words that
//! say what to do.

use std::path::PathBuf;

use aya::programs::ProgramError;
use thiserror::Error;

use crate::kernel::{btf::BtfError, hook::HookMode, privileges, tracefs::TracefsError};

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
    #[error("cannot build the attach BTF from {path}: {error}")]
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
}

impl LoadError {
    /// Whether the command line is at fault (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, LoadError::MapMemory(_))
    }
}
