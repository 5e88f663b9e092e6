//! Scopes (README "Scopes"): the in-kernel filters on the task that waited,
//! and the per-key breakdown histograms (`-P`, `-L`, `--pidnss`,
//! `--cgroups`, `--cpus`).

use crate::{NR_BUCKETS, NR_LOG2_SLOTS, causes::KeyCauses};

/// What a breakdown histogram is keyed by: the `Compute` global's
/// [`breakdown`](crate::kconfig::Compute::breakdown) field.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breakdown {
    None = 0,
    /// The waiting task's tgid (`-P`).
    Process = 1,
    /// Its pid, the thread id (`-L`).
    Thread = 2,
    /// The inode number of its active PID namespace (`--pidnss`).
    PidNamespace = 3,
    /// The kernfs id of its cgroup in the chosen hierarchy (`--cgroups`).
    Cgroup = 4,
    /// The CPU the wait ended on, where the task was switched in (`--cpus`).
    Cpu = 5,
}

/// Words of the `--cpu` mask global: room for 1024 CPUs.
pub const CPU_MASK_WORDS: usize = 16;

/// Ancestors the `-c` filter walks up from the task's own cgroup to find the
/// target (it matches the target and its descendants, as cgroup tools do).
pub const MAX_CGROUP_DEPTH: usize = 16;

/// One key's histogram, cumulative since load (userspace differences snapshots,
/// as for [`CpuStats`](crate::CpuStats)). Shared by all CPUs, so the kernel
/// updates it with atomic adds; u32 counts keep a key at 1,696 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyStats {
    pub buckets: [u32; NR_BUCKETS],
    pub log2: [u32; NR_LOG2_SLOTS],
    pub sum_ns: u64,
    /// comm of the task that last waited under this key (thread and
    /// process keys); NUL-padded.
    pub comm: [u8; 16],
    /// The cause split of the key's waits (counts and sums).
    pub causes: KeyCauses,
}

impl KeyStats {
    pub const ZERO: KeyStats = KeyStats {
        buckets: [0; NR_BUCKETS],
        log2: [0; NR_LOG2_SLOTS],
        sum_ns: 0,
        comm: [0; 16],
        causes: KeyCauses::ZERO,
    };
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integer fields and byte arrays only, no implicit padding
// (checked below), valid for any bit pattern.
unsafe impl aya::Pod for KeyStats {}

/// One key's waits and their sum, cumulative since its first wait: a
/// [`KeyStats`]' count and sum in a map of their own (`KEY_SUMMARY`), 16
/// bytes a key, so that a scrape learns which keys waited since the last,
/// and by how much, without copying 1,696 bytes of every key out of the
/// kernel (serve reads a whole histogram only for the keys it exports).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeySummary {
    pub waits: u64,
    pub sum_ns: u64,
}

#[cfg(feature = "user")]
// SAFETY: repr(C), two u64s, valid for any bit pattern.
unsafe impl aya::Pod for KeySummary {}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn key_stats_has_no_implicit_padding() {
        assert_eq!(
            size_of::<KeyStats>(),
            4 * NR_BUCKETS + 4 * NR_LOG2_SLOTS + 8 + 16 + size_of::<KeyCauses>()
        );
        // The size the docs give (and the kernel side's KEY_ZERO comment).
        assert_eq!(size_of::<KeyStats>(), 1_696);
    }
}
