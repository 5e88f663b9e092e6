//! What each holder a report names was running while tasks waited behind
//! it (docs/stacks.md, "In diagnose", "In victims"): the holder's stacks of
//! a window's slow waits (diagnose's window, or one victims interval),
//! folded per holder task and per holder cgroup, each weighted by the time
//! its waiter waited (as `slow --stacks` weighs its flame graph), and the
//! heaviest kept with its share of that holder's slow-wait time.

use std::collections::{BTreeMap, HashMap};

use schedlat_common::victims::{SlowEvent, TaskInfo};

use crate::{
    analysis::{
        holder::NamedHolder,
        stacks::{HolderStacks, StackNamer, fold_safe},
        task,
    },
    collect::slow::SlowRecord,
    sys::{
        cgroup_of::{TaskCgroups, Which},
        procfs::CgroupLine,
    },
};

/// Distinct stacks a window folds, all holders together. Each is cut to
/// its innermost frames (`HolderStacks::bounded`, at most ~17 KiB), so the
/// bound keeps a long window on a busy host under ~17 MiB; a system's
/// holders run a few hundred distinct stacks in seconds, far below it. A
/// wait whose stack finds no room still counts in its holder's total
/// (`Window::unfolded`), so a share is never overstated.
pub(crate) const MAX_STACKS: usize = 1024;

/// The window's slow waits as they are read, each holder task's stacks
/// folded.
#[derive(Debug)]
pub(crate) struct Folding {
    threshold_ns: u64,
    events: u64,
    unfolded: u64,
    stacks: usize,
    /// By the holder's TID.
    tasks: BTreeMap<u32, Behind>,
}

/// The slow waits behind one holder task.
#[derive(Debug)]
struct Behind {
    task: TaskInfo,
    waits: u64,
    wait_ns: u64,
    /// Wait ns by folded stack (`outer;...;inner`).
    folded: HashMap<String, u64>,
}

impl Folding {
    /// Folds the waits of at least `threshold_ns`.
    pub(crate) fn new(threshold_ns: u64) -> Folding {
        Folding {
            threshold_ns,
            events: 0,
            unfolded: 0,
            stacks: 0,
            tasks: BTreeMap::new(),
        }
    }

    /// One slow wait and its holder's stacks as named (None: the kernel
    /// took none, or its holder was the idle task, which held nobody out).
    pub(crate) fn add(&mut self, event: &SlowEvent, stacks: Option<HolderStacks>) {
        self.events += 1;
        let culprit = event.culprit;
        if culprit.tid == 0 {
            return;
        }
        let behind = self.tasks.entry(culprit.tid).or_insert_with(|| Behind {
            task: culprit,
            waits: 0,
            wait_ns: 0,
            folded: HashMap::new(),
        });
        behind.waits += 1;
        behind.wait_ns += event.wait_ns;
        let Some(stacks) = stacks else {
            self.unfolded += 1;
            return;
        };
        let folded = stacks.bounded().folded();
        if let Some(ns) = behind.folded.get_mut(&folded) {
            *ns += event.wait_ns;
        } else if self.stacks < MAX_STACKS {
            behind.folded.insert(folded, event.wait_ns);
            self.stacks += 1;
        } else {
            self.unfolded += 1;
        }
    }

    /// A batch of slow waits as the ring buffer gave them, named at once
    /// (one pass over the kernel's symbols and one per process, while the
    /// processes live) and folded.
    pub(crate) fn add_records(&mut self, namer: &StackNamer, records: &[SlowRecord]) {
        if records.is_empty() {
            return;
        }
        let named = namer.name(records);
        for (record, stacks) in records.iter().zip(named) {
            self.add(&record.event, stacks);
        }
    }

    /// Ends the folds so far as [`Self::end`] does and starts the next
    /// window's empty, at the same threshold: a victims interval is a
    /// report of its own, its shares of its own waits.
    pub(crate) fn next_window(&mut self, lost: u64, cgroups: &TaskCgroups) -> Window {
        let next = Folding::new(self.threshold_ns);
        std::mem::replace(self, next).end(lost, cgroups)
    }

    /// The holder tasks so far, whose cgroups the end reads.
    pub(crate) fn holders(&self) -> impl Iterator<Item = &TaskInfo> {
        self.tasks.values().map(|b| &b.task)
    }

