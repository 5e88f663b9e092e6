//! The histogram of `schedlat top`: runqlat's log2 rows as bars, folded to
//! fit the rows there are. Nothing is cut: when the terminal is short, the
//! sparsest neighbouring rows merge into one range (`16 -> 2047 : 3`), and
//! the rows holding p50, p90, p99, p99.9 and the verdict's modes are merged
//! with each other last, so the part of the histogram the verdict talks
//! about is always on screen, labelled.

use ratatui::{
    layout::Rect,
    text::Line,
    widgets::{Block, Borders, Paragraph},
};

use super::state::State;
use crate::{
    analysis::{percentiles::Percentiles, shape},
    histogram::{log2_slot, log2_slot_bounds},
    sys::slice::Slice,
};

/// Title and column header.
pub(super) const CHROME: u16 = 2;

/// A row: its first and last log2 slot, and the marks it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    lo: usize,
    hi: usize,
    marks: Vec<&'static str>,
}

/// The slots the reader must see, with their marks: the percentiles the
/// view prints and the modes the verdict names (in µs slots, as the rows).
fn key_slots(state: &State, slice: &Slice) -> Vec<(usize, &'static str)> {
    let (waits, _) = state.shown();
    let slot = |ns: u64| log2_slot(ns / 1000);
    let mut keys = Vec::new();
    if let Some(p) = Percentiles::of(waits) {
        keys.extend([
            (slot(p.p50_ns), "p50"),
            (slot(p.p90_ns), "p90"),
            (slot(p.p99_ns), "p99"),
            (slot(p.p999_ns), "p99.9"),
        ]);
    }
    if let Some((fast, slow)) = shape::classify(waits, slice).evidence.modes_ns {
        keys.extend([(slot(fast), "fast mode"), (slot(slow), "slow mode")]);
    }
    keys
}

