//! The cause split of a span of waits (docs/causes.md) as one compact
//! line, for the views that show it beside other things (`schedlat top`
//! under the shape verdict, `schedlat diagnose` under the histogram's): how the waits began (woken,
//! preempted: share of the waits and of their time, and p99), how many
//! ended on another CPU, what else took the CPU during them (steal, IRQ,
//! throttling: share of the measured wait time, or unavailable), and who
//! held the CPU when they ended (share of the wait time).

use crate::{
    analysis::{
        causes::{Causes, Summary},
        fmt_ns,
    },
    histogram::Waits,
};

/// The line, or why there is none.
pub(crate) fn line(waits: &Waits) -> String {
    let Some(counts) = &waits.causes else {
        return "causes: not measured by this load".into();
    };
    if counts.waits() == 0 {
        return "causes: no waits".into();
    }
    let c = Causes::of(counts);
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let p99 = |s: &Summary| {
        s.p99_ns
            .map_or(String::new(), |p| format!(" p99 {}", fmt_ns(p)))
    };
    // "woken 92%/41% p99 120 us": share of the waits / of their time.
    let began = |name: &str, s: &Summary| {
        let share = s.counted().share_in(c.all());
        format!("{name} {}/{}{}", pct(share.waits), pct(share.time), p99(s))
    };
    let mut parts = vec![format!(
        "causes (waits/time): {}, {}",
        began("woken", &c.woken),
        began("preempted", &c.preempted)
    )];
    if c.new.count > 0 {
        parts[0].push_str(&format!(", {}", began("new", &c.new)));
    }
    let placed = c.placed();
    if placed.count > 0 {
        let m = &c.placement.migrated;
        let share = m.counted().share_in(placed);
        parts.push(format!(
            "migrated {}/{}{}",
            pct(share.waits),
            pct(share.time),
            p99(m)
        ));
    }
    let overlap: Vec<String> = c
        .overlaps()
        .into_iter()
        .map(|(name, ns)| match c.overlap.share(ns) {
            Some(share) => format!("{name} {:.1}%", share * 100.0),
            None if ns.is_none() => format!("{name} n/a"),
            // Available, but no wait was measured at both ends on one CPU.
            None => format!("{name} -"),
        })
        .collect();
    parts.push(format!("of wait time: {}", overlap.join(" ")));
    let held = c.held();
    if held.count > 0 {
        let holders: Vec<String> = c
            .holders()
            .into_iter()
            .filter(|(_, n)| n.count > 0)
            .map(|(name, n)| format!("{name} {}", pct(n.share_in(held).time)))
            .collect();
        parts.push(format!("held by {}", holders.join(", ")));
    }
    parts.join("; ")
}

#[cfg(test)]
pub(crate) mod tests {
    use schedlat_common::{
        bucket_index,
        causes::{Cause, CauseStats, OVERLAP_IRQ},
    };

    use super::*;
    use crate::histogram::{CauseCounts, CauseFacts};

    /// 90 woken waits of 10 us, 10 preempted of 1 ms, 10 of them migrated;
    /// IRQ time measured (1% of the measured time), steal not; the holders
    /// other cgroup (the preemptions) and idle.
    pub(crate) fn counts() -> CauseCounts {
        let mut cpu = CauseStats::ZERO;
        for (class, n, ns) in [
            (Cause::Woken, 90u64, 10_000u64),
            (Cause::Preempted, 10, 1_000_000),
            (Cause::SameCpu, 90, 10_000),
            (Cause::Migrated, 10, 1_000_000),
            (Cause::HeldByOtherCgroup, 10, 1_000_000),
            (Cause::HeldByIdle, 90, 10_000),
        ] {
            cpu.count[class as usize] = n;
            cpu.sum_ns[class as usize] = n * ns;
            if (class as usize) < cpu.buckets.len() {
                cpu.buckets[class as usize][bucket_index(ns)] = n;
            }
        }
        cpu.overlap_ns[OVERLAP_IRQ] = 109_000;
        cpu.overlap_waits = 100;
        cpu.overlap_wait_ns = 10_900_000;
        let m = CauseFacts {
            irq: true,
            held_by: true,
            ..CauseFacts::default()
        };
        CauseCounts::from_cpus(m, &[cpu])
    }

    #[test]
    fn the_line_has_shares_p99s_overlaps_and_holders() {
        let waits = Waits {
            causes: Some(counts()),
            ..Waits::default()
        };
        let line = line(&waits);
        for part in [
            "causes (waits/time): woken 90%/8% p99 10.",
            "preempted 10%/92% p99 1.0",
            "migrated 10%/92% p99 1.0",
            "of wait time: steal n/a IRQ 1.0% throttled n/a",
            "held by other cgroup 92%, idle 8%",
        ] {
            assert!(line.contains(part), "no `{part}` in {line}");
        }
        assert!(!line.contains("new"), "{line}");
    }

    #[test]
    fn unmeasured_and_empty_say_so() {
        assert_eq!(line(&Waits::default()), "causes: not measured by this load");
        let empty = Waits {
            causes: Some(CauseCounts::zero(CauseFacts::default(), true)),
            ..Waits::default()
        };
        assert_eq!(line(&empty), "causes: no waits");
    }
}
