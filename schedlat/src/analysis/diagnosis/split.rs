//! Causes named from the split of the window's waits (docs/causes.md):
//! who held the CPU when they ended (the scope's own cgroup, or others:
//! the noisy neighbour, named), where they ended (migrated waits much
//! slower than the rest), and what else took the CPU during them (steal,
//! IRQ time, the group's bandwidth throttling). Each is named only when
//! its numbers pass a threshold below, stated with its reason here and in
//! docs/diagnose.md; the evidence gives the numbers.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    named::Diagnosis,
    priority::Attribution,
    waiting::{EbpfWaiting, NEGLIGIBLE, scope_waited},
};
use crate::{
    analysis::{
        causes::{Causes, Counted, Summary},
        fmt_ns, task,
    },
    sys::{
        cgroup_of::{self, TaskCgroups},
        findings::Findings,
    },
};

/// The diagnoses the split can give, as the report lists them when none
/// matched.
pub(crate) const KNOWN: &[&str] = &[
    "contention inside the cgroup",
    "noisy neighbour",
    "placement",
    "steal",
    "interrupt time",
];

/// A relation (same cgroup, other cgroups) is named when the waits whose
/// CPU it held carry more than half of the measured wait time: then it is
/// the one relation that explains most of the waiting; below half, no
/// single one does and the capacity causes speak for the rest.
pub(crate) const DOMINANT: f64 = 0.5;
/// Steal and IRQ time are named when they cover a quarter of the measured
/// wait: time taken from the waiting task's CPU outright, and a quarter is
/// a structural part of the wait, far above the fraction of a percent a
/// quiet host or a NIC's interrupts take.
pub(crate) const OVERLAP: f64 = 0.25;
/// The group's throttling is named from the split when it covers more
/// than half of the measured wait (as DOMINANT: the quota is then the main
/// reason its tasks waited).
pub(crate) const THROTTLED: f64 = 0.5;
/// Migrated waits are named when their p99 is at least twice that of the
/// waits that ended on the CPU the task last ran on: p99 is read from
/// buckets a quarter of a power of two wide (within 25%), so a factor of
/// two is a real difference, not the buckets' resolution ...
pub(crate) const SLOWER: f64 = 2.0;
/// ... and they carry at least a tenth of the wait time: fewer slow
/// migrated waits are not what the scope waits on.
pub(crate) const PLACEMENT_TIME: f64 = 0.10;
/// Fewer waits than this in a class make its p99 its maximum and its
/// shares a handful of events: no rule is applied to it.
pub(crate) const MIN_WAITS: u64 = 20;

/// What the split's diagnoses are named from: the split, the victims
/// tables, the scope's waiting as eBPF measured it, and the cgroups of the
/// tables' tasks and of the scope (which stand for a victim gone by the end
/// of the window, a short-lived child).
pub(crate) struct Evidence<'a> {
    pub split: &'a Causes,
    pub attribution: Option<&'a Attribution>,
    pub ebpf: EbpfWaiting,
    pub cgroups: &'a TaskCgroups,
}

/// Adds the diagnoses the split supports to `causes` (the throttling seen
/// in the split joins a quota throttling diagnosis already named from
/// cpu.stat).
pub(crate) fn add(causes: &mut Vec<Diagnosis>, f: &Findings, e: &Evidence) {
    let (split, a) = (e.split, e.attribution);
    let waited = scope_waited(f, Some(e.ebpf));
    if waited < NEGLIGIBLE {
        return;
    }
    let found = [
        same_cgroup(split, waited, a, e.cgroups),
        other_cgroup(split, waited, a, e.cgroups),
        placement(split, waited),
        overlap(split, waited, "steal", split.overlap.steal_ns),
        overlap(split, waited, "IRQ", split.overlap.irq_ns),
    ];
    causes.extend(found.into_iter().flatten());
    throttled(causes, split, waited);
    causes.sort_by(|a, b| b.strength.total_cmp(&a.strength));
}

fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// "N% of the waits began as preemptions": how the waits began, for the
/// evidence of the held-by causes.
fn began(split: &Causes) -> String {
    let all = split.all();
    format!(
        "of all the waits, {} began as preemptions (switched out still runnable) and {} with a wakeup",
        pct(split.preempted.counted().share_in(all).waits),
        pct(split.woken.counted().share_in(all).waits)
    )
}

/// A held-by class's share of the time of the waits whose holder is known,
/// and that share less the part the group was throttled for (a throttled
/// task waits for the next period whoever holds the CPU: who held it when
/// the wait ended is then not why it waited; the throttled share is of
/// the same-CPU waits, taken as the same share of these), when the latter
/// passes DOMINANT.
struct Held {
    share: f64,
    unthrottled: f64,
}

