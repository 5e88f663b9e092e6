//! Two readers of one set of per-key intervals: the scrapes and the OTLP
//! push (`--otlp-endpoint`). A per-key or neighbour-pair series is in a
//! reading only when its key waited since the previous reading
//! (export/keyed_series.rs, export/neighbour_series.rs), and each reading
//! moves that "previous" on, whoever asked. Without this, a key that
//! waited before a push and not since would be missing from the next
//! scrape, though the scrape's own interval saw it wait.
//!
//! So each reader is also given the series the *other* reader's readings
//! had since its own last one, at the value they had: a series absent
//! from a reading did not change since it was last read, so that value is
//! still its cumulative value now. Nothing is counted twice: the values
//! are cumulative, not intervals.

use std::collections::BTreeMap;

use crate::{
    collect::pairs::PairCounts,
    export::{
        families::{KeyedScrape, NeighbourScrape},
        model::{Folded, Labels},
    },
};

/// Who reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reader {
    Scrape,
    Push,
}

impl Reader {
    fn index(self) -> usize {
        match self {
            Reader::Scrape => 0,
            Reader::Push => 1,
        }
    }
}

/// Per reader: the series the other's readings had since its own last.
#[derive(Debug, Default)]
pub(super) struct Unseen {
    /// Per-key series by labels: the key (None: the overflow series) and
    /// the value.
    keyed: [BTreeMap<Labels, (Option<u64>, Folded)>; 2],
    pairs: [BTreeMap<Labels, PairCounts>; 2],
    /// The neighbour pairs' second role, as `pairs`.
    shares: [BTreeMap<Labels, PairCounts>; 2],
    /// Where the waits were decided, as `pairs`.
    levels: [BTreeMap<Labels, PairCounts>; 2],
}

impl Unseen {
    /// `reader`'s per-key series: its reading's, then those the other's
    /// readings had since (before the overflow series, whose key is None).
    pub(super) fn keyed(&mut self, reader: Reader, mut read: KeyedScrape) -> KeyedScrape {
        let (mine, other) = (reader.index(), 1 - reader.index());
        let mut keys = read.keys.iter().copied().map(Some);
        let series: Vec<(Labels, (Option<u64>, Folded))> = (read.series.into_iter())
            .map(|(labels, waits)| (labels, (keys.next().flatten(), waits)))
            .collect();
        for (labels, value) in &series {
            self.keyed[other].insert(labels.clone(), value.clone());
        }
        let mut missed = std::mem::take(&mut self.keyed[mine]);
        for (labels, _) in &series {
            missed.remove(labels);
        }
        let (mut keyed, overflow): (Vec<_>, Vec<_>) = (series.into_iter())
            .chain(missed)
            .partition(|(_, (key, _))| key.is_some());
        keyed.sort_by_key(|(_, (key, _))| *key);
        read.keys = keyed.iter().filter_map(|(_, (key, _))| *key).collect();
        read.series = (keyed.into_iter().chain(overflow))
            .map(|(labels, (_, waits))| (labels, waits))
            .collect();
        read
    }

    /// `reader`'s neighbour pairs, of both roles: its reading's, then
    /// those the other's readings had since.
    pub(super) fn pairs(&mut self, reader: Reader, mut read: NeighbourScrape) -> NeighbourScrape {
        merge(&mut self.pairs, reader, &mut read.series);
        merge(&mut self.shares, reader, &mut read.shares);
        merge(&mut self.levels, reader, &mut read.levels);
        read
    }
}

/// `series`, `reader`'s reading, then those of `seen` the other reader's
/// readings had since; what `series` has is kept for the other reader.
fn merge(
    seen: &mut [BTreeMap<Labels, PairCounts>; 2],
    reader: Reader,
    series: &mut Vec<(Labels, PairCounts)>,
) {
    let (mine, other) = (reader.index(), 1 - reader.index());
    for (labels, counts) in series.iter() {
        seen[other].insert(labels.clone(), *counts);
    }
    let missed = std::mem::take(&mut seen[mine]);
    for (labels, counts) in missed {
        if !series.iter().any(|(l, _)| *l == labels) {
            series.push((labels, counts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(n: u64) -> Folded {
        Folded {
            buckets: vec![n],
            sum_ns: n,
            causes: None,
            decision: None,
        }
    }

    fn labels(cgroup: &str) -> Labels {
        vec![("cgroup", cgroup.to_string())]
    }

    fn read(series: &[(&str, Option<u64>, u64)]) -> KeyedScrape {
        KeyedScrape {
            series: series
                .iter()
                .map(|&(c, _, n)| (labels(c), folded(n)))
                .collect(),
            keys: series.iter().filter_map(|&(_, k, _)| k).collect(),
            overflow_keys: 0,
        }
    }

    #[test]
    fn a_scrape_gets_the_series_a_push_read_since_the_previous_scrape() {
        let mut u = Unseen::default();
        // A scrape sees /a; a push then sees /b (which waited) and /a
        // again (more); the next scrape's own reading has only /c.
        let first = u.keyed(Reader::Scrape, read(&[("/a", Some(1), 1)]));
        assert_eq!(first.keys, [1]);
        let push = u.keyed(
            Reader::Push,
            read(&[("/a", Some(1), 2), ("/b", Some(2), 5)]),
        );
        assert_eq!(
            push.keys,
            [1, 2],
            "the push had not seen /a's value 1: it reads 2 now"
        );
        let scrape = u.keyed(
            Reader::Scrape,
            read(&[("/c", Some(3), 7), ("__overflow__", None, 9)]),
        );
        let got: Vec<(String, u64)> = (scrape.series.iter())
            .map(|(l, w)| (l[0].1.clone(), w.sum_ns))
            .collect();
        assert_eq!(
            got,
            [
                ("/a".into(), 2),
                ("/b".into(), 5),
                ("/c".into(), 7),
                ("__overflow__".into(), 9)
            ],
            "the push's latest values, by key, the overflow last"
        );
        assert_eq!(
            scrape.keys,
            [1, 2, 3],
            "a key per series but the overflow's"
        );
        // Handed over once: the next scrape has its own reading only.
        let again = u.keyed(Reader::Scrape, read(&[]));
        assert!(again.series.is_empty());
        // The push is given /c and the overflow from that scrape.
        let push = u.keyed(Reader::Push, read(&[]));
        assert_eq!(push.keys, [3]);
        assert_eq!(push.series.len(), 2);
    }

    #[test]
    fn a_reading_wins_over_an_older_value_of_the_same_series() {
        let mut u = Unseen::default();
        u.keyed(Reader::Push, read(&[("/a", Some(1), 2)]));
        let scrape = u.keyed(Reader::Scrape, read(&[("/a", Some(1), 3)]));
        assert_eq!(scrape.series.len(), 1);
        assert_eq!(scrape.series[0].1.sum_ns, 3);
        let pairs = |n: &[(&str, u64)]| NeighbourScrape {
            series: (n.iter())
                .map(|&(c, w)| {
                    (
                        labels(c),
                        PairCounts {
                            count: w,
                            sum_ns: w,
                            max_ns: w,
                        },
                    )
                })
                .collect(),
            ..NeighbourScrape::default()
        };
        u.pairs(Reader::Push, pairs(&[("/x", 1), ("/y", 4)]));
        let got = u.pairs(Reader::Scrape, pairs(&[("/y", 6)]));
        let got: Vec<(String, u64)> = (got.series.iter())
            .map(|(l, c)| (l[0].1.clone(), c.count))
            .collect();
        assert_eq!(got, [("/y".into(), 6), ("/x".into(), 1)]);
    }
}
