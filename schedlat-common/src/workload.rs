//! Map values of the workload views: the neighbour-pair table (which
//! cgroup waited behind which, each wait's time charged to the cgroups
//! that ran on its CPU during it), the per-CPU record of recent switches
//! that the charge walks, and the names of cgroups at their creation.

/// A pair of the neighbour table: the cgroup of the task that waited
/// (victim) and the cgroup of a task that held its CPU during the wait
/// (holder), as kernfs ids in the hierarchy the cgroup chain reads
/// (`CgroupOffsets`). A wait is charged to every holder that ran during
/// it, by its time on the CPU inside the wait.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairKey {
    pub victim: u64,
    /// [`HOLDER_IDLE`] when the CPU was idle until the wait ended.
    pub holder: u64,
}

/// A pair of the second role (its own table, so that the first's key
/// stays two words to hash at every charge): the wakeup of a task of
/// `victim` was declined at a queue above its own, where the entity of
/// `group` (a cgroup the victim is in, the cpu controller's id) lost, not
/// eligible or with a later deadline, or it was passed over; `user` is
/// the cgroup of a task that ran on the CPU just before the wait (in a
/// window as long as the wait): it may have used that group's share.
/// Userspace keeps the users inside `group` and not the victim's own.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareKey {
    pub victim: u64,
    pub user: u64,
    pub group: u64,
}

/// The holder of the time a CPU was idle during a wait (the idle task
/// ran: the wakeup's own latency onto an idle CPU): no cgroup's id is 0.
pub const HOLDER_IDLE: u64 = 0;

/// The holder of the part of a wait the kernel could not apportion: the
/// wait began before the oldest run its CPU remembers ([`RING_SWITCHES`]),
/// or it was queued on another CPU before a migration. No cgroup's id is
/// all ones.
pub const HOLDER_UNAPPORTIONED: u64 = u64::MAX;

/// The `user` of a second-role row ([`ShareKey`]) that counts the waits
/// themselves: of `victim`, those decided at `group`'s level (its entity
/// lost at a queue above the victim's own), their number and their
/// whole wait time, whoever ran before them. This is the level each
/// decision was made at. No cgroup's id is this.
pub const HOLDER_WAITED: u64 = u64::MAX - 1;

/// Runs each CPU remembers for the charge: a wait is apportioned over at
/// most this many runs of other tasks and the run that ends it (the rest
/// of it, further back, is [`HOLDER_UNAPPORTIONED`]). A power of two: the
/// ring's index is masked. Measured on one CPU with a 1 ms sleeper and
/// three busy loops at nice 0, 3 and 6 beside other builds and tests
/// (load 7-11 on 2 CPUs), 5 s rounds: with 16 runs, 4.0-5.5% of their
/// wait time was unapportioned in most rounds (the nice 6 loop's waits,
/// up to 80 ms); with 32, 0.3-2.4%; either up to 40% in a round where
/// another test's many short tasks shared the CPU. Each run costs the
/// verifier about 134 instructions (sched_switch with `--cgroups
/// --pairs`: 20,364 with 16, 22,508 with 32) and 24 bytes per CPU.
pub const RING_SWITCHES: usize = 32;

/// One run on a CPU: `holder` held it from `since` to `until`
/// (bpf_ktime_get_ns). Who the holder is depends on the ring: a cgroup's
/// id (or [`HOLDER_IDLE`]) in the neighbour pairs' ring, a task's TID (0:
/// the idle task) in the slow stacks' ring of runs (`victims::SlowStacks`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchRecord {
    pub since: u64,
    pub until: u64,
    pub holder: u64,
}

/// Per CPU, its last [`RING_SWITCHES`] runs: record `(next - 1) mod
/// RING_SWITCHES` is the newest, each began when the one before it ended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchRing {
    /// Records written since load.
    pub next: u64,
    /// When the newest record ended: the next one's `since`.
    pub last_at: u64,
    pub records: [SwitchRecord; RING_SWITCHES],
}

/// One pair's charges, cumulative since load. Shared by all CPUs: count
/// and sum are atomic adds; the maximum and the tag are plain stores,
/// exact unless two CPUs charge the same pair at the same instant (then
/// the smaller maximum may be the one kept, or a wait counted twice).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    /// Waits the holder took part in (once each, however many of its
    /// runs the wait spanned).
    pub count: u64,
    /// The time charged to the holder: its time on the CPU inside them.
    pub sum_ns: u64,
    /// The longest of those waits, whole.
    pub max_ns: u64,
    /// The last wait charged (its CPU and end), so that a wait that
    /// spans two runs of the same holder counts once.
    pub tag: u64,
}

/// Per CPU, cumulative: the waits of which a charge found no pair (the
/// table was full, `--max-pairs`) and the time of those charges, the
/// cgroup names the ring buffer had no room for, and the waits of which a
/// second-role charge found no pair.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadCounters {
    pub pairs_overflow: u64,
    pub pairs_overflow_ns: u64,
    pub names_lost: u64,
    /// Waits whose second-role charges ([`ShareKey`]) found their table
    /// full: apart from the first role's, whose charges add up to the waits.
    pub shares_overflow: u64,
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
    unsafe impl aya::Pod for ShareKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for PairStats {}
    // SAFETY: as above.
    unsafe impl aya::Pod for WorkloadCounters {}
    // SAFETY: as above.
    unsafe impl aya::Pod for SwitchRing {}
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn no_implicit_padding() {
        assert_eq!(size_of::<PairKey>(), 16);
        assert_eq!(size_of::<ShareKey>(), 24);
        assert_eq!(size_of::<PairStats>(), 32);
        assert_eq!(size_of::<SwitchRing>(), 16 + 24 * RING_SWITCHES);
        assert!(RING_SWITCHES.is_power_of_two());
        assert_eq!(size_of::<WorkloadCounters>(), 32);
        assert_eq!(size_of::<NameRecord>(), 16 + NAME_PATH_LEN);
    }
}
