//! The kernel configuration set before the object loads: one read-only
//! global per struct of `schedlat_common::kconfig`, every one of them set
//! on every load; and the start array's size.

use aya::{EbpfLoader, Pod};
use schedlat_common::{
    kconfig::{
        CauseOffsets, CgroupOffsets, Compute, DecisionOffsets, KernelGlobal, PidnsOffsets,
        RqOffsets, TaskFilter, TaskOffsets, TpOffsets,
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
    decision: DecisionOffsets,
}

impl KernelConfig {
    pub(super) fn new(
        globals: &Globals,
        filter: &Filter,
        compute: Compute,
        (cause, decision): (CauseOffsets, DecisionOffsets),
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
            decision,
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
        set(loader, &self.decision);
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
        comm_mask: filter.comm.map_or([0; 2], |c| {
            let mask = comm_mask(&c);
            [comm_word(&mask, 0), comm_word(&mask, 1)]
        }),
        cgroup_id: filter.cgroup.as_ref().map_or(0, |c| c.id),
        by_cpu: u64::from(filter.cpus.is_some()),
        cpu_mask: filter.cpu_mask().unwrap_or_default(),
    }
}

/// 0xff over the bytes of a NUL-padded name that a match compares: the
/// name and the NUL that ends it (all 16 for a name that fills them).
fn comm_mask(comm: &[u8; 16]) -> [u8; 16] {
    let compared = comm.iter().position(|&b| b == 0).map_or(16, |nul| nul + 1);
    let mut mask = [0u8; 16];
    mask[..compared].fill(0xff);
    mask
}

/// Word `i` of a comm as the kernel side loads it (native-endian u64s).
fn comm_word(comm: &[u8; 16], i: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&comm[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn padded(name: &str) -> [u8; 16] {
        let mut comm = [0u8; 16];
        comm[..name.len()].copy_from_slice(name.as_bytes());
        comm
    }

    #[test]
    fn a_comm_match_ignores_what_follows_the_nul() {
        // A task renamed from "longer-name" to "hog" by strlcpy keeps the
        // old tail after the NUL: the mask must not compare it.
        let mut renamed = padded("longer-name");
        renamed[..4].copy_from_slice(b"hog\0");
        let filter = padded("hog");
        let mask = comm_mask(&filter);
        for i in 0..2 {
            assert_eq!(
                comm_word(&renamed, i) & comm_word(&mask, i),
                comm_word(&filter, i)
            );
        }
        // Still a whole-name match: "hogs" and "ho" differ from "hog".
        for other in ["hogs", "ho"] {
            let other = padded(other);
            assert_ne!(
                comm_word(&other, 0) & comm_word(&mask, 0),
                comm_word(&filter, 0)
            );
        }
        assert_eq!(comm_mask(&padded("fifteen-chars-x")), [0xff; 16]);
    }
}
