//! Drawing `schedlat top` with ratatui: header, histogram bars, percentiles
//! and verdict, the p99 sparkline, and the key help. Pure: it reads a State,
//! so it is tested on ratatui's TestBackend.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Sparkline, Wrap},
};

use super::state::State;
use crate::analysis::{fmt_ns, percentiles::Percentiles, shape, slice::Slice};

const KEYS: &str = "q quit  space pause  c last/cumulative  +/- interval  ? help";

pub fn draw(frame: &mut Frame, state: &State, slice: &Slice) {
    let [header, body, summary, spark, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(5),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(header_text(state), header);
    frame.render_widget(histogram(state, body), body);
    frame.render_widget(verdict(state, slice), summary);
    frame.render_widget(p99_sparkline(state), spark);
    frame.render_widget(
        Paragraph::new(KEYS).style(Style::new().add_modifier(Modifier::DIM)),
        footer,
    );
    if state.show_help {
        let area = centered(frame.area(), 64, 12);
        frame.render_widget(ratatui::widgets::Clear, area);
        frame.render_widget(help(), area);
    }
}

fn header_text(state: &State) -> Paragraph<'static> {
    let (waits, elapsed) = state.shown();
    let rate = waits.count() as f64 / elapsed.as_secs_f64().max(1e-9);
    let view = if state.cumulative {
        format!("cumulative {:.0}s", elapsed.as_secs_f64())
    } else {
        format!("last {:.2}s", elapsed.as_secs_f64())
    };
    let cost = match state.bpf_ns_per_run {
        Some(ns) => format!("BPF {ns:.0} ns/run"),
        None => "BPF cost n/a (kernel.bpf_stats_enabled=0)".to_string(),
    };
    let mut first = vec![
        Span::styled("schedlat top", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(
            "  hook {}  scope {}  every {:.2}s  ",
            state.hook,
            state.scope,
            state.interval.as_secs_f64()
        )),
    ];
    if state.paused {
        first.push(Span::styled(
            "PAUSED",
            Style::new().add_modifier(Modifier::REVERSED),
        ));
    }
    let second = format!(
        "{view}: {} waits ({rate:.0}/s)  dropped {}  discarded {}  {cost}",
        waits.count(),
        waits.untracked_tid,
        waits.discarded_negative
    );
    Paragraph::new(vec![Line::from(first), Line::from(second)])
}

/// runqlat's log2 rows as bars; when the area is short, the rows around
/// the bulk of the waits are kept.
fn histogram(state: &State, area: Rect) -> Paragraph<'static> {
    let (waits, _) = state.shown();
    let slots = waits.log2_slots();
    let title = if state.cumulative {
        " run queue latency, cumulative "
    } else {
        " run queue latency, last interval "
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let Some(first) = slots.iter().position(|&n| n > 0) else {
        return Paragraph::new("no waits yet").block(block);
    };
    let rows_fit = area.height.saturating_sub(2).max(1) as usize;
    let mut rows: Vec<usize> = (first..slots.len()).collect();
    while rows.len() > rows_fit {
        // Drop whichever end holds fewer waits.
        let (lo, hi) = (rows[0], rows[rows.len() - 1]);
        if slots[lo] <= slots[hi] {
            rows.remove(0);
        } else {
            rows.pop();
        }
    }
    let max = slots.iter().copied().max().unwrap_or(1).max(1);
    let bar_width = area.width.saturating_sub(40).clamp(10, 60) as u64;
    let mut lines = vec![Line::from(format!(
        "{:>10}    {:<10} : {:<8} distribution",
        "usecs", "", "count"
    ))];
    for i in rows {
        let mut low = (1u64 << (i + 1)) >> 1;
        let high = (1u64 << (i + 1)) - 1;
        if low == high {
            low -= 1;
        }
        let n = slots[i];
        let stars = (n * bar_width / max) as usize;
        let bar = format!(
            "{}{}",
            "█".repeat(stars),
            " ".repeat(bar_width as usize - stars)
        );
        lines.push(Line::from(format!(
            "{low:>10} -> {high:<10} : {n:<8} |{bar}|"
        )));
    }
    Paragraph::new(lines).block(block)
}

