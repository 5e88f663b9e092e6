//! The fleet deployment: the Kubernetes manifests (deploy/kubernetes)
//! checked against the Kubernetes schemas, and the OCI image `cargo xtask
//! image` builds, run by podman with exactly the DaemonSet's
//! securityContext and mounts (root).
//!
//! The image is built once by `cargo xtask test`, which passes its path in
//! SCHEDLAT_DIST_IMAGE (unset: the image test is skipped, except under
//! CI=true).

mod common;

use std::{
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Output},
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{self, TestCgroup},
    http, kube, require_root,
};
use serde_json::Value;

/// Every component, to validate them together.
const COMPONENTS: [&str; 4] = [
    "servicemonitor",
    "kernel-before-5.11",
    "pids",
    "seccomp-localhost",
];

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// kubernetes-validate (PyPI) with `--strict` (unknown fields refused)
/// over a YAML stream; its output on failure.
fn kubernetes_validate(yaml: &str) -> Result<String, String> {
    let file =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("k8s-{}.yaml", std::process::id()));
    fs::write(&file, yaml).unwrap();
    let out = run(Command::new("kubernetes-validate")
        .args(["--strict"])
        .arg(&file));
    let _ = fs::remove_file(&file);
    let report = text(&out);
    if out.status.success() && !report.contains("ERROR") {
        Ok(report)
    } else {
        Err(report)
    }
}

/// The ServiceMonitor against prometheus-operator's CRD schema, through
/// @kubernetes-models/prometheus-operator (npm), which `cargo xtask setup`
/// installs in target/npm/deploy with tests/deploy/servicemonitor.mjs.
fn servicemonitor_validate(yaml: &str) -> Result<String, String> {
    let dir = kube::repo().join("target/npm/deploy");
    let file = dir.join(format!("manifests-{}.yaml", std::process::id()));
    fs::write(&file, yaml).unwrap();
    let out = run(Command::new("node")
        .arg(dir.join("servicemonitor.mjs"))
        .arg(&file)
        .current_dir(&dir));
    let _ = fs::remove_file(&file);
    let report = text(&out);
    if out.status.success() {
        Ok(report)
    } else {
        Err(report)
    }
}

#[test]
fn manifests_pass_the_kubernetes_schemas() {
    for components in [&[][..], &COMPONENTS[..]] {
        let yaml = kube::kustomize_yaml("schemas", components);
        let report = kubernetes_validate(&yaml).unwrap_or_else(|e| panic!("{components:?}: {e}"));
        for kind in ["namespace", "service", "daemonset"] {
            assert!(
                report.contains(&format!("passed for resource {kind}/schedlat")),
                "{report}"
            );
        }
        if !components.is_empty() {
            let report = servicemonitor_validate(&yaml).unwrap_or_else(|e| panic!("{e}"));
            assert!(report.contains("ok schedlat"), "{report}");
        }
    }
    // The validators do refuse: a misspelt field, a malformed duration.
    let yaml = kube::kustomize_yaml("schemas-bad", &COMPONENTS);
    let bad = yaml.replace(
        "readOnlyRootFilesystem: true",
        "readOnlyRootFileSystem: true",
    );
    let e = kubernetes_validate(&bad).expect_err("a misspelt field passed");
    assert!(e.contains("readOnlyRootFileSystem"), "{e}");
    let bad = yaml.replace("interval: 15s", "interval: 15 seconds");
    let e = servicemonitor_validate(&bad).expect_err("a malformed interval passed");
    assert!(e.contains("interval"), "{e}");
}

