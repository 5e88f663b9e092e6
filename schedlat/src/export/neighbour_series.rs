//! Which neighbour pairs get a series of their own (`serve --pairs`,
//! `--max-pair-series`), on top of the pair table's intervals
//! (collect/pairs.rs). The rules are the per-key series' (keyed_series.rs),
//! for counters:
//!
//! - Only pairs whose holder is another cgroup than the victim are a
//!   neighbour's (not the cgroup's own tasks, not an idle CPU, not the
//!   time the kernel could not charge, which is summed apart).
//! - In a scrape, the pairs that waited since the previous one, most wait
//!   time first, up to `--max-pair-series`, get a series; the interval's
//!   waits of the others go to the overflow pair. A pair with nothing new
//!   is left out (its counters have not changed).
//! - Counters never go down: a pair's series carries the waits of the
//!   intervals in which it had one; the overflow pair only grows.
//! - Labels are fixed when a pair first gets a series.
//! - A pair with a cgroup gone is reported one last time (the pair table
//!   hands its last waits out, then removes it) and forgotten.
//!
//! The second role's series and the levels' (per waiting cgroup and the
//! group at whose level its waits were decided) follow the same rules,
//! each in a state of its own; the levels count every such wait, not a
//! neighbour's share of it.

use std::collections::HashMap;

use super::{families::NeighbourScrape, labels, model::Labels};
use crate::collect::pairs::{Holder, Pair, PairCounts, PairsInterval};

/// A pair's holder when it is a neighbour: a task of another cgroup than
/// the victim (not its own tasks, an idle CPU or uncharged time).
fn neighbour(pair: &Pair) -> Option<u64> {
    match pair.holder {
        Holder::Cgroup(holder) if holder != pair.victim => Some(holder),
        _ => None,
    }
}

/// The state kept across scrapes.
pub(crate) struct NeighbourSeries {
    max_series: usize,
    /// The pairs that had a series: their labels and counters.
    shown: HashMap<Pair, (Labels, PairCounts)>,
    overflow: PairCounts,
    /// Waits the kernel's table had no room for, since load.
    unpaired: PairCounts,
    /// Wait time charged to no holder, since load.
    unapportioned: PairCounts,
    /// The overflow series' labels.
    overflow_labels: fn() -> Labels,
}

impl NeighbourSeries {
    /// The pairs' series, or the second role's.
    pub(crate) fn new(max_series: u32) -> NeighbourSeries {
        NeighbourSeries {
            max_series: max_series as usize,
            shown: HashMap::new(),
            overflow: PairCounts::default(),
            unpaired: PairCounts::default(),
            unapportioned: PairCounts::default(),
            overflow_labels: labels::overflow_pair,
        }
    }

    /// The levels' series: per waiting cgroup and group, its waits decided
    /// at that group's level ([`Self::scrape_levels`]).
    pub(crate) fn levels(max_series: u32) -> NeighbourSeries {
        NeighbourSeries {
            overflow_labels: labels::overflow_level,
            ..NeighbourSeries::new(max_series)
        }
    }

    /// One scrape of the pair table's `interval` (its pairs most wait time
    /// first). `name_pair` gives a pair's labels from its victim's and its
    /// holder's cgroup ids (labels::pair); `gone` lists the cgroups found
    /// gone in this interval.
    pub(crate) fn scrape(
        &mut self,
        interval: &PairsInterval,
        mut name_pair: impl FnMut(u64, u64) -> Labels,
        gone: &[u64],
    ) -> NeighbourScrape {
        self.unpaired.add(interval.overflow);
        for (pair, new) in &interval.pairs {
            if pair.holder == Holder::Unapportioned {
                self.unapportioned.add(*new);
            }
        }
        let name = |pair: &Pair, holder| name_pair(pair.victim, holder);
        let (series, overflow_pairs) = self.export(&interval.pairs, neighbour, name, gone);
        NeighbourScrape {
            series,
            overflow_pairs,
            unpaired: self.unpaired,
            unapportioned: self.unapportioned,
            shares: Vec::new(),
            levels: Vec::new(),
        }
    }

