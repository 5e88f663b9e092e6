//! Checks, before touching the kernel, that this process may load and attach
//! tracing programs, so the user gets one clear sentence instead of EPERM.

use std::fs;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capability set of this process, from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// True when the effective capabilities allow loading and attaching tracing
/// programs: CAP_BPF + CAP_PERFMON (5.8+), or CAP_SYS_ADMIN.
pub fn can_trace() -> bool {
    match effective_caps() {
        Some(caps) => {
            let has = |cap: u32| caps & (1u64 << cap) != 0;
            has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
        }
        // No /proc: let the kernel decide and report its own error.
        None => true,
    }
}

pub const NEED_PRIVILEGES: &str = "schedlat loads eBPF programs into the kernel and needs root, or the capabilities CAP_BPF and CAP_PERFMON (for example `sudo schedlat`, or `sudo setcap cap_bpf,cap_perfmon+ep $(which schedlat)`)";
