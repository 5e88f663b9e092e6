//! The hooks' floor and the least timer, the references under every BPF ns
//! per switch. `cargo xtask bench-noop` (hidden; the bench runs it as its
//! `noop` mode) attaches three tp_btf programs, on sched_switch,
//! sched_wakeup and sched_wakeup_new, each `r0 = 0; exit`, and waits for
//! SIGINT. Their run time is what the kernel charges any program on these
//! hooks before it does a thing (the call through the tracepoint, and the
//! clock reads of the run-time stats themselves), measured in the same run
//! as runqlat and schedlat: no ratio of schedlat's below noop/runqlat is
//! reachable.
//!
//! `cargo xtask bench-noop --timer` (the `timer` mode) attaches instead the
//! least a run queue latency tool can do on the same hooks: a wakeup stores
//! the clock at the task's slot of an array indexed by thread id; a switch
//! does the same for a preempted `prev`, and for `next` reads its slot,
//! clears it and adds one to a per-CPU log2 histogram of the wait. No
//! filter, no key, no split, no check that a slot is stale; every map
//! lookup is one the verifier inlines. What it costs above the floor is what
//! timing a wait costs at all, so a ratio to runqlat below the timer's is
//! out of reach for any tool that times waits on these hooks.
//!
//! Both are built from raw instructions (rawbpf.rs), so they ship in no
//! schedlat binary and need no second eBPF object.

use std::{io::Write as _, os::fd::OwnedFd};

use anyhow::{Context, Result, bail};
use btf_rs::Btf;

use super::rawbpf::{
    Asm, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY, HELPER_KTIME_GET_NS, R0, R1, R2, R3, R6,
    R7, R10, array_map, attach, attach_id, member_offset,
};

/// The line the bench waits for, as it waits for runqlat's and schedlat's.
pub(crate) const BANNER: &str = "Tracing run queue latency (noop: programs that return at once)";
/// The same for `--timer`.
pub(crate) const TIMER_BANNER: &str = "Tracing run queue latency (timer: the least a timer does)";

/// The tracepoints, each with the name of its program: names with "switch"
/// count the switches (progs.rs ns_per_switch), as schedlat's and
/// runqlat's do.
const WAKEUP: &str = "sched_wakeup";
const WAKEUP_NEW: &str = "sched_wakeup_new";
const SWITCH: &str = "sched_switch";

/// Log2 buckets of a wait in ns: 2^63 ns is ~292 years.
const SLOTS: i32 = 64;

/// The floor's programs: `r0 = 0; exit` on every hook.
fn noop_programs() -> Result<Vec<(String, &'static str, Vec<u64>)>> {
    let insns = Asm::default().return_zero().finish()?;
    Ok([WAKEUP, WAKEUP_NEW, SWITCH]
        .into_iter()
        .map(|tp| (tp.replace("sched_", "noop_"), tp, insns.clone()))
        .collect())
}

/// The least timer's maps: the start of each thread's wait, by thread id,
/// and the per-CPU histogram.
struct TimerMaps {
    starts: OwnedFd,
    histogram: OwnedFd,
}

impl TimerMaps {
    fn create() -> Result<Self> {
        let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .context("reading /proc/sys/kernel/pid_max")?
            .trim()
            .parse()
            .context("parsing /proc/sys/kernel/pid_max")?;
        Ok(TimerMaps {
            starts: array_map("timer_starts", BPF_MAP_TYPE_ARRAY, 8, pid_max)?,
            histogram: array_map("timer_hist", BPF_MAP_TYPE_PERCPU_ARRAY, 8 * SLOTS as u32, 1)?,
        })
    }
}

/// `starts[task->pid] = r7` for the task pointer in `task`: the key on
/// the stack, an inlined array lookup. Clobbers r0-r2.
fn stamp(asm: &mut Asm, maps: &TimerMaps, task: u8, pid: i16, skip: &'static str) {
    asm.load32(R2, task, pid)
        .store32(R10, -4, R2)
        .lookup(&maps.starts)
        .jump_if_eq(R0, 0, skip)
        .store64(R0, 0, R7);
}

