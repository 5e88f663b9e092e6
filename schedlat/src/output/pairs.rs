//! The neighbour-pair table as text and JSON (docs/json.md `pairs`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::{
    analysis::{
        fmt_ns,
        pairs::{self, PairTable},
    },
    output::escape::printable,
};

/// The table under its heading; the rows not shown and the waits no pair
/// took are counted, never dropped silently. Cgroup names are shown as
/// `printable` makes them (anyone who may make a cgroup names it).
pub(crate) fn render_text(table: &PairTable) -> String {
    let by = table.by.as_str();
    let mut out = format!(
        "\nwho waited behind whom (waiting {by} <- {by} that held the CPU), by total wait:\n"
    );
    let _ = writeln!(
        out,
        "{:>10} {:>10} {:>10}  waiting <- holding",
        "waits", "total", "max"
    );
    for r in &table.rows {
        let _ = writeln!(
            out,
            "{:>10} {:>10} {:>10}  {} <- {}",
            r.counts.count,
            fmt_ns(r.counts.sum_ns),
            fmt_ns(r.counts.max_ns),
            printable(&r.victim.shown()),
            printable(&r.holder.shown())
        );
    }
    if table.rows.is_empty() {
        out.push_str("    (no waits)\n");
    }
    if table.cut > 0 {
        let _ = writeln!(
            out,
            "    {} more pairs: {} waits, {}",
            table.cut,
            table.cut_counts.count,
            fmt_ns(table.cut_counts.sum_ns)
        );
    }
    if table.overflow.count > 0 {
        let _ = writeln!(
            out,
            "    {} waits ({}) in no pair: the table of {} pairs was full (--max-pairs)",
            table.overflow.count,
            fmt_ns(table.overflow.sum_ns),
            table.capacity
        );
    }
    render_shares(table, &mut out);
    render_levels(table, &mut out);
    out
}

/// Where the waits were decided when a wakeup lost above its own queue:
/// per waiting workload and group, the waits and their whole time.
fn render_levels(table: &PairTable, out: &mut String) {
    if table.levels.is_empty() {
        return;
    }
    let by = table.by.as_str();
    let _ = writeln!(
        out,
        "\nwaits decided above the waiting {by}'s own queue (its wakeup lost at the level of a group it is in), by time:"
    );
    let _ = writeln!(
        out,
        "{:>10} {:>10}  waiting (decided at group)",
        "waits", "total"
    );
    for r in &table.levels {
        let _ = writeln!(
            out,
            "{:>10} {:>10}  {} (at {})",
            r.counts.count,
            fmt_ns(r.counts.sum_ns),
            printable(&r.victim.shown()),
            printable(&r.group)
        );
    }
}

/// The second role, when a wakeup lost at a queue above its own: who had
/// used the share of the group it lost with (its tasks that ran just
/// before the waits), and one sentence per victim naming both roles.
fn render_shares(table: &PairTable, out: &mut String) {
    if table.shares.is_empty() && table.shares_overflow == 0 {
        return;
    }
    let by = table.by.as_str();
    let _ = writeln!(
        out,
        "\nwho used the share of a group the waiting {by} is in, when its wakeups lost there (the group's {by}s that ran just before the waits), by time:"
    );
    let _ = writeln!(
        out,
        "{:>10} {:>10}  waiting <- used the share (of group)",
        "waits", "total"
    );
    for r in &table.shares {
        let _ = writeln!(
            out,
            "{:>10} {:>10}  {} <- {} (of {})",
            r.counts.count,
            fmt_ns(r.counts.sum_ns),
            printable(&r.victim.shown()),
            printable(&r.user.shown()),
            printable(&r.group)
        );
    }
    if table.shares_overflow > 0 {
        let _ = writeln!(
            out,
            "    {} waits' charges of this kind found the table of {} pairs full (--max-pairs)",
            table.shares_overflow, table.capacity
        );
    }
    for sentence in pairs::roles(table) {
        let _ = writeln!(out, "  {}.", printable(&sentence));
    }
}

pub(crate) fn to_json(table: &PairTable) -> Value {
    let counts =
        |c: &crate::collect::pairs::PairCounts| json!({"count": c.count, "sum_ns": c.sum_ns});
    json!({
        "by": table.by.as_str(),
        "capacity": table.capacity,
        "rows": table.rows.iter().map(|r| json!({
            "victim": r.victim.shown(),
            "holder": r.holder.shown(),
            "victim_identity": r.victim.identity,
            "holder_identity": r.holder.identity,
            "count": r.counts.count,
            "sum_ns": r.counts.sum_ns,
            "max_ns": r.counts.max_ns,
        })).collect::<Vec<_>>(),
        "cut": {"pairs": table.cut, "count": table.cut_counts.count, "sum_ns": table.cut_counts.sum_ns},
        "overflow": counts(&table.overflow),
        "shares": table.shares.iter().map(|r| json!({
            "victim": r.victim.shown(),
            "user": r.user.shown(),
            "group": r.group,
            "victim_identity": r.victim.identity,
            "user_identity": r.user.identity,
            "count": r.counts.count,
            "sum_ns": r.counts.sum_ns,
        })).collect::<Vec<_>>(),
        "shares_overflow": table.shares_overflow,
        "roles": pairs::roles(table),
        "levels": table.levels.iter().map(|r| json!({
            "victim": r.victim.shown(),
            "group": r.group,
            "victim_identity": r.victim.identity,
            "count": r.counts.count,
            "sum_ns": r.counts.sum_ns,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::pairs::{Side, WorkloadPair},
        collect::pairs::PairCounts,
        sys::workload::level::Level,
    };

    #[test]
    fn a_hostile_cgroup_name_cannot_act_on_the_terminal() {
        let table = PairTable {
            rows: vec![WorkloadPair {
                victim: Side::plain("/evil\u{1b}[2J\nFAKE 1 waits"),
                holder: Side::plain("/b"),
                counts: PairCounts {
                    count: 1,
                    sum_ns: 1_000,
                    max_ns: 1_000,
                },
            }],
            by: Level::Cgroup,
            ..PairTable::default()
        };
        let text = render_text(&table);
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("/evil?[2J?FAKE 1 waits <- /b"), "{text:?}");
        // JSON keeps the exact name.
        assert_eq!(
            to_json(&table)["rows"][0]["victim"],
            "/evil\u{1b}[2J\nFAKE 1 waits"
        );
    }

    #[test]
    fn the_levels_are_shown_after_the_second_role_and_in_json() {
        let table = PairTable {
            by: Level::Cgroup,
            levels: vec![crate::analysis::pairs::LevelRow {
                victim: Side::plain("/kubepods.slice/pod-web/web"),
                group: "/kubepods.slice".into(),
                counts: PairCounts {
                    count: 832,
                    sum_ns: 1_660_000_000,
                    max_ns: 0,
                },
            }],
            ..PairTable::default()
        };
        let text = render_text(&table);
        assert!(
            text.contains("waits decided above the waiting cgroup's own queue"),
            "{text}"
        );
        assert!(
            text.contains(
                "       832     1.66 s  /kubepods.slice/pod-web/web (at /kubepods.slice)"
            ),
            "{text}"
        );
        let json = to_json(&table);
        assert_eq!(json["levels"][0]["group"], "/kubepods.slice");
        assert_eq!(json["levels"][0]["count"], 832);
        assert_eq!(json["levels"][0]["sum_ns"], 1_660_000_000u64);
        // None: no section.
        assert!(!render_text(&PairTable::default()).contains("decided above"));
    }
}
