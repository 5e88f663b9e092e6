//! A victims or culprits row's decision split (docs/decision.md), as the
//! tables' three share columns and the row's JSON `decision` object: how
//! the waits the kernel split ended (granted at once, declined by a rule,
//! passed over) and which decisions they had.

use schedlat_common::decision::{DECISIONS, HOLDERS, OUTCOMES, Outcome};
use serde_json::{Value, json};

use crate::analysis::victims::Row;

/// The columns' header, after the cause shares.
pub(crate) const HEADER: &str = " GRNT% DECL% PASS% HOLDER LEFT     ";

/// The row's granted, declined and passed-over shares of the waits the
/// split saw, each 5 wide, then how the holder most often left the CPU
/// with its share (16 wide); `-` where the load did not split them.
pub(crate) fn cells(row: &Row) -> String {
    let decided = row.decided();
    let share = |o: Outcome| {
        if decided == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.0}%",
                row.outcomes[o as usize] as f64 * 100.0 / decided as f64
            )
        }
    };
    // Ties go to the first class in HOLDERS' order.
    let left = HOLDERS
        .iter()
        .copied()
        .rev()
        .max_by_key(|&h| row.holders[h as usize])
        .filter(|&h| decided > 0 && row.holders[h as usize] > 0)
        .map_or("-".to_string(), |h| {
            let n = row.holders[h as usize] as f64 * 100.0 / decided as f64;
            format!("{} {n:.0}%", h.name())
        });
    format!(
        " {:>5} {:>5} {:>5} {left:<16}",
        share(Outcome::Granted),
        share(Outcome::Declined),
        share(Outcome::PassedOver)
    )
}

/// The row's `decision` object (docs/json.md): `waits` split, `outcomes`
/// and `decisions` and `holders` counts by name, `passes`; None where the load did not
/// split them.
pub(crate) fn json(row: &Row) -> Option<Value> {
    let decided = row.decided();
    if decided == 0 {
        return None;
    }
    let outcomes: serde_json::Map<String, Value> = OUTCOMES
        .iter()
        .map(|&o| (o.name().into(), row.outcomes[o as usize].into()))
        .collect();
    let decisions: serde_json::Map<String, Value> = DECISIONS
        .iter()
        .map(|&d| (d.name().into(), row.decisions[d as usize].into()))
        .collect();
    let holders: serde_json::Map<String, Value> = HOLDERS
        .iter()
        .map(|&h| (h.name().into(), row.holders[h as usize].into()))
        .collect();
    Some(json!({
        "waits": decided,
        "outcomes": outcomes,
        "decisions": decisions,
        "holders": holders,
        "passes": row.passes,
    }))
}

#[cfg(test)]
mod tests {
    use schedlat_common::{
        decision::{Decision, HolderLeft},
        victims::WaitStats,
    };

    use super::*;

    #[test]
    fn a_row_shows_its_outcome_shares_and_counts() {
        let mut stats = WaitStats {
            count: 10,
            ..WaitStats::default()
        };
        assert_eq!(
            cells(&Row::from(&stats)),
            "     -     -     - -               "
        );
        assert!(json(&Row::from(&stats)).is_none());
        stats.outcomes[Outcome::Granted as usize] = 6;
        stats.outcomes[Outcome::PassedOver as usize] = 4;
        stats.decisions[Decision::Requested as usize] = 6;
        stats.decisions[Decision::NotEligible as usize] = 4;
        stats.passes = 13;
        stats.holders[HolderLeft::Blocked as usize] = 3;
        stats.holders[HolderLeft::SliceEnded as usize] = 7;
        let row = Row::from(&stats);
        assert_eq!(cells(&row), "   60%    0%   40% slice_ended 70% ");
        assert_eq!(cells(&row).len(), HEADER.len());
        let v = json(&row).unwrap();
        assert_eq!(v["waits"], 10);
        assert_eq!(v["outcomes"]["passed_over"], 4);
        assert_eq!(v["decisions"]["not_eligible"], 4);
        assert_eq!(v["passes"], 13);
        assert_eq!(v["holders"]["slice_ended"], 7);
        assert_eq!(v["holders"]["idle"], 0);
    }
}
