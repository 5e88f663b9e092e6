//! The victims panel of `schedlat top`: the tasks that waited most and the
//! tasks that held the CPU when waits ended (collect/victims.rs and analysis/victims.rs
//! compute them; docs/victims.md says what the attribution means), or why
//! they are unavailable.

use std::{
    collections::{HashMap, HashSet},
    fmt::Display,
};

use ratatui::{
    layout::Rect,
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Borders, Paragraph, Wrap},
};

use super::{
    pairs,
    state::{MAX_ROWS, Ranked, State},
};
use crate::{
    analysis::{fmt_ns, pairs::PairTable, task::IdleWait, victims::Row},
    collect::workloads::TaskWorkload,
    output::{
        escape::{self, printable},
        workload,
    },
};

/// Title, column header, and the culprits' sub-header.
const CHROME: u16 = 3;

/// Width of the columns before the other task's name.
const FIXED: usize = 59;

/// The panel's content for this frame: ranked tables (and who waited
/// behind whom, with `--pairs`), or a message.
pub(super) enum Panel {
    Tables(Ranked, Option<Box<PairTable>>),
    Message(String),
}

/// Width the other task's name gets before the workload column.
const OTHER: usize = 28;

/// The least room for a workload column worth showing.
const WORKLOAD: usize = 12;

impl Panel {
    pub(super) fn of(state: &State) -> Panel {
        match &state.victims {
            Err(reason) => Panel::Message(format!(
                "victims and culprits unavailable: {}",
                printable(reason)
            )),
            Ok(tables) => match tables.ranked(state.cumulative, state.sort, MAX_ROWS) {
                Some(ranked) => {
                    let pairs = (state.pairs.as_ref())
                        .map(|p| Box::new(p.ranked(state.cumulative, MAX_ROWS)));
                    Panel::Tables(ranked, pairs)
                }
                None => {
                    Panel::Message("victims and culprits: collecting the first interval".into())
                }
            },
        }
    }

    /// The height it would use in full at `width` columns.
    pub(super) fn wanted_height(&self, width: u16) -> u16 {
        match self {
            Panel::Tables(r, pairs) => {
                // An empty victims table is one line: "no waits".
                let rows = r.tables.victims.len().max(1) + r.tables.culprits.len();
                let pairs = pairs.as_ref().map_or(0, |p| pairs::wanted_lines(p));
                CHROME + (rows + pairs) as u16
            }
            Panel::Message(text) => 1 + (text.len() as u16).div_ceil(width.max(1)).min(4),
        }
    }

    /// The height below which it is not worth showing: title, header and a
    /// row of each table.
    pub(super) fn least_height(&self, width: u16) -> u16 {
        self.wanted_height(width).min(CHROME + 2)
    }

    pub(super) fn widget(&self, state: &State, area: Rect) -> Paragraph<'static> {
        let scope = if state.cumulative {
            "since start"
        } else {
            "last interval"
        };
        let (ranked, pair_table) = match self {
            Panel::Tables(ranked, pairs) => (ranked, pairs),
            Panel::Message(text) => {
                return Paragraph::new(text.clone())
                    .wrap(Wrap { trim: true })
                    .block(Block::new().borders(Borders::TOP).title(" victims "));
            }
        };
        let t = &ranked.tables;
        let (v_lost, c_lost) = ranked.overflow;
        let lost = if v_lost + c_lost > 0 {
            format!(", not in the tables: {v_lost} waits, {c_lost} culprit charges")
        } else {
            String::new()
        };
        let title = format!(
            " victims by {} (s: sort), {scope}: {} tasks, {} waits{lost} ",
            state.sort.title(),
            t.totals.0,
            t.waits
        );
        let width = area.width as usize;
        let mut rows = area.height.saturating_sub(CHROME) as usize;
        // Who waited behind whom, and who had used a group's share, get a
        // third of the rows (the pairs' heading and one row at least), or
        // all that the tasks' tables leave, the tasks the rest.
        let tasks = t.victims.len().max(1) + t.culprits.len();
        let pair_rows = pair_table.as_ref().map(|p| {
            let budget = (rows / 3).max(rows.saturating_sub(tasks)).max(2);
            let shown = pairs::rows_in(p, budget);
            rows = rows.saturating_sub(pairs::height(shown));
            shown
        });
        // An empty victims table takes its "no waits" line from the rows.
        let rows = rows.saturating_sub(usize::from(t.victims.is_empty()));
        let (nv, nc) = split_rows(rows, t.victims.len(), t.culprits.len());
        let workloads = &state.workloads;
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let heading = |other: &str| {
            if has_workloads(width) {
                format!("{other:<OTHER$}  WORKLOAD")
            } else {
                other.to_string()
            }
        };
        let mut lines = vec![Line::styled(
            format!(
                "{}{}",
                columns([&"COMM", &"TID", &"WAITS", &"TOTAL", &"AVG", &"MAX"]),
                heading("BEHIND (LONGEST)")
            ),
            bold,
        )];
        if t.victims.is_empty() {
            lines.push(Line::from("no waits"));
        }
        let throttled = state.throttled_shown();
        lines.extend(
            t.victims[..nv]
                .iter()
                .map(|r| row(r, width, throttled, true, workloads)),
        );
        // The culprit rule, where culprits are shown (docs/victims.md):
        // ranked by HELD, their time on the CPU inside the waits; ENDED
        // to MAX the waits they ended as the last holder. In the victims'
        // widths: HELD takes WAITS' place, and a culprit has no AVG.
        lines.push(Line::styled(
            format!(
                "{}{}",
                columns([&"CULPRIT", &"TID", &"HELD", &"ENDED", &"TOTAL", &"MAX"]),
                heading("VICTIM (LONGEST)")
            ),
            bold,
        ));
        lines.extend(
            t.culprits[..nc]
                .iter()
                .map(|r| row(r, width, throttled, false, workloads)),
        );
        if let (Some(table), Some(n)) = (pair_table, pair_rows) {
            lines.extend(pairs::lines(table, n, width));
        }
        Paragraph::new(lines).block(Block::new().borders(Borders::TOP).title(title))
    }
}

