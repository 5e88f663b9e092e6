//! The read-only globals and map sizes set before the object loads.

use aya::EbpfLoader;
use schedlat_common::names;

use super::plan::Globals;
use crate::kernel::{
    btf::{CgroupOffsets, PidnsOffsets},
    error::LoadError,
    filter::Filter,
    limits::pid_max,
};

/// Sizes the start array and sets the read-only globals.
pub(super) fn configure_loader(
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
