//! Recorded cases of the shape verdict (docs/shape.md) with the decision
//! split beside it (analysis/shape_modes.rs): the worker case of
//! docs/decision.md as schedlat recorded it.

use crate::{
    analysis::{
        diagnosis::fixtures::worker_outcomes,
        shape::{Verdict, classify, tests::waits},
    },
    histogram::Waits,
    sys::slice::Slice,
};

/// The worker case (0.8 ms of work, 0.5 ms of sleep, pinned beside
/// three loops) as `schedlat --decision --comm worker 5 1` recorded it
/// on the 2-CPU 6.18 VM (docs/decision.md): runqlat's slots in us.
const WORKER_LOG2: [(u64, u64); 15] = [
    (0, 43),
    (2, 50),
    (4, 446),
    (8, 40),
    (16, 31),
    (32, 23),
    (64, 8),
    (128, 7),
    (256, 11),
    (512, 9),
    (1024, 27),
    (2048, 409),
    (4096, 181),
    (8192, 80),
    (16384, 2),
];

/// The slots' waits at each slot's middle, in ns.
fn worker() -> Waits {
    let groups: Vec<(u64, u64)> = WORKER_LOG2
        .iter()
        .map(|&(low_us, n)| (low_us.max(1) * 1_500, n))
        .collect();
    waits(&groups)
}

/// Issue 24: the worker case was called "shifted-mean" (its median,
/// 1.46 ms, is over a quarter slice) though its histogram has two
/// populations: it is bimodal, and the decision says what separates
/// the modes.
#[test]
fn the_worker_case_is_bimodal_and_the_decision_separates_the_modes() {
    let slice = Slice::fixed(1_400_000, "se.slice in /proc/self/sched");
    let mut w = worker();
    let s = classify(&w, &slice);
    assert_eq!(s.verdict, Verdict::Bimodal, "{}", s.summary);
    let (fast, slow) = s.evidence.modes_ns.unwrap();
    assert!(fast < 10_000 && slow > 2_000_000, "{fast} {slow}");
    assert_eq!(s.evidence.modes_decision, None, "no split measured");
    assert!(!s.summary.contains("decision"), "{}", s.summary);

    w.decision = Some(worker_outcomes());
    let s = classify(&w, &slice);
    assert_eq!(s.verdict, Verdict::Bimodal, "{}", s.summary);
    let m = s.evidence.modes_decision.clone().unwrap();
    assert_eq!((m.fast_waits, m.slow_waits), (670, 702));
    assert!(m.separated_share() > 0.8, "{m:?}");
    assert!(
        s.summary.contains(
            "the decision separates them: 71% of the fast waits were requested and ran with 0 pass-overs, 93% of the slow ones were not requested (36%) or passed over (58%)"
        ),
        "{}",
        s.summary
    );
}

/// A shifted mean stays one: a fast group of 10% is not a mode of its
/// own when the median is slow.
#[test]
fn a_small_fast_group_under_a_slow_median_is_not_bimodal() {
    let slice = Slice::fixed(1_400_000, "t");
    let s = classify(&waits(&[(5_000, 150), (4_000_000, 850)]), &slice);
    assert_eq!(s.verdict, Verdict::ShiftedMean, "{}", s.summary);
    let s = classify(&waits(&[(5_000, 300), (4_000_000, 700)]), &slice);
    assert_eq!(s.verdict, Verdict::Bimodal, "{}", s.summary);
}
