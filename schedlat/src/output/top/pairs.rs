//! Who waited behind whom in `schedlat top` (`--pairs`): the kernel's
//! neighbour-pair table of the last interval, or of the run so far, named
//! at `--by`'s level, under the victims panel's culprits; and below it the
//! second role, who had used the share of a group the waiting workload is
//! in, and the level its wakeups lost at (docs/containers.md).

use std::collections::{HashMap, hash_map::Entry};

use ratatui::text::Line;

use crate::{
    analysis::{
        fmt_ns,
        pairs::{
            LevelRow, PairTable, ShareRow, WorkloadPair, rank, rank_levels, rank_shares, roles,
        },
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
    /// The second role's rows of the run (`rank_shares` adds them up by
    /// identities), and its waits the kernel's table had no room for.
    share_totals: Vec<ShareRow>,
    shares_overflow: u64,
    /// Where the run's waits were decided, when above the waiting
    /// workload's own queue (`rank_levels` adds them up).
    level_totals: Vec<LevelRow>,
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
        let run = self
            .share_totals
            .drain(..)
            .chain(table.shares.iter().cloned());
        self.share_totals = rank_shares(run, None);
        self.shares_overflow += table.shares_overflow;
        let run = (self.level_totals.drain(..)).chain(table.levels.iter().cloned());
        self.level_totals = rank_levels(run, None);
        self.last = table;
    }

    /// The last interval's table, or the run's (`cumulative`), `top` rows.
    pub(crate) fn ranked(&self, cumulative: bool, top: usize) -> PairTable {
        let capacity = self.last.capacity;
        let mut table = if cumulative {
            let rows = self.totals.values().cloned();
            rank(rows, self.by, Some(top), (self.overflow, capacity))
        } else {
            let rows = self.last.rows.iter().cloned();
            rank(rows, self.by, Some(top), (self.last.overflow, capacity))
        };
        let (shares, lost) = match cumulative {
            true => (&self.share_totals, self.shares_overflow),
            false => (&self.last.shares, self.last.shares_overflow),
        };
        table.shares = rank_shares(shares.iter().cloned(), Some(top));
        table.shares_overflow = lost;
        let levels = match cumulative {
            true => &self.level_totals,
            false => &self.last.levels,
        };
        table.levels = rank_levels(levels.iter().cloned(), Some(top));
        table
    }
}

/// How much of the section is shown: rows of each table (a table with
/// rows shown has its heading too), and sentences naming both roles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Shown {
    pub pairs: usize,
    pub shares: usize,
    pub levels: usize,
    pub told: usize,
}

/// The lines the section takes in full: the pairs' heading and rows (one
/// at least), the second role's and the levels' headings and rows when
/// there are any, and a sentence per victim whose two roles are told.
pub(super) fn wanted_lines(table: &PairTable) -> usize {
    height(Shown {
        pairs: table.rows.len().max(1),
        shares: table.shares.len(),
        levels: table.levels.len(),
        told: roles(table).len(),
    })
}

/// The lines `shown` takes, with the headings (the second role's and the
/// levels' only when they have rows).
pub(super) fn height(shown: Shown) -> usize {
    let table = |rows: usize| if rows == 0 { 0 } else { 1 + rows };
    1 + shown.pairs + table(shown.shares) + table(shown.levels) + shown.told
}

/// How much to show in `budget` lines: the pairs' heading and one row
/// at least; the second role's heading and first row when it has any and
/// there is room for both; the first sentence naming both roles; the
/// levels' heading and first row, both or neither; then more pair rows,
/// more of the second role's, more sentences, more levels.
pub(super) fn rows_in(table: &PairTable, budget: usize) -> Shown {
    let mut left = budget.saturating_sub(2);
    // `wanted` lines or as many as are left; with `whole`, all or none.
    let mut take = |wanted: usize, whole: bool| {
        let n = if whole && wanted > left {
            0
        } else {
            wanted.min(left)
        };
        left -= n;
        n
    };
    let told = roles(table).len();
    let shares = usize::from(!table.shares.is_empty() && take(2, true) == 2);
    let first = take(told.min(1), false);
    let levels = usize::from(!table.levels.is_empty() && take(2, true) == 2);
    Shown {
        pairs: 1 + take(table.rows.len().saturating_sub(1), false),
        shares: shares + take(table.shares.len().saturating_sub(1) * shares, false),
        told: first + take(told - first, false),
        levels: levels + take(table.levels.len().saturating_sub(1) * levels, false),
    }
}

