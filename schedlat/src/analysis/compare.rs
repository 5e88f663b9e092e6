//! Before/after: did the fix change the distribution beyond noise?
//!
//! Two tests, because a fix can move the tail and the bulk in different
//! directions (pinning hogs away removes slice-long waits, while the victim's
//! fast wakeups may get a little slower):
//! - the tail: the share of waits of at least half a slice (the waits the
//!   shape rule calls slow), compared with a two-proportion z-test;
//! - the whole distribution: Mann-Whitney U (Wilcoxon rank-sum) on the fine
//!   buckets (waits in one bucket are ties). It asks whether a wait drawn from
//!   AFTER tends to be shorter than one from BEFORE, without assuming a shape
//!   (run-queue latency is far from normal).
//!
//! The overall change follows the tail when the tail changed beyond noise
//! (slow waits are what users feel), else the whole distribution. Both
//! normal approximations are accurate at schedlat's sample sizes (hundreds
//! to millions of waits).

use serde::Serialize;

use super::{
    percentiles::share_at_least,
    shape::{self, Shape},
};
use crate::{histogram::Waits, sys::slice::Slice};

/// Significance level for "beyond noise".
pub(crate) const ALPHA: f64 = 0.001;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct RankTest {
    /// P(a wait after < a wait before) + P(tie) / 2: 0.5 means no change,
    /// above 0.5 means waits got shorter.
    pub p_shorter_after: f64,
    /// Standard normal score of U, tie-corrected.
    pub z: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// The tail test: share of waits at or above a threshold, before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TailTest {
    pub threshold_ns: u64,
    pub share_before: f64,
    pub share_after: f64,
    pub z: f64,
    pub p_value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Change {
    Improved,
    Regressed,
    #[serde(rename = "no-significant-change")]
    Unchanged,
}

impl RankTest {
    pub(crate) fn change(&self) -> Change {
        if self.p_value >= ALPHA {
            Change::Unchanged
        } else if self.p_shorter_after > 0.5 {
            Change::Improved
        } else {
            Change::Regressed
        }
    }
}

impl TailTest {
    pub(crate) fn change(&self) -> Change {
        if self.p_value >= ALPHA {
            Change::Unchanged
        } else if self.share_after < self.share_before {
            Change::Improved
        } else {
            Change::Regressed
        }
    }
}

/// The overall verdict: the tail's when it changed, else the bulk's.
pub(crate) fn overall(tail: Option<TailTest>, rank: Option<RankTest>) -> Change {
    match tail.map(|t| t.change()) {
        Some(Change::Unchanged) | None => rank.map_or(Change::Unchanged, |r| r.change()),
        Some(change) => change,
    }
}

/// Two recordings compared: their shapes against one slice, the tail and
/// rank tests, and the overall change.
pub(crate) struct Comparison {
    pub shapes: (Shape, Shape),
    pub tail: Option<TailTest>,
    pub rank: Option<RankTest>,
    pub change: Change,
}

impl Comparison {
    /// `before` against `after`, both judged against `slice`: the tail is
    /// the waits of at least half of it.
    pub(crate) fn of(before: &Waits, after: &Waits, slice: &Slice) -> Comparison {
        let shapes = (
            shape::classify(before, slice),
            shape::classify(after, slice),
        );
        let rank = rank_test(before, after);
        let tail = tail_test(before, after, slice.ns / 2);
        Comparison {
            shapes,
            tail,
            rank,
            change: overall(tail, rank),
        }
    }
}

/// Two-proportion z-test on the share of waits >= `threshold_ns`.
pub(crate) fn tail_test(before: &Waits, after: &Waits, threshold_ns: u64) -> Option<TailTest> {
    let (n1, n2) = (before.count() as f64, after.count() as f64);
    if n1 == 0.0 || n2 == 0.0 {
        return None;
    }
    let (s1, s2) = (
        share_at_least(before, threshold_ns),
        share_at_least(after, threshold_ns),
    );
    let pooled = (s1 * n1 + s2 * n2) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    let z = if se > 0.0 { (s1 - s2) / se } else { 0.0 };
    Some(TailTest {
        threshold_ns,
        share_before: s1,
        share_after: s2,
        z,
        p_value: erfc(z.abs() / std::f64::consts::SQRT_2),
    })
}

/// Mann-Whitney U of `before` against `after`; None if either is empty.
pub(crate) fn rank_test(before: &Waits, after: &Waits) -> Option<RankTest> {
    let (n1, n2) = (before.count() as f64, after.count() as f64);
    if n1 == 0.0 || n2 == 0.0 {
        return None;
    }
    // U counts pairs (b, a) with b > a, ties as a half.
    let mut u = 0.0;
    let mut after_below = 0.0;
    let mut tie_term = 0.0;
    for (&b, &a) in before.buckets.iter().zip(&after.buckets) {
        let (b, a) = (b as f64, a as f64);
        u += b * (after_below + a / 2.0);
        after_below += a;
        let t = a + b;
        tie_term += t * t * t - t;
    }
    let n = n1 + n2;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)).max(1.0));
    let z = if variance > 0.0 {
        (u - mean) / variance.sqrt()
    } else {
        0.0
    };
    Some(RankTest {
        p_shorter_after: u / (n1 * n2),
        z,
        p_value: erfc(z.abs() / std::f64::consts::SQRT_2),
    })
}

