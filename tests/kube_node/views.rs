//! The node's other views (tests/kube_node.rs makes the node and its
//! load): the breakdown, its roll-ups, diagnose, victims, and the scopes of
//! slow, record and compare name the pods, containers and unit.

use super::{
    CpuTimes, KubeNode, Procs, SLEEPER, TestCgroup, keyed_root, load, pinned_sh, require_root,
    run_schedlat, workload_cpu,
};

#[test]
fn the_breakdown_names_containers_and_units_and_keeps_the_path() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let (web, batch, unit) = (&node.web, &node.batch, &node.unit);
    let (status, stdout, stderr) = run_schedlat(&["--cgroups", "--json", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let interval: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("one JSON interval");
    let keys = interval["breakdown"]["keys"].as_array().unwrap();
    let key = |cgroup: &str| {
        (keys.iter())
            .find(|k| k["cgroup"] == cgroup)
            .unwrap_or_else(|| panic!("no key of {cgroup}: {keys:?}"))
    };
    let w = key(&web.cgroup);
    assert_eq!(
        w["label"],
        format!("container = shop/web-1/nginx, cgroup = {}", web.cgroup)
    );
    let workload = &w["workload"];
    assert_eq!(
        (
            &workload["is"],
            &workload["name"],
            &workload["namespace"],
            &workload["pod"],
            &workload["container"]
        ),
        (
            &"container".into(),
            &"shop/web-1/nginx".into(),
            &"shop".into(),
            &"web-1".into(),
            &"nginx".into()
        ),
        "{w}"
    );
    assert_eq!(workload["container_id"], web.id.as_str(), "{w}");
    assert_eq!(workload["names_from"], "containerd-bundle", "{w}");
    let b = key(&batch.cgroup);
    assert_eq!(
        b["label"],
        format!(
            "container = jobs/batch-7/cruncher, cgroup = {}",
            batch.cgroup
        )
    );
    assert_eq!(b["workload"]["names_from"], "storage-config", "{b}");
    let u = key(&unit.cgroup);
    assert_eq!(
        u["label"],
        format!("unit = {}, cgroup = {}", node.unit_name, unit.cgroup)
    );
    assert_eq!(u["workload"]["pod"], serde_json::Value::Null, "{u}");

    // The text: runqlat's label line, the owner's name first.
    let (status, stdout, stderr) = run_schedlat(&["--cgroups", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let line = format!("container = shop/web-1/nginx, cgroup = {}", web.cgroup);
    assert!(
        stdout.lines().any(|l| l == line),
        "no `{line}` in:\n{stdout}"
    );
}

#[test]
fn diagnose_names_the_noisy_neighbour_by_its_pod_and_container() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let _load = load(&node);
    let dir = node.web.dir.to_string_lossy().into_owned();
    let (status, stdout, stderr) = run_schedlat(&["diagnose", "--json", "-d", "3", "-c", &dir]);
    assert!(status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("diagnose's JSON");
    let causes = r["causes"].as_array().unwrap();
    let cause = causes
        .iter()
        .find(|c| c["name"] == "noisy neighbour (other cgroups)")
        .unwrap_or_else(|| panic!("no noisy neighbour behind 2 hogs on the sleeper's CPU: {r}"));
    let evidence = cause["evidence"].as_str().unwrap();
    // Among the neighbours named (on a busy machine the root cgroup's
    // tasks may be charged with more than the hogs), by pod and container.
    // By time ("..., by their tasks' time on the CPU inside the waits: ")
    // where the pairs were read, else by the waits they ended.
    let named = evidence
        .split("the other cgroups charged with most")
        .nth(1)
        .and_then(|rest| rest.split_once(": "))
        .map(|(_, named)| named)
        .unwrap_or_else(|| panic!("no neighbour named: {evidence}"));
    assert!(
        named.contains("container jobs/batch-7/cruncher (sh"),
        "{evidence}"
    );
    assert!(
        !named.contains(&node.batch.cgroup),
        "the path, not the name: {evidence}"
    );
    // The next step acts on the first named, by name and, once, by path.
    let step = cause["next_step"].as_str().unwrap();
    if named.starts_with("container jobs/batch-7/cruncher") {
        assert!(
            step.contains("than container jobs/batch-7/cruncher, cap it")
                && step.contains(&node.batch.cgroup),
            "{step}"
        );
    }
}

#[test]
fn the_breakdown_rolls_cgroups_up_per_pod_and_per_unit() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let load = load(&node);
    let web = &node.web;
    // A sidecar in web's pod that no runtime file names: it adds up with
    // nginx under the pod's UID all the same.
    let sidecar_id = format!(
        "{}{}",
        &web.id[..63],
        if web.id.ends_with('5') { '6' } else { '5' }
    );
    let prefix = format!("/schedlat-test-{}-", std::process::id());
    let name = web
        .cgroup
        .strip_prefix(&prefix)
        .unwrap()
        .replace(&web.id, &sidecar_id);
    let sidecar = TestCgroup::new(&keyed_root(), &name);
    let sidecar_sleeper = Procs(vec![pinned_sh(workload_cpu(), SLEEPER)]);
    sidecar.add(sidecar_sleeper.pids()[0]);
    let pod_dir = web.dir.parent().unwrap().to_string_lossy().into_owned();

    // Scoped to the pod: its one row adds up every wait of its two
    // containers, as many as the whole interval counts.
    let (status, stdout, stderr) = run_schedlat(&[
        "-c",
        &pod_dir,
        "--cgroups",
        "--pairs",
        "--by",
        "pod",
        "--top",
        "0",
        "--json",
        "2",
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let interval: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one interval");
    let breakdown = &interval["breakdown"];
    assert_eq!(breakdown["rolled_up_by"], "pod", "{breakdown}");
    let keys = breakdown["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "one pod: {keys:?}");
    let pod = &keys[0];
    assert_eq!(pod["label"], "pod = shop/web-1 (2 cgroups)", "{pod}");
    let mut both = vec![web.cgroup.clone(), sidecar.rel.clone()];
    both.sort();
    assert_eq!(pod["cgroups"], serde_json::json!(both), "{pod}");
    assert_eq!(pod["cgroup"], serde_json::Value::Null, "{pod}");
    let workload = &pod["workload"];
    assert_eq!(
        (
            &workload["is"],
            &workload["name"],
            &workload["pod_uid"],
            &workload["container"]
        ),
        (
            &"pod".into(),
            &"shop/web-1".into(),
            &web.uid.as_str().into(),
            &serde_json::Value::Null
        ),
        "{pod}"
    );
    // The keys and the total are read one after the other: a wait ending
    // between the two reads is in one of them only.
    let (total, rolled) = (
        interval["count"].as_u64().unwrap(),
        pod["count"].as_u64().unwrap(),
    );
    assert!(
        total > 100 && rolled.abs_diff(total) <= total / 50 + 2,
        "the pod's row counts {rolled} waits, the interval {total}: {pod}"
    );

    // The pair table adds up by the pod's UID too: the sidecar's waits
    // are the pod's, under the name nginx's runtime file gave it, never a
    // workload of their own (`pod <uid>`, its name without such a file).
    let rows = interval["pairs"]["rows"].as_array().unwrap();
    let waited: std::collections::BTreeSet<&str> = (rows.iter())
        .map(|r| r["victim"].as_str().unwrap())
        .collect();
    assert_eq!(
        waited,
        std::collections::BTreeSet::from(["shop/web-1"]),
        "the pod's pairs: {rows:?}"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r["holder"].as_str().unwrap().starts_with("pod ")),
        "{rows:?}"
    );

    // The node: one row per pod and per unit, by name, in text too.
    let (status, stdout, stderr) =
        run_schedlat(&["--cgroups", "--by", "unit", "--top", "0", "2", "1"]);
    assert!(status.success(), "{stderr}");
    let unit = format!("unit = {}", node.unit_name);
    assert!(
        stdout.lines().any(|l| l == unit),
        "no `{unit}` in:\n{stdout}"
    );
    drop(load);
}

/// A containerd task bundle of the test's, removed when dropped.
struct Bundle(std::path::PathBuf);

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn slow_record_and_compare_take_a_workload_and_compare_it_across_a_restart() {
    if !require_root() {
        return;
    }
    let root = keyed_root();
    let node = KubeNode::new(&root);
    let load = load(&node);
    let web = &node.web;
    let dir = std::env::temp_dir().join(format!("schedlat-scopes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("before.json"), dir.join("after.json"));

    // slow -c by the pod's UID: every wait it reports is the pod's.
    let out = std::process::Command::new("timeout")
        .args([
            "-s",
            "INT",
            "2",
            super::common::SCHEDLAT,
            "slow",
            "--threshold",
            "1us",
            "--json",
        ])
        .args(["-c", &web.uid])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let waits: Vec<serde_json::Value> = (stdout.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "wait")
        .collect();
    let comms: Vec<&str> = (waits.iter())
        .map(|e| e["victim"]["comm"].as_str().unwrap_or_default())
        .collect();
    assert!(
        !comms.is_empty() && comms.iter().all(|c| *c == "sh" || *c == "sleep"),
        "slow -c {}: {comms:?}\n{}",
        web.uid,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each event names the waiting task's container, as victims' rows do
    // (a `sleep` gone or exiting before its batch was read has none: null;
    // read raw, an exiting task's cgroup v1 line says `/`, which named
    // about one event in ten `/` here before it was told apart).
    let named: Vec<(&str, &str)> = (waits.iter())
        .map(|e| &e["victim"]["workload"])
        .filter(|w| !w.is_null())
        .map(|w| {
            (
                w["is"].as_str().unwrap_or(""),
                w["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        !named.is_empty()
            && named
                .iter()
                .all(|n| *n == ("container", "shop/web-1/nginx")),
        "slow -c {}: the victims' workloads {named:?} of {} waits",
        web.uid,
        waits.len()
    );

    // The text says so of a task that had exited (`(exited)`), never `-`
    // (no cgroup: the idle task's) nor the `/` its v1 lines read then.
    let out = std::process::Command::new("timeout")
        .args([
            "-s",
            "INT",
            "2",
            super::common::SCHEDLAT,
            "slow",
            "--threshold",
            "1us",
        ])
        .args(["-c", &web.uid])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<&str> = (stdout.lines())
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|c| c == "sh" || c == "sleep")
        })
        .collect();
    let (exited, named) = (
        events.iter().filter(|l| l.ends_with("  (exited)")).count(),
        (events.iter())
            .filter(|l| l.ends_with("  container shop/web-1/nginx"))
            .count(),
    );
    assert!(
        named > 0 && exited + named == events.len(),
        "slow -c {}: {named} events named, {exited} exited, of:\n{stdout}",
        web.uid
    );

    // record -c by a prefix of the container's ID, keeping what it is.
    let (status, _, stderr) = run_schedlat(&[
        "record",
        "-o",
        a.to_str().unwrap(),
        "-c",
        &web.id[..12],
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let first = std::fs::read_to_string(&a).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["scope"]["workload"], "container shop/web-1/nginx",
        "{first}"
    );
    assert_eq!(
        first["scope"]["cgroup"],
        web.dir.to_string_lossy().as_ref(),
        "{first}"
    );

    // The container restarted: a new ID, a new cgroup in its pod, the same
    // names in its new task bundle; the sleeper moves there.
    let new_id = format!("c0ffee00{}", &web.id[8..]);
    let bundle = Bundle(
        std::path::Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io").join(&new_id),
    );
    std::fs::create_dir_all(&bundle.0).unwrap();
    let config = serde_json::json!({"ociVersion": "1.1.0", "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.container-name": "nginx",
        "io.kubernetes.cri.sandbox-name": "web-1",
        "io.kubernetes.cri.sandbox-namespace": "shop",
        "io.kubernetes.cri.sandbox-uid": web.uid,
    }});
    std::fs::write(bundle.0.join("config.json"), config.to_string()).unwrap();
    let prefix = format!("/schedlat-test-{}-", std::process::id());
    let name = web
        .cgroup
        .strip_prefix(&prefix)
        .unwrap()
        .replace(&web.id, &new_id);
    let restarted = TestCgroup::new(&root, &name);
    restarted.add(load.pids()[0]);
    let (status, _, stderr) = run_schedlat(&[
        "record",
        "-o",
        b.to_str().unwrap(),
        "-c",
        &new_id[..12],
        "1",
    ]);
    assert!(status.success(), "{stderr}");

    // compare: one container before and after, though its path changed.
    let (status, stdout, stderr) = run_schedlat(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(status.success(), "{stderr}");
    let compared: serde_json::Value = serde_json::from_str(stdout.trim()).expect("compare's JSON");
    assert_eq!(
        compared["scope_differences"],
        serde_json::json!([]),
        "{compared}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows of one victims JSON table whose workload is `name`.
fn rows_named<'a>(table: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    (table.as_array().unwrap().iter())
        .filter(|r| r["workload"]["name"] == name)
        .collect()
}

#[test]
fn victims_name_each_task_by_its_container_and_who_waited_behind_whom() {
    if !require_root() {
        return;
    }
    let node = KubeNode::new(&keyed_root());
    let load = load(&node);
    let sleeper = load.pids()[0];
    let (web, batch) = (&node.web, &node.batch);
    let cpus = CpuTimes::now();
    let (status, stdout, stderr) = run_schedlat(&[
        "victims",
        "--pairs",
        "--by",
        "container",
        "--top",
        "0",
        "--json",
        "2",
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON interval");
    // The sleeper's shell (alive at the end) by its container, the path kept.
    let row = (r["victims"].as_array().unwrap().iter())
        .find(|v| v["pid"] == sleeper)
        .unwrap_or_else(|| panic!("no victim row of the sleeper {sleeper}: {r}"));
    assert_eq!(row["workload"]["name"], "shop/web-1/nginx", "{row}");
    assert_eq!(row["workload"]["is"], "container", "{row}");
    assert_eq!(row["cgroup"], web.cgroup.as_str(), "{row}");
    // The hogs are culprits, named by their container too.
    let hogs = rows_named(&r["culprits"], "jobs/batch-7/cruncher");
    assert!(!hogs.is_empty(), "no culprit of batch: {}", r["culprits"]);
    assert!(
        hogs.iter().all(|h| h["cgroup"] == batch.cgroup.as_str()),
        "{hogs:?}"
    );
    // Who waited behind whom, named at the container level: web behind
    // batch. The sleeper wakes ~200 times a second beside two hogs on its
    // CPU; on a machine busy with other work the root cgroup's tasks hold
    // most of its waits' ends (measured: 4 of 500 behind the hogs with
    // both CPUs 100% busy), so the pair is only asked to be there, named.
    let pairs = &r["pairs"];
    assert_eq!(pairs["by"], "container");
    let behind = (pairs["rows"].as_array().unwrap().iter())
        .find(|p| p["victim"] == "shop/web-1/nginx" && p["holder"] == "jobs/batch-7/cruncher")
        .unwrap_or_else(|| panic!("no pair web <- batch ({}): {pairs}", cpus.busy_since()));
    assert!(behind["sum_ns"].as_u64().unwrap() > 0, "{behind}");

    // The text: a WORKLOAD column, and the table under its heading.
    let (status, stdout, stderr) =
        run_schedlat(&["victims", "--pairs", "--by", "pod", "--top", "0", "2", "1"]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("WORKLOAD"), "{stdout}");
    let line = (stdout.lines())
        .find(|l| l.split_whitespace().nth(1) == Some(&sleeper.to_string()))
        .unwrap_or_else(|| panic!("no row of the sleeper {sleeper}:\n{stdout}"));
    assert!(
        line.ends_with("container shop/web-1/nginx"),
        "{line}\n{stdout}"
    );
    // Both pods wait (behind each other, or behind the busy machine's
    // other tasks): each is named at the pod level.
    let pairs = stdout
        .split("waiting pod <- pod that held the CPU")
        .nth(1)
        .unwrap_or_else(|| panic!("no pod table:\n{stdout}"));
    for pod in ["shop/web-1", "jobs/batch-7"] {
        assert!(
            pairs.lines().any(|l| l.contains(&format!("  {pod} <- "))),
            "{pod} waited behind no one ({}):\n{stdout}",
            cpus.busy_since()
        );
    }
}
