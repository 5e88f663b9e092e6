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
/// updates it with atomic adds; u32 counts keep a key at 1,704 bytes.
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
    /// The key's row of `KEY_SUMMARY` ([`KeySummary`]), taken from the
    /// free rows (`KEY_FREE`) when the key was inserted: set before the
    /// insert, so no reader finds the key without it.
    pub summary_slot: u32,
    pub _reserved: u32,
}

impl KeyStats {
    pub const ZERO: KeyStats = KeyStats {
        buckets: [0; NR_BUCKETS],
        log2: [0; NR_LOG2_SLOTS],
        sum_ns: 0,
        comm: [0; 16],
        causes: KeyCauses::ZERO,
        summary_slot: 0,
        _reserved: 0,
    };
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integer fields and byte arrays only, no implicit padding
// (checked below), valid for any bit pattern.
unsafe impl aya::Pod for KeyStats {}

/// One key's waits and their sum, cumulative since its first wait, in
/// the key's row of `KEY_SUMMARY`: a memory-mapped array
/// (`BPF_F_MMAPABLE`) that a scrape reads in place, 24 bytes a key, so
/// that it learns which keys waited since the last, and by how much,
/// without a syscall or a copy (serve reads a whole [`KeyStats`] only for
/// the keys it exports). `key` is 0 in a free row.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeySummary {
    pub key: u64,
    pub waits: u64,
    pub sum_ns: u64,
}

#[cfg(feature = "user")]
// SAFETY: repr(C), three u64s, valid for any bit pattern.
unsafe impl aya::Pod for KeySummary {}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    #[test]
    fn key_stats_has_no_implicit_padding() {
        assert_eq!(
            size_of::<KeyStats>(),
            4 * NR_BUCKETS + 4 * NR_LOG2_SLOTS + 8 + 16 + size_of::<KeyCauses>() + 8
        );
        // The size the docs give (and the kernel side's KEY_ZERO comment).
        assert_eq!(size_of::<KeyStats>(), 1_704);
    }
}
