//! Who waited behind whom in `schedlat top` (`--pairs`): the kernel's
//! neighbour-pair table of the last interval, or of the run so far, named
//! at `--by`'s level, under the victims panel's culprits.

use std::collections::{HashMap, hash_map::Entry};

use ratatui::text::Line;

use crate::{
    analysis::{
        fmt_ns,
        pairs::{PairTable, WorkloadPair, rank},
    },
    collect::pairs::PairCounts,
    output::escape::printable,
    sys::workload::level::Level,
};

/// The last interval's pairs and the run's, added up by their sides'
/// identities (each shown by its best name, `rank` chooses).
#[derive(Debug, Default)]
pub(crate) struct PairsShown {
    by: Level,
    last: PairTable,
    totals: HashMap<(String, String), WorkloadPair>,
    /// Waits in no pair over the run (the kernel's table was full).
    overflow: PairCounts,
}

impl PairsShown {
    pub(crate) fn new(by: Level) -> PairsShown {
        PairsShown {
            by,
            ..PairsShown::default()
        }
    }

    /// Takes one interval's table (every row: ranked with no `top`).
    pub(crate) fn push(&mut self, table: PairTable) {
        for r in &table.rows {
            let key = (r.victim.identity.clone(), r.holder.identity.clone());
            match self.totals.entry(key) {
                Entry::Occupied(mut e) => {
                    let total = e.get_mut();
                    total.counts.add(r.counts);
                    // The newest names: a container's runtime files can
                    // be read after its first interval.
                    (total.victim, total.holder) = (r.victim.clone(), r.holder.clone());
                }
                Entry::Vacant(e) => {
                    e.insert(r.clone());
                }
            }
        }
        self.overflow.add(table.overflow);
        self.last = table;
    }

    /// The last interval's table, or the run's (`cumulative`), `top` rows.
    pub(crate) fn ranked(&self, cumulative: bool, top: usize) -> PairTable {
        let capacity = self.last.capacity;
        if cumulative {
            let rows = self.totals.values().cloned();
            rank(rows, self.by, Some(top), (self.overflow, capacity))
        } else {
            let rows = self.last.rows.iter().cloned();
            rank(rows, self.by, Some(top), (self.last.overflow, capacity))
        }
    }
}

/// The section's heading and its first `rows` rows, cut to `width`.
pub(super) fn lines(table: &PairTable, rows: usize, width: usize) -> Vec<Line<'static>> {
    let by = table.by.as_str();
    let full = if table.overflow.count > 0 {
        format!(
            ", {} waits in no pair (--max-pairs {} full)",
            table.overflow.count, table.capacity
        )
    } else {
        String::new()
    };
    let mut out = vec![Line::from(cut(
        format!("   WAITS    TOTAL      MAX  waiting {by} <- {by} that held the CPU{full}"),
        width,
    ))];
    if table.rows.is_empty() {
        out.push(Line::from("no waits"));
    }
    out.extend(table.rows.iter().take(rows).map(|r| {
        Line::from(cut(
            format!(
                "{:>8} {:>8} {:>8}  {} <- {}",
                r.counts.count,
                fmt_ns(r.counts.sum_ns),
                fmt_ns(r.counts.max_ns),
                printable(&r.victim.shown()),
                printable(&r.holder.shown())
            ),
            width,
        ))
    }));
    out
}

/// `text` cut to `width` characters.
fn cut(text: String, width: usize) -> String {
    text.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::pairs::Side;

    fn table(rows: &[(&str, &str, u64)]) -> PairTable {
        let rows = rows.iter().map(|&(victim, holder, count)| WorkloadPair {
            victim: Side::plain(victim),
            holder: Side::plain(holder),
            counts: PairCounts {
                count,
                sum_ns: count * 1_000,
                max_ns: 1_000,
            },
        });
        rank(rows, Level::Container, None, (PairCounts::default(), 64))
    }

    #[test]
    fn the_run_adds_up_intervals_and_the_last_stays_the_last() {
        let mut p = PairsShown::new(Level::Container);
        p.push(table(&[("web", "batch", 10), ("db", "web", 2)]));
        p.push(table(&[("web", "batch", 5)]));
        let last = p.ranked(false, 10);
        assert_eq!(last.rows.len(), 1);
        assert_eq!(last.rows[0].counts.count, 5);
        let run = p.ranked(true, 1);
        assert_eq!(
            (run.rows[0].victim.name.as_str(), run.rows[0].counts.count),
            ("web", 15)
        );
        assert_eq!(run.cut, 1);
        let shown = lines(&run, 5, 80);
        assert!(
            shown[0]
                .to_string()
                .contains("waiting container <- container")
        );
        assert!(shown[1].to_string().ends_with("web <- batch"), "{shown:?}");
    }
}
