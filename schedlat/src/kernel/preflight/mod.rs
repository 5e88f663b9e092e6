//! `schedlat check`'s judgement: the host's and this process's facts
//! (sys/host.rs), each found good or not with the fix for it, and a trial
//! load of every mode (trial.rs), which is the last word on whether a mode
//! runs: a fact can only explain why one does not.

mod probe;
pub(crate) mod trial;

use schedlat_common::kconfig::DelayedCount;

use crate::{
    kernel::{btf, cgroupfs, privileges, tracefs},
    sys::{
        host::{self, CgroupLayout, Lockdown, ProcessStatus, Release},
        mounts::Mounts,
        sched_context::SchedContext,
        slice::Slice,
    },
};

/// How a fact stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Ok,
    /// Not fatal: a mode or a detail is lost, or worth knowing.
    Warn,
    /// Tracing cannot work until it is fixed.
    Fail,
}

/// One fact: what was found, and the fix where it is not ok.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Check {
    pub name: &'static str,
    pub status: Status,
    pub found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &'static str, status: Status, found: String, fix: Option<String>) -> Check {
    Check {
        name,
        status,
        found,
        fix: fix.filter(|_| status != Status::Ok),
    }
}

const CAP_NAMES: [(u32, &str); 5] = [
    (39, "CAP_BPF"),
    (38, "CAP_PERFMON"),
    (21, "CAP_SYS_ADMIN"),
    (2, "CAP_DAC_READ_SEARCH"),
    (24, "CAP_SYS_RESOURCE"),
];

fn cap_names(mask: u64) -> String {
    let names: Vec<&str> = CAP_NAMES
        .iter()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|&(_, name)| name)
        .collect();
    if names.is_empty() {
        "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN".to_string()
    } else {
        names.join(", ")
    }
}

/// Every fact, in the order a reader fixes them.
pub(crate) fn facts() -> Vec<Check> {
    let can_trace = privileges::can_trace();
    let release = Release::read();
    let status = ProcessStatus::read();
    let mut out = vec![kernel(&release), btf()];
    out.push(capabilities(can_trace, &status));
    out.push(bpf_syscall(can_trace, &status, &release));
    if can_trace {
        out.push(ring_buffer());
    }
    out.push(lockdown());
    out.push(memlock(&release, &status));
    out.push(tracefs());
    out.push(debugfs());
    out.push(scheduler());
    out.extend(cgroups());
    out.extend(from_btf());
    out.push(pid_namespace(&status));
    out.push(psi());
    out.push(bpf_stats());
    out
}

fn kernel(release: &Release) -> Check {
    let status = if !release.at_least(5, 8) {
        Status::Fail
    } else if !release.at_least(5, 12) {
        Status::Warn
    } else {
        Status::Ok
    };
    check(
        "kernel",
        status,
        format!("Linux {}", release.text),
        Some(if status == Status::Fail {
            "before 5.8 no mode runs: there is no BPF ring buffer, which every mode creates, nor CAP_BPF and CAP_PERFMON: Linux 5.8 or newer".to_string()
        } else {
            "victims and top need 5.12+ (64-bit atomics); before 5.11 maps count against RLIMIT_MEMLOCK (see memlock)".to_string()
        }),
    )
}

fn btf() -> Check {
    match host::kernel_btf() {
        Ok(path) => check("btf", Status::Ok, path.display().to_string(), None),
        Err(e) => check(
            "btf",
            Status::Warn,
            format!("/sys/kernel/btf/vmlinux: {e}"),
            Some("tp_btf and the modes that need it (breakdowns, victims, slow) are off; the histogram falls back to classic tracepoints. A kernel built with CONFIG_DEBUG_INFO_BTF=y has it; `--btf FILE` takes a copy".to_string()),
        ),
    }
}

fn capabilities(can_trace: bool, status: &ProcessStatus) -> Check {
    let caps = status.capabilities;
    if privileges::in_user_namespace() {
        return check(
            "capabilities",
            Status::Fail,
            format!(
                "uid {}, effective: {}, in a user namespace other than the host's: they do not allow BPF",
                host::euid(),
                cap_names(caps.effective)
            ),
            Some(privileges::USER_NAMESPACE.to_string()),
        );
    }
    let found = format!(
        "uid {}, effective: {}; bounding set {}",
        host::euid(),
        cap_names(caps.effective),
        if caps.bounding & (3 << 38) == 3 << 38 || caps.bounding & (1 << 21) != 0 {
            "allows tracing"
        } else {
            "lacks CAP_BPF or CAP_PERFMON (the runtime did not grant them)"
        }
    );
    check(
        "capabilities",
        if can_trace { Status::Ok } else { Status::Fail },
        found,
        Some(privileges::NEED_PRIVILEGES.to_string()),
    )
}