/// The columns before the other task (`FIXED` wide, then two spaces), in
/// the widths every header and row of the panel shares: a name, a TID
/// and four numbers.
fn columns(cells: [&dyn Display; 6]) -> String {
    let [name, tid, a, b, c, d] = cells;
    format!("{name:<15} {tid:>7}{a:>8}{b:>9}{c:>9}{d:>9}  ")
}

/// Whether a panel `width` columns wide shows the tasks' workloads: the
/// other task's name in full first, and some of the workload's.
fn has_workloads(width: usize) -> bool {
    width.saturating_sub(FIXED + 2 + OTHER + 2) >= WORKLOAD
}

/// How many victim and culprit rows fit in `rows`: half each, and what one
/// table cannot use goes to the other.
fn split_rows(rows: usize, victims: usize, culprits: usize) -> (usize, usize) {
    let nv = victims.min(rows.div_ceil(2));
    let nc = culprits.min(rows - nv);
    let nv = victims.min(rows - nc);
    (nv, nc)
}

/// One task's row; idle tasks are TID 0, named swapper/CPU, and say what
/// their waits were: "throttled" (the victim's cgroup used its quota) or
/// "idle wake" (woken onto an idle CPU); `?` explains both. Where the
/// terminal is wide enough, the task's workload (its container, pod, unit
/// or cgroup) follows. Names are shown escaped (output/escape.rs), as
/// every text renderer shows them: the terminal library drops a name's
/// control bytes without a trace and passes bidirectional overrides
/// through.
fn row(
    r: &Row,
    width: usize,
    throttled: &HashSet<u32>,
    victim: bool,
    workloads: &HashMap<u32, TaskWorkload>,
) -> Line<'static> {
    let room = width.saturating_sub(FIXED + 2);
    let idle = |victim_pid| IdleWait::of(victim_pid, throttled).short();
    // The other task: "comm pid/tid" when there is room, else "comm/tid".
    let other = if !victim && r.count == 0 {
        "-".to_string()
    } else if victim && r.other.tid == 0 {
        // "swapper/1 (throttled)", or without the CPU at 80 columns.
        let name = if room >= 28 {
            escape::comm(&r.other)
        } else {
            "swapper".to_string()
        };
        format!("{name} ({})", idle(r.task.tgid))
    } else if r.other.tid == 0 || room >= 28 {
        escape::short(&r.other)
    } else {
        format!("{}/{}", escape::comm(&r.other), r.other.tid)
    };
    let comm: String = if !victim && r.task.tid == 0 {
        format!("({})", idle(r.other.tgid))
    } else {
        escape::comm(&r.task).chars().take(15).collect()
    };
    let tid = r.task.tid;
    let fixed = if victim {
        let times = [r.total_ns, r.avg_ns(), r.max_ns].map(fmt_ns);
        columns([&comm, &tid, &r.count, &times[0], &times[1], &times[2]])
    } else {
        // A culprit that ended none of the waits it ran in: no time in
        // them, no longest.
        let ended = |ns| if r.count == 0 { "-".into() } else { fmt_ns(ns) };
        let (held, total, max) = (fmt_ns(r.held_ns), ended(r.total_ns), ended(r.max_ns));
        columns([&comm, &tid, &held, &r.count, &total, &max])
    };
    let column = room.saturating_sub(OTHER + 2);
    if !has_workloads(width) || r.task.tid == 0 {
        return Line::from(format!("{fixed}{other}"));
    }
    let cell: String = (workload::cell(workloads.get(&r.task.tid)).chars())
        .take(column)
        .collect();
    let other: String = other.chars().take(OTHER).collect();
    Line::from(format!("{fixed}{other:<OTHER$}  {cell}"))
}
