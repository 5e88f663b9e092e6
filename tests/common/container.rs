//! The image `cargo xtask image` builds, as the tests run it: the archive,
//! podman with runc, the seccomp profile of the seccomp-localhost
//! component, containers removed when dropped, and scraping one.

use std::{
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Output},
    thread,
    time::{Duration, Instant},
};

use super::{cgroup, http, kube};

pub(crate) fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// Status, stdout and stderr, for assertion messages.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The image archive `cargo xtask test` built; None (skipped) without it,
/// except under CI=true.
pub(crate) fn image_archive() -> Option<PathBuf> {
    let Some(path) = std::env::var_os("SCHEDLAT_DIST_IMAGE") else {
        let why = "SCHEDLAT_DIST_IMAGE is not set: run with `cargo xtask test` (which builds the image first), or run `cargo xtask image` and set it to the file it printed";
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true: {why}");
        eprintln!("skipped: {why}");
        return None;
    };
    Some(PathBuf::from(path))
}

/// podman with runc: crun (podman's default) refuses hosts whose cgroup v2
/// side mount has controllers beside cgroup v1 (this VM's hybrid layout).
pub(crate) fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args(["--runtime", "runc"]);
    cmd
}

/// The seccomp profile of the seccomp-localhost component: podman's
/// default (containers/common's, also CRI-O's) with the rules of
/// deploy/seccomp/bpf.json, made with the jq command docs/deploy.md shows.
pub(crate) fn localhost_profile() -> PathBuf {
    let out_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schedlat-seccomp.json");
    let rules = kube::repo().join("deploy/seccomp/bpf.json");
    let out = run(Command::new("jq")
        .arg("--slurpfile")
        .arg("rules")
        .arg(&rules)
        .arg(SECCOMP_JQ)
        .arg("/usr/share/containers/seccomp.json"));
    assert!(out.status.success(), "{}", text(&out));
    fs::write(&out_path, &out.stdout).unwrap();
    out_path
}

/// docs/deploy.md's transformation: bpf and perf_event_open out of every
/// rule of the runtime's profile, then the rules of bpf.json.
const SECCOMP_JQ: &str = r#".syscalls |= (map(.names -= ["bpf", "perf_event_open"] | select(.names != [])) + $rules[0])"#;

/// A container removed when dropped.
pub(crate) struct Container(pub String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rm", "--force", "--time", "5", &self.0])
            .output();
    }
}

/// podman sets RLIMIT_NOFILE and RLIMIT_NPROC higher than this sandbox's
/// hard limits, which it may not raise (no CAP_SYS_RESOURCE): ask for
/// values under them. A Kubernetes node's runtime has its own.
pub(crate) const ULIMITS: [&str; 2] = ["--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"];

/// The peak memory of `pid`'s memory cgroup: `memory.peak` (cgroup v2,
/// 5.19+) or `memory.max_usage_in_bytes` (v1).
pub(crate) fn memory_peak(pid: &str) -> u64 {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let file = if controllers.split(',').any(|c| c == "memory") {
            cgroup::mount_of(|fstype, opts| {
                fstype == "cgroup" && opts.split(',').any(|o| o == "memory")
            })
            .map(|m| {
                m.join(path.trim_start_matches('/'))
                    .join("memory.max_usage_in_bytes")
            })
        } else if controllers.is_empty() {
            Some(
                cgroup::v2_root()
                    .join(path.trim_start_matches('/'))
                    .join("memory.peak"),
            )
        } else {
            None
        };
        if let Some(peak) = file
            .and_then(|f| fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse().ok())
        {
            return peak;
        }
    }
    panic!("no memory peak for {pid}: {cgroups}");
}

pub(crate) fn logs(name: &str) -> String {
    text(&run(podman().args(["logs", name])))
}

/// Scrapes until the body has `key` (the first scrape may come before the
/// group's first wait), for up to 30 s.
pub(crate) fn wait_for(addr: SocketAddr, key: &str, container: &Container) -> String {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < Duration::from_secs(30) {
        if let Ok(r) = http::get(addr, "/metrics", None) {
            if r.status == 200 && r.body.contains(key) {
                return r.body;
            }
            last = r.body;
        }
        thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "no {key} series within 30 s; last scrape:\n{last}\ncontainer log:\n{}",
        logs(&container.0)
    );
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A directory under /tmp that uid 65532 can enter, removed when dropped.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        let dir = Path::new("/tmp").join(format!("schedlat-{name}-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The capabilities containerd gives a container by default (Docker's set).
pub(crate) const CONTAINERD_DEFAULT_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];
