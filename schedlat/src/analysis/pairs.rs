//! Which workload hurts which: the neighbour-pair table's pairs, named,
//! rolled up (pairs whose two sides have the same names add up) and ranked
//! by the wait time they account for.

use std::collections::HashMap;

use crate::{collect::pairs::PairCounts, sys::workload::level::Level};

/// One row: the workload that waited, the one that held the CPU, and
/// the waits of the first behind the second.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkloadPair {
    pub victim: String,
    pub holder: String,
    pub counts: PairCounts,
}

/// The ranked table of one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PairTable {
    /// The rows shown, most wait time first.
    pub rows: Vec<WorkloadPair>,
    /// Rows not shown (beyond `top`), and their waits.
    pub cut: usize,
    pub cut_counts: PairCounts,
    /// Waits no pair could take: the kernel's table was full.
    pub overflow: PairCounts,
    /// The kernel table's size (`--max-pairs`).
    pub capacity: u32,
    /// The level the sides are named at.
    pub by: Level,
}

/// Adds up the pairs with the same names on both sides (named at level
/// `by`), ranks them by total wait (then by names, for a stable order),
/// and keeps `top` rows (all when None).
pub(crate) fn rank(
    pairs: impl IntoIterator<Item = WorkloadPair>,
    by: Level,
    top: Option<usize>,
    (overflow, capacity): (PairCounts, u32),
) -> PairTable {
    let mut merged: HashMap<(String, String), PairCounts> = HashMap::new();
    for p in pairs {
        merged
            .entry((p.victim, p.holder))
            .or_default()
            .add(p.counts);
    }
    let mut rows: Vec<WorkloadPair> = merged
        .into_iter()
        .map(|((victim, holder), counts)| WorkloadPair {
            victim,
            holder,
            counts,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.counts
            .sum_ns
            .cmp(&a.counts.sum_ns)
            .then_with(|| (&a.victim, &a.holder).cmp(&(&b.victim, &b.holder)))
    });
    let keep = top.unwrap_or(rows.len()).min(rows.len());
    let mut cut_counts = PairCounts::default();
    for r in &rows[keep..] {
        cut_counts.add(r.counts);
    }
    let cut = rows.len() - keep;
    rows.truncate(keep);
    PairTable {
        rows,
        cut,
        cut_counts,
        overflow,
        capacity,
        by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(v: &str, h: &str, count: u64, sum_ns: u64, max_ns: u64) -> WorkloadPair {
        WorkloadPair {
            victim: v.into(),
            holder: h.into(),
            counts: PairCounts {
                count,
                sum_ns,
                max_ns,
            },
        }
    }

    #[test]
    fn same_named_pairs_add_up_and_rank_by_wait_time() {
        let t = rank(
            [
                pair("web", "batch", 10, 5_000, 900),
                pair("web", "batch", 5, 3_000, 1_200),
                pair("db", "web", 100, 7_000, 100),
                pair("web", "(idle)", 50, 1_000, 50),
            ],
            Level::Cgroup,
            Some(2),
            (PairCounts::default(), 64),
        );
        assert_eq!(t.rows[0], pair("web", "batch", 15, 8_000, 1_200));
        assert_eq!(t.rows[1], pair("db", "web", 100, 7_000, 100));
        assert_eq!(t.cut, 1);
        assert_eq!(t.cut_counts.count, 50);
    }
}
