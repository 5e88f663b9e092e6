//! Who the culprits charged with the scope's waits were, by whose they
//! are: the scope's own (its process's threads, or under -c the tasks of
//! its cgroup and every group below it, as a pod's other containers), the
//! root cgroup's own tasks (nobody placed them in a group), another
//! cgroup, or tasks that exited before their cgroup could be read. Kernel
//! threads, the idle task and higher classes are the cause split's own
//! classes and not counted here. Only the culprits whose cgroups differ
//! from their victim's are sorted: these are what the split's "held by
//! another cgroup" counted, and what a noisy neighbour is made of.

use std::collections::{BTreeMap, BTreeSet};

use super::priority::{Attribution, Charged, Edge, ShareCharged, outranks};
use crate::{
    analysis::task,
    sys::cgroup_of::{self, Differs, TaskCgroups},
};

/// Wait charged to one kind of holder, and a few of its tasks' names.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Charge {
    pub ns: u64,
    pub comms: BTreeSet<String>,
}

impl Charge {
    fn add(&mut self, ns: u64, comm: String) {
        self.ns += ns;
        if self.comms.len() < 3 {
            self.comms.insert(comm);
        }
    }

    /// "a, b" of its tasks' names.
    pub(crate) fn names(&self) -> String {
        self.comms.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Another cgroup charged with the scope's wait.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OtherCgroup {
    pub group: Differs,
    pub charge: Charge,
}

/// The charges of the culprits in other cgroups than their victims', by
/// whose they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Holders {
    /// The scope's own tasks in another group than the waiter's.
    pub own: Charge,
    /// Tasks of the root cgroup itself.
    pub root: Charge,
    /// Tasks gone by the end of the window: their cgroups are unknown.
    pub exited: Charge,
    /// Other cgroups, most charged first.
    pub others: Vec<OtherCgroup>,
    /// Charged by each holder's time on the CPU inside the waits (the
    /// neighbour pairs), not by the waits its tasks ended.
    pub by_time: bool,
    /// The other cgroups that had used the share of a group the scope's
    /// waiters are in, where their wakeups lost above their own group
    /// (`Attribution::share_users`, the scope's own groups left out).
    pub share: Vec<ShareCharged>,
}

impl Holders {
    /// By time where the pairs were read (`Attribution::neighbours`), else
    /// by the waits the culprits ended.
    pub(crate) fn of(a: &Attribution, cgroups: &TaskCgroups) -> Holders {
        let by_culprits = Self::by_culprits(a, cgroups);
        let mut h = match &a.neighbours {
            Some(charged) => Self::by_time(charged, &by_culprits, cgroups),
            None => by_culprits,
        };
        let hierarchy = cgroups.keyed_hierarchy();
        h.share = (a.share_users.iter())
            .filter(|u| !cgroups.is_own_group(&u.path, hierarchy))
            .cloned()
            .collect();
        h
    }

    /// Each cgroup the pairs charged, sorted by whose it is: the scope's own
    /// groups, the root's own tasks, or another cgroup (with the comms of its
    /// culprits in the victims tables, where they name it). A cgroup is known
    /// from the kernel's record whether its tasks exited or not, so nothing
    /// is exited here.
    fn by_time(charged: &[Charged], culprits: &Holders, cgroups: &TaskCgroups) -> Holders {
        let hierarchy = cgroups.keyed_hierarchy();
        let comms = |path: &str| {
            (culprits.others.iter())
                .find(|o| o.group.path == path)
                .map_or_else(BTreeSet::new, |o| o.charge.comms.clone())
        };
        let mut h = Holders {
            by_time: true,
            ..Holders::default()
        };
        for c in charged {
            let charge = Charge {
                ns: c.charged_ns,
                comms: comms(&c.path),
            };
            if cgroups.is_own_group(&c.path, hierarchy) {
                h.own.ns += charge.ns;
                h.own.comms.extend(charge.comms);
            } else if c.path == "/" {
                h.root = Charge {
                    comms: culprits.root.comms.clone(),
                    ..charge
                };
            } else {
                h.others.push(OtherCgroup {
                    group: Differs {
                        name: c.path.clone(),
                        path: c.path.clone(),
                        hierarchy,
                    },
                    charge,
                });
            }
        }
        h.others.sort_by_key(|o| std::cmp::Reverse(o.charge.ns));
        h
    }

