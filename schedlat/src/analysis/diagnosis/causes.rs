//! Causes named from the split of the window's waits (docs/causes.md):
//! who held the CPU when they ended (the scope's own cgroup, or others:
//! the noisy neighbour, named), where they ended (migrated waits much
//! slower than the rest), and what else took the CPU during them (steal,
//! IRQ time, the group's bandwidth throttling). Each is named only when
//! its numbers pass a threshold below, stated with its reason here and in
//! docs/diagnose.md; the evidence gives the numbers.

use std::fmt::Write as _;

use super::{
    holders::Holders,
    named::Diagnosis,
    priority::Attribution,
    waiting::{EbpfWaiting, NEGLIGIBLE, scope_waited},
};
use crate::{
    analysis::{
        causes::{Causes, Counted, Summary},
        fmt_ns,
        holder::NamedHolder,
    },
    sys::{
        cgroup_of::{TaskCgroups, Which},
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
    // The split's "other cgroup" is the kernel's: another css_set than the
    // waiter's. A pod's own other containers are that too, and its waits
    // behind them are its own: they move to the inside, by their share of
    // the culprits in other groups (time charged by the victims tables).
    let holders = a.map(|a| Holders::of(a, e.cgroups));
    let own = holders.as_ref().map_or(0.0, Holders::own_share);
    let other = split.held_by.other_cgroup;
    let moved = scaled(other, own);
    let classes = Classes {
        same: plus(split.held_by.same_cgroup, moved),
        other: minus(other, moved),
        own: moved,
    };
    let found = [
        same_cgroup(split, &classes, waited, a, e.cgroups, holders.as_ref()),
        other_cgroup(split, &classes, waited, a, e.cgroups, holders.as_ref()),
        placement(split, waited),
        overlap(split, waited, "steal", split.overlap.steal_ns),
        overlap(split, waited, "IRQ", split.overlap.irq_ns),
    ];
    causes.extend(found.into_iter().flatten());
    throttled(causes, split, waited);
    causes.sort_by(|a, b| b.strength.total_cmp(&a.strength));
}

/// The held-by classes as the diagnosis counts them: the split's same
/// and other cgroup, with the waits behind the scope's own tasks in other
/// groups (`own`) moved from the second to the first.
struct Classes {
    same: Counted,
    other: Counted,
    own: Counted,
}

/// `share` of a class's waits and time.
fn scaled(c: Counted, share: f64) -> Counted {
    let of = |n: u64| (n as f64 * share.clamp(0.0, 1.0)).round() as u64;
    Counted {
        count: of(c.count),
        sum_ns: of(c.sum_ns),
    }
}

fn plus(a: Counted, b: Counted) -> Counted {
    Counted {
        count: a.count + b.count,
        sum_ns: a.sum_ns + b.sum_ns,
    }
}

fn minus(a: Counted, b: Counted) -> Counted {
    Counted {
        count: a.count.saturating_sub(b.count),
        sum_ns: a.sum_ns.saturating_sub(b.sum_ns),
    }
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
    classes: &Classes,
    waited: f64,
    a: Option<&Attribution>,
    cgroups: &TaskCgroups,
    holders: Option<&Holders>,
) -> Option<Diagnosis> {
    let class = classes.same;
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
            "{}: the group's tasks wait for each other{}; {}",
            held_share(split, class, &h, &whose),
            own_note(classes, holders),
            began(split)
        ),
        next_step: next_step.into(),
        holders: Vec::new(),
    })
}

/// "; N waits of it behind the scope's own tasks in groups below it" where
/// some of the split's other-cgroup waits were the scope's own.
fn own_note(classes: &Classes, holders: Option<&Holders>) -> String {
    match holders {
        Some(h) if classes.own.count > 0 => format!(
            " (of it {} in about {} waits behind the scope's own tasks in other groups below it, as a pod's other containers: {})",
            fmt_ns(classes.own.sum_ns),
            classes.own.count,
            h.own.names()
        ),
        _ => String::new(),
    }
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
    classes: &Classes,
    waited: f64,
    a: Option<&Attribution>,
    cgroups: &TaskCgroups,
    holders: Option<&Holders>,
) -> Option<Diagnosis> {
    let class = classes.other;
    let h = dominant(split, class)?;
    // By time, where the pairs were read: other cgroups (not the scope's
    // own groups) must also have held the CPU for most of the waits, not
    // merely ended them (a brief sleeper's runs end most of a busy loop's
    // waits, which the loop spent behind its own group's tasks).
    if let (Some(a), Some(holders)) = (a, holders)
        && holders.by_time
    {
        let others = holders.total_ns() - holders.own.ns;
        if others as f64 <= DOMINANT * a.tables.waited_ns as f64 {
            return None;
        }
    }
    let (who, step, named) = match (a, holders) {
        (Some(a), Some(holders)) if holders.total_ns() > 0 => {
            neighbours(holders, cgroups, a.tables.waited_ns.max(1))
        }
        _ => (
            "the culprits' cgroups could not be read (gone by the end of the window, or no victims tables)".into(),
            "give the scope's cgroup more cpu.weight than its neighbours, cap them (cpu.max, where their parent enables the cpu controller), or keep them on different CPUs (cpuset)".into(),
            Vec::new(),
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
        holders: named,
    })
}

