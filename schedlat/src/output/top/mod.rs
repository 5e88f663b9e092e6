//! `schedlat top`'s terminal view, drawn with ratatui: header, histogram
//! bars (bars.rs), percentiles and verdict, the victims panel (panel.rs,
//! with who waited behind whom: pairs.rs),
//! the p99 sparkline, and the key help. Pure: it reads a State (state.rs:
//! what the view shows and the toggles its keys change), so it is tested on
//! ratatui's TestBackend.

mod bars;
pub(crate) mod pairs;
mod panel;
pub(crate) mod state;

use panel::Panel;
use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Sparkline, Wrap},
};
use state::State;

use crate::{
    analysis::{fmt_ns, percentiles::Percentiles, shape},
    output::{causes, decision, escape::printable},
    sys::slice::Slice,
};

const KEYS: &str = "q quit  space pause  c last/cumulative  s sort  +/- interval  ? help";

/// Rows of the parts whose size does not depend on the data.
const HEADER: u16 = 2;
const FOOTER: u16 = 1;

pub(crate) fn draw(frame: &mut Frame, state: &State, slice: &Slice) {
    let area = frame.area();
    let panel = Panel::of(state);
    let plan = Plan::of(state, slice, &panel, area);
    let [header, body, summary, table, spark, footer] = Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Length(plan.bars),
        Constraint::Length(plan.summary),
        Constraint::Length(plan.victims),
        Constraint::Length(plan.spark),
        Constraint::Length(FOOTER),
    ])
    .areas(area);
    frame.render_widget(header_text(state, area.width), header);
    frame.render_widget(bars::histogram(state, slice, body), body);
    frame.render_widget(verdict(state, slice, area.height, plan.folded), summary);
    frame.render_widget(panel.widget(state, table), table);
    frame.render_widget(p99_sparkline(state), spark);
    frame.render_widget(
        Paragraph::new(KEYS).style(Style::new().add_modifier(Modifier::DIM)),
        footer,
    );
    if state.show_help {
        let area = centered(frame.area(), 64, 18);
        frame.render_widget(ratatui::widgets::Clear, area);
        frame.render_widget(help(), area);
    }
}

/// Two lines: what is traced and how, then what was counted. schedlat's
/// own BPF cost goes on whichever line has room for it.
fn header_text(state: &State, width: u16) -> Paragraph<'static> {
    let (waits, elapsed) = state.shown();
    let rate = waits.count() as f64 / elapsed.as_secs_f64().max(1e-9);
    let view = if state.cumulative {
        format!("cumulative {:.0}s", elapsed.as_secs_f64())
    } else {
        format!("last {:.2}s", elapsed.as_secs_f64())
    };
    let cost = match state.bpf_ns_per_run {
        Some(ns) => format!("BPF {ns:.0} ns/run"),
        // `?` says how to turn the kernel's BPF statistics on.
        None => "BPF cost n/a: stats off".to_string(),
    };
    let mut first = vec![
        Span::styled("schedlat top", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(
            "  hook {}  scope {}  every {:.2}s",
            state.hook,
            printable(&state.scope),
            state.interval.as_secs_f64()
        )),
    ];
    if state.paused {
        first.push(Span::raw("  "));
        first.push(Span::styled(
            "PAUSED",
            Style::new().add_modifier(Modifier::REVERSED),
        ));
    }
    let mut second = vec![Span::raw(format!(
        "{view}: {} waits ({rate:.0}/s)  dropped {}  discarded {}",
        waits.count(),
        waits.untracked_tid,
        waits.discarded_negative
    ))];
    let used = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    let fits = |spans: &[Span]| used(spans) + 2 + cost.len() <= usize::from(width);
    let line = if fits(&first) || !fits(&second) {
        &mut first
    } else {
        &mut second
    };
    line.push(Span::raw(format!("  {cost}")));
    Paragraph::new(vec![Line::from(first), Line::from(second)])
}