    /// The window's hottest stacks, per holder task and per holder cgroup
    /// (the cgroups of the holders' processes, as `cgroups` read them at
    /// the window's end); `lost`: the events the ring buffer had no room
    /// for.
    pub(crate) fn end(self, lost: u64, cgroups: &TaskCgroups) -> Window {
        let mut groups: HashMap<(Which, String), Merged> = HashMap::new();
        for b in self.tasks.values() {
            // Kernel threads are the split's own class, and the scope's
            // own tasks its own: neither is a neighbouring cgroup's
            // (holders.rs). Gone tasks have no cgroup.
            let pid = b.task.tgid;
            if cgroups.is_kernel_thread(pid) || cgroups.is_own(pid) {
                continue;
            }
            for key in cgroups.of(pid).map(group_keys).unwrap_or_default() {
                let merged = groups.entry(key).or_default();
                merged.waits += b.waits;
                merged.wait_ns += b.wait_ns;
                let comm = fold_safe(&task::comm(&b.task));
                for (stack, ns) in &b.folded {
                    *merged
                        .folded
                        .entry((comm.clone(), stack.clone()))
                        .or_default() += ns;
                }
            }
        }
        let tasks = (self.tasks.into_iter())
            .filter_map(|(tid, b)| {
                let (stack, stack_ns) = heaviest(&b.folded)?;
                let hottest = Hottest {
                    comm: fold_safe(&task::comm(&b.task)),
                    stack: stack.clone(),
                    stack_ns,
                    wait_ns: b.wait_ns,
                    waits: b.waits,
                };
                Some((tid, hottest))
            })
            .collect();
        let cgroups = (groups.into_iter())
            .filter_map(|(key, m)| {
                let ((comm, stack), stack_ns) = heaviest(&m.folded)?;
                let hottest = Hottest {
                    comm: comm.clone(),
                    stack: stack.clone(),
                    stack_ns,
                    wait_ns: m.wait_ns,
                    waits: m.waits,
                };
                Some((key, hottest))
            })
            .collect();
        Window {
            threshold_ns: self.threshold_ns,
            events: self.events,
            lost,
            unfolded: self.unfolded,
            tasks,
            cgroups,
        }
    }
}

/// The slow waits behind one cgroup's tasks.
#[derive(Debug, Default)]
struct Merged {
    waits: u64,
    wait_ns: u64,
    /// Wait ns by (comm, folded stack).
    folded: HashMap<(String, String), u64>,
}

/// The heaviest entry; of equal ones the least, so a report is the same
/// whatever order the map iterates in.
fn heaviest<K: Ord>(folded: &HashMap<K, u64>) -> Option<(&K, u64)> {
    (folded.iter())
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(k, ns)| (k, *ns))
}

/// The groups a process's waits count for: its group in the v1 cpu
/// controller and in cgroup v2, the hierarchies a holder cgroup is named
/// in (Holders::of: the pairs' keyed one, or where two tasks differ).
fn group_keys(lines: &[CgroupLine]) -> Vec<(Which, String)> {
    let mut keys = Vec::new();
    for l in lines {
        if l.hierarchy == 0 {
            keys.push((Which::V2, l.path.clone()));
        } else if l.controllers.iter().any(|c| c == "cpu") {
            keys.push((Which::V1Cpu, l.path.clone()));
        }
    }
    keys
}

/// The hottest stacks of a window's slow waits.
#[derive(Debug)]
pub(crate) struct Window {
    /// The waits folded: at least this long.
    pub threshold_ns: u64,
    /// Slow waits read, the idle CPU's included.
    pub events: u64,
    /// Slow waits the ring buffer had no room for.
    pub lost: u64,
    /// Slow waits behind a holder whose stack is not folded: the kernel
    /// took none, or MAX_STACKS was reached.
    pub unfolded: u64,
    tasks: HashMap<u32, Hottest>,
    cgroups: HashMap<(Which, String), Hottest>,
}

impl Window {
    /// The hottest stack behind `holder`, if a slow wait with a stack
    /// ended behind it.
    pub(crate) fn behind(&self, holder: &NamedHolder) -> Option<&Hottest> {
        match holder {
            NamedHolder::Task(t) => self.tasks.get(&t.tid),
            NamedHolder::Cgroup {
                path, hierarchy, ..
            } => self.cgroups.get(&(*hierarchy, path.clone())),
        }
    }
}

