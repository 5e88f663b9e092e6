//! Which workload hurts which: the neighbour-pair table's pairs, rolled
//! up (pairs whose two sides have the same identity at the level add up,
//! as the breakdown's roll-up adds cgroups up) and ranked by the wait
//! time they account for, in two roles: who held the CPU during the
//! waits, and who had used the share of a group the waiter is in when
//! its wakeup lost at a queue above its own ([`ShareRow`]).

use std::{
    cmp::Reverse,
    collections::{BTreeMap, HashMap, btree_map, hash_map::Entry},
};

use crate::{
    collect::pairs::PairCounts,
    sys::workload::level::{Level, Workload},
};

/// One row: the workload that waited, the one that held the CPU, and
/// the waits of the first behind the second.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkloadPair {
    pub victim: Side,
    pub holder: Side,
    pub counts: PairCounts,
}

/// One side of a pair: what it adds up under and what it is shown as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Side {
    /// Its workload's identity at the level (`Workload::identity_at`: a
    /// container's ID or a pod's UID in its own cgroup, a unit), else its cgroup's path (or
    /// name, for a cgroup gone before it was named, and the idle CPU).
    pub identity: String,
    pub name: String,
    /// Whether its runtime's files named it: of the sides with one
    /// identity, such a one gives the name every row shows.
    pub named: bool,
    /// What tells it apart from another identity of the same name
    /// (`Workload::distinct_at`: a container ID's first 12 digits, a pod's
    /// UID, a unit's cgroup), shown after the name when the table has
    /// both (`shown`).
    pub distinct: String,
    /// Whether the table it is in has another identity of its name: set
    /// by `rank`, for every row of the table alike.
    pub qualified: bool,
}

impl Side {
    /// Cgroup `id` at `level`, `workload` being what it is (None: gone
    /// before it could be named).
    pub(crate) fn of(id: u64, workload: Option<&Workload>, level: Level) -> Side {
        let Some(w) = workload else {
            return Side::plain(&format!("(removed, id {id})"));
        };
        Side {
            identity: w.identity_at(level).unwrap_or_else(|| w.path.clone()),
            name: w.name_at(level),
            named: w.names.is_some(),
            distinct: w.distinct_at(level),
            qualified: false,
        }
    }

    /// As a row shows it: its name, and what tells it apart where another
    /// workload of the table has that name (`shop/web-1/nginx
    /// (9a8b7c6d5e4f)` beside the container it replaced).
    pub(crate) fn shown(&self) -> String {
        if self.qualified {
            format!("{} ({})", self.name, self.distinct)
        } else {
            self.name.clone()
        }
    }

    /// A side that is only its name (the idle CPU; tests).
    pub(crate) fn plain(name: &str) -> Side {
        Side {
            identity: name.to_string(),
            name: name.to_string(),
            named: false,
            distinct: name.to_string(),
            qualified: false,
        }
    }

    /// Whether this side names its identity better than `other`: a name
    /// from the runtime's files first, then the smaller name (stable).
    fn names_better_than(&self, other: &Side) -> bool {
        (self.named, std::cmp::Reverse(&self.name)) > (other.named, std::cmp::Reverse(&other.name))
    }
}

/// The ranked table of one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PairTable {
    /// The rows shown, most wait time first.
    pub rows: Vec<WorkloadPair>,
    /// Rows not shown (beyond `top`), and their waits.
    pub cut: usize,
    pub cut_counts: PairCounts,
    /// Waits no pair could take: the kernel's table was full.
    pub overflow: PairCounts,
    /// The kernel table's size (`--max-pairs`).
    pub capacity: u32,
    /// The level the sides are named at.
    pub by: Level,
    /// The second role's rows, most charged time first (`rank_shares`).
    pub shares: Vec<ShareRow>,
    /// Waits of which a second-role charge found the kernel's table full.
    pub shares_overflow: u64,
    /// Where the victims' waits were decided, when above their own queue:
    /// per (victim, group), most wait time first (`rank_levels`).
    pub levels: Vec<LevelRow>,
}

