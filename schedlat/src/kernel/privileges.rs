//! Checks, before touching the kernel, that this process may load and attach
//! tracing programs, so the user gets one clear sentence naming what is
//! missing instead of EPERM.
//!
//! The minimal set, measured (tests/dist.rs runs the systemd unit with
//! exactly it): CAP_BPF (maps, BTF, program load) and CAP_PERFMON (tracing
//! programs, perf events, reading kernel memory). Nothing else for the
//! default tp_btf mode: /sys/kernel/btf/vmlinux is world-readable, and
//! memory locked for maps is charged to the cgroup (5.11+), not
//! RLIMIT_MEMLOCK. `--hook tp` also reads tracefs, mode 0700 root, so it
//! needs CAP_DAC_READ_SEARCH as well (its error says so).

use std::{fmt, fs};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capability set of this process, from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The capabilities tracing needs that `caps` lacks; empty when it may
/// trace: CAP_BPF + CAP_PERFMON (5.8+), or CAP_SYS_ADMIN (which implies
/// both).
fn missing(caps: u64) -> Vec<&'static str> {
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) {
        return Vec::new();
    }
    [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|&(cap, _)| !has(cap))
        .map(|(_, name)| name)
        .collect()
}

/// True when the effective capabilities allow loading and attaching tracing
/// programs.
pub fn can_trace() -> bool {
    // No /proc: let the kernel decide and report its own error.
    effective_caps().is_none_or(|caps| missing(caps).is_empty())
}

/// The sentence for a process that may not trace, naming what it lacks
/// (read when displayed, so it describes this process).
pub struct NeedPrivileges;

pub static NEED_PRIVILEGES: NeedPrivileges = NeedPrivileges;

impl fmt::Display for NeedPrivileges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lacking = effective_caps().map(missing).unwrap_or_default();
        let lacking = match lacking.as_slice() {
            [] => String::new(),
            names => format!(" (this process lacks {})", names.join(" and ")),
        };
        write!(
            f,
            "schedlat loads eBPF programs into the kernel and needs root, or the capabilities CAP_BPF and CAP_PERFMON{lacking}: for example `sudo schedlat`, or `sudo setcap cap_bpf,cap_perfmon+ep $(command -v schedlat)`"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_missing() {
        let bit = |cap: u32| 1u64 << cap;
        assert_eq!(missing(0), ["CAP_BPF", "CAP_PERFMON"]);
        assert_eq!(missing(bit(CAP_BPF)), ["CAP_PERFMON"]);
        assert_eq!(missing(bit(CAP_PERFMON)), ["CAP_BPF"]);
        assert!(missing(bit(CAP_BPF) | bit(CAP_PERFMON)).is_empty());
        assert!(missing(bit(CAP_SYS_ADMIN)).is_empty());
    }
}
