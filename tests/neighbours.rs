//! Root integration tests of the families a fleet's alerts read besides
//! the histograms: the waits per CPU (`schedlat_cpu_runqueue_*`, always),
//! and with `serve --pairs` who held the CPU, by name
//! (`schedlat_neighbour_*`). Both checked against the same scrape's other
//! families and by promtool.

use std::{thread, time::Duration};

use common::{
    cgroup::{HOG, Procs, SLEEPER, TestCgroup, other_cpu, pinned_sh, v2_root},
    cpu::CpuTimes,
    exposition::{promtool_check, sample, samples},
    require_root,
    serve::Server,
    workload::{self, workload_cpu},
};

use crate::common;

const WAITS: &str = "schedlat_runqueue_latency_seconds";
const CPU_WAITS: &str = "schedlat_cpu_runqueue_waits_total";
const CPU_SECONDS: &str = "schedlat_cpu_runqueue_wait_seconds_total";
const PAIR_WAITS: &str = "schedlat_neighbour_waits_total";
const PAIR_SECONDS: &str = "schedlat_neighbour_wait_seconds_total";
const CGROUP_BY_CAUSE: &str = "schedlat_cgroup_runqueue_wait_by_cause_seconds_total";

/// The per-CPU counters are the CPUs the histogram sums, from the same
/// read: their waits add up to its count exactly, their time to its sum;
/// a ping-pong pinned to one CPU ends its waits there.
#[test]
fn per_cpu_counters_add_up_to_the_histogram() {
    if !require_root() {
        return;
    }
    let server = Server::start(&[]);
    let cpu = workload_cpu();
    workload::ping_pong(cpu, 2_000);
    let body = server.scrape_text();
    let count = sample(&body, &format!("{WAITS}_count")).unwrap();
    let sum = sample(&body, &format!("{WAITS}_sum")).unwrap();
    let per_cpu = samples(&body, CPU_WAITS);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(per_cpu.len() >= cpus, "{per_cpu:?}");
    assert_eq!(per_cpu.iter().map(|(_, v)| v).sum::<f64>(), count, "{body}");
    let seconds: f64 = samples(&body, CPU_SECONDS).iter().map(|(_, v)| v).sum();
    assert!(
        (seconds - sum).abs() <= 1e-6 * sum.max(1.0),
        "{seconds} s against {sum} s"
    );
    let on = |cpu: usize| {
        (per_cpu.iter())
            .find(|(l, _)| *l == format!("cpu=\"{cpu}\""))
            .map_or(0.0, |(_, v)| *v)
    };
    assert!(
        on(cpu) >= 2_000.0,
        "the ping-pong's 2,000 waits ended on CPU {cpu}: {per_cpu:?}"
    );
    promtool_check(&body);
}

/// A sleeper's cgroup beside another cgroup's CPU hog on one CPU: its waits
/// are named behind the hog's cgroup, never behind itself or an idle CPU
/// (those are no neighbour's), the pair's time is within the victim's
/// wait time, counters only grow, and the exposition passes promtool.
#[test]
fn pairs_name_the_cgroup_that_held_the_cpu() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let (victim, hogs, alone) = (
        TestCgroup::new(&root, "pairs-victim"),
        TestCgroup::new(&root, "pairs-hogs"),
        TestCgroup::new(&root, "pairs-alone"),
    );
    let server = Server::start(&["--cgroups", "--pairs", "-c", &root.to_string_lossy()]);
    let cpu = workload_cpu();
    let times = CpuTimes::now();
    let procs = Procs(vec![
        pinned_sh(cpu, SLEEPER),
        pinned_sh(cpu, HOG),
        pinned_sh(other_cpu(), SLEEPER),
    ]);
    victim.add(procs.0[0].id());
    hogs.add(procs.0[1].id());
    alone.add(procs.0[2].id());
    thread::sleep(Duration::from_secs(2));
    let first = server.scrape_text();
    thread::sleep(Duration::from_secs(1));
    let body = server.scrape_text();
    drop(procs);

    let of = |text: &str, name: &str, victim: &str, holder: &str| {
        let labels = format!("cgroup=\"{victim}\",holder_cgroup=\"{holder}\"");
        (samples(text, name).into_iter())
            .find(|(l, _)| l.starts_with(&labels))
            .map(|(_, v)| v)
    };
    let behind_hogs = of(&body, PAIR_SECONDS, &victim.rel, &hogs.rel)
        .unwrap_or_else(|| panic!("no pair {} -> {}: {body}", victim.rel, hogs.rel));
    let waits_behind_hogs = of(&body, PAIR_WAITS, &victim.rel, &hogs.rel).unwrap();
    assert!(
        waits_behind_hogs >= 50.0,
        "{waits_behind_hogs} waits behind the hogs"
    );
    // Of the victim's neighbours among this test's cgroups, the hogs' is
    // the largest. Not of all: on a busy machine other tasks (in the root
    // cgroup, and kernel threads) share the CPU too; the message says how
    // much (the victim's pairs with other holders, and the CPUs' busy share).
    let victims_pairs: Vec<(String, f64)> = (samples(&body, PAIR_SECONDS).into_iter())
        .filter(|(l, _)| l.starts_with(&format!("cgroup=\"{}\",", victim.rel)))
        .collect();
    let ours = |l: &str| {
        [&victim.rel, &hogs.rel, &alone.rel]
            .iter()
            .any(|g| l.contains(&format!("holder_cgroup=\"{g}\"")))
    };
    let largest = (victims_pairs.iter())
        .filter(|(l, _)| ours(l))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let busy = times.busy_since();
    assert!(
        largest
            .0
            .contains(&format!("holder_cgroup=\"{}\"", hogs.rel)),
        "the victim's largest neighbour among the test's cgroups is not the hogs': {victims_pairs:?} ({busy})"
    );
    // Never itself, never the idle CPU (no neighbour's waits).
    for (labels, _) in samples(&body, PAIR_WAITS) {
        if labels.contains("__overflow__") {
            continue;
        }
        let (v, h) = labels.split_once(",holder_").unwrap();
        assert_ne!(
            v.trim_start_matches("cgroup="),
            h.trim_start_matches("cgroup="),
            "{labels}"
        );
    }
    // The pair's time is part of the victim's wait time (its held_by split
    // adds up to all of it), read a moment apart.
    let victim_total: f64 = (samples(&body, CGROUP_BY_CAUSE).into_iter())
        .filter(|(l, _)| {
            l.starts_with(&format!("cgroup=\"{}\",", victim.rel)) && l.contains("split=\"held_by\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert!(
        behind_hogs <= victim_total * 1.05 + 0.01,
        "{behind_hogs} s behind the hogs, of {victim_total} s waited"
    );
    // Cumulative: nothing went down between the scrapes.
    for (labels, before) in samples(&first, PAIR_WAITS) {
        let after = (samples(&body, PAIR_WAITS).into_iter())
            .find(|(l, _)| *l == labels)
            .map(|(_, v)| v);
        if let Some(after) = after {
            assert!(after >= before, "{labels}: {before} -> {after}");
        }
    }
    assert_eq!(sample(&body, "schedlat_unpaired_waits_total"), Some(0.0));
    promtool_check(&body);
}
