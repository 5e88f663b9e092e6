//! The cause split (docs/causes.md) as people and machines read it: the
//! `causes:` block under the shape line (here), and the `causes` object of
//! a JSON interval or breakdown key (json.rs, docs/json.md).

mod json;
pub(crate) mod line;

use std::fmt::Write as _;

pub(crate) use json::{CausesOut, json};

use crate::{
    analysis::{
        causes::{Causes, Counted, DEPTH_LABELS, Summary, share},
        fmt_ns,
    },
    histogram::Waits,
};

/// The split of `waits`, when the programs measured it.
pub(crate) fn of(waits: &Waits) -> Option<Causes> {
    waits.causes.as_ref().map(Causes::of)
}

/// The text block: three lines, the first starting `causes: `, the others
/// indented under it, and a fourth for the wakeup path with `--waking`;
/// empty when there is nothing to split. Percentiles appear where the
/// split has them (the total, not a breakdown key).
pub(crate) fn text(causes: &Causes) -> String {
    let waits = causes.waits();
    if waits == 0 {
        return String::new();
    }
    let time = causes.wait_ns();
    let mut began = Vec::new();
    for (name, class) in [
        ("woken", &causes.woken),
        ("new", &causes.new),
        ("preempted", &causes.preempted),
    ] {
        // Woken and preempted always appear, so "0%" is said outright.
        if class.count == 0 && name == "new" {
            continue;
        }
        let shares = if began.is_empty() {
            format!(
                "{} of waits, {} of time",
                pct(share(class.count, waits)),
                pct(share(class.sum_ns, time))
            )
        } else {
            format!(
                "{}, {}",
                pct(share(class.count, waits)),
                pct(share(class.sum_ns, time))
            )
        };
        began.push(format!("{name} {shares}{}", p99(class)));
    }
    let mut out = format!("causes: {}\n", began.join("; "));

    let placement = &causes.placement;
    let mut where_ = format!(
        "migrated {} of waits{}",
        pct(share(placement.migrated.count, waits)),
        p99(&placement.migrated)
    );
    if let Some(llc) = placement.cross_llc
        && llc.count > 0
    {
        let _ = write!(where_, ", {} across LLCs", pct(share(llc.count, waits)));
    }
    if let Some(node) = placement.cross_node
        && node.count > 0
    {
        let _ = write!(where_, ", {} across nodes", pct(share(node.count, waits)));
    }
    let o = &causes.overlap;
    let overlap = |name: &str, ns: Option<u64>| match ns {
        None => format!("{name} unavailable"),
        Some(_) => format!("{name} {}", pct(o.share(ns).unwrap_or(0.0))),
    };
    let _ = writeln!(
        out,
        "        {where_}; {}, {}, {} of same-CPU wait time",
        overlap("steal", o.steal_ns),
        overlap("irq", o.irq_ns),
        overlap("throttled", o.throttled_ns),
    );

    let _ = writeln!(
        out,
        "        {}; {}",
        queue_depth(&causes.queue_depth, waits),
        held_by(causes, time)
    );
    if let Some(w) = &causes.waking {
        let _ = writeln!(out, "        {}", waking(w));
    }
    out
}

/// `wakeup path (sched_waking to enqueue) 812 wakeups, p50 3.1 us, p99 9 us`.
fn waking(w: &Summary) -> String {
    let mut line = format!("wakeup path (sched_waking to enqueue) {} wakeups", w.count);
    if let (Some(p50), Some(p99)) = (w.p50_ns, w.p99_ns)
        && w.count > 0
    {
        let _ = write!(line, ", p50 {}, p99 {}", fmt_ns(p50), fmt_ns(p99));
    }
    line
}

/// `, p99 210 us` where the class has percentiles and waits.
fn p99(class: &Summary) -> String {
    match class.p99_ns {
        Some(ns) if class.count > 0 => format!(", p99 {}", fmt_ns(ns)),
        _ => String::new(),
    }
}

/// The dominant classes, largest first: enough to cover 80% of `whole`
/// (at most three), each at least 1%.
fn dominant<'a>(classes: &[(&'a str, u64)], whole: u64) -> Vec<(&'a str, f64)> {
    let mut sorted: Vec<(&str, u64)> = classes.iter().copied().filter(|c| c.1 > 0).collect();
    sorted.sort_by_key(|c| std::cmp::Reverse(c.1));
    let mut shown = Vec::new();
    let mut covered = 0.0;
    for (name, n) in sorted {
        let s = share(n, whole);
        if shown.len() == 3 || covered >= 0.8 || s < 0.01 {
            break;
        }
        covered += s;
        shown.push((name, s));
    }
    shown
}

