//! `schedlat replay`'s report of a dump: per interval its count,
//! percentiles and verdict, then the sub-window merged (runqlat's table,
//! percentiles, verdict) and its longest slow waits with culprits; as text
//! or JSON Lines (`schedlat.replay.v1`).

use std::fmt::Write as _;

use serde_json::json;

use crate::{
    analysis::{
        fmt_ns,
        percentiles::Percentiles,
        recording::{Second, SlowWait, Window},
        shape,
        shape::Shape,
        task,
    },
    histogram::Waits,
    output::{decision::wait::WaitDecision, escape::printable, stacks::stacks_lines, text},
    sys::{clock::local_time_us, slice::Slice},
};

/// What the report shows of a dump: one series' whole intervals between
/// `from` and `to` (unix ns), merged, and the slow waits that ended in it,
/// longest first.
pub(crate) struct Replay<'a> {
    pub window: &'a Window,
    /// What the series is called, and the dump's series it adds up.
    pub series: &'a str,
    pub names: &'a [String],
    pub from: u64,
    pub to: u64,
    pub inside: Vec<&'a Second>,
    pub merged: Waits,
    pub shape: Shape,
    pub slow: Vec<&'a SlowWait>,
    pub slice: Slice,
    /// Longest slow waits listed (text).
    pub max_slow: usize,
    /// Intervals stamped out of time order (Window::out_of_order).
    pub out_of_order: usize,
    /// Said at the top of the text (JSON readers get them on stderr).
    pub warnings: &'a [String],
}

/// One line per interval, then one for the window.
pub(crate) fn json(r: &Replay) -> String {
    let (w, series, slice) = (r.window, r.series, &r.slice);
    let mut out = String::new();
    for s in &r.inside {
        let waits = s.waits_of(r.names).unwrap_or_default();
        let shape = shape::classify(&waits, slice);
        let line = json!({
            "type": "interval", "schema": "schedlat.replay.v1", "series": series,
            "start_unix_ns": w.unix_ns(s.start_mono_ns), "end_unix_ns": w.unix_ns(s.end_mono_ns),
            "count": waits.count(), "percentiles": Percentiles::of(&waits),
            "verdict": shape.verdict.as_str(),
        });
        let _ = writeln!(out, "{line}");
    }
    let line = json!({
        "type": "window", "schema": "schedlat.replay.v1", "series": series,
        "reason": w.meta.reason, "host": w.meta.host,
        "start_unix_ns": r.from, "end_unix_ns": r.to,
        "intervals": r.inside.len(), "count": r.merged.count(), "mean_ns": r.merged.mean_ns(),
        "percentiles": Percentiles::of(&r.merged),
        "verdict": r.shape.verdict.as_str(), "summary": r.shape.summary,
        "slow_waits": r.slow.len(),
        "out_of_order_intervals": r.out_of_order,
    });
    let _ = writeln!(out, "{line}");
    out
}

/// Under a wait of a dump recorded with stacks whose stacks the window
/// had no room for.
const STACKS_DROPPED: &str =
    "    stacks: not kept (the recorder keeps the newest --max-stacks waits' stacks)\n";

pub(crate) fn text(r: &Replay) -> String {
    let (w, series, slice, inside) = (r.window, r.series, &r.slice, &r.inside);
    let (Some(first), Some(in_first), Some(in_last)) =
        (w.seconds.first(), inside.first(), inside.last())
    else {
        return String::new();
    };
    let mut out = String::new();
    for warning in r.warnings {
        let _ = writeln!(out, "warning: {}", printable(warning));
    }
    let _ = writeln!(
        out,
        "dump of {} on {} ({}): {} intervals, {} slow waits of at least {}",
        clock(w.unix_ns(first.start_mono_ns)),
        printable(&w.meta.host),
        printable(&w.meta.reason),
        w.seconds.len(),
        w.slow.len(),
        fmt_ns(w.meta.slow_threshold_ns)
    );
    let _ = writeln!(
        out,
        "\n{:<15} {:>8} {:>9} {:>9} {:>9}  VERDICT ({})",
        "TIME",
        "COUNT",
        "P50",
        "P99",
        "MAX",
        printable(series)
    );
    for s in inside {
        let waits = s.waits_of(r.names).unwrap_or_default();
        let _ = writeln!(
            out,
            "{}",
            interval_line(w.unix_ns(s.end_mono_ns), &waits, slice)
        );
    }
    let _ = writeln!(
        out,
        "\n{} to {}, {} intervals merged:",
        clock(w.unix_ns(in_first.start_mono_ns)),
        clock(w.unix_ns(in_last.end_mono_ns)),
        inside.len()
    );
    out.push_str(&window_text(&r.merged, &r.shape, &w.meta.unit));
    if !r.slow.is_empty() {
        let _ = writeln!(
            out,
            "\nlongest slow waits ({} in the window):",
            r.slow.len()
        );
        for wait in r.slow.iter().take(r.max_slow) {
            let e = &wait.event;
            let rq = if e.rq_len == schedlat_common::victims::RQ_LEN_UNKNOWN {
                "-".to_string()
            } else {
                e.rq_len.to_string()
            };
            let decided =
                WaitDecision::of(e.decided).map_or(String::new(), |d| format!(": {}", d.text()));
            let _ = writeln!(
                out,
                "  {} cpu {:>3} {:>9}  {} waited behind {} (run queue {rq}){decided}",
                clock(w.unix_ns(e.at_ns)),
                e.cpu,
                fmt_ns(e.wait_ns),
                printable(&task::short(&e.victim)),
                printable(&task::short(&e.culprit))
            );
            // Recorded with --stacks: what the holder ran, and who woke
            // the waiter, as `slow --stacks` shows them.
            match &wait.stacks {
                Some(stacks) => out.push_str(&stacks_lines(stacks)),
                // An idle CPU has no holder to show.
                None if w.meta.stacks && e.culprit.tid != 0 => {
                    out.push_str(STACKS_DROPPED);
                }
                None => {}
            }
        }
    }
    out
}

fn interval_line(end_unix_ns: u64, waits: &Waits, slice: &Slice) -> String {
    let p = Percentiles::of(waits);
    let f = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
    format!(
        "{:<15} {:>8} {:>9} {:>9} {:>9}  {}",
        clock(end_unix_ns),
        waits.count(),
        f(p.map(|p| p.p50_ns)),
        f(p.map(|p| p.p99_ns)),
        f(waits.max_ns),
        shape::classify(waits, slice).verdict.as_str()
    )
}

fn window_text(w: &Waits, shape: &Shape, unit: &str) -> String {
    let mut out = text::log2_table(&w.log2_slots(), unit);
    let _ = writeln!(out, "total {} waits", w.count());
    if let Some(p) = Percentiles::of(w) {
        out.push_str(&text::percentile_line(&p));
    }
    let _ = writeln!(out, "shape: {}", shape.summary);
    out
}

fn clock(unix_ns: u64) -> String {
    local_time_us(unix_ns)
}