fn verdict(state: &State, slice: &Slice) -> Paragraph<'static> {
    let (waits, _) = state.shown();
    let percentiles = match Percentiles::of(waits) {
        Some(p) => format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            fmt_ns(p.p50_ns),
            fmt_ns(p.p90_ns),
            fmt_ns(p.p99_ns),
            fmt_ns(p.p999_ns),
            p.max_ns.map_or("-".into(), fmt_ns)
        ),
        None => "no waits".to_string(),
    };
    let shape = shape::classify(waits, slice);
    Paragraph::new(vec![
        Line::from(percentiles),
        Line::from(Span::styled(
            shape.summary,
            Style::new().add_modifier(Modifier::BOLD),
        )),
    ])
    .wrap(Wrap { trim: true })
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title(" percentiles and shape "),
    )
}

fn p99_sparkline(state: &State) -> Sparkline<'static> {
    let data: Vec<u64> = state.p99_history.iter().map(|v| v.unwrap_or(0)).collect();
    let peak = data.iter().copied().max().unwrap_or(0);
    Sparkline::default()
        .block(Block::new().borders(Borders::TOP).title(format!(
            " p99 per interval, last {} (peak {}) ",
            data.len(),
            fmt_ns(peak)
        )))
        .data(data)
}

fn help() -> Paragraph<'static> {
    Paragraph::new(vec![
        Line::from("q, Ctrl-C   quit (the terminal is restored)"),
        Line::from("space       pause / resume refreshing"),
        Line::from("c           last interval / cumulative since start"),
        Line::from("+ / -       slower / faster refresh"),
        Line::from("? or h      this help"),
        Line::from(""),
        Line::from("A wait: from a task becoming runnable to it running."),
        Line::from("Shape rule and thresholds: docs/shape.md"),
    ])
    .block(Block::bordered().title(" help "))
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::HookMode;
    use ratatui::{Terminal, backend::TestBackend};
    use schedlat_common::{CpuStats, Extremes, bucket_index, log2_slot};
    use std::time::Duration;

    fn screen(state: &State, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        let slice = Slice::fixed(1_500_000, "test");
        terminal.draw(|f| draw(f, state, &slice)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// 970 waits of 10 us and 30 of 3 ms: a long tail.
    fn known_state() -> State {
        let mut cpu = CpuStats::ZERO;
        for (ns, n) in [(10_000u64, 970u64), (3_000_000, 30)] {
            cpu.buckets[bucket_index(ns)] += n;
            cpu.log2[log2_slot(ns / 1000)] += n;
            cpu.sum_ns += ns * n;
        }
        let x = Extremes {
            min_ns: 10_000,
            max_ns: 3_000_000,
        };
        let waits = crate::histogram::Waits::from_cpus(&[cpu]).with_extremes(&[x]);
        let mut s = State::new(HookMode::Btf, "all tasks".into(), Duration::from_secs(1));
        s.push(waits, Duration::from_secs(1));
        s
    }

    #[test]
    fn shows_bars_percentiles_and_verdict_in_80x24() {
        let text = screen(&known_state(), 80, 24);
        assert!(text.contains("8 -> 15"), "{text}");
        assert!(text.contains("2048 -> 4095"), "{text}");
        assert!(text.contains(": 970") && text.contains("█"), "{text}");
        assert!(
            text.contains("p99 3.") && text.contains("max 3.00 ms"),
            "{text}"
        );
        assert!(text.contains("long-tail"), "{text}");
        assert!(text.contains("1000 waits (1000/s)"), "{text}");
        assert!(text.contains("q quit"), "{text}");
    }

    #[test]
    fn cumulative_pause_and_help_show() {
        let mut s = known_state();
        s.on_key('c', false);
        s.on_key(' ', false);
        s.on_key('?', false);
        let text = screen(&s, 100, 30);
        assert!(
            text.contains("cumulative") && text.contains("PAUSED"),
            "{text}"
        );
        assert!(text.contains("this help"), "{text}");
    }

    #[test]
    fn empty_and_tiny_terminals_do_not_panic() {
        let s = State::new(
            HookMode::Tracepoint,
            "all tasks".into(),
            Duration::from_secs(1),
        );
        assert!(screen(&s, 80, 24).contains("no waits yet"));
        screen(&known_state(), 20, 6);
    }
}