/// The section's heading and its first `shown.pairs` rows, then the
/// second role's heading and rows, the levels' heading and rows, and the
/// first `shown.told` sentences naming both roles, each cut to `width`.
pub(super) fn lines(table: &PairTable, shown: Shown, width: usize) -> Vec<Line<'static>> {
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
    out.extend(table.rows.iter().take(shown.pairs).map(|r| {
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
    if shown.shares > 0 {
        let lost = match table.shares_overflow {
            0 => String::new(),
            n => format!(", {n} waits not charged (--max-pairs full)"),
        };
        out.push(Line::from(cut(
            format!("   WAITS  CHARGED  waiting {by} <- {by} that had used the share of a group it is in (of the group){lost}"),
            width,
        )));
        out.extend(table.shares.iter().take(shown.shares).map(|s| {
            let names = format!(
                "{} <- {} (of {})",
                s.victim.shown(),
                s.user.shown(),
                s.group
            );
            counted(&s.counts, &names, width)
        }));
    }
    if shown.levels > 0 {
        out.push(Line::from(cut(
            format!("   WAITS    TOTAL  waiting {by} whose wakeups lost above its own queue (at the group)"),
            width,
        )));
        out.extend(table.levels.iter().take(shown.levels).map(|r| {
            let names = format!("{} (at {})", r.victim.shown(), r.group);
            counted(&r.counts, &names, width)
        }));
    }
    let sentences = roles(table).into_iter().take(shown.told);
    out.extend(sentences.map(|s| Line::from(cut(format!("{}.", printable(&s)), width))));
    out
}

/// A second-role or level row: its waits and their time, then `names`
/// (made printable), cut to `width`.
fn counted(counts: &PairCounts, names: &str, width: usize) -> Line<'static> {
    let text = format!(
        "{:>8} {:>8}  {}",
        counts.count,
        fmt_ns(counts.sum_ns),
        printable(names)
    );
    Line::from(cut(text, width))
}

/// `text` cut to `width` characters.
fn cut(text: String, width: usize) -> String {
    text.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::pairs::Side;

    fn shown(pairs: usize, shares: usize, levels: usize, told: usize) -> Shown {
        Shown {
            pairs,
            shares,
            levels,
            told,
        }
    }

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
        let shown = lines(&run, shown(5, 0, 0, 0), 80);
        assert!(
            shown[0]
                .to_string()
                .contains("waiting container <- container")
        );
        assert!(shown[1].to_string().ends_with("web <- batch"), "{shown:?}");
    }

    /// One wait of `ns`.
    fn one_wait(ns: u64) -> PairCounts {
        PairCounts {
            count: 1,
            sum_ns: ns,
            max_ns: ns,
        }
    }

    fn share(victim: &str, user: &str, ns: u64) -> ShareRow {
        ShareRow {
            victim: Side::plain(victim),
            user: Side::plain(user),
            group: "/kubepods.slice".into(),
            counts: one_wait(ns),
        }
    }

    #[test]
    fn the_second_role_is_shown_under_the_pairs_and_added_up_over_the_run() {
        let mut p = PairsShown::new(Level::Container);
        let mut first = table(&[("web", "/", 10)]);
        first.shares = vec![share("web", "batch", 3_000_000), share("web", "api", 1_000)];
        first.shares_overflow = 2;
        p.push(first);
        let mut second = table(&[("web", "/", 4)]);
        second.shares = vec![share("web", "batch", 2_000_000)];
        p.push(second);

        let last = p.ranked(false, 10);
        assert_eq!(last.shares.len(), 1);
        assert_eq!(last.shares_overflow, 0);
        let run = p.ranked(true, 10);
        assert_eq!(
            (run.shares.iter())
                .map(|s| (s.user.name.as_str(), s.counts.count, s.counts.sum_ns))
                .collect::<Vec<_>>(),
            [("batch", 2, 5_000_000), ("api", 1, 1_000)]
        );
        assert_eq!(run.shares_overflow, 2);

        // Heading and one pair, then the second role's heading and its
        // first row: four lines; wanted_lines says six, of one more share
        // row and the sentence naming both roles (batch's 5 ms against
        // web's 14 us behind /), which a fifth line shows.
        let first = rows_in(&run, 4);
        assert_eq!(first, shown(1, 1, 0, 0));
        assert_eq!(wanted_lines(&run), 6);
        assert_eq!(rows_in(&run, 5), shown(1, 1, 0, 1));
        let with_roles = lines(&run, rows_in(&run, 5), 200);
        assert_eq!(
            with_roles[4].to_string(),
            "web waited behind / (it held the CPU) because batch had used /kubepods.slice's share of the CPU."
        );
        let shown: Vec<String> = lines(&run, first, 200)
            .iter()
            .map(Line::to_string)
            .collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert!(
            shown[2].contains("that had used the share of a group it is in"),
            "{shown:?}"
        );
        assert!(
            shown[2].ends_with("2 waits not charged (--max-pairs full)"),
            "{shown:?}"
        );
        assert!(
            shown[3].ends_with("web <- batch (of /kubepods.slice)"),
            "{shown:?}"
        );
        assert!(shown[3].starts_with("       2  5.00 ms  "), "{shown:?}");
    }

    #[test]
    fn no_second_role_takes_no_lines() {
        let t = table(&[("web", "batch", 1)]);
        assert_eq!(rows_in(&t, 6), shown(1, 0, 0, 0));
        assert_eq!(wanted_lines(&t), 2);
        assert_eq!(lines(&t, shown(1, 0, 0, 0), 80).len(), 2);
    }

    fn level(victim: &str, group: &str, ns: u64) -> LevelRow {
        LevelRow {
            victim: Side::plain(victim),
            group: group.into(),
            counts: one_wait(ns),
        }
    }

    /// Where the waits were decided, under the second role: added up over
    /// the run by (victim, group), the last interval's alone otherwise, and
    /// given lines after the first sentence naming both roles.
    #[test]
    fn the_levels_are_shown_under_the_second_role_and_added_up_over_the_run() {
        let mut p = PairsShown::new(Level::Container);
        let mut first = table(&[("web", "/", 10)]);
        first.shares = vec![share("web", "batch", 3_000_000)];
        first.levels = vec![
            level("web", "/kubepods.slice", 4_000_000),
            level("db", "/kubepods.slice", 1_000),
        ];
        p.push(first);
        let mut second = table(&[("web", "/", 4)]);
        second.levels = vec![level("web", "/kubepods.slice", 2_000_000)];
        p.push(second);

        assert_eq!(p.ranked(false, 10).levels.len(), 1);
        let run = p.ranked(true, 10);
        assert_eq!(
            (run.levels.iter())
                .map(|r| (r.victim.name.as_str(), r.counts.count, r.counts.sum_ns))
                .collect::<Vec<_>>(),
            [("web", 2, 6_000_000), ("db", 1, 1_000)]
        );
        // Pairs (2), second role (2) and the sentence (1) come first; the
        // levels' heading and first row need two more lines, both or none.
        assert_eq!(rows_in(&run, 6), shown(1, 1, 0, 1));
        assert_eq!(rows_in(&run, 7), shown(1, 1, 1, 1));
        assert_eq!(rows_in(&run, 8), shown(1, 1, 2, 1));
        assert_eq!(wanted_lines(&run), 8);
        let text: Vec<String> = lines(&run, rows_in(&run, 8), 200)
            .iter()
            .map(Line::to_string)
            .collect();
        assert_eq!(text.len(), 8, "{text:?}");
        assert!(
            text[4].contains("waiting container whose wakeups lost above its own queue"),
            "{text:?}"
        );
        assert_eq!(text[5], "       2  6.00 ms  web (at /kubepods.slice)");
        assert!(text[7].starts_with("web waited behind /"), "{text:?}");
    }
}