/// The waits of `victim` whose wakeups lost at the level of `group` (a
/// cgroup the victim is in: its entity lost at a queue above the victim's
/// own, not eligible, with a later deadline, or passed over), their
/// number and their whole time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LevelRow {
    pub victim: Side,
    /// The group's cgroup path.
    pub group: String,
    pub counts: PairCounts,
}

/// The level rows added up by (victim identity, group), ranked by wait
/// time (then by names), the first `top` kept.
pub(crate) fn rank_levels(
    rows: impl IntoIterator<Item = LevelRow>,
    top: Option<usize>,
) -> Vec<LevelRow> {
    add_up(rows, |r| (r.victim.identity.clone(), r.group.clone()), top)
}

/// A row whose counts add up with those of the rows of its key.
trait Charged {
    fn counts(&mut self) -> &mut PairCounts;
    fn sum_ns(&self) -> u64;
}

impl Charged for LevelRow {
    fn counts(&mut self) -> &mut PairCounts {
        &mut self.counts
    }
    fn sum_ns(&self) -> u64 {
        self.counts.sum_ns
    }
}

impl Charged for ShareRow {
    fn counts(&mut self) -> &mut PairCounts {
        &mut self.counts
    }
    fn sum_ns(&self) -> u64 {
        self.counts.sum_ns
    }
}

/// `rows` added up by `key`, most charged time first (then by key, for a
/// stable order), the first `top` kept (all when None).
fn add_up<R: Charged, K: Ord>(
    rows: impl IntoIterator<Item = R>,
    key: impl Fn(&R) -> K,
    top: Option<usize>,
) -> Vec<R> {
    let keyed = rows.into_iter().map(|r| (key(&r), r));
    let add = |sum: &mut R, mut more: R| sum.counts().add(*more.counts());
    let mut rows = most_first(keyed, add, R::sum_ns);
    rows.truncate(top.unwrap_or(rows.len()));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// `items` added up by key (`add` merges a value into its key's), the
/// largest `weight` first, ties in key order.
pub(crate) fn most_first<K: Ord, V>(
    items: impl IntoIterator<Item = (K, V)>,
    add: impl Fn(&mut V, V),
    weight: impl Fn(&V) -> u64,
) -> Vec<(K, V)> {
    let mut by_key = BTreeMap::<K, V>::new();
    for (key, value) in items {
        match by_key.entry(key) {
            btree_map::Entry::Occupied(e) => add(e.into_mut(), value),
            btree_map::Entry::Vacant(e) => {
                e.insert(value);
            }
        }
    }
    let mut sorted: Vec<(K, V)> = by_key.into_iter().collect();
    // Stable: equal weights stay in key order.
    sorted.sort_by_key(|(_, v)| Reverse(weight(v)));
    sorted
}

/// One row of the second role: waits of `victim` the fair class declined
/// at a queue above its own, where the entity of `group` (a cgroup the
/// victim is in) lost: not eligible, with a later deadline or behind the
/// holder's protected slice, because its tasks had used its share of the
/// CPU. `user` is a workload inside `group`, not the victim's own, that
/// ran on the CPU just before those waits; `counts` the time it ran there
/// (in windows as long as each wait, before it) and the waits it took
/// part in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShareRow {
    pub victim: Side,
    pub user: Side,
    /// The group's cgroup path.
    pub group: String,
    pub counts: PairCounts,
}

/// A share row is told in a sentence when its time is at least this part
/// of its victim's wait time in the table (a few waits' worth of a
/// neighbour's runs is not why a workload waited).
const ROLE_TOLD_AT: f64 = 0.1;

