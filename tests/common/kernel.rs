//! The running kernel, for tests that run on several (here and in the VM
//! guests): its release and version, and the scheduler calls they make.

/// (major, minor) of the running kernel; (0, 0) if unreadable.
pub(crate) fn kernel_version() -> (u32, u32) {
    let release = kernel_release();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// `uname -r`, for messages: the same test runs on several kernels.
pub(crate) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "this kernel".to_string(), |s| s.trim().to_string())
}

/// Whether this kernel is PREEMPT_RT (/sys/kernel/realtime, or the build
/// string `uname -v` prints). There a fair task's timer wakeups come from
/// the ktimers thread (its hrtimers expire in that thread's softirq
/// context), a SCHED_FIFO task at priority 1 that is the running task on
/// the sleeper's CPU at the wakeup: no fair wakeup preempts it, every rule
/// check meets another class, no timer wakeup finds the CPU idle, and a
/// real-time loop on the CPU keeps a fair sleeper there from waking at all.
pub(crate) fn preempt_rt() -> bool {
    let file = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    file("/sys/kernel/realtime").trim() == "1"
        || file("/proc/sys/kernel/version").contains("PREEMPT_RT")
}

/// Fails unless RT throttling is on (sched_rt_runtime_us not -1): a test
/// that runs a SCHED_FIFO loop would otherwise starve its CPU for good.
pub(crate) fn assert_rt_throttling_on() {
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .unwrap_or_default()
        .trim()
        .to_string();
    assert!(
        runtime != "-1" && !runtime.is_empty(),
        "{}: RT throttling is off (sched_rt_runtime_us {runtime:?}): a FIFO loop would starve the CPU",
        kernel_release()
    );
}

/// sched_setattr(2) on `tid`: SCHED_OTHER, nice 0, a custom slice of
/// `runtime_ns` (the task's slice from 6.12, kernel/sched/syscalls.c
/// __setscheduler_params(); earlier kernels ignore it for the fair class).
pub(crate) fn set_custom_slice(tid: u32, runtime_ns: u64) {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: size_of::<SchedAttr>() as u32,
        policy: 0,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: runtime_ns,
        deadline: 0,
        period: 0,
    };
    // SAFETY: attr is a valid sched_attr of the size it states (VER0).
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    assert_eq!(rc, 0, "sched_setattr: {}", std::io::Error::last_os_error());
}

/// Why waits here are set by emulation rather than by the scheduler, or
/// None on real or hardware-virtualized CPUs: `cargo xtask vm-test` boots
/// its guests under QEMU's TCG where the host has no KVM (xtask/src/vm/qemu.rs
/// passes no `-cpu` then), and QEMU's default CPU model names itself in
/// /proc/cpuinfo ("QEMU Virtual CPU version 2.5+"); under KVM (`-cpu host`)
/// the guest sees the host's model and runs at its speed. A test that can
/// assert latency only where the CPU is not emulated asks this.
pub(crate) fn emulated() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))?
        .trim_start_matches([' ', '\t', ':'])
        .trim();
    model
        .starts_with("QEMU")
        .then(|| format!("the CPU is emulated (/proc/cpuinfo model name \"{model}\": QEMU's TCG)"))
}