    /// The second role's series (a state of their own): `shares` are the
    /// pairs whose holder had used the share of the group a wakeup of the
    /// victim lost with, already kept to the holders inside that group;
    /// `name_pair` gives their labels from the pair and its holder's id
    /// (the group's among them).
    pub(crate) fn scrape_shares(
        &mut self,
        shares: &[(Pair, PairCounts)],
        name_pair: impl FnMut(&Pair, u64) -> Labels,
        gone: &[u64],
    ) -> Vec<(Labels, PairCounts)> {
        self.export(shares, neighbour, name_pair, gone).0
    }

    /// Where waits were decided (a state of their own): `levels` are the
    /// interval's (victim, group) rows, each the waits of the victim
    /// decided at the level of that group of its; `name_level` gives their
    /// labels from the row and the group's id.
    pub(crate) fn scrape_levels(
        &mut self,
        levels: &[(Pair, PairCounts)],
        name_level: impl FnMut(&Pair, u64) -> Labels,
        gone: &[u64],
    ) -> Vec<(Labels, PairCounts)> {
        self.export(levels, |pair| pair.parent, name_level, gone).0
    }

    /// The pairs that `series_of` gives an id (the one their labels are
    /// made from with the victim) that get a series in this scrape, with
    /// their cumulative counts, then the overflow pair; and how many pairs
    /// went to the overflow pair.
    fn export(
        &mut self,
        pairs: &[(Pair, PairCounts)],
        series_of: impl Fn(&Pair) -> Option<u64>,
        mut name_pair: impl FnMut(&Pair, u64) -> Labels,
        gone: &[u64],
    ) -> (Vec<(Labels, PairCounts)>, u64) {
        let mut exported = Vec::new();
        let mut overflow_pairs = 0;
        for (pair, new) in pairs {
            let Some(id) = series_of(pair) else {
                continue;
            };
            if exported.len() == self.max_series {
                self.overflow.add(*new);
                overflow_pairs += 1;
                continue;
            }
            let (_, own) = (self.shown.entry(*pair))
                .or_insert_with(|| (name_pair(pair, id), PairCounts::default()));
            own.add(*new);
            exported.push(*pair);
        }
        exported.sort_unstable();
        let mut series: Vec<(Labels, PairCounts)> = (exported.iter())
            .map(|pair| self.shown[pair].clone())
            .collect();
        if self.overflow.count > 0 {
            series.push(((self.overflow_labels)(), self.overflow));
        }
        self.shown.retain(|pair, _| {
            let holder_gone = matches!(pair.holder, Holder::Cgroup(id) if gone.contains(&id));
            let group_gone = pair.parent.is_some_and(|id| gone.contains(&id));
            !holder_gone && !group_gone && !gone.contains(&pair.victim)
        });
        (series, overflow_pairs)
    }