/// The rows at most `fit` high: one per slot from the first non-empty one,
/// then the neighbouring pair holding the fewest waits merged, again and
/// again (empty runs go first); pairs that both carry a mark merge only
/// when nothing else is left.
fn rows(slots: &[u64], keys: &[(usize, &'static str)], fit: usize) -> Vec<Row> {
    let Some(first) = slots.iter().position(|&n| n > 0) else {
        return Vec::new();
    };
    let last = slots.len() - 1;
    let mut rows: Vec<Row> = (first..=last)
        .map(|i| Row {
            lo: i,
            hi: i,
            marks: Vec::new(),
        })
        .collect();
    for &(slot, mark) in keys {
        // A quantile from the fine buckets can round just outside the
        // log2 rows: it belongs to the nearest one.
        let i = slot.clamp(first, last) - first;
        rows[i].marks.push(mark);
    }
    let count = |r: &Row| slots[r.lo..=r.hi].iter().sum::<u64>();
    while rows.len() > fit.max(1) {
        let cost = |i: usize| {
            let (a, b) = (&rows[i], &rows[i + 1]);
            let both_marked = !a.marks.is_empty() && !b.marks.is_empty();
            (both_marked, count(a) + count(b))
        };
        let i = (0..rows.len() - 1).min_by_key(|&i| cost(i)).unwrap_or(0);
        let next = rows.remove(i + 1);
        rows[i].hi = next.hi;
        rows[i].marks.extend(next.marks);
    }
    rows
}

/// Rows the histogram would like: every slot from the first non-empty one.
pub(super) fn wanted_height(state: &State) -> u16 {
    let slots = state.shown().0.log2_slots();
    let bars = slots
        .iter()
        .position(|&n| n > 0)
        .map_or(1, |first| slots.len() - first);
    CHROME + bars as u16
}

/// Rows it needs at least: one per marked row, so that no two marks share
/// one when the terminal has the room.
pub(super) fn least_height(state: &State, slice: &Slice) -> u16 {
    let mut slots: Vec<usize> = key_slots(state, slice).iter().map(|&(s, _)| s).collect();
    slots.sort_unstable();
    slots.dedup();
    CHROME + slots.len().max(1) as u16
}

pub(super) fn histogram(state: &State, slice: &Slice, area: Rect) -> Paragraph<'static> {
    let (waits, _) = state.shown();
    let slots = waits.log2_slots();
    let title = if state.cumulative {
        " run queue latency, cumulative "
    } else {
        " run queue latency, last interval "
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let fit = area.height.saturating_sub(CHROME).max(1) as usize;
    let rows = rows(&slots, &key_slots(state, slice), fit);
    if rows.is_empty() {
        return Paragraph::new("no waits yet").block(block);
    }
    let count = |r: &Row| slots[r.lo..=r.hi].iter().sum::<u64>();
    // Merged rows can hold more than any one slot: scale to what is shown.
    let max = rows.iter().map(count).max().unwrap_or(1).max(1);
    let marks = |r: &Row| r.marks.join(",");
    let marks_width = rows.iter().map(|r| marks(r).len()).max().unwrap_or(0);
    // "{low:>10} -> {high:<10} : {n:<8} |" is 37 columns, "|" one more.
    let room = usize::from(area.width).saturating_sub(38 + marks_width + 1);
    let bar_width = room.clamp(10, 60) as u64;
    let mut lines = vec![Line::from(format!(
        "{:>10}    {:<10} : {:<8} distribution",
        "usecs", "", "count"
    ))];
    for row in &rows {
        let (low, _) = log2_slot_bounds(row.lo);
        let (_, high) = log2_slot_bounds(row.hi);
        let n = count(row);
        let stars = (n * bar_width / max) as usize;
        let bar = format!(
            "{}{}",
            "█".repeat(stars),
            " ".repeat(bar_width as usize - stars)
        );
        lines.push(Line::from(format!(
            "{low:>10} -> {high:<10} : {n:<8} |{bar}| {}",
            marks(row)
        )));
    }
    Paragraph::new(lines).block(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(rows: &[Row]) -> Vec<(usize, usize)> {
        rows.iter().map(|r| (r.lo, r.hi)).collect()
    }

    #[test]
    fn every_slot_has_a_row_when_there_is_room() {
        let slots = [0, 5, 0, 0, 0, 7, 0, 2];
        let r = rows(&slots, &[], 10);
        assert_eq!(r.len(), 7);
        assert_eq!((r[0].lo, r[6].hi), (1, 7));
    }

    #[test]
    fn empty_and_sparse_rows_fold_first() {
        let slots = [0, 5, 0, 0, 0, 7, 0, 2];
        // Empty runs merge before any row with waits.
        assert_eq!(
            spans(&rows(&slots, &[], 4)),
            [(1, 1), (2, 4), (5, 5), (6, 7)]
        );
        // Nothing is dropped: every slot is in a row.
        let r = rows(&slots, &[], 2);
        assert_eq!((r[0].lo, r[r.len() - 1].hi, r.len()), (1, 7, 2));
    }

    /// Issue 19: a sleeper + hogs histogram, 2000 fast waits and a slow
    /// mode far above; in five rows the slow mode keeps its own labelled
    /// row instead of being cut as "N above".
    #[test]
    fn marked_rows_merge_with_each_other_last() {
        let mut slots = vec![0u64; 14];
        slots[2] = 50;
        slots[3] = 2000;
        slots[4] = 300;
        slots[6] = 4;
        slots[9] = 1;
        slots[11] = 900;
        slots[12] = 700;
        slots[13] = 3;
        let keys = [
            (3, "p50"),
            (11, "p90"),
            (12, "p99"),
            (12, "p99.9"),
            (3, "fast mode"),
            (11, "slow mode"),
        ];
        let r = rows(&slots, &keys, 4);
        assert_eq!(r.len(), 4);
        let marked: Vec<_> = r.iter().filter(|r| !r.marks.is_empty()).collect();
        assert_eq!(marked.len(), 3, "{r:?}");
        assert!(
            r.iter()
                .any(|r| r.lo <= 11 && r.hi >= 11 && r.marks.contains(&"slow mode"))
        );
        assert_eq!(r.last().unwrap().hi, 13);
        // In fewer rows than marks, marks share rows but none is lost.
        let r = rows(&slots, &keys, 2);
        let all: usize = r.iter().map(|r| r.marks.len()).sum();
        assert_eq!(all, keys.len());
    }
}
