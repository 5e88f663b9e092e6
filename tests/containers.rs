//! Workloads named as their owners know them, on the real kernel (root):
//! cgroups that live a fraction of a second keep their names, named by
//! the kernel as they are made (the cgroup_mkdir program), in the cgroup
//! v1 cpu hierarchy and in cgroup v2.

mod common;

use std::{collections::BTreeSet, path::Path};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{TestCgroup, churn, v1_cpu_root, v2_root},
    parse_json_lines, require_root,
};
use serde_json::Value;

/// The breakdown's key labels of a `--cgroups --json` run's intervals.
fn labels(intervals: &[Value]) -> Vec<String> {
    intervals
        .iter()
        .flat_map(|i| {
            i["breakdown"]["keys"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|k| k["label"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `--cgroups` (plus `extra`) while `work` runs; every label of a
/// cgroup under `prefix` must be its path, and every group made must be
/// among them (each waited at least once).
fn every_short_lived_group_is_named(
    extra: &[&str],
    (root, parent): (&Path, &str),
    count: usize,
    parallel: usize,
    life: f64,
) {
    let parent = TestCgroup::new(root, parent);
    let mut args = vec![
        "--cgroups",
        "--max-keys",
        "16384",
        "--top",
        "100000",
        "--json",
    ];
    args.extend(extra);
    args.push("1");
    let tracer = TracerProcess::start(SCHEDLAT, &args);
    let made = churn(&parent, root, count, parallel, life);
    // Two more intervals: the last groups' waits are shown.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "schedlat exited with {status}");
    let labels = labels(&parse_json_lines(&lines));
    let unnamed: Vec<&String> = labels
        .iter()
        .filter(|l| l.contains("(removed, id"))
        .collect();
    let ours: BTreeSet<&str> = labels
        .iter()
        .filter_map(|l| l.strip_prefix("cgroup = "))
        .map(|l| l.trim_end_matches(" (removed)"))
        .filter(|p| p.starts_with(&parent.rel))
        .collect();
    let missing: Vec<&String> = made.iter().filter(|p| !ours.contains(p.as_str())).collect();
    assert!(
        unnamed.is_empty(),
        "{} of {} keys unnamed, e.g. {:?}",
        unnamed.len(),
        labels.len(),
        &unnamed[..unnamed.len().min(3)]
    );
    assert!(
        missing.is_empty(),
        "{} of {count} groups not among the keys, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(3)]
    );
}

/// The previous round's case: 30 groups living 0.2 s each, in the
/// hierarchy `--cgroups` keys by (the cpu controller's: v1 on a hybrid
/// host, else v2). Before the kernel named them at creation, most were
/// `(removed, id N)`.
#[test]
fn thirty_groups_living_a_fifth_of_a_second_keep_their_names() {
    if !require_root() {
        return;
    }
    let root = v1_cpu_root().unwrap_or_else(v2_root);
    every_short_lived_group_is_named(&[], (&root, "churn"), 30, 1, 0.2);
}

/// A churn of 2,000 groups living about 10 ms each, four at a time.
#[test]
fn a_churn_of_thousands_of_groups_keeps_every_name() {
    if !require_root() {
        return;
    }
    let root = v1_cpu_root().unwrap_or_else(v2_root);
    every_short_lived_group_is_named(&[], (&root, "churn"), 2000, 4, 0.01);
}

/// The same in cgroup v2 (hierarchy 0), scoped there by `-c`.
#[test]
fn short_lived_groups_are_named_in_cgroup_v2_too() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let scope = TestCgroup::new(&root, "v2scope");
    // The churn's parent is made under the scope, so -c sees its groups.
    let c = scope.path();
    every_short_lived_group_is_named(&["-c", &c], (&root, "v2scope/churn"), 300, 2, 0.05);
}
