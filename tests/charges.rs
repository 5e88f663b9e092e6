//! Root integration tests of the neighbour pairs' charges (`--pairs`): a
//! wait is charged to the cgroups whose tasks held its CPU during it, each
//! by its time on the CPU inside the wait, and what the kernel's record of
//! the CPU's recent runs does not reach is counted as `(unapportioned)`.
//!
//! Each case runs `schedlat --cgroups --pairs -c PARENT --json` over one
//! interval. In the flat cases every task of the case is in a cgroup of
//! its own under a parent that does not give its children the cpu
//! controller (cgroup v2; on a hybrid host v2 has none): the pairs tell
//! the tasks apart while the CPU scheduler sees one flat run queue of
//! them. The kubelet-shaped case has the groups every Kubernetes node
//! has, and checks the second role: who had used the share of the group
//! a wakeup lost with.

use std::{
    collections::HashMap,
    fs,
    path::Path,
    process::{Command, Stdio},
    thread,
    time::Duration,
};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{Procs, TestCgroup, niced_loop, other_cpu, python_sleeper, set_frozen, v2_root},
    cpu::CpuTimes,
    kube_node::{KubeNode, keyed_root},
    parse_json_lines,
    perf::{SchedTrace, ran_during_waits},
    require_root,
    serve::Server,
    workload::workload_cpu,
};
use serde_json::Value;

use crate::common;

/// The interval each case is measured over.
const SECONDS: u64 = 5;

/// The time a task has run on a CPU, from /proc/PID/schedstat's first
/// field (ns).
fn ran_ns(pid: u32) -> u64 {
    let text = fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("/proc/{pid}/schedstat: {text:?}"))
}

/// One interval of `schedlat --cgroups --pairs -c parent --json`, `during`
/// called once it is attached (its result returned beside the interval's
/// object) and again when the interval is in. The parent's tasks are
/// frozen while schedlat starts and ends its interval: the pairs and the
/// keys are read one after the other, and a wait that ended between the
/// two reads (a stall of the machine there) would be in one and not in
/// the other (CI's machine once: 5 ms of the flat sleeper's 300, the
/// pairs named between the reads then). A v1 hierarchy (the kubelet
/// case's, on a host whose cpu controller is on v1) has no freezer of its
/// own: its case checks parts with room for such a wait.
fn one_interval<T>(parent: &str, mut during: impl FnMut() -> T) -> (Value, T, T) {
    let path = parent.to_string();
    let args = [
        "--cgroups",
        "--pairs",
        "--top",
        "0",
        "-c",
        &path,
        "--json",
        "99",
        "1",
    ];
    let dir = Path::new(parent);
    let freeze = |frozen| {
        if dir.join("cgroup.freeze").exists() {
            set_frozen(dir, frozen);
        }
    };
    freeze(true);
    let tracer = TracerProcess::start(SCHEDLAT, &args);
    freeze(false);
    let first = during();
    thread::sleep(Duration::from_secs(SECONDS));
    freeze(true);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    let last = during();
    freeze(false);
    assert!(status.success(), "schedlat {args:?}: {status}");
    let mut objects = parse_json_lines(&lines);
    assert_eq!(objects.len(), 1, "{lines:?}");
    (objects.remove(0), first, last)
}

/// The interval's pairs of `victim` (a cgroup's path under the hierarchy's
/// root): holder -> (waits, charged ns).
fn charges_of(interval: &Value, victim: &str) -> HashMap<String, (u64, u64)> {
    let rows = interval["pairs"]["rows"].as_array().expect("pairs rows");
    (rows.iter())
        .filter(|r| r["victim"] == victim)
        .map(|r| {
            let holder = r["holder"].as_str().unwrap().to_string();
            let count = r["count"].as_u64().unwrap();
            (holder, (count, r["sum_ns"].as_u64().unwrap()))
        })
        .collect()
}