/// The least timer's programs (module doc).
fn timer_programs(maps: &TimerMaps, pid: i16) -> Result<Vec<(String, &'static str, Vec<u64>)>> {
    // A wakeup: r7 = now; starts[p->pid] = r7.
    let mut wakeup = Asm::default();
    wakeup
        .load64(R6, R1, 0)
        .call(HELPER_KTIME_GET_NS)
        .mov(R7, R0);
    stamp(&mut wakeup, maps, R6, pid, "out");
    wakeup.label("out").return_zero();
    let wakeup = wakeup.finish()?;

    // A switch (ctx: preempt, prev, next, prev_state, each a u64).
    let mut switch = Asm::default();
    switch.mov(R6, R1).call(HELPER_KTIME_GET_NS).mov(R7, R0);
    // A preempted prev (state 0, TASK_RUNNING) starts waiting now.
    switch.load64(R1, R6, 24).jump_if_ne32(R1, 0, "next");
    switch.load64(R3, R6, 8);
    stamp(&mut switch, maps, R3, pid, "next");
    // next: its wait ends; r7 = now - start.
    switch
        .label("next")
        .load64(R3, R6, 16)
        .load32(R2, R3, pid)
        .store32(R10, -4, R2)
        .lookup(&maps.starts)
        .jump_if_eq(R0, 0, "out")
        .load64(R1, R0, 0)
        .jump_if_eq(R1, 0, "out")
        .store64_imm(R0, 0, 0)
        .sub(R7, R1);
    // r3 = log2(r7): the binary search runqlat's log2l does, by shifts.
    switch.mov_imm(R3, 0);
    for (i, shift) in [32, 16, 8, 4, 2, 1].into_iter().enumerate() {
        let skip = ["s32", "s16", "s8", "s4", "s2", "s1"][i];
        switch
            .mov(R1, R7)
            .rsh_imm(R1, shift)
            .jump_if_eq(R1, 0, skip)
            .add_imm(R3, shift)
            .mov(R7, R1)
            .label(skip);
    }
    // histogram[slot] += 1, this CPU's.
    switch
        .store32_imm(R10, -4, 0)
        .mov(R6, R3)
        .lookup(&maps.histogram)
        .jump_if_eq(R0, 0, "out")
        .lsh_imm(R6, 3)
        .add(R0, R6)
        .load64(R1, R0, 0)
        .add_imm(R1, 1)
        .store64(R0, 0, R1)
        .label("out")
        .return_zero();
    let switch = switch.finish()?;

    Ok(vec![
        ("timer_wakeup".into(), WAKEUP, wakeup.clone()),
        ("timer_wakeup_new".into(), WAKEUP_NEW, wakeup),
        ("timer_switch".into(), SWITCH, switch),
    ])
}

/// Body of `cargo xtask bench-noop`: attach, say so, hold until SIGINT or
/// SIGTERM, detach by exiting.
pub(crate) fn run(timer: bool) -> Result<()> {
    crate::util::require_root("the noop programs are eBPF programs")?;
    // Blocked before anything: the signal waits for sigwait below.
    // SAFETY: plain libc signal-set calls on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("blocking SIGINT and SIGTERM");
        }
        set
    };
    let btf = Btf::from_file_with_backend("/sys/kernel/btf/vmlinux", btf_rs::Backend::Mmap)
        .or_else(|_| Btf::from_file("/sys/kernel/btf/vmlinux"))
        .context("reading /sys/kernel/btf/vmlinux")?;
    let maps = if timer {
        Some(TimerMaps::create()?)
    } else {
        None
    };
    let programs = match &maps {
        Some(maps) => {
            let pid = member_offset(&btf, "task_struct", "pid")?;
            timer_programs(
                maps,
                i16::try_from(pid).context("task_struct.pid's offset")?,
            )?
        }
        None => noop_programs()?,
    };
    let mut held = Vec::new();
    for (name, tp, insns) in &programs {
        held.push(attach(name, insns, attach_id(&btf, tp)?)?);
    }
    drop(btf);
    let mut out = std::io::stdout();
    writeln!(out, "{}", if timer { TIMER_BANNER } else { BANNER })?;
    out.flush()?;
    let mut signal = 0;
    // SAFETY: a valid set and out-pointer.
    if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
        bail!("waiting for SIGINT");
    }
    drop(held);
    drop(maps);
    Ok(())
}
