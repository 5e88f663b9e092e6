//! Workloads named as their owners know them, on the real kernel (root):
//! cgroups that live a fraction of a second keep their names, named by
//! the kernel as they are made (the cgroup_mkdir program), in the cgroup
//! v1 cpu hierarchy and in cgroup v2.

use std::{collections::BTreeSet, path::Path, process::Command};

use common::{
    SCHEDLAT, TracerProcess,
    cgroup::{TestCgroup, churn, v1_cpu_root, v2_root},
    cpu::CpuTimes,
    parse_json_lines, require_root, run_schedlat,
    workload::batch_sleeper,
};
use serde_json::Value;

use crate::common;

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

/// A podman container of the test, removed when dropped.
struct Container {
    name: String,
    id: String,
    /// Its first process, as the host sees it.
    pid: String,
}

/// What podman needs on hosts like this project's VM: runc (crun refuses
/// hybrid cgroups while the v2 hierarchy holds a controller), and limits
/// below the hard ones (podman's default of 1,048,576 open files needs
/// CAP_SYS_RESOURCE, which a sandboxed root may lack).
const PODMAN_RUN: [&str; 6] = [
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=4096:4096",
];

/// A local image of one static busybox (no registry is reached): the
/// host's busybox-static, imported once under a fixed tag.
fn busybox_image() -> String {
    let image = "localhost/schedlat-test-busybox:1".to_string();
    let exists = Command::new("podman")
        .args(["image", "exists", &image])
        .status()
        .expect("podman runs (cargo xtask setup installs it)");
    if exists.success() {
        return image;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-rootfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", dir.join("bin/busybox")).expect("busybox-static installed");
    for applet in ["sh", "sleep"] {
        std::os::unix::fs::symlink("busybox", dir.join("bin").join(applet)).unwrap();
    }
    import_rootfs(&dir, &image);
    image
}

/// Imports the root file system `dir` as `image`, and removes it.
fn import_rootfs(dir: &Path, image: &str) {
    let tar = dir.with_extension("tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(ok.success(), "tar of the rootfs failed");
    let out = Command::new("podman")
        .arg("import")
        .arg(&tar)
        .arg(image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(&tar);
}

/// A local image holding only the static holder of
/// tests/fixtures/container-holder (no registry is reached), built with the
/// host's C compiler and imported under a fixed tag.
fn holder_image() -> String {
    let image = "localhost/schedlat-test-holder:1".to_string();
    let dir = std::env::temp_dir().join(format!("schedlat-holder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/container-holder/holder.c"
    );
    let built = Command::new("cc")
        .args(["-static", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(dir.join("holder"))
        .arg(source)
        .output()
        .expect("cc runs (gcc, as cargo's linker)");
    assert!(
        built.status.success(),
        "cc -static (glibc's libc.a is package libc6-dev): {}",
        String::from_utf8_lossy(&built.stderr)
    );
    import_rootfs(&dir, &image);
    image
}

impl Container {
    /// Runs `script` in busybox's sh in a new container.
    fn run(image: &str, name: &str, script: &str) -> Container {
        Self::run_command(image, name, &["sh", "-c", script])
    }

    /// Runs `command` in a new container.
    fn run_command(image: &str, name: &str, command: &[&str]) -> Container {
        let name = format!("schedlat-test-{}-{name}", std::process::id());
        let _ = Command::new("podman").args(["rm", "-f", &name]).output();
        let out = Command::new("podman")
            .args(["run", "-d", "--name", &name])
            .args(PODMAN_RUN)
            .arg(image)
            .args(command)
            .output()
            .expect("podman runs");
        if !out.status.success() {
            // A container the runtime failed to start is left created.
            let _ = Command::new("podman").args(["rm", "-f", &name]).output();
            panic!(
                "podman run {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(id.len(), 64, "podman printed {id:?}");
        let pid = Command::new("podman")
            .args(["inspect", "-f", "{{.State.Pid}}", &name])
            .output()
            .expect("podman inspect");
        let pid = String::from_utf8_lossy(&pid.stdout).trim().to_string();
        Container { name, id, pid }
    }

    /// The first CPU the container's cgroup lets it run on (its cpuset
    /// may be narrower than the host's).
    fn first_allowed_cpu(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        let first = list.trim().split([',', '-']).next().unwrap();
        first
            .parse()
            .unwrap_or_else(|_| panic!("Cpus_allowed_list {list:?}"))
    }

    /// Pins the container's processes (and so their children) to `cpu`,
    /// from the host: `--cpuset-cpus` needs a cpuset its runtime's parent
    /// cgroup may not give.
    fn pin(&self, cpu: usize) {
        let pinned = Command::new("taskset")
            .args(["-a", "-p", "-c", &cpu.to_string(), &self.pid])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("taskset (util-linux) runs");
        assert!(
            pinned.success(),
            "taskset {cpu} {} ({})",
            self.pid,
            self.name
        );
    }
}

/// The breakdown key (rolled up per container) holding `c`'s cgroup.
fn key_of<'a>(keys: &'a [Value], c: &Container) -> &'a Value {
    let own = format!("libpod-{}", c.id);
    let holds = |k: &Value| {
        (k["cgroups"].as_array().into_iter().flatten())
            .any(|p| p.as_str().is_some_and(|p| p.ends_with(&own)))
    };
    keys.iter().find(|k| holds(k)).unwrap_or_else(|| {
        let shown: Vec<_> = keys.iter().map(|k| (&k["label"], &k["cgroups"])).collect();
        panic!("{} not among the keys: {shown:?}", c.id)
    })
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", "-t", "0", &self.name])
            .output();
    }
}

/// A real container pair (podman, a local busybox image): a sleeper and
/// a hog pinned to one CPU, in two containers. On the host, `--pairs --by
/// container` names both by the names podman gave them (its storage's
/// containers.json), the breakdown by their IDs, and `-c` takes a prefix
/// of the sleeper's ID.
#[test]
fn podman_containers_are_named_by_id_and_by_name() {
    if !require_root() {
        return;
    }
    let image = busybox_image();
    let sleeper = Container::run(&image, "sleeper", "while :; do sleep 0.002; done");
    let hog = Container::run(&image, "hog", "while :; do :; done");
    // Both on one CPU their cgroups allow.
    let cpu = sleeper.first_allowed_cpu();
    sleeper.pin(cpu);
    hog.pin(cpu);
    let cpus = CpuTimes::now();
    let (status, out, err) = run_schedlat(&[
        "--cgroups",
        "--pairs",
        "--by",
        "container",
        "--top",
        "0",
        "--json",
        "3",
        "1",
    ]);
    assert!(status.success(), "schedlat: {err}");
    let interval = parse_json_lines(&out.lines().map(str::to_string).collect::<Vec<_>>())
        .pop()
        .expect("an interval");
    // The breakdown rolled up per container (--by): one key each.
    let keys = interval["breakdown"]["keys"].as_array().unwrap();
    for c in [&sleeper, &hog] {
        let key = key_of(keys, c);
        assert_eq!(key["label"], format!("container = {}", c.name), "{key}");
    }
    let rows = interval["pairs"]["rows"].as_array().unwrap();
    let wait = |victim: &str, holder: Option<&str>| -> u64 {
        rows.iter()
            .filter(|r| r["victim"] == victim && holder.is_none_or(|h| r["holder"] == h))
            .map(|r| r["sum_ns"].as_u64().unwrap())
            .sum()
    };
    let behind_hog = wait(&sleeper.name, Some(&hog.name));
    let waits_behind_hog: u64 = rows
        .iter()
        .filter(|r| r["victim"] == sleeper.name.as_str() && r["holder"] == hog.name.as_str())
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    // Both sides of a pair are named by podman's names. The hog holds the
    // sleeper's CPU at most of its ~1,500 wakeups in the 3 s on a quiet
    // host (the kernel test collect::live::pairs checks the pair table's
    // shares); other tasks of a busy one end most of them (the root
    // cgroup's rows): 42 were left with both CPUs 100% busy and 18 tasks
    // runnable, so at least 10, and the message says how busy it was.
    assert!(
        behind_hog > 0 && waits_behind_hog >= 10,
        "the sleeper {} waited {waits_behind_hog} times ({behind_hog} ns) behind the hog {} ({} ns in all), {}: {rows:?}",
        sleeper.name,
        hog.name,
        wait(&sleeper.name, None),
        cpus.busy_since()
    );
    // -c by a prefix of the ID: the container's own cgroup.
    let prefix = &sleeper.id[..12];
    let (status, out, err) = run_schedlat(&["-c", prefix, "--json", "1", "1"]);
    assert!(status.success(), "-c {prefix}: {err}");
    let interval = parse_json_lines(&out.lines().map(str::to_string).collect::<Vec<_>>())
        .pop()
        .expect("an interval");
    let scope = interval["scope"]["cgroup"].as_str().unwrap_or_default();
    assert!(
        scope.ends_with(&format!("libpod-{}", sleeper.id)),
        "-c {prefix} took {scope}"
    );
    assert!(
        interval["count"].as_u64().unwrap() > 0,
        "no waits under -c {prefix}"
    );
}

/// The pair test of a node that runs schedlat as the manifests deploy it:
/// the image `cargo xtask image` builds, under the DaemonSet's security
/// context, mounts and user, and the seccomp-localhost component's profile
/// (deploy/seccomp/bpf.json: podman's default refuses bpf()), beside a
/// sleeper and a hog in two podman containers on one CPU. From inside its
/// container it keys both by their cgroups and names them by runtime and
/// ID (the runtime's state files are root's, unreadable to the image's
/// user), and counts who waited behind whom. Skipped without the image
/// (SCHEDLAT_DIST_IMAGE, set by `cargo xtask test`), except under CI.
#[test]
fn schedlat_in_its_container_names_a_podman_pair() {
    use common::{
        container::{ULIMITS, image_archive, localhost_profile, podman, run, text},
        kube,
    };
    let Some(archive) = image_archive() else {
        return;
    };
    if !require_root() {
        return;
    }
    let out = run(podman().arg("load").arg("--input").arg(&archive));
    assert!(out.status.success(), "{}", text(&out));
    let docs = kube::documents(&kube::kustomize_yaml("pair", &["seccomp-localhost"]));
    let daemonset = kube::find(&docs, "DaemonSet");
    let image = kube::pod(daemonset).1["image"]
        .as_str()
        .unwrap()
        .to_string();
    let flags = kube::podman_flags(daemonset, &localhost_profile(), "65532:65532");

    let busybox = busybox_image();
    let sleeper = Container::run(&busybox, "pair-sleeper", "while :; do sleep 0.002; done");
    let hog = Container::run(&busybox, "pair-hog", "while :; do :; done");
    let cpu = sleeper.first_allowed_cpu();
    sleeper.pin(cpu);
    hog.pin(cpu);
    let cpus = CpuTimes::now();
    let out = run(podman()
        .args(["run", "--rm"])
        .args(ULIMITS)
        .args(&flags)
        .arg(&image)
        .args([
            "--cgroups",
            "--pairs",
            "--by",
            "container",
            "--top",
            "0",
            "--json",
            "3",
            "1",
        ]));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let interval = parse_json_lines(&stdout.lines().map(str::to_string).collect::<Vec<_>>())
        .pop()
        .unwrap_or_else(|| panic!("no interval: {}", text(&out)));
    let keys = interval["breakdown"]["keys"].as_array().unwrap();
    let named = |c: &Container| format!("podman {}", &c.id[..12]);
    for c in [&sleeper, &hog] {
        let key = key_of(keys, c);
        assert_eq!(key["workload"]["name"], named(c).as_str(), "{key}");
        assert_eq!(key["workload"]["runtime"], "podman", "{key}");
    }
    // The sleeper's ~1,500 wakeups in 3 s end behind the hog on a quiet
    // CPU; on a busy one other tasks end most of them (measured on this
    // VM: 4 of ~500 with both CPUs busy), so the pair is asked to exist.
    let rows = interval["pairs"]["rows"].as_array().unwrap();
    let behind = (rows.iter())
        .find(|r| r["victim"] == named(&sleeper).as_str() && r["holder"] == named(&hog).as_str());
    assert!(
        behind.is_some_and(|r| r["count"].as_u64() > Some(0)),
        "no wait of the sleeper {} behind the hog {} ({}): {rows:?}",
        named(&sleeper),
        named(&hog),
        cpus.busy_since()
    );
}

/// The holder's user stack of a process inside a container is named
/// through the container's own file system: its binary is `/holder` there,
/// a path the host does not have, so it can only be read through the
/// process (/proc/PID/map_files, /proc/PID/root).
#[test]
fn a_holder_inside_a_container_is_named_through_its_file_system() {
    if !require_root() {
        return;
    }
    assert!(
        !Path::new("/holder").exists(),
        "the host has a /holder: the test would not tell"
    );
    let holder = Container::run_command(&holder_image(), "stack-holder", &["/holder"]);
    let cpu = holder.first_allowed_cpu();
    holder.pin(cpu);
    // At nice -10 it holds nine in ten of the CPU's time against the
    // sleeper, a SCHED_BATCH task (its wakeups never preempt), whose
    // waits then end behind it.
    let reniced = Command::new("renice")
        .args(["-n", "-10", "-p", &holder.pid])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("renice (util-linux) runs");
    assert!(reniced.success(), "renice {}", holder.pid);
    let cpus = CpuTimes::now();
    let tracer = crate::stacks::slow_json("--stacks=holder");
    let sleeper = batch_sleeper(cpu, 1500);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let busy = cpus.busy_since();
    let objects = parse_json_lines(&lines);
    let pid: u64 = holder.pid.parse().unwrap();
    let behind: Vec<&Value> = (objects.iter())
        .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == u64::from(sleeper))
        .filter(|o| o["culprit"]["pid"] == pid)
        .collect();
    assert!(
        behind.len() >= 5,
        "{} slow waits behind the container's holder; {busy}",
        behind.len()
    );
    let innermost = |w: &Value| w["holder_stacks"]["user"][0].clone();
    let named = (behind.iter())
        // Named from the file as the container sees it.
        .filter(|w| innermost(w)["module"] == "/holder")
        .filter(|w| innermost(w)["symbol"] == "schedlat_container_spin")
        .count();
    assert!(
        named * 10 >= behind.len() * 9,
        "{named} of {} user stacks of the container's holder name its function: {:?}",
        behind.len(),
        behind.iter().map(|w| innermost(w)).collect::<Vec<_>>()
    );
}