/// What the issue asks of the pod, read from what kustomize builds.
#[test]
fn daemonset_asks_for_two_capabilities_and_two_read_only_host_paths() {
    let docs = kube::documents(&kube::kustomize_yaml("pod", &[]));
    let daemonset = kube::find(&docs, "DaemonSet");
    let (spec, container) = kube::pod(daemonset);
    let ctx = &container["securityContext"];
    assert_eq!(ctx["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(
        ctx["capabilities"]["add"],
        serde_json::json!(["BPF", "PERFMON"])
    );
    assert_eq!(ctx["readOnlyRootFilesystem"], true);
    assert_eq!(ctx["allowPrivilegeEscalation"], false);
    assert!(ctx.get("privileged").is_none(), "{ctx:#}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(spec["hostPID"], false);
    assert!(spec.get("hostNetwork").is_none(), "{spec:#}");
    let mut host_paths: Vec<&str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v["hostPath"]["path"]
                .as_str()
                .expect("hostPath volumes only")
        })
        .collect();
    host_paths.sort_unstable();
    assert_eq!(host_paths, ["/sys/fs/cgroup", "/sys/kernel/btf"]);
    for mount in container["volumeMounts"].as_array().unwrap() {
        assert_eq!(mount["readOnly"], true, "{mount}");
    }
    // Probes and the Service use the port the container serves on.
    let port = &container["ports"][0];
    assert_eq!(port["name"], "metrics");
    let args = kube::args(daemonset);
    assert!(
        args.join(" ")
            .contains(&format!("--listen 0.0.0.0:{}", port["containerPort"])),
        "{args:?}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let service = kube::find(&docs, "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert!(
        container["resources"]["limits"].get("cpu").is_none(),
        "no CPU limit"
    );

    // The older-kernel component adds exactly CAP_SYS_RESOURCE; the pids one
    // shares the node's PID namespace.
    let docs = kube::documents(&kube::kustomize_yaml(
        "old",
        &["kernel-before-5.11", "pids"],
    ));
    let daemonset = kube::find(&docs, "DaemonSet");
    let (spec, container) = kube::pod(daemonset);
    assert_eq!(
        container["securityContext"]["capabilities"]["add"],
        serde_json::json!(["BPF", "PERFMON", "SYS_RESOURCE"])
    );
    assert_eq!(spec["hostPID"], true);
    assert!(kube::args(daemonset).contains(&"--pids".to_string()));
}

/// The image archive `cargo xtask test` built; None (skipped) without it,
/// except under CI=true.
fn image_archive() -> Option<PathBuf> {
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
fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args(["--runtime", "runc"]);
    cmd
}

/// The seccomp profile of the seccomp-localhost component: podman's
/// default (containers/common's, also CRI-O's) with the rules of
/// deploy/seccomp/bpf.json, made with the jq command docs/deploy.md shows.
fn localhost_profile() -> PathBuf {
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
struct Container(String);

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
const ULIMITS: [&str; 2] = ["--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"];

#[test]
fn image_serves_per_cgroup_series_with_the_daemonsets_security_context() {
    let Some(archive) = image_archive() else {
        return;
    };
    if !require_root() {
        return;
    }
    let out = run(podman().arg("load").arg("--input").arg(&archive));
    assert!(out.status.success(), "{}", text(&out));
    let docs = kube::documents(&kube::kustomize_yaml("podman", &["seccomp-localhost"]));
    let daemonset = kube::find(&docs, "DaemonSet");
    // The name the archive loads as is the one the manifests use.
    let image = kube::pod(daemonset).1["image"]
        .as_str()
        .unwrap()
        .to_string();
    let image = image.as_str();
    let out = run(podman().args(["image", "inspect", image]));
    assert!(out.status.success(), "{}", text(&out));
    let inspect: Value = serde_json::from_slice(&out.stdout).unwrap();
    let image_user = inspect[0]["Config"]["User"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(image_user, "65532:65532", "non-root by default");

    let flags = kube::podman_flags(daemonset, &localhost_profile(), &image_user);
    eprintln!("podman run {}", flags.join(" "));

    // podman's default seccomp profile is CRI-O's RuntimeDefault: bpf()
    // is refused without CAP_SYS_ADMIN, whatever the capabilities.
    let base = kube::documents(&kube::kustomize_yaml("podman-default", &[]));
    let default_flags = kube::podman_flags(
        kube::find(&base, "DaemonSet"),
        Path::new("/nonexistent"),
        &image_user,
    );
    let out = run(podman()
        .args(["run", "--rm"])
        .args(ULIMITS)
        .args(&default_flags)
        .arg(image)
        .args(["1", "1"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("failed to create map"),
        "{}",
        text(&out)
    );

    // A group of the node's made here, with a sleeper in it: its series
    // must come from inside the container.
    let root = cgroup::v1_cpu_root().unwrap_or_else(cgroup::v2_root);
    let group = TestCgroup::new(&root, "image");
    let procs = cgroup::Procs(vec![cgroup::pinned_sh(0, cgroup::SLEEPER)]);
    group.add(procs.pids()[0]);

    let port = free_port();
    let name = format!("schedlat-test-{}", std::process::id());
    let out = run(podman()
        .args(["run", "--detach", "--name", &name])
        .args(ULIMITS)
        .args(&flags)
        .arg(format!("--publish=127.0.0.1:{port}:9415"))
        .arg(image)
        .args(kube::args(daemonset)));
    assert!(out.status.success(), "{}", text(&out));
    let container = Container(name.clone());
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let key = format!("cgroup=\"{}\"", group.rel);
    let body = wait_for(addr, &key, &container);

    // Who it runs as, seen from the node.
    let out = run(podman().args(["inspect", "--format", "{{.State.Pid}}", &name]));
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let field = |name: &str| common::status_field(pid.parse().unwrap(), name);
    // The whole file, for the failure messages.
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(field("Uid:").starts_with("65532"), "{status}");
    // CAP_PERFMON is bit 38, CAP_BPF bit 39: exactly these, effective.
    assert_eq!(field("CapEff:"), "000000c000000000", "{status}");
    assert_eq!(field("CapBnd:"), "000000c000000000", "{status}");
    // None ambient: they came from the binary's file capabilities, as on
    // a Kubernetes node.
    assert_eq!(field("CapAmb:"), "0000000000000000", "{status}");
    assert_eq!(field("Seccomp:"), "2", "a seccomp filter: {status}");
    let mountinfo = fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root_mount = mountinfo
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .expect("a root mount");
    let options = root_mount.split_whitespace().nth(5).unwrap();
    assert!(
        options.split(',').any(|o| o == "ro"),
        "root not read-only: {root_mount}"
    );
    let count = body
        .lines()
        .filter(|l| l.starts_with("schedlat_cgroup_runqueue_latency_seconds_count{"))
        .count();
    assert!(count >= 2, "per-cgroup series: {body}");

    // The pod's memory, eBPF maps included (charged to its cgroup from
    // Linux 5.11), under a fork storm while scraped: the DaemonSet's
    // limit must hold twice the peak.
    let limit = kube::pod(daemonset).1["resources"]["limits"]["memory"]
        .as_str()
        .and_then(|m| m.strip_suffix("Mi"))
        .and_then(|m| m.parse::<u64>().ok())
        .expect("a memory limit in Mi")
        << 20;
    let storm = cgroup::Procs(
        (0..2)
            .map(|cpu| cgroup::pinned_sh(cpu, "while :; do /bin/true; done"))
            .collect(),
    );
    let started = Instant::now();
    let mut scrapes = 0;
    while started.elapsed() < Duration::from_secs(10) {
        if http::get(addr, "/metrics", None).is_ok_and(|r| r.status == 200) {
            scrapes += 1;
        }
        thread::sleep(Duration::from_millis(250));
    }
    drop(storm);
    let peak = memory_peak(&pid);
    let hwm_kib: u64 = field("VmHWM:")
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    assert!(scrapes > 10, "{scrapes} scrapes answered in 10 s");
    assert!(
        2 * peak <= limit,
        "memory peak {peak} is more than half the limit {limit}"
    );
    eprintln!(
        "container: {count} cgroup series, uid 65532, CapEff BPF+PERFMON; under a fork storm {scrapes} scrapes, memory peak {:.1} MiB (RSS {hwm_kib} KiB) of the {} MiB limit; pid_max {}",
        peak as f64 / (1 << 20) as f64,
        limit >> 20,
        fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
    );

    // SIGTERM (podman stop) ends it with status 0.
    let out = run(podman().args(["stop", "--time", "10", &name]));
    assert!(out.status.success(), "{}", text(&out));
    let out = run(podman().args(["inspect", "--format", "{{.State.ExitCode}}", &name]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "{}",
        logs(&name)
    );
    drop(container);
    drop(procs);
}

/// The peak memory of `pid`'s memory cgroup: `memory.peak` (cgroup v2,
/// 5.19+) or `memory.max_usage_in_bytes` (v1).
fn memory_peak(pid: &str) -> u64 {
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

fn logs(name: &str) -> String {
    text(&run(podman().args(["logs", name])))
}

/// Scrapes until the body has `key` (the first scrape may come before the
/// group's first wait), for up to 30 s.
fn wait_for(addr: SocketAddr, key: &str, container: &Container) -> String {
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The image's way of granting capabilities, on this host: a copy of
/// schedlat with the image's file capabilities (permitted only, `+p`) run
/// as uid 65532 with the DaemonSet's bounding set and no ambient
/// capabilities, as a non-root container process on a Kubernetes node.
#[test]
fn file_capabilities_without_the_effective_flag_are_raised_or_named() {
    if !require_root() {
        return;
    }
    let dir = TempDir::new("filecaps");
    let binary = dir.0.join("schedlat");
    fs::copy(common::SCHEDLAT, &binary).unwrap();
    let caps = "cap_bpf,cap_perfmon,cap_sys_resource,cap_dac_read_search+p";
    let out = run(Command::new("setcap").arg(caps).arg(&binary));
    assert!(out.status.success(), "{}", text(&out));
    let as_nonroot = |bounding: &str, extra: &[&str]| {
        run(Command::new("setpriv")
            .args([
                "--reuid=65532",
                "--regid=65532",
                "--clear-groups",
                "--inh-caps=-all",
                &format!("--bounding-set=-all,{bounding}"),
            ])
            .args(extra)
            .arg(&binary)
            .args(["1", "1"]))
    };
    let granted = as_nonroot("+bpf,+perfmon", &[]);
    assert!(granted.status.success(), "{}", text(&granted));
    assert!(text(&granted).contains("total "), "{}", text(&granted));
    // A bounding set without CAP_PERFMON: the exec still works (no
    // effective flag), and schedlat names what it lacks.
    let lacking = as_nonroot("+bpf", &[]);
    assert_eq!(lacking.status.code(), Some(1), "{}", text(&lacking));
    assert!(
        text(&lacking).contains("lacks CAP_PERFMON)"),
        "{}",
        text(&lacking)
    );
    // A non-root process that does not hold them, under no_new_privs: the
    // file capabilities would be a gain, which the kernel then withholds
    // (security/commoncap.c, cap_bprm_creds_from_file), and the message
    // says why. (A runtime that sets them permitted before the exec, as
    // runc does, is not refused: no gain.) The inner setpriv runs as the
    // user, without capabilities, and sets no_new_privs.
    let nnp = as_nonroot("+bpf,+perfmon", &["setpriv", "--no-new-privs"]);
    assert_eq!(nnp.status.code(), Some(1), "{}", text(&nnp));
    assert!(text(&nnp).contains("no_new_privs is set"), "{}", text(&nnp));
}

/// A directory under /tmp that uid 65532 can enter, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
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
const CONTAINERD_DEFAULT_CAPS: [&str; 14] = [
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

/// Kubernetes' `RuntimeDefault` on containerd (most clusters' runtime):
/// containerd's own default seccomp profile, which its CRI plugin and `ctr
/// run --seccomp` both apply, with the DaemonSet's capabilities, read-only
/// root and mounts, and the image's own user. containerd runs here as a
/// private daemon (its own root, state and socket) for the test's length.
#[test]
fn image_runs_under_containerds_default_seccomp_profile() {
    let Some(archive) = image_archive() else {
        return;
    };
    if !require_root() {
        return;
    }
    let dir = TempDir::new("containerd");
    let config = dir.0.join("config.toml");
    // Only what `ctr run` needs: no CRI server.
    fs::write(
        &config,
        "version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n",
    )
    .unwrap();
    let socket = dir.0.join("containerd.sock");
    let daemon = cgroup::Procs(vec![
        Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .arg("--root")
            .arg(dir.0.join("root"))
            .arg("--state")
            .arg(dir.0.join("state"))
            .arg("--address")
            .arg(&socket)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("containerd (Debian package containerd) runs"),
    ]);
    let ready = Instant::now();
    while !socket.exists() && ready.elapsed() < Duration::from_secs(20) {
        thread::sleep(Duration::from_millis(100));
    }
    let ctr = || {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(&socket)
            .args(["--namespace", "schedlat-test"]);
        cmd
    };
    let out = run(ctr().args(["image", "import"]).arg(&archive));
    assert!(out.status.success(), "{}", text(&out));

    let docs = kube::documents(&kube::kustomize_yaml("containerd", &[]));
    let daemonset = kube::find(&docs, "DaemonSet");
    let (_, container) = kube::pod(daemonset);
    let image = container["image"].as_str().unwrap();
    let caps = &container["securityContext"]["capabilities"];
    let mut cmd = ctr();
    cmd.args(["run", "--rm", "--seccomp", "--read-only"]);
    // ctr names capabilities one by one: `drop: [ALL]` is every one of
    // containerd's defaults (oci/spec.go's defaultUnixCaps).
    assert_eq!(caps["drop"], serde_json::json!(["ALL"]));
    for cap in CONTAINERD_DEFAULT_CAPS {
        cmd.args(["--cap-drop", cap]);
    }
    for cap in caps["add"].as_array().unwrap() {
        cmd.args(["--cap-add", &format!("CAP_{}", cap.as_str().unwrap())]);
    }
    for path in ["/sys/fs/cgroup", "/sys/kernel/btf"] {
        cmd.args([
            "--mount",
            &format!("type=bind,src={path},dst={path},options=rbind:ro"),
        ]);
    }
    let out = run(cmd
        .arg(image)
        .arg(format!("schedlat-test-{}", std::process::id()))
        .args(["/usr/bin/schedlat", "1", "1"]));
    let _ = run(ctr().args(["image", "rm", image]));
    drop(daemon);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("total "), "{report}");
}