/// Splits `rest` rows between the histogram and the victims panel: the
/// panel gets two fifths (at least its title, header and a row of each
/// table), and whatever the histogram cannot use; neither takes more than
/// it shows, and the histogram keeps at least its marked rows (the
/// percentiles and the verdict's modes): the panel gives way first.
fn split(
    rest: u16,
    (bars_wanted, bars_least): (u16, u16),
    panel: &Panel,
    width: u16,
) -> (u16, u16) {
    let wanted = panel.wanted_height(width);
    let mut victims = (rest * 2 / 5).max(panel.least_height(width)).min(wanted);
    let bars = rest.saturating_sub(victims);
    if bars > bars_wanted {
        victims = (victims + bars - bars_wanted).min(wanted);
    }
    victims = victims.min(rest.saturating_sub(bars_least.min(bars_wanted)));
    (rest - victims, victims)
}

/// How many rows each part gets in this frame.
struct Plan {
    bars: u16,
    summary: u16,
    victims: u16,
    spark: u16,
    /// The percentiles are in the summary's title row, not a line of their
    /// own.
    folded: bool,
}

impl Plan {
    /// A taller terminal gets a taller sparkline; below that, the bars and
    /// the victims share what is left. Where that leaves the victims panel
    /// under its least height (a bimodal verdict and a long cause split
    /// take ten rows at 80x24), the sparkline gives its rows up first, then
    /// the percentiles move into the summary's title row: a table header
    /// with no rows under it tells nothing, and the p99 history is what a
    /// glance at a short screen needs least.
    fn of(state: &State, slice: &Slice, panel: &Panel, area: Rect) -> Plan {
        let spark = if area.height >= TALL { 4 } else { 2 };
        let can_fold = percentiles_title(state).width() <= usize::from(area.width);
        let least = panel.least_height(area.width);
        let mut plan = Plan::with(state, slice, panel, area, spark, false);
        for (spark, folded) in [(0, false), (0, true)] {
            if plan.victims >= least || (folded && !can_fold) {
                break;
            }
            plan = Plan::with(state, slice, panel, area, spark, folded);
        }
        plan
    }

    fn with(
        state: &State,
        slice: &Slice,
        panel: &Panel,
        area: Rect,
        spark: u16,
        folded: bool,
    ) -> Plan {
        let summary = summary_height(state, slice, area, folded);
        let rest = area
            .height
            .saturating_sub(HEADER + summary + FOOTER + spark);
        let wanted = (bars::wanted_height(state), bars::least_height(state, slice));
        let (bars, victims) = split(rest, wanted, panel, area.width);
        Plan {
            bars,
            summary,
            victims,
            spark,
            folded,
        }
    }
}

/// The percentiles, the verdict with its evidence and the cause split:
/// title, then the lines they wrap to at this width, all of them: the
/// verdict wraps, it is never cut.
fn summary_height(state: &State, slice: &Slice, area: Rect, folded: bool) -> u16 {
    let lines = verdict(state, slice, area.height, folded).line_count(area.width.max(1));
    u16::try_from(lines).unwrap_or(u16::MAX)
}

/// Terminals this tall get the taller sparkline and the decision line:
/// at 80x24 every row is the histogram's, the verdict's or a victim's.
const TALL: u16 = 32;

/// The summary; the decision split's line too on a terminal of `height`
/// rows at least [`TALL`].
fn verdict(state: &State, slice: &Slice, height: u16, folded: bool) -> Paragraph<'static> {
    let (waits, _) = state.shown();
    let shape = shape::classify(waits, slice);
    let mut lines = vec![
        Line::from(Span::styled(
            shape.summary,
            Style::new().add_modifier(Modifier::BOLD),
        )),
        Line::from(causes::line::line(waits)),
    ];
    // What the scheduler decided (docs/decision.md), when the load split
    // it and the terminal has the rows.
    if height >= TALL {
        lines.extend(decision::line(waits).map(Line::from));
    }
    let title = if folded {
        percentiles_title(state)
    } else {
        lines.insert(0, Line::from(percentiles(state)));
        Line::from(" percentiles, shape and causes ")
    };
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(Block::new().borders(Borders::TOP).title(title))
}

