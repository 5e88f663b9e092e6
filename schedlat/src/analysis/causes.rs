//! The cause split read as a report (docs/causes.md): for each class its
//! waits, their time and, for the classes the kernel histograms, p50 and
//! p99; the overlaps as shares of the measured wait time; and the shares
//! the text line, top, victims and diagnose quote.

use schedlat_common::causes::{
    Cause, DEPTH, NR_OVERLAPS, OVERLAP_IRQ, OVERLAP_STEAL, OVERLAP_THROTTLED,
};

use super::percentiles::quantile_ns;
use crate::histogram::{CauseCounts, Waits};

/// Waits of one class and their time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    pub count: u64,
    pub sum_ns: u64,
}

/// A class's share of a whole: of the waits, and of their time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Share {
    pub waits: f64,
    pub time: f64,
}

impl Counted {
    /// Its share of `whole` (0 where the whole is empty).
    pub(crate) fn share_in(self, whole: Counted) -> Share {
        Share {
            waits: share(self.count, whole.count),
            time: share(self.sum_ns, whole.sum_ns),
        }
    }

    /// Mean wait; None without waits.
    pub(crate) fn mean_ns(self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    fn plus(self, other: Counted) -> Counted {
        Counted {
            count: self.count + other.count,
            sum_ns: self.sum_ns + other.sum_ns,
        }
    }
}

/// A class with percentiles (the total has its histogram; a breakdown key
/// does not, and its percentiles are None).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub count: u64,
    pub sum_ns: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

impl Summary {
    pub(crate) fn counted(&self) -> Counted {
        Counted {
            count: self.count,
            sum_ns: self.sum_ns,
        }
    }
}

/// Where the wait ended against where the task last ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    pub same_cpu: Summary,
    pub migrated: Summary,
    /// Subsets of `migrated`; None when the topology was not read.
    pub cross_llc: Option<Counted>,
    pub cross_node: Option<Counted>,
    /// First wait of a task since load: no earlier CPU to compare with.
    pub unknown: Counted,
}

/// Who held the CPU when the wait ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HeldBy {
    pub same_cgroup: Counted,
    pub other_cgroup: Counted,
    pub kernel: Counted,
    pub higher_class: Counted,
    pub idle: Counted,
    /// No task pointers (classic tracepoints).
    pub unknown: Counted,
}

/// Nanoseconds of same-CPU waits that steal, IRQ time and bandwidth
/// throttling covered; None where the kernel lacks the accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub steal_ns: Option<u64>,
    pub irq_ns: Option<u64>,
    pub throttled_ns: Option<u64>,
    /// The waits measured (same CPU at both ends), and their time: the
    /// denominator of the shares.
    pub measured: Counted,
}

impl Overlap {
    /// Share of the measured wait time `ns` covers; None when unavailable
    /// or nothing was measured.
    pub(crate) fn share(&self, ns: Option<u64>) -> Option<f64> {
        let ns = ns?;
        (self.measured.sum_ns > 0).then(|| ns as f64 / self.measured.sum_ns as f64)
    }
}

/// Labels of the queue-depth classes, in order (their names).
pub(crate) const DEPTH_LABELS: [&str; 7] = {
    let mut labels = [""; 7];
    let mut i = 0;
    while i < DEPTH.len() {
        labels[i] = DEPTH[i].name();
        i += 1;
    }
    labels
};

/// The whole split of a span of waits.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Causes {
    pub woken: Summary,
    pub new: Summary,
    pub preempted: Summary,
    pub placement: Placement,
    pub held_by: HeldBy,
    pub overlap: Overlap,
    /// Waits per depth class ([`DEPTH_LABELS`]).
    pub queue_depth: [Counted; 7],
    /// sched_waking to sched_wakeup, when `--waking` was on.
    pub waking: Option<Summary>,
}