/// `queue depth 1: 71%, 2: 20%` (tasks queued ahead, share of waits).
fn queue_depth(depth: &[Counted; 7], waits: u64) -> String {
    let known: u64 = depth[..6].iter().map(|c| c.count).sum();
    if known == 0 {
        return "queue depth unknown".to_string();
    }
    let classes: Vec<(&str, u64)> = DEPTH_LABELS
        .iter()
        .zip(depth)
        .map(|(label, c)| (*label, c.count))
        .collect();
    let parts: Vec<String> = dominant(&classes, waits)
        .into_iter()
        .map(|(label, s)| format!("{label}: {}", pct(s)))
        .collect();
    format!("queue depth {}", parts.join(", "))
}

/// `held by other cgroup 64%, same cgroup 30% of wait time`.
fn held_by(causes: &Causes, time: u64) -> String {
    let h = &causes.held_by;
    let classes = [
        ("same cgroup", h.same_cgroup.sum_ns),
        ("other cgroup", h.other_cgroup.sum_ns),
        ("kernel", h.kernel.sum_ns),
        ("higher class", h.higher_class.sum_ns),
        ("idle", h.idle.sum_ns),
        ("unknown", h.unknown.sum_ns),
    ];
    if h.unknown.count == causes.waits() {
        return "held by unknown".to_string();
    }
    let parts: Vec<String> = dominant(&classes, time)
        .into_iter()
        .map(|(name, s)| format!("{name} {}", pct(s)))
        .collect();
    format!("held by {} of wait time", parts.join(", "))
}

