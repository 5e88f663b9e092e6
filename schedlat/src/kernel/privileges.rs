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
//!
//! The container image gives the binary these as file capabilities in the
//! permitted set only (`setcap cap_bpf,cap_perfmon,...+p`), so that a
//! runtime that withholds them still lets it start and say so; schedlat
//! raises them to effective itself ([`raise_permitted`]).

use std::{fmt, fs};

const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_RESOURCE: u32 = 24;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// What schedlat uses when it holds it: tracing (CAP_BPF, CAP_PERFMON, or
/// CAP_SYS_ADMIN, which implies both), tracefs for `--hook tp`
/// (CAP_DAC_READ_SEARCH), and, before Linux 5.11, raising RLIMIT_MEMLOCK
/// for the maps (CAP_SYS_RESOURCE; aya raises it on the first EPERM).
const USED: [u32; 5] = [
    CAP_BPF,
    CAP_PERFMON,
    CAP_SYS_ADMIN,
    CAP_DAC_READ_SEARCH,
    CAP_SYS_RESOURCE,
];

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`
/// (include/uapi/linux/capability.h), version 3: two data words, caps
/// 0-31 then 32-63.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Makes the [`USED`] capabilities that this process holds in its
/// permitted set effective too. A binary with file capabilities but no
/// effective flag (`+p`, as in the container image) starts with them
/// permitted only: the kernel grants them at exec only where the
/// runtime's bounding set has them, and never refuses the exec over
/// them, so the missing ones can be named instead of a bare EPERM from
/// exec. Returns the effective set afterwards. Nothing to do (and no
/// syscall that changes anything) when they are effective already.
pub(crate) fn raise_permitted() -> Option<u64> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData (version 3) for this process.
    let got = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if got != 0 {
        return None;
    }
    let word =
        |pick: fn(&CapData) -> u32| u64::from(pick(&data[0])) | (u64::from(pick(&data[1])) << 32);
    let (effective, permitted) = (word(|d| d.effective), word(|d| d.permitted));
    let used: u64 = USED.iter().map(|cap| 1u64 << cap).sum();
    let raised = effective | (permitted & used);
    if raised == effective {
        return Some(effective);
    }
    for (i, d) in data.iter_mut().enumerate() {
        d.effective = (raised >> (32 * i)) as u32;
    }
    // SAFETY: capset reads the header and two CapData; raising effective
    // capabilities within the permitted set needs no privilege.
    let set = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    Some(if set == 0 { raised } else { effective })
}

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

/// The inode of the initial user namespace (PROC_USER_INIT_INO,
/// include/linux/proc_ns.h): the same on every kernel.
const INIT_USER_NS_INO: u64 = 0xEFFF_FFFD;

/// True when this process is in a user namespace other than the host's
/// (`unshare -U`, a rootless container). Its capabilities hold only there:
/// the kernel's BPF and perf checks (bpf_capable, perfmon_capable) ask the
/// initial namespace, so they allow no tracing. Unknown (no /proc) is
/// taken as the host's: the kernel then gives its own error.
pub(crate) fn in_user_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/user").is_ok_and(|m| m.ino() != INIT_USER_NS_INO)
}

/// The sentence for a process in a user namespace other than the host's.
pub(crate) const USER_NAMESPACE: &str = "this process runs in a user namespace other than the host's (unshare -U, a rootless container): the capabilities it holds there do not allow BPF, which the kernel checks against the host's namespace. Run schedlat in the host's user namespace (root, or CAP_BPF and CAP_PERFMON granted there)";

/// True when the effective capabilities allow loading and attaching tracing
/// programs, once the permitted ones are raised ([`raise_permitted`]).
pub(crate) fn can_trace() -> bool {
    raise_permitted();
    if in_user_namespace() {
        return false;
    }
    // No /proc: let the kernel decide and report its own error.
    effective_caps().is_none_or(|caps| missing(caps).is_empty())
}

/// Why file capabilities could not have applied: under `no_new_privs`
/// (systemd's `NoNewPrivileges=`, Kubernetes' `allowPrivilegeEscalation:
/// false`) the exec grants a non-root user no capability it did not
/// already hold (security/commoncap.c, cap_bprm_creds_from_file). Container
/// runtimes set the granted ones before the exec; a shell or a unit
/// without `AmbientCapabilities=` does not.
fn no_new_privs_note() -> &'static str {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let nnp = status
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:"))
        .is_some_and(|v| v.trim() == "1");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if nnp && !root {
        "; no_new_privs is set, so the binary's file capabilities add none this non-root process did not already hold: grant them as ambient capabilities (systemd's AmbientCapabilities=), or start schedlat without no_new_privs, or as uid 0 with only these capabilities"
    } else {
        ""
    }
}

/// The sentence for a process that may not trace, naming what it lacks
/// (read when displayed, so it describes this process).
pub(crate) struct NeedPrivileges;

pub(crate) static NEED_PRIVILEGES: NeedPrivileges = NeedPrivileges;

impl fmt::Display for NeedPrivileges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if in_user_namespace() {
            return write!(
                f,
                "schedlat loads eBPF programs into the kernel, and {USER_NAMESPACE}"
            );
        }
        let lacking = effective_caps().map(missing).unwrap_or_default();
        let lacking = match lacking.as_slice() {
            [] => String::new(),
            names => format!(" (this process lacks {})", names.join(" and ")),
        };
        write!(
            f,
            "schedlat loads eBPF programs into the kernel and needs root, or the capabilities CAP_BPF and CAP_PERFMON{lacking}: for example `sudo schedlat`, or `sudo setcap cap_bpf,cap_perfmon+ep $(command -v schedlat)`{}",
            no_new_privs_note()
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

    /// The tests run in the host's user namespace (CI's root and a
    /// developer's shell alike).
    #[test]
    fn the_hosts_user_namespace_is_known() {
        assert!(!in_user_namespace());
    }
}
