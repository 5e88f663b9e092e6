//! What the size options (`--max-keys`, `--max-tasks`, `--max-pairs`) cost in kernel
//! memory. The maps are preallocated when the object loads, so a large
//! value takes its memory (and seconds of load time) at once, whether or
//! not the keys ever come: say how much, and refuse past a bound unless
//! `--force-memory` is given.

use schedlat_common::{
    decision::KeyDecision,
    scope::{KeyStats, KeySummary},
    victims::WaitStats,
    workload::{PairKey, PairStats, ShareKey},
};

use crate::kernel::modes::Modes;

/// Beyond this, a size option is refused without `--force-memory`: 256 MiB
/// is 27 times the default key maps (histograms and decision split) and
/// more than a busy machine's tasks need.
pub(crate) const LIMIT_BYTES: u64 = 256 << 20;

/// Costs at or above this are printed; the defaults (a few MiB) are not.
pub(crate) const NOTE_BYTES: u64 = 16 << 20;

/// Per element of a preallocated BPF hash map, besides key and value: the
/// kernel's `struct htab_elem` header (hash chain node, hash), and a
/// 16-byte bucket per element (the bucket array is a power of two at least
/// as large as max_entries).
const HASH_ELEM_OVERHEAD: u64 = 48;
const HASH_BUCKET: u64 = 16;

fn round8(n: usize) -> u64 {
    (n as u64).div_ceil(8) * 8
}

/// The kernel memory one size option makes the maps take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cost {
    pub option: &'static str,
    pub value: u32,
    pub bytes: u64,
}

impl Cost {
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} {} takes about {} of kernel memory for its maps",
            self.option,
            self.value,
            human(self.bytes)
        )
    }
}

/// The costs of the size options `modes` uses; `cpus` adds the idle rows
/// of the culprit table, `decision` (the decision split on) the keys'
/// decision map beside their histograms.
pub(crate) fn costs(modes: &Modes, (cpus, decision): (u32, bool)) -> Vec<Cost> {
    let mut out = Vec::new();
    if let Some(k) = modes.keyed {
        let n = u64::from(k.max_keys);
        let map = |value: usize| {
            let elem = HASH_ELEM_OVERHEAD + 8 + round8(value);
            n * elem + n.next_power_of_two() * HASH_BUCKET
        };
        let split = if decision {
            map(size_of::<KeyDecision>())
        } else {
            0
        };
        out.push(Cost {
            option: "--max-keys",
            value: k.max_keys,
            // The summary rows (an array) and the queue of free rows.
            bytes: map(size_of::<KeyStats>()) + split + n * (size_of::<KeySummary>() as u64 + 4),
        });
    }
    if let Some(max_pairs) = modes.pairs {
        let n = u64::from(max_pairs);
        // Two tables of that size: the pairs and their second role's.
        let table = |key: usize| {
            let elem = HASH_ELEM_OVERHEAD + round8(key) + round8(size_of::<PairStats>());
            n * elem + n.next_power_of_two() * HASH_BUCKET
        };
        out.push(Cost {
            option: "--max-pairs",
            value: max_pairs,
            bytes: table(size_of::<PairKey>()) + table(size_of::<ShareKey>()),
        });
    }
    if let Some(max_tasks) = modes.victims {
        // Two halves (one per interval parity) of each table.
        let n = u64::from(max_tasks);
        let victims = 2 * n * round8(size_of::<WaitStats>());
        let culprits = 2 * (n + u64::from(cpus)) * round8(size_of::<WaitStats>());
        out.push(Cost {
            option: "--max-tasks",
            value: max_tasks,
            bytes: victims + culprits,
        });
    }
    out
}

/// The notes to print, or why the options are refused.
pub(crate) fn check(
    modes: &Modes,
    cpus_decision: (u32, bool),
    force: bool,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    for cost in costs(modes, cpus_decision) {
        if cost.bytes > LIMIT_BYTES && !force {
            return Err(format!(
                "{}, more than the {} schedlat allows without --force-memory: lower {} (each entry is one key or task that can be told apart), or pass --force-memory",
                cost.describe(),
                human(LIMIT_BYTES),
                cost.option
            ));
        }
        if cost.bytes >= NOTE_BYTES {
            notes.push(cost.describe());
        }
    }
    Ok(notes)
}

/// 1.4 GiB, 458 MiB, 5.6 MiB.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::scope::Breakdown;

    use super::*;
    use crate::kernel::modes::Keyed;

    fn keyed(max_keys: u32) -> Modes {
        Modes::histogram(Some(Keyed {
            by: Breakdown::Process,
            max_keys,
        }))
    }

    /// Regression: `--max-keys 1000000` silently took 1.4 GiB of kernel
    /// memory, `victims --max-tasks 1000000` 458 MiB.
    #[test]
    fn large_maps_are_priced_and_refused_unless_forced() {
        let default = check(&keyed(4096), (2, true), false).unwrap();
        assert!(default.is_empty(), "the default is quiet: {default:?}");
        let e = check(&keyed(1_000_000), (2, false), false).unwrap_err();
        assert!(
            e.contains("--max-keys 1000000 takes about 1.") && e.contains("GiB"),
            "{e}"
        );
        assert!(e.contains("--force-memory"), "{e}");
        let forced = check(&keyed(1_000_000), (2, true), true).unwrap();
        assert_eq!(forced.len(), 1, "{forced:?}");
        let e = check(&Modes::victims(1_000_000), (2, false), false).unwrap_err();
        assert!(e.contains("--max-tasks 1000000 takes about"), "{e}");
        // The cost grows with the option: the bound is a number of entries.
        let c = |n| costs(&keyed(n), (2, false))[0].bytes;
        assert!(c(4096) < 8 << 20 && c(4096) > 4 << 20, "{}", human(c(4096)));
        // The keys' decision split: 712 bytes a key more (3.1 MiB at 4096).
        let with_split = costs(&keyed(4096), (2, true))[0].bytes - c(4096);
        assert!(
            (3 << 20..4 << 20).contains(&with_split),
            "{}",
            human(with_split)
        );
        assert!(
            check(&Modes::HISTOGRAM, (2, true), false)
                .unwrap()
                .is_empty()
        );
        // The pair tables (both roles): about 200 bytes a pair.
        let pairs = costs(&Modes::HISTOGRAM.with_pairs(4096), (2, true))[0].bytes;
        assert!((800 << 10..1000 << 10).contains(&pairs), "{}", human(pairs));
        let e = check(&Modes::HISTOGRAM.with_pairs(10_000_000), (2, true), false).unwrap_err();
        assert!(e.contains("--max-pairs 10000000 takes about"), "{e}");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(5_872_025), "5.6 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