/// A share as a percentage: one decimal below 10%, none above.
fn pct(s: f64) -> String {
    let p = s * 100.0;
    if p == 0.0 {
        "0%".to_string()
    } else if p < 0.1 {
        "<0.1%".to_string()
    } else if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use schedlat_common::{
        bucket_index,
        causes::{Cause, CauseStats, KeyCauses, OVERLAP_STEAL, OVERLAP_THROTTLED},
    };

    use super::*;
    use crate::histogram::{CauseCounts, CauseFacts};

    /// 900 woken waits of 10 us (100 of them migrated) and 100 preempted
    /// of 1 ms, all behind another cgroup but 100 woken behind the idle
    /// task; half the same-CPU time throttled.
    pub(crate) fn sample_cpu() -> CauseStats {
        let mut cpu = CauseStats::ZERO;
        let mut put = |class: Cause, n: u64, ns: u64| {
            cpu.count[class as usize] += n;
            cpu.sum_ns[class as usize] += n * ns;
            if (class as usize) < cpu.buckets.len() {
                cpu.buckets[class as usize][bucket_index(ns)] += n;
            }
        };
        put(Cause::Woken, 900, 10_000);
        put(Cause::Preempted, 100, 1_000_000);
        put(Cause::SameCpu, 800, 10_000);
        put(Cause::SameCpu, 100, 1_000_000);
        put(Cause::Migrated, 100, 10_000);
        put(Cause::HeldByOtherCgroup, 100, 1_000_000);
        put(Cause::HeldByOtherCgroup, 800, 10_000);
        put(Cause::HeldByIdle, 100, 10_000);
        put(Cause::Depth1, 700, 10_000);
        put(Cause::Depth2, 300, 10_000);
        cpu.overlap_waits = 900;
        cpu.overlap_wait_ns = 108_000_000;
        cpu.overlap_ns[OVERLAP_THROTTLED] = 54_000_000;
        cpu
    }

    fn measurable() -> CauseFacts {
        CauseFacts {
            irq: true,
            throttled: true,
            queue_depth: true,
            held_by: true,
            ..CauseFacts::default()
        }
    }

    #[test]
    fn the_text_block_gives_shares_percentiles_and_unavailable_overlaps() {
        let causes = Causes::of(&CauseCounts::from_cpus(measurable(), &[sample_cpu()]));
        let t = text(&causes);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        // 900 of 1000 waits; 9 ms of 109 ms.
        assert!(
            lines[0].starts_with("causes: woken 90% of waits, 8.3% of time, p99 "),
            "{t}"
        );
        assert!(lines[0].contains("; preempted 10%, 92%, p99 1."), "{t}");
        assert!(!lines[0].contains("new"), "{t}");
        assert!(
            lines[1].starts_with("        migrated 10% of waits, p99 "),
            "{t}"
        );
        assert!(
            lines[1].ends_with("steal unavailable, irq 0%, throttled 50% of same-CPU wait time"),
            "{t}"
        );
        assert_eq!(
            lines[2],
            "        queue depth 1: 70%, 2: 30%; held by other cgroup 99% of wait time"
        );
    }

    #[test]
    fn a_key_has_shares_without_percentiles() {
        let cpu = sample_cpu();
        let mut key = KeyCauses::ZERO;
        for i in 0..key.count.len() {
            key.count[i] = cpu.count[i] as u32;
            key.sum_ns[i] = cpu.sum_ns[i];
        }
        key.overlap_ns[OVERLAP_STEAL] = 1;
        key.overlap_waits = cpu.overlap_waits;
        key.overlap_wait_ns = cpu.overlap_wait_ns;
        let m = CauseFacts {
            held_by: false,
            ..measurable()
        };
        let mut counts = CauseCounts::from_key(m, &key);
        counts.count[Cause::HeldByUnknown as usize] = 1000;
        let t = text(&Causes::of(&counts));
        assert!(!t.contains("p99"), "{t}");
        assert!(t.starts_with("causes: woken 90% of waits, 8.3% of time; preempted 10%, 92%\n"));
        assert!(t.contains("held by unknown"), "{t}");
        let v = serde_json::to_value(json(&Causes::of(&counts))).unwrap();
        assert_eq!(v["woken"]["p99_ns"], serde_json::Value::Null);
        assert_eq!(v["woken"]["count"], 900);
    }

    #[test]
    fn the_wakeup_path_shows_only_when_measured() {
        let mut cpu = sample_cpu();
        cpu.waking_count = 1000;
        cpu.waking_sum_ns = 3_000_000;
        cpu.waking_buckets[bucket_index(3_000)] = 1000;
        let m = CauseFacts {
            waking: true,
            ..measurable()
        };
        let causes = Causes::of(&CauseCounts::from_cpus(m, &[cpu]));
        let t = text(&causes);
        let last = t.lines().nth(3).unwrap_or_default();
        assert!(
            last.starts_with("        wakeup path (sched_waking to enqueue) 1000 wakeups, p50 "),
            "{t}"
        );
        assert!(last.contains(", p99 "), "{t}");
        let v = serde_json::to_value(json(&causes)).unwrap();
        assert_eq!(v["waking"]["count"], 1000);
        assert_eq!(v["waking"]["sum_ns"], 3_000_000);
        let p50 = v["waking"]["p50_ns"].as_u64().unwrap();
        assert!(p50.abs_diff(3_000) <= 500, "{p50}");
        // A breakdown key keeps no wakeup path: null, no line.
        let key = Causes::of(&CauseCounts::from_key(m, &KeyCauses::ZERO));
        assert_eq!(key.waking, None);
        // Not measured: no line, null in JSON (the counts are ignored).
        let off = Causes::of(&CauseCounts::from_cpus(measurable(), &[cpu]));
        assert_eq!(text(&off).lines().count(), 3);
        assert_eq!(
            serde_json::to_value(json(&off)).unwrap()["waking"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn nothing_to_split_prints_nothing() {
        let counts = CauseCounts::zero(measurable(), true);
        assert_eq!(text(&Causes::of(&counts)), "");
        assert!(of(&Waits::default()).is_none());
    }

    #[test]
    fn the_json_object_names_every_field_and_nulls_the_unmeasured() {
        let causes = Causes::of(&CauseCounts::from_cpus(measurable(), &[sample_cpu()]));
        let v = serde_json::to_value(json(&causes)).unwrap();
        assert_eq!(v["woken"]["count"], 900);
        assert_eq!(v["woken"]["sum_ns"], 9_000_000);
        let p99 = v["preempted"]["p99_ns"].as_u64().unwrap();
        assert!(p99.abs_diff(1_000_000) <= 125_000, "{p99}");
        assert_eq!(v["new"]["p50_ns"], serde_json::Value::Null);
        assert_eq!(v["placement"]["migrated"]["count"], 100);
        assert_eq!(v["placement"]["cross_llc"], serde_json::Value::Null);
        assert_eq!(v["placement"]["unknown"]["count"], 0);
        assert_eq!(v["overlap_ns"]["steal"], serde_json::Value::Null);
        assert_eq!(v["overlap_ns"]["irq"], 0);
        assert_eq!(v["overlap_ns"]["throttled"], 54_000_000);
        assert_eq!(v["overlap_ns"]["measured_waits"], 900);
        assert_eq!(v["overlap_ns"]["measured_wait_ns"], 108_000_000);
        assert_eq!(v["queue_depth"]["1"], 700);
        assert_eq!(v["queue_depth"]["3-4"], 0);
        assert_eq!(v["queue_depth"]["9+"], 0);
        assert_eq!(v["queue_depth"]["unknown"], 0);
        assert_eq!(v["held_by"]["other_cgroup"]["count"], 900);
        assert_eq!(v["held_by"]["higher_class"]["sum_ns"], 0);
        assert_eq!(v["waking"], serde_json::Value::Null);
        let back: CausesOut = serde_json::from_value(v).unwrap();
        assert_eq!(back, json(&causes));
    }
}
