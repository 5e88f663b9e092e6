//! What the numbers mean: percentiles from the fine buckets, the shape of the
//! distribution (docs/shape.md), before/after comparison, who waited
//! behind whom (docs/victims.md), and the diagnosis (docs/diagnose.md).

pub(crate) mod breakdown;
pub(crate) mod causes;
pub(crate) mod compare;
pub(crate) mod diagnosis;
pub(crate) mod dump_series;
pub(crate) mod holder;
pub(crate) mod hottest;
pub(crate) mod pairs;
pub(crate) mod percentiles;
pub(crate) mod recording;
pub(crate) mod shape;
#[cfg(test)]
mod shape_cases;
pub(crate) mod shape_modes;
pub(crate) mod stack_watch;
pub(crate) mod stacks;
pub(crate) mod task;
pub(crate) mod victims;

/// `s` cut to at most `max` bytes, on a character boundary, its spare
/// capacity given back: a name kept for long (a series' cgroup path, a
/// stack frame's symbol) holds no more than its bound.
pub(crate) fn cut_to(s: &mut String, max: usize) {
    if s.len() > max {
        let end = (0..=max)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        s.truncate(end);
    }
    s.shrink_to_fit();
}

/// A duration for people: 3 significant digits in ns, us, ms or s.
pub(crate) fn fmt_ns(ns: u64) -> String {
    let ns = ns as f64;
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "us")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::fmt_ns;

    #[test]
    fn human_durations() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.3 us");
        assert_eq!(fmt_ns(1_500_000), "1.50 ms");
        assert_eq!(fmt_ns(2_000_000_000), "2.00 s");
    }
}