/// "p50 6.45 us  p90 11.0 us  p99 3.75 ms  p99.9 4.06 ms  max 5.33 ms".
fn percentiles(state: &State) -> String {
    match Percentiles::of(state.shown().0) {
        Some(p) => format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            fmt_ns(p.p50_ns),
            fmt_ns(p.p90_ns),
            fmt_ns(p.p99_ns),
            fmt_ns(p.p999_ns),
            p.max_ns.map_or("-".into(), fmt_ns)
        ),
        None => "no waits".to_string(),
    }
}

/// The percentiles as the summary's title, where the rows are short.
fn percentiles_title(state: &State) -> Line<'static> {
    Line::from(format!(" {} ", percentiles(state)))
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
        Line::from("s           victims' sort: total, longest, count, average"),
        Line::from("+ / -       slower / faster refresh"),
        Line::from("? or h      this help"),
        Line::from(""),
        Line::from("A wait: from a task becoming runnable to it running."),
        Line::from("Culprits: HELD = their time on the CPU inside the"),
        Line::from("  waits (the rank); ENDED to MAX: the waits they ended."),
        Line::from("swapper (idle CPU): throttled = cgroup quota used up;"),
        Line::from("  idle wake = woken onto an idle CPU (wakeup path)."),
        Line::from("Shape rule: docs/shape.md; victims: docs/victims.md"),
        Line::from("causes (waits/time): share of waits / of wait time;"),
        Line::from("  docs/causes.md"),
        Line::from("BPF cost: sysctl kernel.bpf_stats_enabled=1"),
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
    use std::time::Duration;

    use ratatui::{Terminal, backend::TestBackend};
    use schedlat_common::{CpuStats, Extremes, bucket_index, log2_slot, victims::WaitStats};

    use super::*;
    use crate::{
        analysis::task::tests::task, collect::victims::VictimsInterval, kernel::hook::HookMode,
    };

    fn screen(state: &State, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        draw_on(&mut terminal, state)
    }

    fn draw_on(terminal: &mut Terminal<TestBackend>, state: &State) -> String {
        let slice = Slice::fixed(1_500_000, "test");
        terminal.draw(|f| draw(f, state, &slice)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let area = buffer.area;
        (0..area.height)
            .map(|y| {
                (0..area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// 970 waits of 10 us and 30 of 3 ms: a long tail; four stress-ng
    /// workers waited (the first most in total, the last longest), behind
    /// each other and a shell.
    fn known_state() -> State {
        known_state_with(true)
    }

    /// `known_state`, with its victims' table empty unless `victims` (an
    /// interval whose victims all overflowed the table).
    fn known_state_with(victims: bool) -> State {
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
        let worker = |tid| task(tid, 4000, "stress-ng-cpu", 0, 0, 0);
        let shell = task(900, 900, "bash", 0, 0, 0);
        let victims = (0..4u32)
            .map(|i| WaitStats {
                task: worker(4001 + i),
                count: 200 - 10 * u64::from(i),
                total_ns: 40_000_000 - 5_000_000 * u64::from(i),
                max_ns: 1_000_000 + 500_000 * u64::from(i),
                max_other: if i == 0 { shell } else { worker(4001) },
                ..Default::default()
            })
            .filter(|_| victims)
            .collect();
        let culprits = [
            (worker(4002), 300, 12_000_000),
            (shell, 20, 1_000_000),
            (worker(4003), 280, 20_000_000),
        ]
        .into_iter()
        .map(|(t, count, held_ns)| WaitStats {
            task: t,
            count,
            total_ns: count * 100_000,
            max_ns: 2_500_000,
            max_other: worker(4004),
            held_ns,
            ..Default::default()
        })
        .collect();
        s.push_victims(&VictimsInterval {
            victims,
            culprits,
            ..Default::default()
        });
        s
    }

    /// Where the summary leaves the panel short of a row of each table, the
    /// sparkline goes, then the percentiles move into the summary's title:
    /// CI's 80x24 screen under a bimodal load showed the victims' header
    /// and nothing under it.
    #[test]
    fn a_short_screen_gives_the_sparkline_up_for_the_culprits() {
        let mut state = known_state();
        state.last.causes = Some(crate::output::causes::line::tests::counts());
        let culprit_row = |t: &str| t.lines().any(|l| l.starts_with("stress-ng-cpu      4003"));
        let spark = |t: &str| t.contains("p99 per interval");
        let folded = |t: &str| t.lines().any(|l| l.starts_with(" p50 10.0 us  p90"));
        // Rows to spare: everything.
        let text = screen(&state, 80, 21);
        assert!(
            culprit_row(&text) && spark(&text) && !folded(&text),
            "{text}"
        );
        // Two rows short: the sparkline goes.
        let text = screen(&state, 80, 19);
        assert!(
            culprit_row(&text) && !spark(&text) && !folded(&text),
            "{text}"
        );
        // Three: the percentiles go into the title row too.
        let text = screen(&state, 80, 18);
        assert!(
            culprit_row(&text) && !spark(&text) && folded(&text),
            "{text}"
        );
        assert!(
            text.contains("long-tail: median") && text.contains("held by"),
            "{text}"
        );
    }

    #[test]
    fn shows_bars_percentiles_verdict_and_victims_in_80x24() {
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
        assert!(
            text.contains("hook tp_btf") && text.contains("dropped 0"),
            "{text}"
        );
        assert!(
            text.contains("discarded 0") && text.contains("BPF cost n/a"),
            "{text}"
        );
        assert!(text.contains("q quit") && text.contains("s sort"), "{text}");
        // The panel: title with the sort, the top victim (most total wait)
        // and its culprit, the top culprit.
        assert!(
            text.contains("victims by total wait") && text.contains("4 tasks, 740 waits"),
            "{text}"
        );
        let top = text.lines().find(|l| l.contains("   4001 ")).expect(&text);
        assert!(
            top.starts_with("stress-ng-cpu") && top.contains("40.0 ms") && top.contains("bash/900"),
            "{text}"
        );
        // The culprits rank by their time held, under HELD; ENDED to MAX
        // are the waits they ended.
        let header = text
            .lines()
            .find(|l| l.starts_with("CULPRIT"))
            .expect(&text);
        let held = header.find("HELD").unwrap() + "HELD".len();
        let ended = header.find("ENDED").unwrap() + "ENDED".len();
        let culprits = text.lines().position(|l| l == header).unwrap();
        let first = text.lines().nth(culprits + 1).unwrap();
        assert!(first.contains("   4003 "), "{text}");
        assert_eq!(&first[held - 7..held], "20.0 ms", "{text}");
        assert_eq!(&first[ended - 3..ended], "280", "{text}");
        assert!(
            first.contains("28.0 ms") && first.contains("2.50 ms"),
            "{text}"
        );
    }

    /// Issue 29 item 7: names on top's screen are escaped as in every text
    /// renderer. Before, the terminal library dropped the ESC and the
    /// newline without a trace (the row read `[8mhidFAKE`) and passed the
    /// right-to-left override through, which reorders the rest of the row.
    #[test]
    fn hostile_names_and_cgroup_paths_are_shown_escaped() {
        let hostile = "\x1b[8mhid\nFAKE\u{202e}";
        let mut s = known_state();
        s.scope = "cgroup /sys/fs/cgroup/\x1b[2Jx\u{2066}".into();
        let named = task(4100, 4100, hostile, 0, 0, 0);
        let row = WaitStats {
            task: named,
            count: 500,
            total_ns: 90_000_000,
            max_ns: 3_000_000,
            max_other: named,
            ..Default::default()
        };
        s.push_victims(&VictimsInterval {
            victims: vec![row],
            culprits: vec![row],
            ..Default::default()
        });
        for (width, height) in [(80, 24), (160, 50)] {
            let text = screen(&s, width, height);
            assert!(text.contains("?[8mhid?FAKE?"), "{width}x{height}: {text}");
            assert!(
                text.contains("scope cgroup /sys/fs/cgroup/?[2Jx?"),
                "{width}x{height}: {text}"
            );
            let acting: Vec<char> = text
                .chars()
                .filter(|&c| {
                    c != '\n'
                        && (c.is_control()
                            || ('\u{2066}'..='\u{2069}').contains(&c)
                            || c == '\u{202e}')
                })
                .collect();
            assert!(acting.is_empty(), "{acting:?} on screen: {text}");
        }
    }

    #[test]
    fn a_wide_terminal_names_the_workloads_and_who_waited_behind_whom() {
        use crate::{
            analysis::pairs::{Side, WorkloadPair, rank},
            collect::pairs::PairCounts,
            output::top::pairs::PairsShown,
            sys::workload::level::{Level, tests::workload},
        };
        let mut s = known_state();
        s.workloads.insert(
            4001,
            crate::collect::workloads::TaskWorkload::In(Box::new(workload(
                "/system.slice/stress.service",
                None,
            ))),
        );
        let mut pairs = PairsShown::new(Level::Unit);
        let row = WorkloadPair {
            victim: Side::plain("stress.service"),
            holder: Side::plain("/"),
            counts: PairCounts {
                count: 7,
                sum_ns: 7_000_000,
                max_ns: 2_000_000,
            },
        };
        pairs.push(rank([row], Level::Unit, None, (PairCounts::default(), 64)));
        s.pairs = Some(pairs);
        let wide = screen(&s, 140, 40);
        let line = |text: &str| wide.lines().find(|l| l.contains(text)).map(str::trim_end);
        assert!(line("WORKLOAD").is_some(), "{wide}");
        let worker = line("stress-ng-cpu      4001").unwrap_or_else(|| panic!("{wide}"));
        assert!(worker.ends_with("unit stress.service"), "{wide}");
        assert!(
            line("waiting unit <- unit that held the CPU").is_some(),
            "{wide}"
        );
        let pair = line("stress.service <- /").unwrap_or_else(|| panic!("{wide}"));
        assert!(pair.contains("7.00 ms"), "{pair}");
        // At 80 columns: no room for the workloads; the pairs still shown.
        let narrow = screen(&s, 80, 30);
        assert!(!narrow.contains("WORKLOAD"), "{narrow}");
        assert!(narrow.contains("stress.service <- /"), "{narrow}");
    }

    /// The pairs get a third of the panel's rows, or all that the tasks'
    /// tables leave: on a tall terminal every pair row is shown beside
    /// every task row (a third showed five of the ten).
    #[test]
    fn the_pairs_take_the_rows_the_tasks_leave() {
        use crate::{
            analysis::pairs::{Side, WorkloadPair, rank},
            collect::pairs::PairCounts,
            output::top::pairs::PairsShown,
            sys::workload::level::Level,
        };
        let mut s = known_state();
        let rows = (1..=12u64).map(|i| WorkloadPair {
            victim: Side::plain(&format!("victim-{i}.service")),
            holder: Side::plain("/"),
            counts: PairCounts {
                count: i,
                sum_ns: i * 1_000_000,
                max_ns: 1_000_000,
            },
        });
        let mut pairs = PairsShown::new(Level::Unit);
        pairs.push(rank(rows, Level::Unit, None, (PairCounts::default(), 64)));
        s.pairs = Some(pairs);
        let text = screen(&s, 160, 60);
        let shown = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
        // The table's own rows: the first MAX_ROWS of the twelve.
        let pair_rows = text.lines().filter(|l| l.contains(".service <- /")).count();
        assert_eq!(pair_rows, state::MAX_ROWS, "{text}");
        assert_eq!(shown("stress-ng-cpu") + shown("bash "), 7, "{text}");
    }

    #[test]
    fn a_larger_terminal_shows_every_row_and_adapts_to_resizing() {
        let state = known_state();
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let small = draw_on(&mut terminal, &state);
        let rows = |t: &str| t.lines().filter(|l| l.starts_with("stress-ng-cpu")).count();
        terminal.backend_mut().resize(160, 50);
        let large = draw_on(&mut terminal, &state);
        assert_eq!(large.lines().count(), 50);
        assert!(rows(&large) == 6 && large.contains("bash "), "{large}");
        assert!(rows(&small) < rows(&large), "{small}");
        // The other task in full where there is room: comm pid/tid.
        assert!(large.contains("stress-ng-cpu 4000/4001"), "{large}");
        for text in [&small, &large] {
            assert!(
                text.contains(": 970") && text.contains("long-tail"),
                "{text}"
            );
            assert!(text.contains("p99 per interval"), "{text}");
        }
        terminal.backend_mut().resize(80, 24);
        assert_eq!(draw_on(&mut terminal, &state), small);
    }

    /// A culprit that ran inside waits and ended none of them: its time
    /// held, and `-` for the time and the longest of the waits it ended
    /// and that wait's victim (not a wait at boot behind the idle task).
    #[test]
    fn a_culprit_that_ended_no_wait_shows_its_time_held_and_no_longest() {
        let mut s = known_state();
        let quiet = task(700, 700, "quiet", 0, 0, 0);
        let waiter = task(800, 800, "waiter", 0, 0, 0);
        s.push_victims(&VictimsInterval {
            victims: vec![WaitStats {
                task: waiter,
                count: 1,
                total_ns: 100_000_000,
                max_ns: 100_000_000,
                max_other: task(900, 900, "bash", 0, 0, 0),
                ..Default::default()
            }],
            culprits: vec![WaitStats {
                task: quiet,
                held_ns: 90_000_000,
                ..Default::default()
            }],
            ..Default::default()
        });
        let text = screen(&s, 80, 30);
        let row = (text.lines())
            .find(|l| l.starts_with("quiet "))
            .expect(&text);
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            ["quiet", "700", "90.0", "ms", "0", "-", "-", "-"],
            "{text}"
        );
    }

    /// Issue 19: an idle culprit says what the waits were, and the
    /// culprits' header says the rule.
    #[test]
    fn idle_culprits_are_labelled_throttled_or_idle_wake() {
        let mut s = known_state();
        let idle = task(0, 0, "swapper/1", 0, 0, 0);
        let boxed = task(500, 500, "boxed", 0, 0, 0);
        let sleeper = task(600, 600, "sleeper", 0, 0, 0);
        let victim = |t, total| WaitStats {
            task: t,
            count: 10,
            total_ns: total,
            max_ns: 9_000_000,
            max_other: idle,
            ..Default::default()
        };
        s.push_victims(&VictimsInterval {
            victims: vec![victim(boxed, 900_000_000), victim(sleeper, 800_000_000)],
            culprits: vec![WaitStats {
                task: idle,
                count: 20,
                total_ns: 1_700_000_000,
                max_ns: 9_000_000,
                max_other: boxed,
                ..Default::default()
            }],
            ..Default::default()
        });
        s.push_throttled(std::collections::HashSet::from([500]));
        for (width, name) in [(80, "swapper"), (120, "swapper/1")] {
            let text = screen(&s, width, 30);
            let line = |start: &str| {
                text.lines()
                    .find(|l| l.starts_with(start))
                    .expect(&text)
                    .trim_end()
            };
            // At 120 columns the workload column follows (`-`: these
            // tasks are no process of this host).
            let end = if width > 100 { " -" } else { "" };
            for (row, label) in [("boxed ", "throttled"), ("sleeper ", "idle wake")] {
                let row = line(row);
                let culprit = format!("{name} ({label})");
                assert!(row.contains(&culprit) && row.ends_with(end), "{text}");
                let rest = row.split_once(&culprit).unwrap().1;
                assert_eq!(rest.trim_start(), end.trim_start(), "{text}");
            }
            assert!(line("(throttled) ").contains("boxed"), "{text}");
            assert!(
                text.contains("CULPRIT             TID    HELD    ENDED    TOTAL      MAX"),
                "{text}"
            );
        }
    }

    #[test]
    fn s_changes_the_sort_and_its_label() {
        let mut s = known_state();
        s.on_key('s', false);
        let text = screen(&s, 80, 24);
        assert!(text.contains("victims by longest wait"), "{text}");
        // The longest single wait was the fourth worker's.
        let first = text
            .lines()
            .find(|l| l.starts_with("stress-ng-cpu"))
            .unwrap();
        assert!(
            first.contains("   4004 ") && first.contains("2.50 ms"),
            "{text}"
        );
        s.on_key('s', false);
        assert!(screen(&s, 80, 24).contains("victims by number of waits"));
    }

    #[test]
    fn unavailable_victims_say_why_and_the_rest_works() {
        let mut s = known_state();
        s.victims = Err("they need the tp_btf hook mode: drop --hook tp".into());
        let text = screen(&s, 80, 24);
        assert!(
            text.contains("victims and culprits unavailable: they need the tp_btf"),
            "{text}"
        );
        assert!(
            text.contains(": 970") && text.contains("long-tail"),
            "{text}"
        );
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
        assert!(
            text.contains("this help") && text.contains("victims' sort"),
            "{text}"
        );
        s.on_key('?', false);
        assert!(screen(&s, 100, 30).contains("victims by total wait (s: sort), since start"));
    }

    #[test]
    fn empty_and_tiny_terminals_do_not_panic() {
        let s = State::new(
            HookMode::Tracepoint,
            "all tasks".into(),
            Duration::from_secs(1),
        );
        let text = screen(&s, 80, 24);
        assert!(
            text.contains("no waits yet") && text.contains("collecting"),
            "{text}"
        );
        screen(&known_state(), 20, 6);
        screen(&known_state(), 1, 1);
    }

    #[test]
    fn short_terminals_fold_rows_and_cut_none() {
        // 970 waits in 8 -> 15, 30 in 2048 -> 4095: both rows, labelled.
        for height in [24, 18, 14] {
            let text = screen(&known_state(), 80, height);
            assert!(!text.contains("cut") && !text.contains("above"), "{text}");
            let row = |mark: &str| {
                text.lines()
                    .find(|l| l.contains('|') && l.ends_with_mark(mark))
            };
            assert!(
                row("p50").is_some_and(|l| l.contains("8 -> ")),
                "{height}: {text}"
            );
            assert!(
                row("p99.9").is_some_and(|l| l.contains(" -> 4095")),
                "{height}: {text}"
            );
        }
        let text = screen(&known_state(), 100, 40);
        assert!(
            text.contains("16 -> 31 ") && text.contains("1024 -> 2047 "),
            "{text}"
        );
    }

    trait Marks {
        fn ends_with_mark(&self, mark: &str) -> bool;
    }
    impl Marks for &str {
        /// The row's marks (after the bar) include `mark`.
        fn ends_with_mark(&self, mark: &str) -> bool {
            self.rsplit('|')
                .next()
                .is_some_and(|m| m.trim().split(',').any(|m| m == mark))
        }
    }

    /// A sleeper beside four CPU hogs on two CPUs: the sleeper's waits are
    /// short, the hogs' are a slice or more, in two modes far apart (the
    /// mix issue 19 was found with: 45.6% of the waits in the slow mode).
    fn sleeper_and_hogs() -> State {
        let mut cpu = CpuStats::ZERO;
        let groups = [
            (3_000u64, 600u64),
            (6_000, 900),
            (12_000, 200),
            (40_000, 30),
            (150_000, 8),
            (600_000, 2),
            (2_500_000, 500),
            (5_000_000, 700),
            (9_000_000, 60),
            (20_000_000, 3),
        ];
        for (ns, n) in groups {
            cpu.buckets[bucket_index(ns)] += n;
            cpu.log2[log2_slot(ns / 1000)] += n;
            cpu.sum_ns += ns * n;
        }
        let x = Extremes {
            min_ns: 3_000,
            max_ns: 20_000_000,
        };
        let waits = crate::histogram::Waits::from_cpus(&[cpu]).with_extremes(&[x]);
        let mut s = known_state();
        s.push(waits, Duration::from_secs(1));
        s
    }

    /// Issue 19: at 80x24 and 120x40, the rows from p50 to p99.9 and the
    /// modes the verdict names are on screen, labelled, and the verdict is
    /// whole (wrapped, not cut).
    #[test]
    fn the_tail_and_the_verdict_stay_on_screen() {
        let state = sleeper_and_hogs();
        let slice = Slice::fixed(1_500_000, "test");
        let shape = shape::classify(state.shown().0, &slice);
        assert_eq!(shape.verdict, shape::Verdict::Bimodal, "{}", shape.summary);
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        for (w, h) in [(80, 24), (120, 40), (80, 20)] {
            let text = screen(&state, w, h);
            for mark in ["p50", "p90", "p99", "p99.9", "fast mode", "slow mode"] {
                assert!(
                    text.lines()
                        .any(|l| l.contains('|') && l.ends_with_mark(mark)),
                    "{w}x{h}: no row marked {mark}:\n{text}"
                );
            }
            assert!(!text.contains("cut") && !text.contains("above"), "{text}");
            assert!(
                words(&text).contains(&words(&shape.summary)),
                "{w}x{h}: verdict cut:\n{text}"
            );
            // Every wait is in some row: the counts add up.
            let counted: u64 = text
                .lines()
                .filter(|l| l.contains(" -> ") && l.contains('|'))
                .filter_map(|l| {
                    l.split(':')
                        .nth(1)?
                        .split('|')
                        .next()?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .sum();
            assert_eq!(counted, state.shown().0.count(), "{w}x{h}:\n{text}");
        }
    }

    /// Issue 15: the split of the waits shown, whole (wrapped, not cut),
    /// under the verdict; "not measured" where the load has none.
    #[test]
    fn the_cause_split_is_under_the_verdict() {
        let mut state = known_state();
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words(&screen(&state, 80, 24)).contains("causes: not measured by this load"),
            "{}",
            screen(&state, 80, 24)
        );
        state.last.causes = Some(crate::output::causes::line::tests::counts());
        let line = causes::line::line(&state.last);
        for (w, h) in [(80, 24), (120, 40)] {
            let text = screen(&state, w, h);
            assert!(words(&text).contains(&words(&line)), "{w}x{h}:\n{text}");
            assert!(text.contains("percentiles, shape and causes"), "{text}");
            assert!(
                text.contains(": 970") && text.contains("long-tail"),
                "{text}"
            );
        }
    }

    /// With the decision split, its line is under the causes, whole, on a
    /// tall terminal; no line where the load has none, nor at 80x24 (its
    /// rows are the victims').
    #[test]
    fn the_decision_split_is_under_the_causes() {
        use schedlat_common::decision::{Decision, HolderLeft, Pass};

        use crate::histogram::{
            DecisionCounts, DecisionFacts,
            decision_fixtures::{self as fixtures, waits},
        };
        let mut state = known_state();
        assert!(!screen(&state, 80, 24).contains("decision:"));
        let s = fixtures::stats(&[
            waits(
                600,
                7_000,
                Decision::Requested,
                Pass::Zero,
                HolderLeft::Preempted,
            ),
            waits(
                370,
                4_000_000,
                Decision::NotEligible,
                Pass::ThreePlus,
                HolderLeft::SliceEnded,
            ),
        ]);
        state.last.decision = Some(DecisionCounts::from_cpus(DecisionFacts::X86_6_18, &[s]));
        let line = decision::line(&state.last).unwrap();
        assert!(line.starts_with("decision: granted 62%"), "{line}");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        for (w, h) in [(80, 32), (120, 40)] {
            let text = screen(&state, w, h);
            assert!(words(&text).contains(&words(&line)), "{w}x{h}:\n{text}");
        }
        assert!(!screen(&state, 80, 24).contains("decision:"));
    }

    #[test]
    fn an_empty_victims_table_leaves_every_culprit_row() {
        let state = known_state_with(false);
        // Chrome 3, the "no waits" line, 3 culprits.
        assert_eq!(Panel::of(&state).wanted_height(80), 7);
        let text = screen(&state, 80, 40);
        assert!(text.contains("no waits"), "{text}");
        for tid in ["4002", " 900", "4003"] {
            assert!(
                text.lines()
                    .any(|l| l.contains(tid) && !l.contains("CULPRIT")),
                "culprit {tid} cut:\n{text}"
            );
        }
    }

    #[test]
    fn split_gives_spare_rows_to_whoever_can_use_them() {
        let panel = Panel::of(&known_state()); // 3 + 4 + 3 rows wanted
        assert_eq!(split(15, (9, 4), &panel, 80), (9, 6));
        assert_eq!(split(40, (9, 4), &panel, 80), (30, 10));
        assert_eq!(split(40, (35, 4), &panel, 80), (30, 10));
        // The marked rows before the panel's least height.
        assert_eq!(split(8, (9, 6), &panel, 80), (6, 2));
        assert_eq!(split(3, (9, 4), &panel, 80), (3, 0));
    }
}
