//! libbpf-tools' log2 histogram layout, byte for byte (trace_helpers.c
//! print_log2_hist), followed by schedlat's one-line summary.

use std::fmt::Write as _;

use super::Report;
use crate::{
    analysis::{fmt_ns, percentiles::Percentiles},
    histogram::{Unit, Waits, log2_slot_bounds},
};

const STARS_MAX: usize = 40;

/// runqlat's table for `slots` (as from `Waits::log2_slots`); empty input
/// prints nothing, as runqlat does for an empty interval.
pub(crate) fn log2_table(slots: &[u64], unit_label: &str) -> String {
    let mut out = String::new();
    let Some(idx_max) = slots.iter().rposition(|&n| n > 0) else {
        return out;
    };
    let val_max = slots.iter().copied().max().unwrap_or(0);
    // Wide tables (beyond 2^32) get wider columns and half-length bars.
    let wide = idx_max > 32;
    let (pad, label_width, num_width, stars) = if wide {
        (15, 29, 20, STARS_MAX / 2)
    } else {
        (5, 19, 10, STARS_MAX)
    };
    let _ = writeln!(
        out,
        "{:pad$}{unit_label:<label_width$} : count    distribution",
        ""
    );
    for (i, &val) in slots.iter().enumerate().take(idx_max + 1) {
        let (low, high) = log2_slot_bounds(i);
        let _ = write!(out, "{low:>num_width$} -> {high:<num_width$} : {val:<8} |");
        push_stars(&mut out, val, val_max, stars);
        out.push_str("|\n");
    }
    out
}

fn push_stars(out: &mut String, val: u64, val_max: u64, width: usize) {
    let num_stars = (val.min(val_max) * width as u64 / val_max.max(1)) as usize;
    out.extend(std::iter::repeat_n('*', num_stars));
    out.extend(std::iter::repeat_n(' ', width - num_stars));
    if val > val_max {
        out.push('+');
    }
}

/// The whole text block for one interval: optional timestamp line (`-T`),
/// the table, the short report in sentences (brief.rs), and with
/// `verbose` (`-v`) the full split tables under it.
pub(crate) fn render(report: &Report, timestamp: Option<&str>, verbose: bool) -> String {
    let mut out = String::from("\n");
    if let Some(ts) = timestamp {
        let _ = writeln!(out, "{ts:<8}");
    }
    out.push_str(&log2_table(&report.waits.log2_slots(), report.unit.label()));
    out.push_str(&super::brief::text(report));
    if verbose {
        out.push_str(&details(report));
    }
    out
}

/// `-v`'s lines: the summary, the percentiles, the shape, the cause and
/// decision splits (with the verdict in words), the kernel's context.
pub(crate) fn details(report: &Report) -> String {
    let mut out = summary(report);
    if let Some(p) = &report.percentiles {
        out.push_str(&percentile_line(p));
    }
    let _ = writeln!(out, "shape: {}", report.shape.summary);
    if let Some(causes) = super::causes::of(report.waits) {
        out.push_str(&super::causes::text(&causes));
    }
    out.push_str(&super::decision::text(report.waits));
    if let Some(kernel) = report.kernel {
        out.push_str(&super::decision::verdict_text(kernel, report.waits, false));
        out.push_str(&super::kernel_context::text(kernel, report.waits));
    }
    out
}

/// e.g. `p50 18.0 us, p90 52.0 us, p99 410 us, p99.9 1.20 ms, max 1.52 ms (min 410 ns)`
pub(crate) fn percentile_line(p: &Percentiles) -> String {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
    format!(
        "{}, max {} (min {})\n",
        quantiles(p),
        opt(p.max_ns),
        opt(p.min_ns)
    )
}

/// The estimated percentiles alone, e.g. `p50 18.0 us, p90 52.0 us, p99
/// 410 us, p99.9 1.20 ms`: what every percentile line starts with.
pub(crate) fn quantiles(p: &Percentiles) -> String {
    format!(
        "p50 {}, p90 {}, p99 {}, p99.9 {}",
        fmt_ns(p.p50_ns),
        fmt_ns(p.p90_ns),
        fmt_ns(p.p99_ns),
        fmt_ns(p.p999_ns)
    )
}

/// The exact mean as `35.2 usecs`, or `-` without waits.
pub(crate) fn mean_in_unit(w: &Waits, unit: Unit) -> String {
    match w.mean_ns() {
        Some(ns) => format!("{:.1} {}", ns / unit.ns() as f64, unit.label()),
        None => "-".to_string(),
    }
}

/// e.g. `total 1234 waits, mean 35.2 usecs; dropped 0 (TID > pid_max), discarded 0 (negative delta)`
pub(crate) fn summary(report: &Report) -> String {
    let w = report.waits;
    let mean = mean_in_unit(w, report.unit);
    format!(
        "total {} waits, mean {mean}; dropped {} (TID > pid_max), discarded {} (negative delta)\n",
        w.count(),
        w.untracked_tid,
        w.discarded_negative
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from libbpf-tools runqlat (Debian bookworm) on this machine;
    /// `cat -A` confirmed the trailing spaces.
    const RUNQLAT_SAMPLE: &str = "     usecs               : count    distribution
         0 -> 1          : 0        |                                        |
         2 -> 3          : 1        |                                        |
         4 -> 7          : 3        |**                                      |
         8 -> 15         : 5        |****                                    |
        16 -> 31         : 22       |*********************                   |
        32 -> 63         : 41       |****************************************|
        64 -> 127        : 1        |                                        |
";

    #[test]
    fn matches_runqlat_byte_for_byte() {
        assert_eq!(
            log2_table(&[0, 1, 3, 5, 22, 41, 1], "usecs"),
            RUNQLAT_SAMPLE
        );
    }

    #[test]
    fn msecs_header_and_single_slot() {
        let t = log2_table(&[44], "msecs");
        assert_eq!(
            t,
            "     msecs               : count    distribution
         0 -> 1          : 44       |****************************************|
"
        );
    }

    #[test]
    fn empty_interval_prints_no_table() {
        assert_eq!(log2_table(&[], "usecs"), "");
        assert_eq!(log2_table(&[0, 0], "usecs"), "");
    }

    #[test]
    fn wide_tables_use_wide_columns_and_half_bars() {
        let mut slots = vec![0u64; 34];
        slots[33] = 7;
        let t = log2_table(&slots, "usecs");
        let last = t.lines().last().unwrap();
        assert_eq!(
            last,
            format!(
                "{:>20} -> {:<20} : 7        |{}|",
                1u64 << 33,
                (1u64 << 34) - 1,
                "*".repeat(20)
            )
        );
        assert!(t.starts_with(&format!("{:15}usecs{:24} : count", "", "")));
    }
}
