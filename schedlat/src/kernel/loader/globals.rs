//! The kernel configuration set before the object loads: one read-only
//! global per struct of `schedlat_common::kconfig`, every one of them set
//! on every load; and the start array's size.

use aya::{EbpfLoader, Pod};
use schedlat_common::{
    kconfig::{
        CauseOffsets, CgroupOffsets, Compute, KernelGlobal, PidnsOffsets, RqOffsets, TaskFilter,
        TaskOffsets, TpOffsets,
    },
    names,
};

use super::plan::Globals;
use crate::kernel::{error::LoadError, filter::Filter, limits::pid_max};

/// Every global of the object, as the loader sets them. Offsets a run does
/// not need (the other hook mode's, chains no filter or breakdown reads)
/// are zero: the code that would read them is dead for the verifier.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelConfig {
    task: TaskOffsets,
    rq: RqOffsets,
    cgroup: CgroupOffsets,
    pidns: PidnsOffsets,
    tp: TpOffsets,
    filter: TaskFilter,
    compute: Compute,
    cause: CauseOffsets,
}

impl KernelConfig {
    pub(super) fn new(
        globals: &Globals,
        filter: &Filter,
        compute: Compute,
        cause: CauseOffsets,
    ) -> KernelConfig {
        KernelConfig {
            task: globals.task.unwrap_or(TaskOffsets::ZERO),
            rq: globals.rq.unwrap_or(RqOffsets::ZERO),
            cgroup: globals.cgroup.unwrap_or(CgroupOffsets::ZERO),
            pidns: globals.pidns.unwrap_or(PidnsOffsets::ZERO),
            tp: globals.tp.unwrap_or(TpOffsets::ZERO),
            filter: task_filter(filter),
            compute,
            cause,
        }
    }

    /// Sizes the start array and sets every global. They must exist: an
    /// object without one of them fails to load rather than run unset.
    pub(super) fn configure<'a>(&'a self, loader: &mut EbpfLoader<'a>) -> Result<(), LoadError> {
        // One start slot per possible TID (see schedlat-ebpf/src/wait.rs).
        loader.map_max_entries(names::MAP_START, pid_max()?);
        set(loader, &self.task);
        set(loader, &self.rq);
        set(loader, &self.cgroup);
        set(loader, &self.pidns);
        set(loader, &self.tp);
        set(loader, &self.filter);
        set(loader, &self.compute);
        set(loader, &self.cause);
        Ok(())
    }
}

fn set<'a, T: KernelGlobal + Pod>(loader: &mut EbpfLoader<'a>, value: &'a T) {
    loader.override_global(T::SYMBOL, value, true);
}

/// The filters on the task that waited, as the programs test them.
fn task_filter(filter: &Filter) -> TaskFilter {
    TaskFilter {
        tgid: filter.tgid.map_or(0, u64::from),
        tid: filter.tid.map_or(0, u64::from),
        by_comm: u64::from(filter.comm.is_some()),
        comm: filter
            .comm
            .map_or([0; 2], |c| [comm_word(&c, 0), comm_word(&c, 1)]),
        cgroup_id: filter.cgroup.as_ref().map_or(0, |c| c.id),
        by_cpu: u64::from(filter.cpus.is_some()),
        cpu_mask: filter.cpu_mask().unwrap_or_default(),
    }
}

/// Word `i` of a comm as the kernel side loads it (native-endian u64s).
fn comm_word(comm: &[u8; 16], i: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&comm[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(word)
}
