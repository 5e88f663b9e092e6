//! The neighbour-pair table as this kernel counts it (root: loads the
//! programs): every measured wait's time is charged to its pairs or the
//! overflow, a cgroup's charges add up to its breakdown key's wait time,
//! and a sleeper beside another group's hogs on one CPU waits behind that
//! group.

use std::{
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::Duration,
};

use schedlat_common::scope::Breakdown;

use crate::{
    collect::{
        batch::Entries,
        pairs::{Holder, PairCounts, PairIntervals},
        tracer::Tracer,
    },
    kernel::{
        cgroupfs,
        hook::HookChoice,
        modes::{Keyed, Modes},
    },
};

/// Loads `modes` in the tp_btf hook mode for the whole system (the cause
/// split's live tests' loader: None when not root, a failure under CI).
fn load(modes: &Modes) -> Option<Tracer> {
    crate::collect::live::causes::load(HookChoice::Btf, modes)
}

/// A cgroup made for the test in the hierarchy `--cgroups` keys by,
/// removed when dropped (its processes moved back to the root first).
struct Group {
    dir: PathBuf,
    root: PathBuf,
    id: u64,
}

impl Group {
    fn new(name: &str) -> Group {
        let root = cgroupfs::default_hierarchy(&crate::sys::mounts::Mounts::read())
            .expect("a cgroup hierarchy with the cpu controller, or cgroup v2")
            .mount;
        let dir = root.join(format!("schedlat-pairs-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir the test cgroup");
        let id = fs::metadata(&dir).unwrap().ino();
        Group { dir, root, id }
    }

    fn run(&self, cpu: usize, script: &str) -> Child {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", script])
            .stdout(Stdio::null())
            .spawn()
            .expect("taskset (util-linux) runs");
        fs::write(self.dir.join("cgroup.procs"), child.id().to_string())
            .expect("move into the group");
        child
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for _ in 0..100 {
            if let Ok(procs) = fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.lines() {
                    let _ = fs::write(self.root.join("cgroup.procs"), pid);
                }
            }
            if fs::remove_dir(&self.dir).is_ok() || !Path::new(&self.dir).exists() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

fn stop(children: Vec<Child>) {
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The foreign busy share of CPU 0 over the test, for failure messages:
/// a noisy machine can be told from a regression.
fn cpu0_busy(before: &[u64], after: &[u64]) -> String {
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let total: u64 = d.iter().sum();
    let idle = d.get(3).copied().unwrap_or(0) + d.get(4).copied().unwrap_or(0);
    format!(
        "CPU 0 busy {:.0}% of the test",
        100.0 * (total - idle) as f64 / total.max(1) as f64
    )
}

/// The path of the interpreter `python3` runs (its `sys.executable`),
/// which execs no helper of its own.
fn real_python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let path = String::from_utf8(out.stdout).expect("a UTF-8 path");
    assert!(
        out.status.success() && !path.trim().is_empty(),
        "python3 names no interpreter"
    );
    path.trim().to_string()
}

fn cpu0_times() -> Vec<u64> {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .find(|l| l.starts_with("cpu0 "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_sleeper_beside_another_groups_hogs_waits_behind_that_group() {
    let keyed = Keyed {
        by: Breakdown::Cgroup,
        max_keys: 4096,
    };
    let Some(mut tracer) = load(&Modes::histogram(Some(keyed)).with_pairs(4096)) else {
        return;
    };
    let victim = Group::new("victim");
    let hogs = Group::new("hogs");
    let mut intervals = PairIntervals::default();
    intervals.next(&mut tracer, |_| true).unwrap();
    let before = cpu0_times();
    // A sleeper that does not fork: every task of the group is the one
    // that waits. The interpreter is named by its real path: `python3` on
    // PATH may be a shim (pyenv's is a bash script that forks some 40
    // helpers before it execs the interpreter), and those helpers, in the
    // victim's group, would hold its waits at startup.
    let sleeper = format!(
        "exec {} -c 'import time\nwhile True: time.sleep(0.002)'",
        real_python()
    );
    let mut children = vec![victim.run(0, &sleeper)];
    children.extend((0..2).map(|_| hogs.run(0, "while :; do :; done")));
    thread::sleep(Duration::from_secs(3));
    stop(children);
    thread::sleep(Duration::from_millis(100));
    let after = cpu0_times();
    let interval = intervals.next(&mut tracer, |_| true).unwrap();
    let of_victim: Vec<(Holder, PairCounts)> = interval
        .pairs
        .iter()
        .filter(|(p, _)| p.victim == victim.id)
        .map(|(p, c)| (p.holder, *c))
        .collect();
    let mut total = PairCounts::default();
    for (_, c) in &of_victim {
        total.add(*c);
    }
    // The key of the same waits, counted by the same program run.
    let key = tracer
        .read_keyed()
        .unwrap()
        .into_iter()
        .find(|(k, _)| *k == victim.id)
        .map(|(_, s)| s)
        .expect("the victim group has a breakdown key");
    let key_count: u64 = key.buckets.iter().map(|&n| u64::from(n)).sum();
    // Each wait is charged whole to the holders that ran during it (and
    // the unapportioned rest): the times add up exactly; each holder
    // counts the waits it took part in, so every wait is counted at least
    // once and no pair counts more waits than there were.
    assert_eq!(total.sum_ns, key.sum_ns, "pairs {of_victim:?}");
    assert!(
        total.count >= key_count,
        "pairs {of_victim:?}: {key_count} waits"
    );
    assert!(
        of_victim.iter().all(|(_, c)| c.count <= key_count),
        "pairs {of_victim:?}: {key_count} waits"
    );
    let behind = |holder: Holder| {
        of_victim
            .iter()
            .filter(|(h, _)| *h == holder)
            .map(|(_, c)| c.sum_ns)
            .sum::<u64>()
    };
    let behind_hogs = behind(Holder::Cgroup(hogs.id));
    // Tasks from outside the test (other cgroups, the root's) share CPU 0
    // on a busy machine: the hogs' share is of the rest.
    let ours = behind_hogs + behind(Holder::Cgroup(victim.id)) + behind(Holder::Idle);
    assert!(
        behind_hogs * 10 >= ours * 6,
        "the sleeper waited {behind_hogs} ns behind the hogs' group, of {ours} ns behind the test's own tasks and the idle CPU ({} ns in all, the rest behind other cgroups): {of_victim:?}; {}",
        total.sum_ns,
        cpu0_busy(&before, &after)
    );
    assert!(
        interval.overflow.count == 0,
        "overflow {:?}",
        interval.overflow
    );
    // The groups are gone: their pairs leave the kernel's table once
    // their last waits are counted.
    let (victim_id, hogs_id) = (victim.id, hogs.id);
    drop(victim);
    drop(hogs);
    let gone = |id: u64| id == victim_id || id == hogs_id;
    intervals.next(&mut tracer, |id| !gone(id)).unwrap();
    let left = tracer.read_pairs(&mut Entries::default()).unwrap();
    assert!(
        !left.pairs.iter().any(|(p, _)| gone(p.victim)),
        "pairs of removed groups are still in the table"
    );
}

#[test]
fn a_full_table_counts_the_rest_as_overflow() {
    let Some(tracer) = load(&Modes::HISTOGRAM.with_pairs(2)) else {
        return;
    };
    // Four groups waiting: more pairs than the table holds.
    let groups: Vec<Group> = (0..4).map(|i| Group::new(&format!("full{i}"))).collect();
    let work: Vec<_> = groups
        .iter()
        .map(|g| {
            g.run(
                0,
                "i=0; while [ $i -lt 300 ]; do sleep 0.001; i=$((i+1)); done",
            )
        })
        .collect();
    stop_after(work);
    let before = tracer.read_waits().unwrap();
    let reading = tracer.read_pairs(&mut Entries::default()).unwrap();
    let after = tracer.read_waits().unwrap();
    assert_eq!(reading.capacity, 2);
    assert!(reading.pairs.len() <= 2);
    assert!(reading.overflow.count > 0, "no overflow with 2 pairs");
    // Every wait's time is charged, to a pair or to the overflow.
    let charged =
        reading.pairs.iter().map(|(_, c)| c.sum_ns).sum::<u64>() + reading.overflow.sum_ns;
    // The total and the table are read one after the other, while the
    // rest of the machine waits too.
    assert!(
        before.sum_ns <= charged && charged <= after.sum_ns,
        "{charged} ns in pairs and overflow, against {}..{} ns of waits",
        before.sum_ns,
        after.sum_ns
    );
    assert!(
        reading.overflow.count <= after.count(),
        "{} waits in overflow of {} waits",
        reading.overflow.count,
        after.count()
    );
}

fn stop_after(children: Vec<Child>) {
    for mut c in children {
        let _ = c.wait();
    }
}