/// The interval's wait time of `cgroup`, from its breakdown key.
fn waited_ns(interval: &Value, cgroup: &str) -> u64 {
    let keys = interval["breakdown"]["keys"].as_array().expect("keys");
    (keys.iter())
        .find(|k| k["cgroup"] == cgroup || k["key"] == cgroup)
        .and_then(|k| k["sum_ns"].as_u64())
        .unwrap_or_else(|| panic!("no key {cgroup}: {keys:?}"))
}

/// How the kernel decided `cgroup`'s waits, for a failure message: the
/// rules and the pass-overs with any time, in ms.
fn decided_how(interval: &Value, cgroup: &str) -> String {
    let keys = interval["breakdown"]["keys"].as_array().expect("keys");
    let Some(split) = (keys.iter())
        .find(|k| k["cgroup"] == cgroup)
        .map(|k| &k["decision"])
    else {
        return "no decision split".into();
    };
    let part = |name: &str| -> String {
        let rows = split[name].as_object().into_iter().flatten();
        (rows.filter_map(|(class, c)| Some((class, c["sum_ns"].as_u64()?))))
            .filter(|(_, ns)| *ns > 0)
            .map(|(class, ns)| format!("{class} {:.0} ms", ns as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "its rules: {}; its pass-overs: {}",
        part("decisions"),
        part("pass_overs")
    )
}

/// The parent of a case: a v2 cgroup that does not enable cpu for its
/// children, so its tasks are one group of the CPU scheduler.
fn parent(name: &str) -> TestCgroup {
    let parent = TestCgroup::new(&v2_root(), name);
    let control = fs::read_to_string(format!("{}/cgroup.subtree_control", parent.path()));
    assert!(
        !control.unwrap_or_default().contains("cpu "),
        "the parent gives its children the cpu controller"
    );
    parent
}

/// A flat run queue: a 1 ms sleeper beside three busy loops at nice 0, 3
/// and 6 (weights 1024, 526, 272), all on one CPU, each in a cgroup of
/// its own but one group of the CPU scheduler. The sleeper's charges add
/// up to its measured wait, and split among the loops as the loops' run
/// time inside its waits does, which `perf record` of every switch and
/// wakeup over the same run rebuilds (over the runs the kernel keeps). Each loop's share of the loops' run
/// time over the run (/proc/PID/schedstat) is printed beside: the waits
/// do not sample the loops' turns evenly (measured here: the nice 6 loop
/// ran 0.15 of the loops' time and held 0.25 of the sleeper's waits, by
/// schedlat and by perf alike), so it is no measure of the charge. The
/// time perf finds beyond the kernel's reach is the unapportioned time
/// (measured: 65,536,938 ns by perf, 65,527,460 by schedlat, under a
/// load of 12 on 2 CPUs).
#[test]
fn a_flat_queue_charges_each_loop_by_its_run_time_in_the_waits() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let parent = parent("flat");
    let nices = [0, 3, 6];
    let groups: Vec<TestCgroup> = std::iter::once("flat/sleeper".to_string())
        .chain(nices.iter().map(|n| format!("flat/nice{n}")))
        .map(|name| TestCgroup::new(&v2_root(), &name))
        .collect();
    let mut children = vec![python_sleeper(cpu)];
    children.extend(nices.iter().map(|&n| niced_loop(cpu, n)));
    let procs = Procs(children);
    for (group, pid) in groups.iter().zip(procs.pids()) {
        group.add(pid);
    }
    thread::sleep(Duration::from_millis(300));
    let times = CpuTimes::now();
    let loop_pids = procs.pids()[1..].to_vec();
    let ran = || loop_pids.iter().map(|&p| ran_ns(p)).collect::<Vec<u64>>();
    let trace = SchedTrace::start(&std::env::temp_dir());
    let (interval, before, after) = one_interval(&parent.path(), ran);
    let events = trace.stop();
    let busy = times.busy_since();
    let sleeper_pid = procs.pids()[0];
    drop(procs);

    let sleeper_rel = &groups[0].rel;
    let charges = charges_of(&interval, sleeper_rel);
    let waited = waited_ns(&interval, sleeper_rel);
    let charged: u64 = charges.values().map(|c| c.1).sum();
    let unapportioned = charges.get("(unapportioned)").map_or(0, |c| c.1);
    eprintln!(
        "the sleeper waited {waited} ns; charged {charged} ns, {unapportioned} ns unapportioned: {charges:?}"
    );
    // The charges tile each wait: they add up to it to the nanosecond
    // (the cases' tasks are frozen while the interval is read).
    assert_eq!(charged, waited, "charged of waited: {charges:?}");
    let loop_charges: Vec<u64> = (groups[1..].iter())
        .map(|g| charges.get(&g.rel).map_or(0, |c| c.1))
        .collect();
    // The kernel's reach: the run that ends a wait and the 32 before it.
    let (in_waits, beyond) = ran_during_waits(&events, sleeper_pid, cpu, 33);
    eprintln!("perf: {beyond} ns of the sleeper's waits beyond 33 runs");
    let traced: Vec<u64> = (loop_pids.iter())
        .map(|p| in_waits.get(p).copied().unwrap_or(0))
        .collect();
    let loop_runs: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let share = |v: &[u64], i: usize| v[i] as f64 / v.iter().sum::<u64>().max(1) as f64;
    assert!(
        loop_charges.iter().all(|&c| c > 0) && traced.iter().all(|&t| t > 0),
        "a loop held none of the sleeper's waits: charged {loop_charges:?}, traced {traced:?} ({busy})"
    );
    for (i, nice) in nices.iter().enumerate() {
        let (charge, seen, run) = (
            share(&loop_charges, i),
            share(&traced, i),
            share(&loop_runs, i),
        );
        eprintln!(
            "nice {nice}: {charge:.3} of the loops' charges, {seen:.3} of their time in the sleeper's waits traced by perf, {run:.3} of their run time"
        );
        // perf's run begins before schedlat's interval and ends after it:
        // shares, not sums, compare.
        assert!(
            (charge - seen).abs() <= 0.05,
            "the nice {nice} loop took {charge:.3} of the loops' charges and ran {seen:.3} of their time inside the sleeper's waits by perf (charges {loop_charges:?} ns, perf {traced:?} ns; {busy})"
        );
    }
    // On a quiet machine a 1 ms sleeper's waits span a few runs; a busy
    // one's (other tasks on the CPU) may reach past the 32 the kernel
    // keeps: that part is unapportioned, and the message says how busy.
    assert!(
        unapportioned * 20 <= waited,
        "{unapportioned} ns of {waited} ns unapportioned: the record of recent runs did not reach back ({busy})"
    );
}

/// The inverse case: two busy loops in one cgroup and a brief
/// sleeper in another, on one CPU. The loops wait behind each other; the
/// sleeper runs a few microseconds a millisecond, and its runs end most
/// of the loops' waits (which the last holder charged to it whole). By
/// time, the loops' waits are theirs, not the sleeper's.
#[test]
fn a_brief_sleeper_is_not_charged_with_the_loops_waits() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let parent = parent("inverse");
    let loops = TestCgroup::new(&v2_root(), "inverse/loops");
    let brief = TestCgroup::new(&v2_root(), "inverse/brief");
    let procs = Procs(vec![
        niced_loop(cpu, 0),
        niced_loop(cpu, 0),
        python_sleeper(cpu),
    ]);
    loops.add(procs.pids()[0]);
    loops.add(procs.pids()[1]);
    brief.add(procs.pids()[2]);
    thread::sleep(Duration::from_millis(300));
    let times = CpuTimes::now();
    let (interval, (), ()) = one_interval(&parent.path(), || ());
    let busy = times.busy_since();
    drop(procs);

    let charges = charges_of(&interval, &loops.rel);
    let waited = waited_ns(&interval, &loops.rel);
    let charged: u64 = charges.values().map(|c| c.1).sum();
    let to = |g: &TestCgroup| charges.get(&g.rel).copied().unwrap_or_default();
    let (own, sleeper) = (to(&loops), to(&brief));
    eprintln!("the loops waited {waited} ns, charged {charged} ns: {charges:?}");
    assert_eq!(charged, waited, "charged of waited: {charges:?}");
    // The sleeper ran a few percent of the CPU: that is its part of the
    // loops' waits, at most. Of what the test's own tasks held, most of
    // the loops' waits were spent behind each other (the rest of the CPU
    // is other tasks', which a busy machine has many of).
    assert!(
        sleeper.1 * 10 <= own.1,
        "the sleeper's cgroup was charged {} ns of the loops' {waited} ns, the loops {} ns ({charges:?}; {busy})",
        sleeper.1,
        own.1
    );
    // It took part in many of their waits: the count is of waits.
    assert!(sleeper.0 > 0 && sleeper.0 <= own.0 * 2, "{charges:?}");
}

