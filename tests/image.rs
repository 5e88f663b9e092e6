//! Root: the OCI image `cargo xtask image` builds, run with exactly the
//! DaemonSet's securityContext and mounts: by podman (its default seccomp
//! profile, then the seccomp-localhost component's), and by containerd
//! under its own default profile (Kubernetes' RuntimeDefault on most
//! clusters); and the image's file capabilities on this host.
//!
//! The image is built once by `cargo xtask test`, which passes its path in
//! SCHEDLAT_DIST_IMAGE (unset: these are skipped, except under CI=true).

use std::{
    fs,
    net::SocketAddr,
    path::Path,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{
    cgroup::{self, TestCgroup},
    container::{
        CONTAINERD_DEFAULT_CAPS, Container, TempDir, ULIMITS, free_port, image_archive,
        localhost_profile, logs, memory_peak, podman, run, text, wait_for,
    },
    http, kube, require_root,
};
use serde_json::Value;

use crate::common;

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
    // `schedlat check` there names the seccomp filter, not the
    // capabilities, and the profile to use.
    let out = run(podman()
        .args(["run", "--rm"])
        .args(ULIMITS)
        .args(&default_flags)
        .arg(image)
        .args(["check", "--json"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fact = |report: &Value, name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {report}"))
    };
    assert_eq!(fact(&report, "capabilities")["status"], "ok", "{report}");
    let bpf = fact(&report, "bpf");
    assert_eq!(bpf["status"], "fail", "{bpf}");
    let fix = bpf["fix"].as_str().unwrap();
    assert!(fix.contains("seccomp") && fix.contains("bpf.json"), "{fix}");

    // Under the profile the manifests use, check (as the init container
    // runs it) reports every mode this pod can run: all but classic
    // tracepoints, which need tracefs (not mounted) and
    // CAP_DAC_READ_SEARCH.
    let out = run(podman()
        .args(["run", "--rm"])
        .args(ULIMITS)
        .args(&flags)
        .arg(image)
        .args([
            "check",
            "--json",
            "--require",
            "histogram,per-process,cgroups,victims,slow",
        ]));
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for m in report["modes"].as_array().unwrap() {
        let expected = m["mode"] != "tracepoint";
        assert_eq!(m["runs"], expected, "{m}");
    }
    assert_eq!(fact(&report, "cgroup-root")["status"], "ok", "{report}");
    assert_eq!(fact(&report, "pid-namespace")["status"], "warn", "{report}");
    // The container's /sys has no securityfs: lockdown is unknown there,
    // not absent (check said "no lockdown LSM" before).
    let lockdown = fact(&report, "lockdown");
    assert_eq!(lockdown["status"], "warn", "{lockdown}");
    assert!(
        lockdown["found"]
            .as_str()
            .is_some_and(|f| f.starts_with("unreadable: ")),
        "{lockdown}"
    );
    eprintln!("check in the container: {report}");

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
    let cpus = common::cpu::CpuTimes::now();
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
    assert!(
        scrapes > 10,
        "{scrapes} scrapes answered in 10 s ({})",
        cpus.busy_since()
    );
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
            .args(["-v", "1", "1"]))
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
        .args(["/usr/bin/schedlat", "-v", "1", "1"]));
    let _ = run(ctr().args(["image", "rm", image]));
    drop(daemon);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("total "), "{report}");
}
