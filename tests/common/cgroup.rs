//! Real cgroups and processes for the tests that need them: a cgroup made
//! by a test (removed when dropped, also when the test fails), the cgroup
//! mounts, and pinned shell loops killed when dropped.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::Duration,
};

use super::workload::workload_cpu;

/// A cgroup made by a test in one hierarchy, removed when dropped (tasks
/// moved back to the root first), also when the test fails. A `name` with
/// a `/` is a child of the group made with its first part: make the parent
/// first, so that it is dropped last.
pub(crate) struct TestCgroup {
    dir: PathBuf,
    root: PathBuf,
    /// Its path relative to the root, as `--cgroups` labels it.
    pub rel: String,
}

impl TestCgroup {
    pub(crate) fn new(root: &Path, name: &str) -> TestCgroup {
        let rel = format!("/schedlat-test-{}-{name}", std::process::id());
        let dir = root.join(&rel[1..]);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TestCgroup {
            dir,
            root: root.to_path_buf(),
            rel,
        }
    }

    /// A cgroup with a CPU quota, where the cpu controller is: cgroup v2
    /// (`cpu.max`) when the v2 root delegates it (pure v2, and the VM
    /// guests), else the v1 cpu hierarchy (`cpu.cfs_quota_us`; hybrid hosts
    /// like this project's). Also says which: "cgroup v2" or "cgroup v1".
    pub(crate) fn with_cpu_quota(
        name: &str,
        quota_us: u64,
        period_us: u64,
    ) -> (TestCgroup, &'static str) {
        let (group, which) = TestCgroup::with_cpu_controller(name);
        if which == "cgroup v2" {
            fs::write(group.dir.join("cpu.max"), format!("{quota_us} {period_us}"))
                .expect("write cpu.max");
        } else {
            fs::write(group.dir.join("cpu.cfs_period_us"), period_us.to_string())
                .expect("write cpu.cfs_period_us");
            fs::write(group.dir.join("cpu.cfs_quota_us"), quota_us.to_string())
                .expect("write cpu.cfs_quota_us");
        }
        (group, which)
    }

    /// A cgroup of the hierarchy the cpu controller is in, so a group of
    /// the CPU scheduler of its own: cgroup v2 when the v2 root delegates
    /// the controller, else the v1 cpu hierarchy. Also says which.
    pub(crate) fn with_cpu_controller(name: &str) -> (TestCgroup, &'static str) {
        let v2 = v2_root();
        if v2_delegates_cpu(&v2) {
            return (TestCgroup::new(&v2, name), "cgroup v2");
        }
        let v1 = v1_cpu_root().unwrap_or_else(|| {
            panic!(
                "no cpu controller: {}/cgroup.subtree_control lacks cpu and no v1 cpu mount",
                v2.display()
            )
        });
        (TestCgroup::new(&v1, name), "cgroup v1")
    }

    /// Two cgroups in a hierarchy without the cpu controller below this
    /// group of the cpu controller's (`with_cpu_controller`), so that
    /// tasks in them differ in cgroup but are one group of the CPU
    /// scheduler: a v1 hierarchy of another controller (memory, pids...)
    /// where there is one (hybrid hosts), else two v2 children of this
    /// group, which does not enable cpu for its children. The caller puts
    /// each task in this group first (on v1).
    pub(crate) fn two_without_cpu(&self, names: [&str; 2]) -> [TestCgroup; 2] {
        let other = mount_of(|fstype, opts| {
            fstype == "cgroup"
                && opts
                    .split(',')
                    .any(|o| ["memory", "pids", "blkio"].contains(&o))
                && !opts.split(',').any(|o| o == "cpu")
        });
        names.map(|name| match &other {
            Some(root) => TestCgroup::new(root, name),
            None => {
                let rel = format!("{}/{name}", self.rel);
                let dir = self.root.join(&rel[1..]);
                fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                TestCgroup {
                    dir,
                    root: self.root.clone(),
                    rel,
                }
            }
        })
    }