fn bpf_syscall(can_trace: bool, status: &ProcessStatus, release: &Release) -> Check {
    let e = match probe::array_map() {
        Ok(()) => return check("bpf", Status::Ok, "bpf() creates maps".to_string(), None),
        Err(e) => e,
    };
    let fix = match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no bpf() (CONFIG_BPF_SYSCALL=n), or a seccomp filter answers ENOSYS for it: a kernel with BPF, or a profile that allows bpf".to_string(),
        Some(libc::EPERM) if privileges::in_user_namespace() => privileges::USER_NAMESPACE.to_string(),
        Some(libc::EPERM) if !can_trace => "grant the capabilities above".to_string(),
        Some(libc::EPERM) if status.seccomp == Some(2) => "the capabilities are held, so the seccomp filter refuses bpf(): the default profiles of podman and CRI-O allow bpf and perf_event_open only with CAP_SYS_ADMIN. Run under a profile that allows them (deploy/seccomp/bpf.json: podman --security-opt seccomp=FILE, Kubernetes seccompProfile type Localhost; docs/deploy.md)".to_string(),
        Some(libc::EPERM) if !release.at_least(5, 11) => "before 5.11 a map's memory counts against RLIMIT_MEMLOCK: raise it (LimitMEMLOCK=infinity, ulimit -l unlimited) or grant CAP_SYS_RESOURCE".to_string(),
        _ => "an LSM (SELinux, AppArmor, lockdown) or kernel.unprivileged_bpf_disabled refuses; see the kernel log".to_string(),
    };
    check(
        "bpf",
        Status::Fail,
        format!("bpf() refused a map: {e}"),
        Some(fix),
    )
}

fn ring_buffer() -> Check {
    match probe::ring_buffer() {
        Ok(()) => check(
            "ring-buffer",
            Status::Ok,
            "BPF ring buffers".to_string(),
            None,
        ),
        Err(e) => check(
            "ring-buffer",
            Status::Warn,
            format!("a BPF ring buffer was refused: {e}"),
            Some(
                "BPF ring buffers came in Linux 5.8: `slow` and the flight recorder need them"
                    .to_string(),
            ),
        ),
    }
}

fn lockdown() -> Check {
    match host::lockdown() {
        Lockdown::Mode(mode) if mode == "confidentiality" => check(
            "lockdown",
            Status::Fail,
            mode,
            Some("lockdown=confidentiality forbids BPF programs to read kernel memory: boot with lockdown=integrity (or none)".to_string()),
        ),
        Lockdown::Mode(mode) => check("lockdown", Status::Ok, mode, None),
        Lockdown::NoLsm => check("lockdown", Status::Ok, "no lockdown LSM".to_string(), None),
        // Unknown, not absent: the trial loads below still tell whether
        // lockdown refuses anything.
        Lockdown::Unreadable(why) => check(
            "lockdown",
            Status::Warn,
            format!("unreadable: {why}"),
            Some("the modes' trial loads decide; on the host, /sys/kernel/security/lockdown says the mode".to_string()),
        ),
    }
}

fn memlock(release: &Release, status: &ProcessStatus) -> Check {
    if release.at_least(5, 11) {
        return check(
            "memlock",
            Status::Ok,
            "not used: since 5.11 maps are charged to the memory cgroup".to_string(),
            None,
        );
    }
    let may_raise = status.capabilities.effective & (1 << 24 | 1 << 21) != 0;
    match host::memlock() {
        None => check("memlock", Status::Ok, "unlimited".to_string(), None),
        Some(_) if may_raise => check(
            "memlock",
            Status::Ok,
            "limited, raised at load (CAP_SYS_RESOURCE)".to_string(),
            None,
        ),
        Some(bytes) => check(
            "memlock",
            Status::Fail,
            format!("RLIMIT_MEMLOCK {} KiB, and no CAP_SYS_RESOURCE to raise it", bytes >> 10),
            Some("before 5.11 maps count against RLIMIT_MEMLOCK: LimitMEMLOCK=infinity in a unit, `ulimit -l unlimited`, or grant CAP_SYS_RESOURCE (deploy/kubernetes's kernel-before-5.11 component)".to_string()),
        ),
    }
}

fn tracefs() -> Check {
    let found = tracefs::locate(None)
        .and_then(|dir| tracefs::Format::read(&dir, "sched", "sched_switch").map(|_| dir));
    match found {
        Ok(dir) => check(
            "tracefs",
            Status::Ok,
            format!("{} (sched_switch format readable)", dir.display()),
            None,
        ),
        Err(e) => check(
            "tracefs",
            Status::Warn,
            "unreadable".to_string(),
            Some(format!(
                "`--hook tp` (the fallback without BTF) needs it: {e}"
            )),
        ),
    }
}

fn debugfs() -> Check {
    match host::debugfs() {
        Some(dir) => check("debugfs", Status::Ok, dir.display().to_string(), None),
        None => check(
            "debugfs",
            Status::Ok,
            "not mounted (schedlat does not need it where tracefs is mounted)".to_string(),
            None,
        ),
    }
}

/// The preemption model and the mechanisms that change what a wait means
/// (sched_ext, the fair deadline server, delayed dequeue): what the
/// reports' kernel lines say, so that a host can be told before a run.
fn scheduler() -> Check {
    let context = SchedContext::detect(&Slice::detect());
    let preemption = context.preemption.as_ref().map_or_else(
        || "preemption unknown".to_string(),
        |p| format!("preemption {} ({})", p.model, p.source),
    );
    check(
        "scheduler",
        Status::Ok,
        format!("{preemption}; {}", context.mechanisms.summary()),
        None,
    )
}