/// One sentence per victim of the share rows (its first, most charged,
/// when it accounts for [`ROLE_TOLD_AT`] of the victim's wait time),
/// naming both roles: who held the CPU during its waits (its first holder
/// that is a workload) and who had used the share of the group its
/// wakeups lost with.
pub(crate) fn roles(table: &PairTable) -> Vec<String> {
    let mut told: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for s in &table.shares {
        if told.contains(&s.victim.identity.as_str()) {
            continue;
        }
        told.push(&s.victim.identity);
        let waited: u64 = (table.rows.iter())
            .filter(|r| r.victim.identity == s.victim.identity)
            .map(|r| r.counts.sum_ns)
            .sum();
        if (s.counts.sum_ns as f64) < ROLE_TOLD_AT * waited as f64 {
            continue;
        }
        let (victim, user) = (s.victim.shown(), s.user.shown());
        let held = (table.rows.iter())
            .filter(|r| r.victim.identity == s.victim.identity && r.holder_is_workload())
            .map(|r| &r.holder)
            .next();
        out.push(match held {
            Some(h) if h.identity == s.user.identity => format!(
                "{victim} waited behind {user}, which held the CPU and had used {}'s share of it",
                s.group
            ),
            Some(h) => format!(
                "{victim} waited behind {} (it held the CPU) because {user} had used {}'s share of the CPU",
                h.shown(),
                s.group
            ),
            None => format!("{victim} waited because {user} had used {}'s share of the CPU", s.group),
        });
    }
    out
}

impl WorkloadPair {
    /// Whether the holder is a workload, not the idle CPU or the time the
    /// kernel could not charge.
    fn holder_is_workload(&self) -> bool {
        !self.holder.identity.starts_with('(')
    }
}

/// Whether a cgroup at `path` is `group` or inside it.
pub(crate) fn inside(group: &str, path: &str) -> bool {
    path == group
        || path
            .strip_prefix(group)
            .is_some_and(|rest| rest.starts_with('/') || group == "/")
}

/// The share rows added up by (victim, user, group) identity, the
/// victim's own workload left out (a pod's waits behind its own
/// containers are never a neighbour's), ranked by charged time, the
/// first `top` kept.
pub(crate) fn rank_shares(
    rows: impl IntoIterator<Item = ShareRow>,
    top: Option<usize>,
) -> Vec<ShareRow> {
    let others = (rows.into_iter()).filter(|r| r.user.identity != r.victim.identity);
    let key = |r: &ShareRow| {
        let (victim, user) = (r.victim.identity.clone(), r.user.identity.clone());
        (victim, user, r.group.clone())
    };
    add_up(others, key, top)
}