/// The interval's wait time of `cgroup` and its p99 (estimated from the
/// fine buckets), from its breakdown key; zeros when it did not wait.
fn waited_and_p99(interval: &Value, cgroup: &str) -> (u64, u64) {
    let keys = interval["breakdown"]["keys"].as_array().expect("keys");
    (keys.iter())
        .find(|k| k["cgroup"] == cgroup)
        .map_or((0, 0), |k| {
            let p99 = k["percentiles"]["p99_ns"].as_u64().unwrap_or(0);
            (k["sum_ns"].as_u64().unwrap_or(0), p99)
        })
}

/// The interval's second-role rows of `victim`: (user, group) -> charged ns.
fn shares_of(interval: &Value, victim: &str) -> HashMap<(String, String), u64> {
    let rows = interval["pairs"]["shares"]
        .as_array()
        .expect("pairs shares");
    (rows.iter())
        .filter(|r| r["victim"] == victim)
        .map(|r| {
            let user = r["user"].as_str().unwrap().to_string();
            let group = r["group"].as_str().unwrap().to_string();
            ((user, group), r["sum_ns"].as_u64().unwrap())
        })
        .collect()
}

/// The kubelet case, in its phases, on one CPU of a node shaped as
/// the kubelet makes it (tests/common/kube_node.rs): web-1's 1 ms sleeper
/// (pod shop/web-1) beside pod B's two busy loops (jobs/batch-7), a busy
/// loop in the root cgroup, or both. Only both together make web-1 wait:
/// batch-7 keeps the node group's entity at its share at the root level,
/// so web-1's wakeups lose there to the root loop and wait for its slice.
/// The pairs must say both roles: `/` held the CPU, batch-7 had used the
/// node group's share; diagnose must propose keeping batch-7 off web-1's
/// CPU first (never a cap on `/`), and that remedy, applied, must bring
/// web-1's p99 back down with the root loop left as it is.
#[test]
fn the_pod_that_used_the_shared_groups_share_is_named_and_moving_it_fixes_the_waiter() {
    if !require_root() {
        return;
    }
    let root = keyed_root();
    let node = KubeNode::new(&root);
    node.enable_cpu(&[&node.web.dir, &node.batch.dir]);
    let cpu = workload_cpu();
    let (web, batch) = (&node.web.cgroup, &node.batch.cgroup);
    let node_group = node.path()[root.to_string_lossy().len()..].to_string();
    let web_sleeper = Procs(vec![python_sleeper(cpu)]);
    node.web.add(web_sleeper.pids()[0]);
    let times = CpuTimes::now();
    let phase = |name: &str| {
        thread::sleep(Duration::from_millis(300));
        let (interval, (), ()) = one_interval(&node.path(), || ());
        let (waited, p99) = waited_and_p99(&interval, web);
        eprintln!(
            "{name}: web-1 waited {waited} ns, p99 {p99} ns; shares {:?}; pairs {:?}",
            shares_of(&interval, web),
            charges_of(&interval, web)
        );
        (interval, waited, p99)
    };
    // A phase in which no share row of web-1's names a neighbour with a
    // tenth of its wait; its p99.
    let no_neighbour = |name: &str| {
        let (interval, waited, p99) = phase(name);
        let named =
            (shares_of(&interval, web).into_iter()).find(|(_, ns)| ns * 10 >= waited.max(1));
        assert_eq!(named, None, "{name}: {}", times.busy_since());
        p99
    };
    // batch-7's two loops, in its container.
    let batch_loops = || {
        let hogs = Procs(vec![niced_loop(cpu, 0), niced_loop(cpu, 0)]);
        for pid in hogs.pids() {
            node.batch.add(pid);
        }
        hogs
    };

    no_neighbour("web-1 alone");
    let hogs = batch_loops();
    no_neighbour("beside batch-7's loops");
    drop(hogs);
    let root_loop = Procs(vec![niced_loop(cpu, 0)]);
    fs::write(root.join("cgroup.procs"), root_loop.pids()[0].to_string()).expect("to the root");
    let p99_root_only = no_neighbour("beside the root loop");

    let hogs = batch_loops();
    // Both roles, and serve's second-role series over the same phase.
    // Each part is checked against the one it is made of, since how much
    // of the wait the kernel saw lost at the node group's queue is the
    // machine's timing: 0.87 of the same wait here, 0.33-0.35 on CI's
    // machine, with the same wait and p99, before the waits behind a
    // protected slice at that queue counted as lost there (whether they
    // were CI's rest is not known: the split of the rules was not in the
    // message then; it is now). Of the waits it counted, batch-7 was
    // charged 0.76-0.80 of the window before them on both.
    // Measured again once if a check fails, the first attempt's numbers
    // kept in the message: a stall of the machine does not repeat on
    // demand; a regression does.
    let both = || -> Result<(Value, u64, u64), String> {
        let server = Server::start(&["--cgroups", "--pairs", "-c", &node.path()]);
        let (bad, waited, p99_bad) = phase("both");
        let page = server.scrape_text();
        drop(server);
        let busy = times.busy_since();
        let exported: f64 = (page.lines())
            .filter(|l| l.starts_with("schedlat_neighbour_share_seconds_total{"))
            .filter(|l| {
                l.contains(&format!("cgroup=\"{web}\""))
                    && l.contains(&format!("holder_cgroup=\"{batch}\""))
                    && l.contains(&format!("group=\"{node_group}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        // And where its waits were decided, as serve exports it.
        let exported_level: f64 = (page.lines())
            .filter(|l| l.starts_with("schedlat_neighbour_level_wait_seconds_total{"))
            .filter(|l| {
                l.contains(&format!("cgroup=\"{web}\""))
                    && l.contains(&format!("group=\"{node_group}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        let held = charges_of(&bad, web);
        let top_holder = (held.iter())
            .filter(|(h, _)| !h.starts_with('('))
            .max_by_key(|(_, c)| c.1)
            .map(|(h, _)| h.clone());
        let batch_share = (shares_of(&bad, web))
            .get(&(batch.clone(), node_group.clone()))
            .copied()
            .unwrap_or(0);
        // Where web-1's waits were decided: at the node group's level,
        // where its wakeups lost to the root loop.
        let decided_at: u64 = (bad["pairs"]["levels"].as_array())
            .expect("pairs levels")
            .iter()
            .filter(|l| l["victim"] == *web && l["group"] == *node_group)
            .filter_map(|l| l["sum_ns"].as_u64())
            .sum();
        let numbers = format!(
            "web-1 waited {waited} ns (p99 {p99_bad} ns; {}); serve exported {exported} s of batch-7's use of the node group's share; the interval charged batch-7 {batch_share} ns for it; {decided_at} ns lost at the node group's level (serve: {exported_level} s); the top holder {top_holder:?} ({busy})",
            decided_how(&bad, web)
        );
        eprintln!("{numbers}");
        let failed = [
            (
                top_holder.as_deref() != Some("/"),
                "the root loop did not hold the CPU during most of the waits",
            ),
            (
                decided_at * 5 < waited,
                "under a fifth of the wait was lost at the node group's level",
            ),
            (
                batch_share * 2 < decided_at,
                "batch-7 was charged under half of the waits lost at the node group's level as having used its share",
            ),
            (
                batch_share * 10 < waited,
                "batch-7 was charged under a tenth of the wait, where the roles sentence and diagnose's step begin",
            ),
            (
                exported * 2e9 < batch_share as f64,
                "serve exported under half of what the interval charged batch-7",
            ),
            (
                exported_level * 2e9 < decided_at as f64,
                "serve exported under half of the wait the interval lost at the node group's level",
            ),
        ];
        match failed.iter().find(|(failed, _)| *failed) {
            Some((_, what)) => Err(format!("{what}: {numbers}")),
            None => Ok((bad, waited, p99_bad)),
        }
    };
    let (bad, _, p99_bad) = both()
        .or_else(|first| both().map_err(|again| format!("{first}\nmeasured again: {again}")))
        .unwrap_or_else(|message| panic!("{message}"));
    let busy = times.busy_since();
    let roles = bad["pairs"]["roles"].to_string();
    assert!(
        roles.contains(&format!(
            "{web} waited behind / (it held the CPU) because {batch} had used {node_group}'s share of the CPU"
        )),
        "{roles}"
    );
    // web-1's brief runs are not why batch-7's loops waited.
    let (batch_waited, _) = waited_and_p99(&bad, batch);
    let web_share: u64 = (shares_of(&bad, batch).iter())
        .filter(|((user, _), _)| user == web)
        .map(|(_, ns)| ns)
        .sum();
    assert!(
        web_share * 10 < batch_waited,
        "web-1 was charged {web_share} ns of batch-7's {batch_waited} ns ({busy})"
    );
    assert!(
        p99_bad >= 4 * p99_root_only && p99_bad >= 500_000,
        "only both together should make web-1 wait: p99 {p99_bad} ns against {p99_root_only} ns beside the root loop alone ({busy})"
    );

    // diagnose proposes moving batch-7, never a cap on `/`.
    let out = Command::new(SCHEDLAT)
        .args(["diagnose", "--json", "-d", "3", "-c"])
        .arg(&node.web.dir)
        .output()
        .expect("schedlat runs");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("diagnose: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let steps: Vec<&str> = (report["causes"].as_array().expect("causes").iter())
        .filter_map(|c| c["next_step"].as_str())
        .collect();
    let keep_off = format!("off the scope's CPUs (cpuset of cgroup {batch}");
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("keep ") && s.contains(&keep_off)),
        "diagnose did not propose keeping batch-7 off web-1's CPU: {steps:?} ({})",
        times.busy_since()
    );
    assert!(
        !steps
            .iter()
            .any(|s| s.contains("cap /,") || s.contains("cap / ")),
        "{steps:?}"
    );

    // The remedy, applied: batch-7's loops kept on another CPU (its
    // tasks' affinity, as a cpuset of its cgroup would); the root loop
    // left as it is.
    for pid in hogs.pids() {
        let status = Command::new("taskset")
            .args(["-pc", &other_cpu().to_string(), &pid.to_string()])
            .stdout(Stdio::null())
            .status()
            .expect("taskset runs");
        assert!(status.success(), "taskset -pc for {pid}");
    }
    let (_, _, p99_fixed) = phase("both, batch-7 on another CPU");
    assert!(
        p99_fixed * 4 <= p99_bad,
        "keeping batch-7 off web-1's CPU did not bring its p99 down: {p99_fixed} ns against {p99_bad} ns ({})",
        times.busy_since()
    );
    drop((hogs, root_loop, web_sleeper));
    node.wait_empty();
}