    /// Pairs remembered (tests: gone pairs are forgotten).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.shown.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(count: u64, sum_ns: u64) -> PairCounts {
        PairCounts {
            count,
            sum_ns,
            max_ns: 0,
        }
    }

    fn pair(victim: u64, holder: Holder) -> Pair {
        Pair {
            victim,
            holder,
            parent: None,
        }
    }

    /// The pair table's interval, sorted as it hands it out.
    fn interval(mut pairs: Vec<(Pair, PairCounts)>, overflow: PairCounts) -> PairsInterval {
        pairs.sort_by(|a, b| b.1.sum_ns.cmp(&a.1.sum_ns).then(a.0.cmp(&b.0)));
        PairsInterval {
            pairs,
            overflow,
            capacity: 64,
            ..PairsInterval::default()
        }
    }

    fn name(victim: u64, holder: u64) -> Labels {
        vec![
            ("cgroup", format!("/g{victim}")),
            ("holder_cgroup", format!("/g{holder}")),
        ]
    }

    fn value<'a>(s: &'a NeighbourScrape, victim: &str, holder: &str) -> Option<&'a PairCounts> {
        s.series
            .iter()
            .find(|(l, _)| {
                l.contains(&("cgroup", victim.into()))
                    && l.contains(&("holder_cgroup", holder.into()))
            })
            .map(|(_, c)| c)
    }

    #[test]
    fn only_other_cgroups_are_neighbours_and_the_top_pairs_get_series() {
        let mut series = NeighbourSeries::new(2);
        let s = series.scrape(
            &interval(
                vec![
                    (pair(1, Holder::Cgroup(2)), counts(10, 9_000)),
                    (pair(1, Holder::Cgroup(3)), counts(5, 5_000)),
                    (pair(1, Holder::Cgroup(4)), counts(1, 1_000)),
                    // Its own tasks and the idle CPU: no neighbour.
                    (pair(1, Holder::Cgroup(1)), counts(100, 99_000)),
                    (pair(1, Holder::Idle), counts(100, 98_000)),
                    // What the kernel could not charge: no neighbour's,
                    // counted apart.
                    (pair(1, Holder::Unapportioned), counts(2, 4_000)),
                ],
                counts(7, 700),
            ),
            name,
            &[],
        );
        assert_eq!(value(&s, "/g1", "/g2"), Some(&counts(10, 9_000)));
        assert_eq!(value(&s, "/g1", "/g3"), Some(&counts(5, 5_000)));
        assert_eq!(value(&s, "/g1", "/g4"), None);
        assert_eq!(
            value(&s, labels::OVERFLOW, labels::OVERFLOW),
            Some(&counts(1, 1_000))
        );
        assert_eq!(s.series.len(), 3);
        assert_eq!(s.overflow_pairs, 1);
        assert_eq!(s.unpaired, counts(7, 700));
        assert_eq!(s.unapportioned, counts(2, 4_000));
    }

    #[test]
    fn counters_never_go_down_and_a_returning_pair_keeps_its_value() {
        let mut series = NeighbourSeries::new(1);
        let (a, b) = (pair(1, Holder::Cgroup(2)), pair(3, Holder::Cgroup(2)));
        series.scrape(
            &interval(vec![(a, counts(4, 400))], PairCounts::default()),
            name,
            &[],
        );
        // b waits more: a's waits of this interval go to overflow.
        let s = series.scrape(
            &interval(
                vec![(a, counts(1, 100)), (b, counts(2, 200))],
                PairCounts::default(),
            ),
            name,
            &[],
        );
        assert_eq!(value(&s, "/g3", "/g2"), Some(&counts(2, 200)));
        assert_eq!(value(&s, "/g1", "/g2"), None, "left out: not in the top");
        let s = series.scrape(
            &interval(vec![(a, counts(1, 100))], counts(3, 30)),
            name,
            &[],
        );
        assert_eq!(value(&s, "/g1", "/g2"), Some(&counts(5, 500)));
        assert_eq!(
            value(&s, labels::OVERFLOW, labels::OVERFLOW),
            Some(&counts(1, 100))
        );
        assert_eq!(s.unpaired, counts(3, 30), "cumulative");
    }

    #[test]
    fn levels_get_series_per_cgroup_and_group_with_their_own_overflow() {
        let mut series = NeighbourSeries::levels(1);
        let level = |victim, group| Pair {
            victim,
            holder: Holder::Waited,
            parent: Some(group),
        };
        let name = |pair: &Pair, group| {
            vec![
                ("cgroup", format!("/g{}", pair.victim)),
                ("group", format!("/g{group}")),
            ]
        };
        let rows = [
            (level(1, 10), counts(8, 8_000)),
            (level(2, 10), counts(1, 1_000)),
        ];
        let s = series.scrape_levels(&rows, name, &[]);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0], (name(&rows[0].0, 10), counts(8, 8_000)));
        let overflow = vec![
            ("cgroup", labels::OVERFLOW.to_string()),
            ("group", labels::OVERFLOW.to_string()),
        ];
        assert_eq!(s[1], (overflow, counts(1, 1_000)));
        // The group gone: its rows are reported once more, then forgotten.
        let s = series.scrape_levels(&rows[..1], name, &[10]);
        assert_eq!(s[0].1, counts(16, 16_000), "cumulative");
        assert_eq!(series.remembered(), 0);
    }

    #[test]
    fn pairs_of_gone_cgroups_are_reported_once_more_then_forgotten() {
        let mut series = NeighbourSeries::new(10);
        let s = series.scrape(
            &interval(
                vec![
                    (pair(1, Holder::Cgroup(2)), counts(1, 10)),
                    (pair(3, Holder::Cgroup(4)), counts(1, 10)),
                ],
                PairCounts::default(),
            ),
            name,
            &[2],
        );
        assert_eq!(s.series.len(), 2, "its last waits are exported");
        assert_eq!(series.remembered(), 1);
    }
}