/// Other cgroups named in the evidence, most charged first.
const OTHER_CGROUPS: usize = 3;

/// A holder is named in the evidence when charged with at least this
/// share of the scope's measured wait: "0%" names nobody.
const NAMED: f64 = 0.005;

/// Who the neighbours were and what to do about them: the other cgroups
/// charged with most, the root cgroup's own tasks and the exited ones
/// named as such; the next step acts on the one charged with most, and
/// limits a group only where a limit can be set (never the root, nor a
/// group without the cpu controller). With the groups named, most
/// charged first.
fn neighbours(
    h: &Holders,
    cgroups: &TaskCgroups,
    waited_ns: u64,
) -> (String, String, Vec<NamedHolder>) {
    let share = |ns: u64| ns as f64 / waited_ns as f64;
    let mut named: Vec<(u64, String, NamedHolder)> = (h.others.iter())
        .take(OTHER_CGROUPS)
        .filter(|o| share(o.charge.ns) >= NAMED)
        .map(|o| {
            let owner = cgroups.owner(&o.group.name);
            let said = format!(
                "{owner} ({}: {}, {} of the scope's measured wait)",
                o.charge.names(),
                fmt_ns(o.charge.ns),
                pct(share(o.charge.ns))
            );
            let group = NamedHolder::Cgroup {
                path: o.group.path.clone(),
                hierarchy: o.group.hierarchy,
                name: owner,
            };
            (o.charge.ns, said, group)
        })
        .collect();
    if share(h.root.ns) >= NAMED {
        let said = format!(
            "the root cgroup's own tasks, which no service manager placed in a group ({}: {}, {})",
            h.root.names(),
            fmt_ns(h.root.ns),
            pct(share(h.root.ns))
        );
        // In the hierarchy the pairs key by, where they charged it; the
        // root's own tasks are in the root of every hierarchy.
        let root = NamedHolder::Cgroup {
            path: "/".into(),
            hierarchy: cgroups.keyed_hierarchy(),
            name: "the root cgroup's own tasks".into(),
        };
        named.push((h.root.ns, said, root));
    }
    named.sort_by_key(|(ns, ..)| std::cmp::Reverse(*ns));
    let (said, named): (Vec<String>, Vec<NamedHolder>) = named
        .into_iter()
        .map(|(_, said, holder)| (said, holder))
        .unzip();
    let mut who = if said.is_empty() {
        "no other cgroup was charged with a share of it".to_string()
    } else {
        format!(
            "the other cgroups charged with most{}: {}",
            match h.by_time {
                true => ", by their tasks' time on the CPU inside the waits",
                false => "",
            },
            said.join(", ")
        )
    };
    let exited = h.exited.ns as f64 / h.total_ns().max(1) as f64;
    if exited > 0.5 {
        who = format!(
            "most of it was charged to tasks that have exited ({} of {}: {}; their cgroups can no longer be read); {who}",
            fmt_ns(h.exited.ns),
            fmt_ns(h.total_ns()),
            h.exited.names()
        );
    } else if share(h.exited.ns) >= NAMED {
        who = format!(
            "{who}; tasks that have exited: {} ({})",
            fmt_ns(h.exited.ns),
            h.exited.names()
        );
    }
    let top = h.others.first();
    // The scope's own weight is a remedy only where its group has one.
    let weigh = |than: &str| {
        if cgroups.scope_has_cpu() {
            format!("give the scope's cgroup more cpu.weight (v1: cpu.shares) than {than}, ")
        } else {
            String::new()
        }
    };
    let mut step = match top {
        _ if h.root.ns > top.map_or(0, |o| o.charge.ns) => ROOT_STEP.to_string(),
        Some(o) if cgroups.can_limit(&o.group) => match cgroups.owners.get(&o.group.name) {
            Some(owner) => {
                // "than X, cap it": the owner's name once, its path where
                // the cap is set.
                let weigh = weigh(owner);
                let it = if weigh.is_empty() {
                    owner.as_str()
                } else {
                    "it"
                };
                format!(
                    "{weigh}cap {it} (cpu.max, v1: cpu.cfs_quota_us, of cgroup {}), or keep them on different CPUs (cpuset)",
                    o.group.name
                )
            }
            None => format!(
                "{}cap {} (cpu.max, v1: cpu.cfs_quota_us), or keep them on different CPUs (cpuset)",
                weigh(&o.group.name),
                o.group.name
            ),
        },
        Some(o) => format!(
            "{}keep them on different CPUs (cpuset), or limit the nearest ancestor of {} that has a CPU limit: it has none of its own ({})",
            weigh("the neighbours' group"),
            cgroups.owner(&o.group.name),
            match o.group.hierarchy {
                Which::V2 =>
                    "its parent does not enable the cpu controller in cgroup.subtree_control",
                _ => "it is in a hierarchy without the cpu controller",
            }
        ),
        None => format!(
            "{}keep the neighbours on different CPUs (cpuset)",
            weigh("theirs")
        ),
    };
    if !cgroups.scope_has_cpu() {
        step.push_str("; the scope's own cgroup has no cpu controller (no cpu.weight of its own): to weigh it against them, place it in a group that has one");
    }
    if let Some(u) = h.share.first().filter(|u| share(u.charged_ns) >= NAMED) {
        let owner = cgroups.owner(&u.path);
        let _ = write!(
            who,
            "; the scope's wakeups lost above their own group: {owner} had used {}'s share of the CPU ({} of the time just before those waits, {} of the scope's measured wait), so {} held it",
            u.group,
            fmt_ns(u.charged_ns),
            pct(share(u.charged_ns)),
            match h.others.first() {
                Some(o) if o.charge.ns >= h.root.ns => cgroups.owner(&o.group.name),
                _ => "the root cgroup's own tasks".to_string(),
            }
        );
        if share(u.charged_ns) >= SHARE_STEP {
            step = format!(
                "keep {owner} off the scope's CPUs (cpuset of cgroup {}, or its tasks' affinity): its runs used {}'s share of the CPU, and every run of it puts that group behind again, so a cap (cpu.max) helps only as far as it keeps it nearly idle there, and a lower weight inside the group not at all; or {step}",
                u.path, u.group
            );
        }
    }
    (who, step, named)
}

