//! Why loading, attaching or reading the eBPF object failed, in words that
//! say what to do.

use std::path::PathBuf;

use aya::programs::ProgramError;
use thiserror::Error;

use crate::kernel::{btf::BtfError, hook::HookMode, privileges, tracefs::TracefsError};

/// The last line of the errors the environment causes: where to see, for
/// every mode at once, what this host and process lack.
pub(crate) const SEE_CHECK: &str =
    "\n  (`schedlat check` tries every mode on this host and names the fix for each)";

#[derive(Debug, Error)]
pub(crate) enum LoadError {
    #[error(
        "this schedlat was built without its eBPF object (AYA_BUILD_SKIP was set): rebuild with `cargo xtask build`"
    )]
    NoObject,
    #[error("{}{SEE_CHECK}", privileges::NEED_PRIVILEGES)]
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
    #[error("loading the eBPF object failed: {}{SEE_CHECK}", chain(.0))]
    Object(Box<aya::EbpfError>),
    /// The kernel refused for a resource limit (too many open files, no
    /// memory for a map): no hook mode would do better, so none is tried.
    #[error("{what} failed: {cause}\n  {fix}")]
    Limit {
        what: String,
        cause: String,
        fix: String,
    },
    #[error("no hook mode works on this kernel:\n  - {}{SEE_CHECK}", .0.join("\n  - "))]
    NoHookMode(Vec<String>),
    #[error("cannot build the attach BTF from {path}: {error}")]
    LoaderBtf { path: PathBuf, error: aya::BtfError },
    #[error("{mode} program `{program}` failed to {step}: {}{hint}{SEE_CHECK}", chain(.error))]
    Program {
        mode: HookMode,
        program: &'static str,
        step: &'static str,
        error: Box<ProgramError>,
        hint: std::borrow::Cow<'static, str>,
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
    /// The breakdown keys' summary rows could not be mapped or queued
    /// (`error` None: the map is missing from the object).
    #[error(
        "cannot set up the keys' summary rows: eBPF map {name}: {}",
        .error.as_ref().map_or_else(|| "missing from the object".to_string(), |e| chain(e))
    )]
    Summaries {
        name: &'static str,
        error: Option<aya::maps::MapError>,
    },
}

impl LoadError {
    /// Whether the command line is at fault (exit status 2).
    pub(crate) fn is_usage(&self) -> bool {
        matches!(self, LoadError::MapMemory(_))
    }
}

/// Descriptors a tracing command holds at most, in every mode: the maps
/// and programs of the object, a link and (for classic tracepoints) a perf
/// event per program, the BTF, the runtime's, the cgroup_mkdir program that
/// names new cgroups, the recorder's dump directory. Measured (6.18, with
/// a syscall tracepoint's program and perf event the object no longer
/// has): `record --ring` worked from `ulimit -n` 49, `serve --cgroups`
/// from 48, and a test runs every mode at this limit, which keeps a
/// margin. `serve` adds one per client connection.
pub(crate) const DESCRIPTORS: u64 = 56;

/// An error and its causes, `a: b: c`. aya keeps the errno in a source
/// ("failed to create map `START`" alone says nothing of why); a cause
/// whose text its parent already shows is not repeated.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// The errno of the first I/O error in `e`'s chain.
pub(crate) fn errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some(code) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(code);
        }
        next = cause.source();
    }
    None
}

impl LoadError {
    /// `what` failed with `e`: a [`LoadError::Limit`] with its fix when the
    /// kernel refused for a resource limit; None otherwise. `sizes` names
    /// what the size options cost (map_memory), for a refused allocation.
    pub(crate) fn limit(
        what: &str,
        e: &(dyn std::error::Error + 'static),
        sizes: &[String],
    ) -> Option<LoadError> {
        let fix = match errno(e)? {
            libc::EMFILE => {
                let soft = crate::sys::own_limits::open_files().map_or("too few".to_string(), |n| n.to_string());
                format!(
                    "EMFILE: schedlat may have {soft} open files (RLIMIT_NOFILE) and needs about {DESCRIPTORS} in every mode, more for serve's clients: raise the limit (`ulimit -n 1024`; LimitNOFILE=1024 in a systemd unit; a container runtime's nofile ulimit)"
                )
            }
            libc::ENFILE => "ENFILE: the system's open-file table is full (/proc/sys/fs/file-nr): close files elsewhere, or raise fs.file-max".to_string(),
            libc::ENOMEM => format!(
                "ENOMEM: the kernel could not allocate the maps' memory{}. Since Linux 5.11 BPF maps are charged to the memory cgroup (MemoryMax= in a systemd unit, a container's memory limit; this process is in {}): raise it, or make the maps smaller (--max-keys, --max-tasks); before 5.11 they count against RLIMIT_MEMLOCK (LimitMEMLOCK=infinity)",
                if sizes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", sizes.join("; "))
                },
                crate::sys::own_limits::own_memory_cgroup()
            ),
            _ => return None,
        };
        // A program's load error carries the verifier's log, which says
        // nothing about a limit.
        let mut cause = chain(e);
        if let Some(at) = cause.find(". Verifier output:") {
            cause.truncate(at);
        }
        Some(LoadError::Limit {
            what: what.to_string(),
            cause,
            fix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29 item 10: `ulimit -n 16` gave "failed to create map START"
    /// with no errno, and an 8 MiB memory cgroup "failed to create map
    /// KEYED" without ENOMEM. The chain carries the errno, and the limit is
    /// named with its fix.
    #[test]
    fn limits_are_named_with_their_fix() {
        let create = |code| {
            aya::EbpfError::MapError(aya::maps::MapError::CreateError {
                name: "START".into(),
                io_error: std::io::Error::from_raw_os_error(code),
            })
        };
        let plain = LoadError::Object(Box::new(create(libc::EINVAL))).to_string();
        assert!(
            plain.contains("failed to create map `START`") && plain.contains("Invalid argument"),
            "{plain}"
        );
        let files = LoadError::limit("loading the eBPF object", &create(libc::EMFILE), &[])
            .unwrap()
            .to_string();
        for needle in [
            "Too many open files",
            "EMFILE",
            "RLIMIT_NOFILE",
            "LimitNOFILE",
            "about 56",
        ] {
            assert!(files.contains(needle), "{needle}: {files}");
        }
        let sizes =
            ["--max-keys 100000 takes about 170 MiB of kernel memory for its maps".to_string()];
        let memory = LoadError::limit("loading the eBPF object", &create(libc::ENOMEM), &sizes)
            .unwrap()
            .to_string();
        for needle in [
            "ENOMEM",
            "memory cgroup",
            "MemoryMax",
            "--max-keys 100000 takes",
            "RLIMIT_MEMLOCK",
        ] {
            assert!(memory.contains(needle), "{needle}: {memory}");
        }
        assert!(LoadError::limit("x", &create(libc::EINVAL), &[]).is_none());
    }
}
