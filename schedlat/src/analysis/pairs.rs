//! Which workload hurts which: the neighbour-pair table's pairs, rolled
//! up (pairs whose two sides have the same identity at the level add up,
//! as the breakdown's roll-up adds cgroups up) and ranked by the wait
//! time they account for.

use std::collections::{HashMap, hash_map::Entry};

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
}