/// The part of the scope's measured wait a cgroup that used the share of
/// the group its wakeups lost with must be charged with for the next
/// step to act on it first. Why the step is placement, not a cap or a
/// weight: measured on a kubelet-shaped node (a 1 ms sleeper beside
/// another pod's two loops under one parent group and a loop in the root
/// cgroup, one CPU, 6.18), the sleeper's p99 stayed at 5 ms with the
/// other pod capped at 10% of a CPU (8 ms at 10% in 10 ms periods) or its
/// group's weight at 2, and came back to 16-31 us with the pod on
/// another CPU, capped at 1%, or the root loop in a group of weight 2.
/// Why a tenth (the part at which the pairs' roles sentence names it
/// too): the charge is the part of the wait the kernel saw lost at that
/// group's queue times the user's part of the window before those waits,
/// and the first factor is the machine's timing, not the workload's: the
/// same case (same wait, same p99) was charged 0.70 of the wait here and
/// 0.25-0.27 on another machine of the same kind, where a third of the
/// wait was seen lost at that queue instead of seven eighths.
const SHARE_STEP: f64 = 0.1;

/// What to do about the root cgroup's own tasks: they are in no group, so
/// there is no group to cap (the root has no cpu.max).
const ROOT_STEP: &str = "the root cgroup's own tasks are in no group, so no group limits them (the root has no cpu.max): give them one (a systemd unit or slice, e.g. `systemd-run --scope -p CPUWeight=20 CMD`, or a cgroup with cpu.weight), renice them (nice 19), or keep them on other CPUs (taskset, cpuset)";

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
        holders: Vec::new(),
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
        holders: Vec::new(),
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
            holders: Vec::new(),
        }),
    }
}

#[cfg(test)]
mod tests;