/// The stack a holder ran most while tasks of the scope waited behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hottest {
    /// The task that ran it (of a cgroup, the heaviest of its tasks').
    pub comm: String,
    /// Folded, outermost first: the user frames, then the holder's own
    /// kernel frames marked `_[k]`.
    pub stack: String,
    /// The wait behind this stack, and behind the holder in all.
    pub stack_ns: u64,
    pub wait_ns: u64,
    /// Slow waits behind the holder.
    pub waits: u64,
}

impl Hottest {
    /// The stack's share of the holder's slow-wait time.
    pub(crate) fn share(&self) -> f64 {
        self.stack_ns as f64 / self.wait_ns.max(1) as f64
    }

    /// As one line of a folded file, without its weight: `comm;stack`.
    pub(crate) fn folded(&self) -> String {
        match self.stack.is_empty() {
            true => self.comm.clone(),
            false => format!("{};{}", self.comm, self.stack),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analysis::task::tests::task, sys::procfs::parse_proc_cgroup};

    fn user(names: &[&str]) -> HolderStacks {
        crate::analysis::stacks::fixtures::user_stacks(names)
    }

    fn wait(culprit: TaskInfo, wait_ns: u64) -> SlowEvent {
        SlowEvent {
            wait_ns,
            culprit,
            ..SlowEvent::default()
        }
    }

    #[test]
    fn the_heaviest_stack_wins_by_wait_time_not_by_count() {
        let batch = task(70, 70, "batch-7", 0, 0, 0);
        let mut f = Folding::new(1_000_000);
        // Three short waits behind one stack, one long behind another.
        for _ in 0..3 {
            f.add(&wait(batch, 1_000_000), Some(user(&["main", "read"])));
        }
        f.add(
            &wait(batch, 5_000_000),
            Some(user(&["main", "compress", "compress_block"])),
        );
        // The idle task holds nobody: read, never folded.
        f.add(&wait(task(0, 0, "swapper/1", 0, 0, 0), 9_000_000), None);
        let w = f.end(2, &TaskCgroups::default());
        assert_eq!((w.events, w.lost, w.unfolded), (5, 2, 0));
        let hottest = w
            .behind(&NamedHolder::Task(batch))
            .expect("a stack behind batch-7");
        assert_eq!(hottest.stack, "main;compress;compress_block");
        assert_eq!(hottest.folded(), "batch-7;main;compress;compress_block");
        assert_eq!(
            (hottest.stack_ns, hottest.wait_ns, hottest.waits),
            (5_000_000, 8_000_000, 4)
        );
        assert!((hottest.share() - 0.625).abs() < 1e-9);
        let idle = task(0, 0, "swapper/1", 0, 0, 0);
        assert!(w.behind(&NamedHolder::Task(idle)).is_none());
    }

    #[test]
    fn a_cgroup_folds_its_tasks_stacks_and_names_the_task() {
        let a = task(60, 60, "worker-a", 0, 0, 0);
        let b = task(61, 61, "worker-b", 0, 0, 0);
        let kthread = task(2, 2, "kthreadd", 0, 0, 0);
        let own = task(62, 62, "scope", 0, 0, 0);
        let mut f = Folding::new(1_000_000);
        f.add(&wait(own, 40_000_000), Some(user(&["main", "own"])));
        f.add(&wait(a, 3_000_000), Some(user(&["main", "hash"])));
        f.add(&wait(b, 2_000_000), Some(user(&["main", "sort"])));
        f.add(&wait(b, 2_000_000), Some(user(&["main", "sort"])));
        f.add(&wait(kthread, 50_000_000), Some(user(&["loop"])));
        // A wait whose stack the kernel did not take counts in the totals.
        f.add(&wait(a, 1_000_000), None);
        let lines = |text: &str| Some(parse_proc_cgroup(text).unwrap());
        let cgroups = TaskCgroups {
            by_pid: [
                (60, lines("4:cpu,cpuacct:/batch\n0::/batch.slice\n")),
                (61, lines("4:cpu,cpuacct:/batch\n0::/other.slice\n")),
                (2, lines("4:cpu,cpuacct:/\n0::/\n")),
                (62, lines("4:cpu,cpuacct:/batch\n0::/batch.slice\n")),
            ]
            .into_iter()
            .collect(),
            kernel_threads: [2].into_iter().collect(),
            scope_pid: Some(62),
            ..TaskCgroups::default()
        };
        let w = f.end(0, &cgroups);
        assert_eq!(w.unfolded, 1);
        let group = |hierarchy, path: &str| NamedHolder::Cgroup {
            path: path.into(),
            hierarchy,
            name: path.into(),
        };
        let batch = w.behind(&group(Which::V1Cpu, "/batch")).expect("/batch");
        assert_eq!(batch.folded(), "worker-b;main;sort");
        assert_eq!(
            (batch.stack_ns, batch.wait_ns, batch.waits),
            (4_000_000, 8_000_000, 4)
        );
        let v2 = w
            .behind(&group(Which::V2, "/batch.slice"))
            .expect("/batch.slice");
        assert_eq!(v2.folded(), "worker-a;main;hash");
        assert!((v2.share() - 0.75).abs() < 1e-9);
        // The scope's own process counts in no group (it is no neighbour),
        // nor does the kernel thread in the root.
        assert!(w.behind(&group(Which::V1Cpu, "/")).is_none());
        assert!(w.behind(&group(Which::Other, "/batch")).is_none());
    }

    #[test]
    fn past_the_bound_new_stacks_only_count_in_their_holders_totals() {
        let t = task(80, 80, "jit", 0, 0, 0);
        let mut f = Folding::new(1);
        for i in 0..MAX_STACKS + 5 {
            f.add(&wait(t, 10), Some(user(&["main", &format!("fn_{i}")])));
        }
        // A stack already kept still adds its waits.
        f.add(&wait(t, 1_000), Some(user(&["main", "fn_3"])));
        let w = f.end(0, &TaskCgroups::default());
        assert_eq!(w.unfolded, 5);
        let h = w.behind(&NamedHolder::Task(t)).unwrap();
        assert_eq!(h.stack, "main;fn_3");
        assert_eq!(h.waits, MAX_STACKS as u64 + 6);
        assert_eq!(h.wait_ns, 10 * (MAX_STACKS as u64 + 5) + 1_000);
    }

    #[test]
    fn each_window_folds_only_its_own_waits() {
        let t = task(91, 91, "batch", 0, 0, 0);
        let quiet = task(92, 92, "quiet", 0, 0, 0);
        let mut f = Folding::new(2_000_000);
        f.add(&wait(t, 9_000_000), Some(user(&["main", "compress"])));
        f.add(&wait(quiet, 3_000_000), Some(user(&["main", "poll"])));
        let first = f.next_window(4, &TaskCgroups::default());
        assert_eq!((first.events, first.lost), (2, 4));
        f.add(&wait(t, 2_000_000), Some(user(&["main", "read"])));
        f.add(&wait(t, 2_000_000), None);
        let second = f.next_window(0, &TaskCgroups::default());
        // The first window's heavier stack is not carried over, nor is a
        // holder that had no wait in the second; the threshold stays.
        let h = second.behind(&NamedHolder::Task(t)).unwrap();
        assert_eq!(h.stack, "main;read");
        assert_eq!((h.stack_ns, h.wait_ns, h.waits), (2_000_000, 4_000_000, 2));
        assert!(second.behind(&NamedHolder::Task(quiet)).is_none());
        assert_eq!(
            (
                second.threshold_ns,
                second.events,
                second.lost,
                second.unfolded
            ),
            (2_000_000, 2, 0, 1)
        );
        let third = f.next_window(0, &TaskCgroups::default());
        assert_eq!(third.events, 0);
        assert!(third.behind(&NamedHolder::Task(t)).is_none());
    }

    #[test]
    fn equal_stacks_are_told_apart_the_same_way_every_time() {
        let t = task(90, 90, "tie", 0, 0, 0);
        let mut f = Folding::new(1);
        for name in ["zeta", "alpha", "mid"] {
            f.add(&wait(t, 100), Some(user(&["main", name])));
        }
        let w = f.end(0, &TaskCgroups::default());
        assert_eq!(w.behind(&NamedHolder::Task(t)).unwrap().stack, "main;alpha");
    }
}