fn cgroups() -> Vec<Check> {
    let mounts = Mounts::read();
    let layout = CgroupLayout::of(&mounts);
    let Some(hierarchy) = cgroupfs::default_hierarchy(&mounts) else {
        return vec![check(
            "cgroups",
            Status::Warn,
            "no cgroup filesystem mounted".to_string(),
            Some(
                "--cgroups and -c need one: mount the host's /sys/fs/cgroup (read-only will do)"
                    .to_string(),
            ),
        )];
    };
    let mut out = vec![check(
        "cgroups",
        Status::Ok,
        format!(
            "{}; --cgroups reads {}",
            layout.name(),
            hierarchy.describe()
        ),
        None,
    )];
    out.push(match host::shows_whole_hierarchy(&hierarchy.mount) {
        Some(true) => check(
            "cgroup-root",
            Status::Ok,
            format!("{} is the hierarchy's root: every group can be named", hierarchy.mount.display()),
            None,
        ),
        _ => check(
            "cgroup-root",
            Status::Warn,
            format!("{} is not the hierarchy's root (a cgroup namespace or a bind-mounted subtree)", hierarchy.mount.display()),
            Some("groups outside this one are measured but shown by id, not path: mount the host's cgroupfs (hostPath /sys/fs/cgroup, read-only) at a path of its own".to_string()),
        ),
    });
    out
}

/// What the kernel's BTF tells about the split, from one read of it: what
/// the cause split's "held by the same cgroup" compares on this kernel
/// (docs/causes.md, "Who held the CPU"), and what the queue depth counts.
fn from_btf() -> Vec<Check> {
    let path = std::path::Path::new(btf::VMLINUX_BTF);
    let read = btf::open(path).map_err(|e| e.to_string()).and_then(|b| {
        let layouts = btf::Layouts::new(&b, path);
        let group = btf::scheduler_group(&layouts).map_err(|e| e.to_string())?;
        Ok((group.0, btf::delayed_count(&layouts).0))
    });
    match read {
        Ok((group, delayed)) => vec![
            check(
                "held-by",
                Status::Ok,
                format!("same or other cgroup: {}", group.describe()),
                None,
            ),
            check("queue-depth", Status::Ok, queue_depth(delayed).into(), None),
        ],
        Err(e) => vec![check(
            "held-by",
            Status::Warn,
            format!("unknown: {e}"),
            Some("without kernel BTF the cause split's holder is `unknown` (see btf)".to_string()),
        )],
    }
}

/// What the queue depth (docs/causes.md) counts on this kernel: the
/// tasks that can run, the kernel's own count of those delayed dequeue
/// keeps queued after they blocked taken out, by the counter it has.
fn queue_depth(delayed: DelayedCount) -> &'static str {
    match delayed {
        DelayedCount::QueuedLessRunnable => {
            "runnable tasks: rq->nr_running less the blocked tasks delayed dequeue keeps queued (rq->cfs.h_nr_queued - h_nr_runnable)"
        }
        DelayedCount::Delayed => {
            "runnable tasks: rq->nr_running less the blocked tasks delayed dequeue keeps queued (rq->cfs.h_nr_delayed)"
        }
        DelayedCount::None => {
            "rq->nr_running: this kernel has no counter of blocked tasks kept queued (no delayed dequeue before 6.12)"
        }
    }
}

fn pid_namespace(status: &ProcessStatus) -> Check {
    let own = match host::in_host_pid_namespace() {
        Some(host) => !host,
        None => status.nspid.len() > 1,
    };
    if !own {
        return check("pid-namespace", Status::Ok, "the host's".to_string(), None);
    }
    check(
        "pid-namespace",
        Status::Warn,
        "a namespace of its own (a container's)".to_string(),
        Some("the kernel reports host PIDs: -P, -L, victims, slow and serve --pids name processes from /proc, which here shows this namespace only. Share the host's (hostPID: true, podman --pid=host)".to_string()),
    )
}

fn psi() -> Check {
    match host::psi() {
        Ok(()) => check("psi", Status::Ok, "/proc/pressure/cpu".to_string(), None),
        Err(e) => check(
            "psi",
            Status::Warn,
            format!("/proc/pressure/cpu: {e}"),
            Some(
                "`diagnose` loses its no-root evidence: boot with psi=1 (CONFIG_PSI=y)".to_string(),
            ),
        ),
    }
}

fn bpf_stats() -> Check {
    match host::bpf_stats_enabled() {
        Some(true) => check("bpf-stats", Status::Ok, "enabled".to_string(), None),
        Some(false) => check(
            "bpf-stats",
            Status::Ok,
            "off: schedlat_bpf_run_time (its own cost) stands still unless enabled".to_string(),
            None,
        ),
        None => check(
            "bpf-stats",
            Status::Ok,
            "kernel.bpf_stats_enabled unreadable".to_string(),
            None,
        ),
    }
}