fn dominant(split: &Causes, class: Counted) -> Option<Held> {
    let held = split.held();
    let share = class.share_in(held).time;
    let throttled = split.overlap.share(split.overlap.throttled_ns);
    let unthrottled = share * (1.0 - throttled.unwrap_or(0.0).min(1.0));
    (held.count >= MIN_WAITS && unthrottled > DOMINANT).then_some(Held { share, unthrottled })
}

/// ", N% of it outside throttling" when throttling took a part.
fn unthrottled_note(h: &Held) -> String {
    if h.unthrottled < h.share {
        format!(" ({} outside the group's throttling)", pct(h.unthrottled))
    } else {
        String::new()
    }
}

/// "N% of the measured wait time (.. of .., N waits) ended when a task of
/// `whose` left the CPU": the share a held-by class carries.
fn held_share(split: &Causes, class: Counted, h: &Held, whose: &str) -> String {
    format!(
        "{}{} of the measured wait time ({} of {}, {} waits) ended when a task of {whose} left the CPU",
        pct(h.share),
        unthrottled_note(h),
        fmt_ns(class.sum_ns),
        fmt_ns(split.held().sum_ns),
        class.count
    )
}

/// The next step for contention inside a group a service was given.
const IN_GROUP_STEP: &str = "the group has more runnable work than CPU: fewer runnable threads (a smaller worker pool), more CPU for the group (cpuset, cpu.max), or a lower weight for its batch part in a child group";

/// Peers of one cgroup: a culprit that outranks its victim by weight (a
/// lower nice) is in its cgroup too, and those waits are class or
/// priority's (each wait explained once, as for the capacity causes): the
/// strength counts the rest. The cgroup is named; the root cgroup is no
/// service's group (tasks nobody gave a group of their own), and gets
/// advice of its own.
fn same_cgroup(
    split: &Causes,
    waited: f64,
    a: Option<&Attribution>,
    cgroups: &TaskCgroups,
) -> Option<Diagnosis> {
    let class = split.held_by.same_cgroup;
    let h = dominant(split, class)?;
    let peers = a.map_or(1.0, |a| 1.0 - a.outranking_share());
    let own = own_cgroup(cgroups);
    let (whose, next_step) = match own.as_deref() {
        Some("/") => (
            "the root cgroup (/, where tasks no service manager placed stay)".to_string(),
            "the waiters and the tasks they waited behind are all in the root cgroup: give the competing work cgroups of its own (a systemd slice or scope, a container) with cpu.weight, renice the batch part (nice 19), or keep it on other CPUs (taskset, cpuset)",
        ),
        Some(path) => (format!("the waiter's own cgroup ({path})"), IN_GROUP_STEP),
        None => ("the waiter's own cgroup".to_string(), IN_GROUP_STEP),
    };
    Some(Diagnosis {
        name: "contention inside the cgroup",
        strength: waited * h.unthrottled * peers,
        evidence: format!(
            "{}: the group's tasks wait for each other; {}",
            held_share(split, class, &h, &whose),
            began(split)
        ),
        next_step: next_step.into(),
    })
}

/// The waiters' cgroup, to name it: the scope's (a process's or a
/// cgroup's; the whole system's waiters are in many), its group in the cpu
/// controller's hierarchy (where the kernel's same-cgroup test looks
/// first), else in cgroup v2.
fn own_cgroup(cgroups: &TaskCgroups) -> Option<String> {
    let lines = cgroups.scope.as_deref()?;
    let cpu = lines
        .iter()
        .find(|l| l.controllers.iter().any(|c| c == "cpu"));
    cpu.or_else(|| lines.iter().find(|l| l.hierarchy == 0))
        .map(|l| l.path.clone())
}

