//! Map values of the workload views: the neighbour-pair table (which
//! cgroup waited behind which) and the names of cgroups at their creation.

/// A pair of the neighbour table: the cgroup of the task that waited
/// (victim) and the cgroup of the task that held the CPU when the wait
/// ended (holder: the switch's prev, the victims tables' culprit), as
/// kernfs ids in the hierarchy the cgroup chain reads (`CgroupOffsets`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairKey {
    pub victim: u64,
    /// [`HOLDER_IDLE`] when the CPU was idle until the wait ended.
    pub holder: u64,
}

/// The holder of a wait that ended on an idle CPU (prev was the idle
/// task): no cgroup's id is 0.
pub const HOLDER_IDLE: u64 = 0;

/// One pair's waits, cumulative since load. Shared by all CPUs: count and
/// sum are atomic adds; the maximum is a plain compare-and-store, exact
/// unless two CPUs end a wait of the same pair at the same instant (then
/// the smaller may be the one kept).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

/// Per CPU, cumulative: the waits no pair could take (the table was full,
/// `--max-pairs`), and the cgroup names the ring buffer had no room for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadCounters {
    pub pairs_overflow: u64,
    pub pairs_overflow_ns: u64,
    pub names_lost: u64,
}

/// The longest cgroup path a name record carries: the kernel's own buffer
/// for the cgroup tracepoints' path is 1 KiB (kernel/cgroup/cgroup.c
/// TRACE_CGROUP_PATH_LEN), NUL included; a longer path arrives cut there.
pub const NAME_PATH_LEN: usize = 1024;

/// The header of a cgroup name record (ring buffer CGROUP_NAMES), followed
/// by `len` bytes of path (no NUL), relative to the hierarchy's root.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameHeader {
    /// The new cgroup's kernfs id (what its breakdown key and pairs hold).
    pub id: u64,
    /// Bytes of path after the header.
    pub len: u64,
}

/// A name record as the kernel builds it before sending its used part.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameRecord {
    pub header: NameHeader,
    pub path: [u8; NAME_PATH_LEN],
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: repr(C), u64 fields only: no padding, any bit pattern valid.
    unsafe impl aya::Pod for PairKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for PairStats {}
    // SAFETY: as above.
    unsafe impl aya::Pod for WorkloadCounters {}
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn no_implicit_padding() {
        assert_eq!(size_of::<PairKey>(), 16);
        assert_eq!(size_of::<PairStats>(), 24);
        assert_eq!(size_of::<WorkloadCounters>(), 24);
        assert_eq!(size_of::<NameRecord>(), 16 + NAME_PATH_LEN);
    }
}