    pub(crate) fn add(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.dir.display()));
    }

    /// Waits (bounded) until no process is left in it: a killed shell
    /// loop's last child may still be finishing.
    pub(crate) fn wait_empty(&self) {
        for _ in 0..250 {
            let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("{} still has processes after 5 s", self.dir.display());
    }

    pub(crate) fn path(&self) -> String {
        self.dir.to_string_lossy().into_owned()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if let Ok(procs) = fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.lines() {
                    let _ = fs::write(self.root.join("cgroup.procs"), pid);
                }
            }
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Freezes (or thaws) the v2 cgroup at `dir` with its subtree, and waits
/// (bounded) until the kernel says all of it is: a frozen task neither
/// wakes nor waits, so a measurement ended while its tasks are frozen
/// does not depend on how long the reads of its end took.
pub(crate) fn set_frozen(dir: &Path, frozen: bool) {
    let want = format!("frozen {}", u8::from(frozen));
    fs::write(dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })
        .unwrap_or_else(|e| panic!("{}/cgroup.freeze: {e}", dir.display()));
    for _ in 0..250 {
        let events = fs::read_to_string(dir.join("cgroup.events")).unwrap_or_default();
        if events.lines().any(|l| l == want) {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("{} is not `{want}` after 5 s", dir.display());
}

/// The cgroup v2 mount (`/sys/fs/cgroup/unified` on hybrid systems).
pub(crate) fn v2_root() -> PathBuf {
    mount_of(|fstype, _| fstype == "cgroup2").expect("a cgroup2 mount")
}

/// Whether the cgroup v2 root gives its children the cpu controller.
pub(crate) fn v2_delegates_cpu(v2: &Path) -> bool {
    fs::read_to_string(v2.join("cgroup.subtree_control"))
        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"))
}

/// The cpu controller's v1 mount, if the cpu controller is on v1.
pub(crate) fn v1_cpu_root() -> Option<PathBuf> {
    mount_of(|fstype, opts| fstype == "cgroup" && opts.split(',').any(|o| o == "cpu"))
}

pub(crate) fn mount_of(want: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 3 && want(f[2], f[3]))
        .map(|f| PathBuf::from(f[1]))
}

/// Child processes killed when dropped.
pub(crate) struct Procs(pub Vec<Child>);

impl Procs {
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `sh -c script` pinned to `cpu` (taskset execs the shell: its PID is the
/// shell's).
pub(crate) fn pinned_sh(cpu: usize, script: &str) -> Child {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "sh", "-c", script])
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset (util-linux) runs")
}

/// A 1 ms sleeper that does not fork (every wait of its cgroup is its
/// own), pinned to `cpu`: the Python interpreter exec'd by taskset, so its
/// PID is the sleeper's. The interpreter is named by its real path:
/// `python3` on PATH may be a shim (pyenv's is a bash script that forks
/// helpers before it execs the interpreter, for seconds on a busy CPU).
pub(crate) fn python_sleeper(cpu: usize) -> Child {
    pinned_python(cpu, 0, "import time\nwhile True: time.sleep(0.001)")
}

/// A SCHED_FIFO task (priority 10) that runs 20 ms and sleeps 20 ms,
/// over and over, pinned to `cpu` (the interpreter's PID is the task's).
pub(crate) fn fifo_bursts(cpu: usize) -> Child {
    let script = "import os, time\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))\nwhile True:\n t = time.monotonic()\n while time.monotonic() - t < 0.02: pass\n time.sleep(0.02)";
    pinned_python(cpu, 0, script)
}

/// `python3 -c script` at `nice`, pinned to `cpu` (taskset and nice exec
/// the interpreter).
fn pinned_python(cpu: usize, nice: i32, script: &str) -> Child {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "nice", "-n", &nice.to_string()])
        .args([&real_python(), "-c", script])
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset (util-linux), nice and python3 run")
}

/// The path of the interpreter `python3` runs (its `sys.executable`).
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

/// A busy loop at `nice`, pinned to `cpu` (taskset and nice exec: its PID
/// is the loop's).
pub(crate) fn niced_loop(cpu: usize, nice: i32) -> Child {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "nice", "-n", &nice.to_string()])
        .args(["sh", "-c", HOG])
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset and nice run")
}

pub(crate) const SLEEPER: &str = "while :; do sleep 0.005; done";
pub(crate) const HOG: &str = "while :; do :; done";

pub(crate) fn other_cpu() -> usize {
    (workload_cpu() + 1) % thread::available_parallelism().map_or(1, |n| n.get())
}

/// The two-group load of the scope tests: `hogs` CPU hogs and a sleeper
/// pinned to the workload CPU in `busy`, a sleeper on another CPU in
/// `idle`. So `busy`'s waits are long (behind the hogs) and `idle`'s short.
pub(crate) fn busy_and_idle(busy: &TestCgroup, idle: &TestCgroup, hogs: usize) -> Procs {
    let cpu = workload_cpu();
    let mut children: Vec<Child> = (0..hogs).map(|_| pinned_sh(cpu, HOG)).collect();
    children.push(pinned_sh(cpu, SLEEPER));
    let idle_sleeper = pinned_sh(other_cpu(), SLEEPER);
    for child in &children {
        busy.add(child.id());
    }
    idle.add(idle_sleeper.id());
    children.push(idle_sleeper);
    Procs(children)
}

/// Makes `count` cgroups `parent/g<i>` one after the other, `parallel` at
/// a time, each living about `life` seconds with a process in it that
/// sleeps and spins (so that it waits for a CPU at least once), then
/// removes it. Returns each group's path relative to the hierarchy root.
pub(crate) fn churn(
    parent: &TestCgroup,
    root: &Path,
    count: usize,
    parallel: usize,
    life: f64,
) -> Vec<String> {
    churn_named(
        parent,
        root,
        count,
        parallel,
        life,
        ("g$i", |i| format!("g{i}")),
    )
}

/// [`churn`] with the groups named by `name`: the shell's spelling of the
/// i-th name (`$i` its number) and the same in Rust.
pub(crate) fn churn_named(
    parent: &TestCgroup,
    root: &Path,
    count: usize,
    parallel: usize,
    life: f64,
    name: (&str, fn(usize) -> String),
) -> Vec<String> {
    let dir = parent.path();
    let shell_name = name.0;
    // One shell per lane: mkdir, a child moved in that sleeps and spins,
    // wait for it, rmdir. The child moves itself, then execs: every wait
    // of the exec'd process is in the group.
    let lane = format!(
        r#"i=$1; while [ $i -le {count} ]; do
             g={dir}/{shell_name}; mkdir $g
             sh -c "echo \$\$ > $g/cgroup.procs; exec sh -c 'sleep {life}; n=0; while [ \$n -lt 300 ]; do n=\$((n+1)); done'"
             rmdir $g; i=$((i+{parallel}))
           done"#
    );
    let lanes: Vec<_> = (1..=parallel)
        .map(|first| {
            Command::new("sh")
                .args(["-c", &lane, "lane", &first.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .expect("sh runs")
        })
        .collect();
    for mut lane in lanes {
        assert!(lane.wait().unwrap().success(), "a churn lane failed");
    }
    let rel = Path::new(&dir)
        .strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (1..=count)
        .map(|i| format!("/{rel}/{}", name.1(i)))
        .collect()
}