/// Complementary error function (Numerical Recipes' erfcc, relative error
/// below 1.2e-7 everywhere): std has none, and this is all we need of one.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index};

    use super::*;

    fn waits(groups: &[(u64, u64)]) -> Waits {
        let mut cpu = CpuStats::ZERO;
        for &(ns, n) in groups {
            cpu.buckets[bucket_index(ns)] += n;
        }
        Waits::from_cpus(&[cpu])
    }

    #[test]
    fn erfc_matches_known_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_1),
            (1.0, 0.157_299_2),
            (3.0, 2.209_05e-5),
        ] {
            assert!((erfc(x) - want).abs() < 1e-6 * want.max(1e-3), "erfc({x})");
        }
        assert!((erfc(-1.0) - (2.0 - 0.157_299_2)).abs() < 1e-6);
    }

    #[test]
    fn shorter_waits_after_are_an_improvement() {
        let before = waits(&[(10_000, 500), (3_000_000, 500)]);
        let after = waits(&[(10_000, 950), (3_000_000, 50)]);
        let t = rank_test(&before, &after).unwrap();
        assert!(t.p_shorter_after > 0.5 && t.p_value < 1e-10, "{t:?}");
        assert_eq!(t.change(), Change::Improved);
        assert_eq!(
            rank_test(&after, &before).unwrap().change(),
            Change::Regressed
        );
    }

    #[test]
    fn a_shorter_tail_wins_over_a_slower_bulk() {
        // Before: fast bulk at 5 us and 10% slice-long waits; after: bulk at
        // 20 us, no slice-long waits. The bulk regressed, the tail improved.
        let before = waits(&[(5_000, 900), (3_000_000, 100)]);
        let after = waits(&[(20_000, 1000)]);
        let rank = rank_test(&before, &after).unwrap();
        let tail = tail_test(&before, &after, 750_000).unwrap();
        assert_eq!(rank.change(), Change::Regressed);
        assert_eq!(tail.change(), Change::Improved);
        assert_eq!((tail.share_before, tail.share_after), (0.1, 0.0));
        assert_eq!(overall(Some(tail), Some(rank)), Change::Improved);
        // Without a tail change, the bulk decides.
        let same_tail = tail_test(&after, &after, 750_000).unwrap();
        assert_eq!(overall(Some(same_tail), Some(rank)), Change::Regressed);
    }

    #[test]
    fn the_same_distribution_is_no_change() {
        let a = waits(&[(10_000, 500), (20_000, 300), (3_000_000, 20)]);
        let t = rank_test(&a, &a).unwrap();
        assert!(
            (t.p_shorter_after - 0.5).abs() < 1e-12 && t.z.abs() < 1e-9,
            "{t:?}"
        );
        assert_eq!(t.change(), Change::Unchanged);
    }

    #[test]
    fn u_matches_a_direct_pair_count() {
        // Three distinct values: counts of pairs can be enumerated by hand.
        let before = waits(&[(1_000, 2), (5_000, 1)]);
        let after = waits(&[(1_000, 1), (9_000, 1)]);
        // Pairs (b, a): (1k,1k) tie x2 -> 1; (1k,9k) x2 -> 0; (5k,1k) -> 1; (5k,9k) -> 0.
        let t = rank_test(&before, &after).unwrap();
        assert!((t.p_shorter_after - 2.0 / 6.0).abs() < 1e-12, "{t:?}");
        assert!(rank_test(&before, &Waits::default()).is_none());
    }
}