/// Adds up the pairs with the same identities on both sides (at level
/// `by`), each identity shown by one name in every row (a name its
/// runtime gave, if any side of it has one: a pod whose containers are
/// named unevenly stays one workload; identities that share a name, such
/// as a container and its restart, shown with what tells them apart),
/// ranks them by total wait (then by names, for a stable order), and
/// keeps `top` rows (all when None).
pub(crate) fn rank(
    pairs: impl IntoIterator<Item = WorkloadPair>,
    by: Level,
    top: Option<usize>,
    (overflow, capacity): (PairCounts, u32),
) -> PairTable {
    let mut merged: HashMap<(String, String), WorkloadPair> = HashMap::new();
    let mut shown: HashMap<String, Side> = HashMap::new();
    for p in pairs {
        for side in [&p.victim, &p.holder] {
            match shown.entry(side.identity.clone()) {
                Entry::Occupied(mut e) if side.names_better_than(e.get()) => {
                    e.insert(side.clone());
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(e) => {
                    e.insert(side.clone());
                }
            }
        }
        let key = (p.victim.identity.clone(), p.holder.identity.clone());
        match merged.entry(key) {
            Entry::Occupied(mut e) => e.get_mut().counts.add(p.counts),
            Entry::Vacant(e) => {
                e.insert(p);
            }
        }
    }
    let mut of_name: HashMap<&str, usize> = HashMap::new();
    for side in shown.values() {
        *of_name.entry(side.name.as_str()).or_default() += 1;
    }
    let shared: std::collections::HashSet<String> = (of_name.into_iter())
        .filter(|&(_, n)| n > 1)
        .map(|(name, _)| name.to_string())
        .collect();
    for side in shown.values_mut() {
        side.qualified = shared.contains(&side.name);
    }
    let mut rows: Vec<WorkloadPair> = (merged.into_values())
        .map(|mut r| {
            r.victim = shown[&r.victim.identity].clone();
            r.holder = shown[&r.holder.identity].clone();
            r
        })
        .collect();
    let names = |r: &WorkloadPair| (r.victim.shown(), r.holder.shown());
    rows.sort_by(|a, b| {
        b.counts
            .sum_ns
            .cmp(&a.counts.sum_ns)
            .then_with(|| names(a).cmp(&names(b)))
            .then_with(|| a.victim.identity.cmp(&b.victim.identity))
            .then_with(|| a.holder.identity.cmp(&b.holder.identity))
    });
    let keep = top.unwrap_or(rows.len()).min(rows.len());
    let mut cut_counts = PairCounts::default();
    for r in &rows[keep..] {
        cut_counts.add(r.counts);
    }
    let cut = rows.len() - keep;
    rows.truncate(keep);
    PairTable {
        rows,
        cut,
        cut_counts,
        overflow,
        capacity,
        by,
        shares: Vec::new(),
        shares_overflow: 0,
        levels: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(v: &str, h: &str, count: u64, sum_ns: u64, max_ns: u64) -> WorkloadPair {
        WorkloadPair {
            victim: Side::plain(v),
            holder: Side::plain(h),
            counts: PairCounts {
                count,
                sum_ns,
                max_ns,
            },
        }
    }

    #[test]
    fn same_named_pairs_add_up_and_rank_by_wait_time() {
        let t = rank(
            [
                pair("web", "batch", 10, 5_000, 900),
                pair("web", "batch", 5, 3_000, 1_200),
                pair("db", "web", 100, 7_000, 100),
                pair("web", "(idle)", 50, 1_000, 50),
            ],
            Level::Cgroup,
            Some(2),
            (PairCounts::default(), 64),
        );
        assert_eq!(t.rows[0], pair("web", "batch", 15, 8_000, 1_200));
        assert_eq!(t.rows[1], pair("db", "web", 100, 7_000, 100));
        assert_eq!(t.cut, 1);
        assert_eq!(t.cut_counts.count, 50);
    }

    /// Issue 25: a pod whose containers are named unevenly (one by its
    /// runtime's files, a sidecar by none) is one workload in the table,
    /// under the name the runtime gave, as in the breakdown's roll-up.
    #[test]
    fn a_pod_named_unevenly_rolls_up_by_its_uid_under_its_runtime_name() {
        use crate::sys::workload::{level::tests::workload, names::ContainerNames};
        let uid = "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
        let dir = format!(
            "/kubepods.slice/kubepods-pod{}.slice",
            uid.replace('-', "_")
        );
        let container =
            |id: char| format!("{dir}/cri-containerd-{}.scope", id.to_string().repeat(64));
        let nginx = workload(
            &container('a'),
            Some(ContainerNames {
                namespace: Some("shop".into()),
                pod: Some("web-1".into()),
                container: Some("nginx".into()),
                ..ContainerNames::default()
            }),
        );
        let sidecar = workload(&container('b'), None);
        let batch = workload("/system.slice/batch.service", None);
        let side = |w: &Workload| Side::of(1, Some(w), Level::Pod);
        assert_eq!(side(&sidecar).name, format!("pod {uid}"), "unnamed alone");
        let behind = |v: &Workload, count| WorkloadPair {
            victim: side(v),
            holder: side(&batch),
            counts: PairCounts {
                count,
                sum_ns: count * 1_000,
                max_ns: 1_000,
            },
        };
        // The sidecar's pair first: the name does not depend on the order.
        let in_both =
            |pairs: Vec<WorkloadPair>| rank(pairs, Level::Pod, None, (PairCounts::default(), 64));
        for t in [
            in_both(vec![behind(&sidecar, 2), behind(&nginx, 3)]),
            in_both(vec![behind(&nginx, 3), behind(&sidecar, 2)]),
        ] {
            assert_eq!(t.rows.len(), 1, "{t:?}");
            let row = &t.rows[0];
            assert_eq!(
                (row.victim.name.as_str(), row.counts.count),
                ("shop/web-1", 5)
            );
            assert_eq!(row.victim.identity, format!("pod {uid} in {dir}"));
            assert_eq!(row.holder.name, "/system.slice/batch.service");
        }
        // A removed cgroup stays its own row, by its id.
        let gone = Side::of(7, None, Level::Pod);
        assert_eq!(
            (gone.identity.as_str(), gone.name.as_str()),
            ("(removed, id 7)", "(removed, id 7)")
        );
    }

    /// Issue 25: workloads that share a name never add up, and a table
    /// that has two of one name tells them apart: a container and its
    /// restart (a new ID in the same pod), two pods named alike in two
    /// namespaces whose runtime files give no namespace.
    #[test]
    fn namesakes_stay_apart_and_are_told_apart() {
        use crate::sys::workload::{level::tests::workload, names::ContainerNames};
        let names = |ns: Option<&str>| {
            Some(ContainerNames {
                namespace: ns.map(str::to_string),
                pod: Some("web-1".into()),
                container: Some("nginx".into()),
                ..ContainerNames::default()
            })
        };
        let container = |uid: &str, id: char, ns| {
            let dir = format!(
                "/kubepods.slice/kubepods-pod{}.slice",
                uid.replace('-', "_")
            );
            let id = id.to_string().repeat(64);
            workload(&format!("{dir}/cri-containerd-{id}.scope"), names(ns))
        };
        let uid = "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
        let other_uid = "0b1c2d3e-4f5a-4b7c-8d9e-0f1a2b3c4d5e";
        let (before, after) = (
            container(uid, 'a', Some("shop")),
            container(uid, 'c', Some("shop")),
        );
        let batch = workload("/system.slice/batch.service", None);
        let table = |level, victims: &[&Workload]| {
            let rows = victims.iter().map(|v| WorkloadPair {
                victim: Side::of(1, Some(*v), level),
                holder: Side::of(2, Some(&batch), level),
                counts: PairCounts {
                    count: 1,
                    sum_ns: 1_000,
                    max_ns: 1_000,
                },
            });
            rank(
                rows.collect::<Vec<_>>(),
                level,
                None,
                (PairCounts::default(), 64),
            )
        };
        let shown = |t: &PairTable| {
            let mut v: Vec<String> = t.rows.iter().map(|r| r.victim.shown()).collect();
            v.sort();
            v
        };
        let restart = table(Level::Container, &[&before, &after]);
        assert_eq!(
            shown(&restart),
            [
                "shop/web-1/nginx (aaaaaaaaaaaa)",
                "shop/web-1/nginx (cccccccccccc)"
            ]
        );
        assert!(
            restart
                .rows
                .iter()
                .all(|r| r.holder.shown() == "/system.slice/batch.service")
        );
        // One pod all the same: one row, its name alone.
        let pod = table(Level::Pod, &[&before, &after]);
        assert_eq!(
            (shown(&pod), pod.rows[0].counts.count),
            (vec!["shop/web-1".to_string()], 2)
        );
        // A container alone in its table is shown by its name alone.
        assert_eq!(
            shown(&table(Level::Container, &[&before])),
            ["shop/web-1/nginx"]
        );
        // Two pods named web-1, no namespace known: two rows, by UID.
        let (a, b) = (container(uid, 'a', None), container(other_uid, 'b', None));
        assert_eq!(
            shown(&table(Level::Pod, &[&a, &b])),
            [format!("web-1 ({other_uid})"), format!("web-1 ({uid})")]
        );
    }

    fn share(v: &str, user: &str, group: &str, sum_ns: u64) -> ShareRow {
        ShareRow {
            victim: Side::plain(v),
            user: Side::plain(user),
            group: group.to_string(),
            counts: PairCounts {
                count: 1,
                sum_ns,
                max_ns: 0,
            },
        }
    }

    #[test]
    fn a_group_holds_its_descendants_only() {
        assert!(inside("/kubepods.slice", "/kubepods.slice"));
        assert!(inside("/kubepods.slice", "/kubepods.slice/burstable/pod-b"));
        assert!(!inside("/kubepods.slice", "/kubepods.slice2/x"));
        assert!(!inside("/kubepods.slice", "/"));
        assert!(inside("/", "/system.slice"));
    }

    #[test]
    fn share_users_add_up_without_the_victims_own() {
        let rows = rank_shares(
            [
                share("web-1", "batch-7", "/kubepods.slice", 3_000),
                share("web-1", "batch-7", "/kubepods.slice", 2_000),
                // The victim's own pod used the share too: never a neighbour.
                share("web-1", "web-1", "/kubepods.slice", 9_000),
                share("web-1", "api-2", "/kubepods.slice", 1_000),
            ],
            None,
        );
        let got: Vec<_> = (rows.iter())
            .map(|r| (r.user.name.as_str(), r.counts.sum_ns, r.counts.count))
            .collect();
        assert_eq!(got, [("batch-7", 5_000, 2), ("api-2", 1_000, 1)]);
        assert_eq!(rank_shares(rows, Some(1)).len(), 1);
    }

    #[test]
    fn both_roles_are_named_in_one_sentence() {
        let mut table = PairTable {
            rows: vec![
                pair("shop/web-1", "(idle CPU)", 9, 9_000, 1),
                pair("shop/web-1", "/", 5, 5_000, 1),
                pair("jobs/batch-7", "shop/web-1", 5, 1_000, 1),
            ],
            ..PairTable::default()
        };
        table.shares = vec![
            share("shop/web-1", "jobs/batch-7", "/kubepods.slice", 4_000),
            share("shop/web-1", "jobs/other", "/kubepods.slice", 1_000),
        ];
        assert_eq!(
            roles(&table),
            [
                "shop/web-1 waited behind / (it held the CPU) because jobs/batch-7 had used /kubepods.slice's share of the CPU"
            ]
        );
        // Too little of the victim's wait to tell.
        table.shares = vec![share("jobs/batch-7", "shop/web-1", "/kubepods.slice", 99)];
        assert!(roles(&table).is_empty());
        table.shares = vec![share("jobs/batch-7", "shop/web-1", "/kubepods.slice", 100)];
        assert_eq!(
            roles(&table),
            [
                "jobs/batch-7 waited behind shop/web-1, which held the CPU and had used /kubepods.slice's share of it"
            ]
        );
    }

    #[test]
    fn level_rows_add_up_by_victim_and_group_and_rank_by_time() {
        let level = |victim: &str, group: &str, count, sum_ns| LevelRow {
            victim: Side::plain(victim),
            group: group.into(),
            counts: PairCounts {
                count,
                sum_ns,
                max_ns: 0,
            },
        };
        let rows = rank_levels(
            [
                level("shop/web-1", "/kubepods.slice", 3, 3_000),
                level("jobs/batch-7", "/kubepods.slice", 1, 2_000),
                level("shop/web-1", "/kubepods.slice", 2, 2_000),
                level("shop/web-1", "/kubepods.slice/burstable", 1, 10),
            ],
            None,
        );
        let seen: Vec<(&str, &str, u64, u64)> = (rows.iter())
            .map(|r| {
                (
                    r.victim.name.as_str(),
                    r.group.as_str(),
                    r.counts.count,
                    r.counts.sum_ns,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("shop/web-1", "/kubepods.slice", 5, 5_000),
                ("jobs/batch-7", "/kubepods.slice", 1, 2_000),
                ("shop/web-1", "/kubepods.slice/burstable", 1, 10),
            ]
        );
        assert_eq!(rank_levels(rows, Some(2)).len(), 2);
    }
}
