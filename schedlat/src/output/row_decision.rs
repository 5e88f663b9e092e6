//! A victims or culprits row's decision split (docs/decision.md), as the
//! tables' three share columns and the row's JSON `decision` object: how
//! the waits the kernel split ended (granted at once, declined by a rule,
//! passed over) and which decisions they had.

use schedlat_common::decision::{DECISIONS, OUTCOMES, Outcome};
use serde_json::{Value, json};

use super::decision::{decision_name, outcome_name};
use crate::analysis::victims::Row;

/// The columns' header, after the cause shares.
pub(crate) const HEADER: &str = " GRNT% DECL% PASS%";

/// The row's granted, declined and passed-over shares of the waits the
/// split saw, each 5 wide; `-` where the load did not split them.
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
    format!(
        " {:>5} {:>5} {:>5}",
        share(Outcome::Granted),
        share(Outcome::Declined),
        share(Outcome::PassedOver)
    )
}

/// The row's `decision` object (docs/json.md): `waits` split, `outcomes`
/// and `decisions` counts by name, `passes`; None where the load did not
/// split them.
pub(crate) fn json(row: &Row) -> Option<Value> {
    let decided = row.decided();
    if decided == 0 {
        return None;
    }
    let outcomes: serde_json::Map<String, Value> = OUTCOMES
        .iter()
        .map(|&o| (outcome_name(o).into(), row.outcomes[o as usize].into()))
        .collect();
    let decisions: serde_json::Map<String, Value> = DECISIONS
        .iter()
        .map(|&d| (decision_name(d).into(), row.decisions[d as usize].into()))
        .collect();
    Some(json!({
        "waits": decided,
        "outcomes": outcomes,
        "decisions": decisions,
        "passes": row.passes,
    }))
}

#[cfg(test)]
mod tests {
    use schedlat_common::{decision::Decision, victims::WaitStats};

    use super::*;

    #[test]
    fn a_row_shows_its_outcome_shares_and_counts() {
        let mut stats = WaitStats {
            count: 10,
            ..WaitStats::default()
        };
        assert_eq!(cells(&Row::from(&stats)), "     -     -     -");
        assert!(json(&Row::from(&stats)).is_none());
        stats.outcomes[Outcome::Granted as usize] = 6;
        stats.outcomes[Outcome::PassedOver as usize] = 4;
        stats.decisions[Decision::Requested as usize] = 6;
        stats.decisions[Decision::NotEligible as usize] = 4;
        stats.passes = 13;
        let row = Row::from(&stats);
        assert_eq!(cells(&row), "   60%    0%   40%");
        assert_eq!(cells(&row).len(), HEADER.len());
        let v = json(&row).unwrap();
        assert_eq!(v["waits"], 10);
        assert_eq!(v["outcomes"]["passed_over"], 4);
        assert_eq!(v["decisions"]["not_eligible"], 4);
        assert_eq!(v["passes"], 13);
    }
}