impl Causes {
    pub(crate) fn of(counts: &CauseCounts) -> Causes {
        let counted = |c: Cause| Counted {
            count: counts.count[c as usize],
            sum_ns: counts.sum_ns[c as usize],
        };
        let summary = |c: Cause| {
            let hist = counts.buckets.get(c as usize);
            summarize(counted(c), hist.map(Vec::as_slice))
        };
        let m = counts.measurable;
        let overlap = |i: usize, on: bool| on.then_some(counts.overlap_ns[i]);
        Causes {
            woken: summary(Cause::Woken),
            new: summary(Cause::New),
            preempted: summary(Cause::Preempted),
            placement: Placement {
                same_cpu: summary(Cause::SameCpu),
                migrated: summary(Cause::Migrated),
                cross_llc: m.topology.then(|| counted(Cause::CrossLlc)),
                cross_node: m.topology.then(|| counted(Cause::CrossNode)),
                unknown: counted(Cause::PlacementUnknown),
            },
            held_by: HeldBy {
                same_cgroup: counted(Cause::HeldBySameCgroup),
                other_cgroup: counted(Cause::HeldByOtherCgroup),
                kernel: counted(Cause::HeldByKernel),
                higher_class: counted(Cause::HeldByHigherClass),
                idle: counted(Cause::HeldByIdle),
                unknown: counted(Cause::HeldByUnknown),
            },
            overlap: Overlap {
                steal_ns: overlap(OVERLAP_STEAL, m.steal),
                irq_ns: overlap(OVERLAP_IRQ, m.irq),
                throttled_ns: overlap(OVERLAP_THROTTLED, m.throttled),
                measured: Counted {
                    count: counts.overlap_waits,
                    sum_ns: counts.overlap_wait_ns,
                },
            },
            queue_depth: DEPTH.map(counted),
            waking: m.waking.then(|| {
                let hist =
                    (!counts.waking_buckets.is_empty()).then_some(counts.waking_buckets.as_slice());
                summarize(
                    Counted {
                        count: counts.waking_count,
                        sum_ns: counts.waking_sum_ns,
                    },
                    hist,
                )
            }),
        }
    }

    /// Waits in the span (each is in one class of how it began).
    pub(crate) fn waits(&self) -> u64 {
        self.woken.count + self.new.count + self.preempted.count
    }

    /// Their time.
    pub(crate) fn wait_ns(&self) -> u64 {
        self.woken.sum_ns + self.new.sum_ns + self.preempted.sum_ns
    }

    /// Every wait of the span, and their time: the whole of how they began.
    pub(crate) fn all(&self) -> Counted {
        Counted {
            count: self.waits(),
            sum_ns: self.wait_ns(),
        }
    }

    /// The waits whose placement is known (same CPU or migrated): the
    /// whole of the migrated share, so that a task's first wait since load
    /// (no earlier CPU) counts neither way.
    pub(crate) fn placed(&self) -> Counted {
        let p = &self.placement;
        p.same_cpu.counted().plus(p.migrated.counted())
    }

    /// The waits whose holder is known (every class but `unknown`, the
    /// classic tracepoints' waits): the whole of the held-by shares.
    pub(crate) fn held(&self) -> Counted {
        let h = &self.held_by;
        [
            h.same_cgroup,
            h.other_cgroup,
            h.kernel,
            h.higher_class,
            h.idle,
        ]
        .into_iter()
        .fold(Counted::default(), Counted::plus)
    }