    /// The culprits in other cgroups than their victims', charged with the
    /// waits they ended.
    fn by_culprits(a: &Attribution, cgroups: &TaskCgroups) -> Holders {
        let mut h = Holders::default();
        let mut others: BTreeMap<String, OtherCgroup> = BTreeMap::new();
        for c in &a.tables.culprits {
            let pid = c.task.tgid;
            // The split's own classes: idle, kernel threads, higher classes.
            if c.task.tid == 0
                || c.other.tid == 0
                || cgroups.is_kernel_thread(pid)
                || outranks(&c.task, &c.other) == Some(Edge::Class)
            {
                continue;
            }
            let comm = task::comm(&c.task);
            let Some(culprit) = cgroups.of(pid) else {
                h.exited.add(c.total_ns, comm);
                continue;
            };
            let victim = cgroups.of(c.other.tgid).or(cgroups.scope.as_deref());
            let Some(group) = victim.and_then(|v| cgroup_of::differs_in(culprit, v)) else {
                continue;
            };
            if cgroups.is_own(pid) {
                h.own.add(c.total_ns, comm);
            } else if group.is_root() {
                h.root.add(c.total_ns, comm);
            } else {
                let other = others.entry(group.name.clone()).or_insert(OtherCgroup {
                    group,
                    charge: Charge::default(),
                });
                other.charge.add(c.total_ns, comm);
            }
        }
        h.others = others.into_values().collect();
        h.others.sort_by_key(|o| std::cmp::Reverse(o.charge.ns));
        h
    }

    /// Everything charged here.
    pub(crate) fn total_ns(&self) -> u64 {
        let others: u64 = self.others.iter().map(|o| o.charge.ns).sum();
        self.own.ns + self.root.ns + self.exited.ns + others
    }

    /// The share of it that was the scope's own; 0 when nothing was charged.
    pub(crate) fn own_share(&self) -> f64 {
        self.own.ns as f64 / self.total_ns().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::WaitStats;

    use super::*;
    use crate::{
        analysis::{
            task::tests::task,
            victims::{SortKey, rank},
        },
        sys::procfs::parse_proc_cgroup,
    };

    /// A pod (`/pod`, containers `a` and `b`) whose waiter in `a` waited
    /// behind its own second container, its own second thread, a sibling
    /// pod, the root's own tasks, a task that exited and a kernel thread.
    #[test]
    fn own_root_exited_and_others_are_told_apart() {
        let victim = task(40, 40, "web", 0, 0, 0);
        let culprit = |t, total_ns| WaitStats {
            task: t,
            count: 10,
            total_ns,
            max_other: victim,
            ..Default::default()
        };
        let rows = [
            culprit(task(41, 40, "web-2", 0, 0, 0), 1000),
            culprit(task(50, 50, "sidecar", 0, 0, 0), 500),
            culprit(task(60, 60, "batch", 0, 0, 0), 300),
            culprit(task(70, 70, "loop", 0, 0, 0), 200),
            culprit(task(80, 80, "gone", 0, 0, 0), 100),
            culprit(task(90, 90, "kworker/1:0", 0, 0, 0), 50),
            culprit(task(0, 0, "swapper/1", 0, 0, 0), 25),
        ];
        let lines = |path: &str| Some(parse_proc_cgroup(&format!("0::{path}\n")).unwrap());
        let cgroups = TaskCgroups {
            scope: lines("/pod"),
            scope_subtree: true,
            by_pid: [
                (40, lines("/pod/a")),
                (50, lines("/pod/b")),
                (60, lines("/other-pod/c")),
                (70, lines("/")),
                (80, None),
                (90, lines("/")),
            ]
            .into_iter()
            .collect(),
            kernel_threads: [90].into_iter().collect(),
            ..TaskCgroups::default()
        };
        let a = Attribution::new(rank(&[], &rows, SortKey::Total, 0), (0, 0), &cgroups);
        let h = Holders::of(&a, &cgroups);
        // The second thread is in the waiter's own group: not counted here.
        assert_eq!(h.own.ns, 500);
        assert_eq!(h.root.names(), "loop");
        assert_eq!(h.exited.ns, 100);
        assert_eq!(h.others.len(), 1);
        assert_eq!(h.others[0].group.name, "/other-pod/c");
        assert_eq!(h.total_ns(), 1100);
        assert!((h.own_share() - 500.0 / 1100.0).abs() < 1e-9);
    }
}