fn other_cgroup(
    split: &Causes,
    waited: f64,
    a: Option<&Attribution>,
    cgroups: &TaskCgroups,
) -> Option<Diagnosis> {
    let class = split.held_by.other_cgroup;
    let h = dominant(split, class)?;
    // By time, where the pairs were read: other cgroups must also have
    // held the CPU for most of the waits, not merely ended them (a brief
    // sleeper's runs end most of a busy loop's waits, which the loop spent
    // behind its own group's tasks).
    if let Some(a) = a
        && let Some(neighbours) = &a.neighbours
    {
        let charged: u64 = neighbours.iter().map(|n| n.charged_ns).sum();
        if charged as f64 <= DOMINANT * a.tables.waited_ns as f64 {
            return None;
        }
    }
    let others = a.map_or_else(Vec::new, |a| other_cgroups(a, cgroups));
    // By time, where the pair table was read: what each held of the CPU
    // inside the waits, not the waits its tasks happened to end.
    let by_time = a.is_some_and(|a| a.neighbours.is_some());
    let (who, step) = match others.first() {
        Some(top) => {
            let waited_ns = a.map_or(0, |a| a.tables.waited_ns).max(1);
            let named: Vec<String> = others
                .iter()
                .map(|o| {
                    format!(
                        "{} ({}: {}, {} of the scope's measured wait)",
                        cgroups.owner(&o.path),
                        o.comms.join(", "),
                        fmt_ns(o.charged_ns),
                        pct(o.charged_ns as f64 / waited_ns as f64)
                    )
                })
                .collect();
            (
                match by_time {
                    true => format!(
                        "the other cgroups charged with most, by their tasks' time on the CPU inside the waits: {}",
                        named.join(", ")
                    ),
                    false => format!("the other cgroups charged with most: {}", named.join(", ")),
                },
                match cgroups.owners.get(&top.path) {
                    Some(owner) => format!(
                        "give the scope's cgroup more cpu.weight (v1: cpu.shares) than {owner}, cap it (cpu.max, v1: cpu.cfs_quota_us, of cgroup {}), or keep them on different CPUs (cpuset)",
                        top.path
                    ),
                    None => format!(
                        "give the scope's cgroup more cpu.weight (v1: cpu.shares) than {0}, cap {0} (cpu.max, v1: cpu.cfs_quota_us), or keep them on different CPUs (cpuset)",
                        top.path
                    ),
                },
            )
        }
        None => (
            "the culprits' cgroups could not be read (gone by the end of the window, or no victims tables)".into(),
            "give the scope's cgroup more cpu.weight than its neighbours, cap them (cpu.max), or keep them on different CPUs (cpuset)".into(),
        ),
    };
    Some(Diagnosis {
        name: "noisy neighbour (other cgroups)",
        strength: waited * h.unthrottled,
        evidence: format!(
            "{}; {who}; {}",
            held_share(split, class, &h, "another cgroup"),
            began(split)
        ),
        next_step: step,
    })
}

/// Other cgroups named in the evidence, most charged first.
const OTHER_CGROUPS: usize = 3;

/// An other cgroup charged with the scope's wait, from the culprits table.
struct OtherCgroup {
    path: String,
    charged_ns: u64,
    /// Its culprits' comms (a few).
    comms: Vec<String>,
}

/// The OTHER_CGROUPS charged with most: by time where the pair table was
/// read (`Attribution::neighbours`), each with the comms of its culprits;
/// else the culprits grouped by their cgroup where it is not that of the
/// victim they made wait longest (the kernel's same-cgroup test, per
/// culprit; the scope's cgroup when that victim is gone), charged with the
/// waits they ended; idle tasks and kernel threads are no cgroup's. The
/// cgroups are read at the end of the window: a culprit gone by then is
/// not counted.
fn other_cgroups(a: &Attribution, cgroups: &TaskCgroups) -> Vec<OtherCgroup> {
    let by_culprits = culprit_cgroups(a, cgroups);
    let Some(neighbours) = &a.neighbours else {
        let mut by_culprits = by_culprits;
        by_culprits.truncate(OTHER_CGROUPS);
        return by_culprits;
    };
    let mut others: Vec<OtherCgroup> = (neighbours.iter())
        .map(|n| OtherCgroup {
            path: n.path.clone(),
            charged_ns: n.charged_ns,
            comms: (by_culprits.iter())
                .find(|o| o.path == n.path)
                .map_or_else(Vec::new, |o| o.comms.clone()),
        })
        .collect();
    others.truncate(OTHER_CGROUPS);
    others
}

/// The culprits' cgroups (`other_cgroups` without the pair table), all of
/// them, most charged first.
fn culprit_cgroups(a: &Attribution, cgroups: &TaskCgroups) -> Vec<OtherCgroup> {
    let mut groups: BTreeMap<String, (u64, BTreeSet<String>)> = BTreeMap::new();
    for c in &a.tables.culprits {
        let pid = c.task.tgid;
        if c.task.tid == 0 || c.other.tid == 0 || cgroups.is_kernel_thread(pid) {
            continue;
        }
        let victim = cgroups.of(c.other.tgid).or(cgroups.scope.as_deref());
        let (Some(culprit), Some(victim)) = (cgroups.of(pid), victim) else {
            continue;
        };
        if let Some(path) = cgroup_of::differs(culprit, victim) {
            let group = groups.entry(path).or_default();
            group.0 += c.total_ns;
            group.1.insert(task::comm(&c.task));
        }
    }
    let mut others: Vec<OtherCgroup> = groups
        .into_iter()
        .map(|(path, (charged_ns, comms))| OtherCgroup {
            path,
            charged_ns,
            comms: comms.into_iter().take(3).collect(),
        })
        .collect();
    others.sort_by_key(|o| std::cmp::Reverse(o.charged_ns));
    others
}