    /// The held-by classes with their labels, in the order the views print
    /// them; `held_by.unknown` is left out (it is not a holder).
    pub(crate) fn holders(&self) -> [(&'static str, Counted); 5] {
        let h = &self.held_by;
        [
            ("same cgroup", h.same_cgroup),
            ("other cgroup", h.other_cgroup),
            ("kernel thread", h.kernel),
            ("higher class", h.higher_class),
            ("idle", h.idle),
        ]
    }

    /// The overlaps with their labels: steal, IRQ, throttled; None where
    /// the kernel lacks the accounting.
    pub(crate) fn overlaps(&self) -> [(&'static str, Option<u64>); 3] {
        let o = &self.overlap;
        [
            ("steal", o.steal_ns),
            ("IRQ", o.irq_ns),
            ("throttled", o.throttled_ns),
        ]
    }
}

/// Share of `part` in `whole` (0 when the whole is 0).
pub(crate) fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn summarize(counted: Counted, buckets: Option<&[u64]>) -> Summary {
    let (p50_ns, p99_ns) = match buckets {
        Some(buckets) => {
            let waits = Waits {
                buckets: buckets.to_vec(),
                sum_ns: counted.sum_ns,
                ..Waits::default()
            };
            (quantile_ns(&waits, 0.50), quantile_ns(&waits, 0.99))
        }
        None => (None, None),
    };
    Summary {
        count: counted.count,
        sum_ns: counted.sum_ns,
        p50_ns,
        p99_ns,
    }
}

// Every overlap index has a field above.
const _: () = assert!(NR_OVERLAPS == 3);

#[cfg(test)]
mod tests {
    use schedlat_common::{bucket_index, causes::CauseStats};

    use super::*;
    use crate::histogram::CauseFacts;

    #[test]
    fn classes_summaries_and_unavailable_overlaps() {
        let mut cpu = CauseStats::ZERO;
        for (class, n, ns) in [
            (Cause::Woken, 90u64, 10_000u64),
            (Cause::Preempted, 10, 1_000_000),
        ] {
            cpu.count[class as usize] = n;
            cpu.sum_ns[class as usize] = n * ns;
            cpu.buckets[class as usize][bucket_index(ns)] = n;
        }
        cpu.count[Cause::Depth2 as usize] = 100;
        cpu.overlap_ns[OVERLAP_IRQ] = 50_000;
        cpu.overlap_waits = 100;
        cpu.overlap_wait_ns = 10_900_000;
        let measurable = CauseFacts {
            irq: true,
            ..CauseFacts::default()
        };
        let causes = Causes::of(&CauseCounts::from_cpus(measurable, &[cpu]));
        assert_eq!(causes.waits(), 100);
        assert_eq!(causes.wait_ns(), 10_900_000);
        let p99 = causes.preempted.p99_ns.unwrap();
        assert!(p99.abs_diff(1_000_000) <= 125_000, "{p99}");
        assert!(causes.woken.p50_ns.unwrap().abs_diff(10_000) <= 1_250);
        assert_eq!(causes.new.p50_ns, None);
        assert_eq!(causes.overlap.steal_ns, None);
        assert_eq!(causes.overlap.irq_ns, Some(50_000));
        let irq = causes.overlap.share(causes.overlap.irq_ns).unwrap();
        assert!((irq - 50_000.0 / 10_900_000.0).abs() < 1e-9);
        assert_eq!(causes.queue_depth[2].count, 100);
        assert_eq!(causes.placement.cross_llc, None);
        assert_eq!(causes.waking, None);
        // Shares: of the waits and of their time.
        let pre = causes.preempted.counted().share_in(causes.all());
        assert!((pre.waits - 0.10).abs() < 1e-9, "{pre:?}");
        assert!((pre.time - 10.0 / 10.9).abs() < 1e-9, "{pre:?}");
        assert_eq!(causes.placed(), Counted::default());
        assert_eq!(Counted::default().share_in(causes.placed()).waits, 0.0);
        assert_eq!(causes.held(), Counted::default());
    }

    #[test]
    fn placement_and_holders_leave_the_unknown_out() {
        let mut cpu = CauseStats::ZERO;
        for (class, n, ns) in [
            (Cause::Woken, 10u64, 1_000u64),
            (Cause::SameCpu, 6, 1_000),
            (Cause::Migrated, 2, 1_000),
            (Cause::PlacementUnknown, 2, 1_000),
            (Cause::HeldByOtherCgroup, 6, 1_000),
            (Cause::HeldByIdle, 2, 1_000),
            (Cause::HeldByUnknown, 2, 1_000),
        ] {
            cpu.count[class as usize] = n;
            cpu.sum_ns[class as usize] = n * ns;
        }
        let causes = Causes::of(&CauseCounts::from_cpus(CauseFacts::default(), &[cpu]));
        let migrated = causes
            .placement
            .migrated
            .counted()
            .share_in(causes.placed());
        assert!((migrated.waits - 0.25).abs() < 1e-9, "{migrated:?}");
        let other = causes.held_by.other_cgroup.share_in(causes.held());
        assert!((other.time - 0.75).abs() < 1e-9, "{other:?}");
        assert_eq!(
            causes.holders()[1],
            ("other cgroup", causes.held_by.other_cgroup)
        );
        assert_eq!(causes.overlaps()[0], ("steal", None));
        assert_eq!(causes.placement.migrated.counted().mean_ns(), Some(1_000.0));
    }
}