fn placement(split: &Causes, waited: f64) -> Option<Diagnosis> {
    let (same, migrated) = (&split.placement.same_cpu, &split.placement.migrated);
    if same.count < MIN_WAITS || migrated.count < MIN_WAITS {
        return None;
    }
    let ratio = |m: Option<f64>, s: Option<f64>| Some(m? / s.filter(|&s| s > 0.0)?);
    let p99 = |s: &Summary| s.p99_ns.map(|p| p as f64);
    let by_p99 = ratio(p99(migrated), p99(same))?;
    let by_mean = ratio(migrated.counted().mean_ns(), same.counted().mean_ns());
    let placed = split.placed();
    let share = migrated.counted().share_in(placed);
    if by_p99 < SLOWER || share.time < PLACEMENT_TIME {
        return None;
    }
    let crossed = match (split.placement.cross_llc, split.placement.cross_node) {
        (Some(llc), Some(node)) => format!(
            "; {} of them crossed a last-level cache, {} a NUMA node",
            llc.count, node.count
        ),
        _ => String::new(),
    };
    Some(Diagnosis {
        name: "placement (migrated waits slower)",
        strength: waited * share.time,
        evidence: format!(
            "migrated waits {by_p99:.1}x slower at p99 ({} against {} for waits that ended on the CPU the task last ran on{}): {} waits, {} of the waits and {} of the wait time{crossed}",
            fmt_ns(migrated.p99_ns.unwrap_or(0)),
            fmt_ns(same.p99_ns.unwrap_or(0)),
            by_mean.map_or(String::new(), |m| format!(", {m:.1}x by the mean")),
            migrated.count,
            pct(share.waits),
            pct(share.time)
        ),
        next_step: "the waits that end on another CPU are the slow ones (a wakeup placed away from the task's last CPU, or load balancing): keep the latency-sensitive task on CPUs that share its cache (taskset, cpuset), and look for busy CPUs it is pulled from".into(),
    })
}

/// Steal or IRQ time covering OVERLAP of the measured wait; None where the
/// kernel lacks the accounting (unavailable is not 0).
fn overlap(split: &Causes, waited: f64, name: &str, ns: Option<u64>) -> Option<Diagnosis> {
    let measured = split.overlap.measured;
    let share = split.overlap.share(ns)?;
    if measured.count < MIN_WAITS || share < OVERLAP {
        return None;
    }
    let (cause, step) = match name {
        "steal" => (
            "hypervisor steal",
            "the hypervisor ran something else on this vCPU while the task waited: not the guest's scheduler; ask for dedicated or less overcommitted vCPUs, and watch steal in /proc/stat",
        ),
        _ => (
            "interrupt time",
            "interrupts (hard and soft) took the CPU while the task waited: find them in /proc/interrupts and /proc/softirqs, and move them off the task's CPUs (IRQ affinity, irqbalance) or use threaded interrupts",
        ),
    };
    Some(Diagnosis {
        name: cause,
        strength: waited * share,
        evidence: format!(
            "{name} time covers {} of the measured wait ({} of {}, in the {} waits that began and ended on one CPU)",
            pct(share),
            fmt_ns(ns.unwrap_or(0)),
            fmt_ns(measured.sum_ns),
            measured.count
        ),
        next_step: step.into(),
    })
}

/// The group throttled during THROTTLED of the measured wait: joins the
/// quota throttling cause named from cpu.stat, or names it.
fn throttled(causes: &mut Vec<Diagnosis>, split: &Causes, waited: f64) {
    let measured = split.overlap.measured;
    let Some(share) = split.overlap.share(split.overlap.throttled_ns) else {
        return;
    };
    if measured.count < MIN_WAITS || share <= THROTTLED {
        return;
    }
    let evidence = format!(
        "eBPF: the waiter's cgroup was throttled during {} of the measured wait ({} of {}, in the {} waits that began and ended on one CPU)",
        pct(share),
        fmt_ns(split.overlap.throttled_ns.unwrap_or(0)),
        fmt_ns(measured.sum_ns),
        measured.count
    );
    match causes.iter_mut().find(|c| c.name == "quota throttling") {
        Some(c) => {
            c.evidence = format!("{}; {evidence}", c.evidence);
            c.strength = c.strength.max(waited * share);
        }
        None => causes.push(Diagnosis {
            name: "quota throttling",
            strength: waited * share,
            evidence,
            next_step: "raise the CPU quota of the throttled group (cpu.max, v1: cpu.cfs_quota_us; it may be a parent of the scope's cgroup) above its peak demand, or spread its bursts".into(),
        }),
    }
}

#[cfg(test)]
mod tests;
