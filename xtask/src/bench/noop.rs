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
//! `--timer --decision` (the `timer-decision` mode) adds the least of the
//! decision split (docs/decision.md) to it: the two facts every wait's
//! decision starts from. At each enqueue (a wakeup, a preempted `prev`),
//! the need-resched bit of the CPU's running task
//! (`p->se.cfs_rq->rq->curr->thread_info.flags`, kept in the stamp's low
//! bit) and that run queue's switch count (`rq->nr_switches`, in a second
//! array by thread id); at the switch-in, the count again, the difference
//! (the pass-overs) added to a per-CPU sum. No rule, no holder, no
//! classes: less than the split has to do for any wait, so schedlat's
//! decision split costs at least this.
//!
//! Both are built from raw instructions (rawbpf.rs), so they ship in no
//! schedlat binary and need no second eBPF object.

use std::{io::Write as _, os::fd::OwnedFd};

use anyhow::{Context, Result, bail};
use btf_rs::Btf;

use super::rawbpf::{
    Asm, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY, HELPER_KTIME_GET_NS, R0, R1, R2, R3, R6,
    R7, R8, R9, R10, array_map, attach, attach_id, member_offset,
};

/// The line the bench waits for, as it waits for runqlat's and schedlat's.
pub(crate) const BANNER: &str = "Tracing run queue latency (noop: programs that return at once)";
/// The same for `--timer`.
pub(crate) const TIMER_BANNER: &str = "Tracing run queue latency (timer: the least a timer does)";
/// The same for `--timer --decision`.
pub(crate) const DECISION_BANNER: &str =
    "Tracing run queue latency (timer-decision: the least timer and decision)";

/// The tracepoints, each with the name of its program: names with "switch"
/// count the switches (progs.rs ns_per_switch), as schedlat's and
/// runqlat's do.
const WAKEUP: &str = "sched_wakeup";
const WAKEUP_NEW: &str = "sched_wakeup_new";
const SWITCH: &str = "sched_switch";

/// Log2 buckets of a wait in ns: 2^63 ns is ~292 years. The per-CPU
/// histogram has one u64 more: the decision variant's pass-over sum.
const SLOTS: i32 = 64;
/// x86's TIF_NEED_RESCHED up to 6.17 (4 from 6.18): what is measured is
/// the read, which costs the same whichever bit is kept.
const NEED_RESCHED_BIT: i32 = 3;

/// The floor's programs: `r0 = 0; exit` on every hook.
fn noop_programs() -> Result<Vec<(String, &'static str, Vec<u64>)>> {
    let insns = Asm::default().return_zero().finish()?;
    Ok([WAKEUP, WAKEUP_NEW, SWITCH]
        .into_iter()
        .map(|tp| (tp.replace("sched_", "noop_"), tp, insns.clone()))
        .collect())
}

/// The least timer's maps: the start of each thread's wait, by thread id,
/// and the per-CPU histogram; with the decision, the switch count at each
/// thread's enqueue.
struct TimerMaps {
    starts: OwnedFd,
    histogram: OwnedFd,
    switches: Option<OwnedFd>,
}

impl TimerMaps {
    fn create(decision: bool) -> Result<Self> {
        let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .context("reading /proc/sys/kernel/pid_max")?
            .trim()
            .parse()
            .context("parsing /proc/sys/kernel/pid_max")?;
        let by_tid = |name| array_map(name, BPF_MAP_TYPE_ARRAY, 8, pid_max);
        Ok(TimerMaps {
            starts: by_tid("timer_starts")?,
            histogram: array_map(
                "timer_hist",
                BPF_MAP_TYPE_PERCPU_ARRAY,
                8 * (SLOTS as u32 + 1),
                1,
            )?,
            switches: match decision {
                true => Some(by_tid("timer_switches")?),
                false => None,
            },
        })
    }
}

/// The kernel's offsets the programs read, from its BTF.
struct Offsets {
    pid: i16,
    /// `task->se.cfs_rq`, `cfs_rq->rq`, `rq->curr`, `rq->nr_switches`,
    /// `task->thread_info.flags`: the decision's.
    se_cfs_rq: i16,
    cfs_rq_rq: i16,
    rq_curr: i16,
    rq_nr_switches: i16,
    ti_flags: i16,
}

impl Offsets {
    fn resolve(btf: &Btf, decision: bool) -> Result<Self> {
        let at = |strukt, member| -> Result<i16> {
            let offset = member_offset(btf, strukt, member)?;
            i16::try_from(offset).with_context(|| format!("{strukt}.{member} at {offset}"))
        };
        let pid = at("task_struct", "pid")?;
        if !decision {
            return Ok(Offsets {
                pid,
                se_cfs_rq: 0,
                cfs_rq_rq: 0,
                rq_curr: 0,
                rq_nr_switches: 0,
                ti_flags: 0,
            });
        }
        Ok(Offsets {
            pid,
            se_cfs_rq: at("task_struct", "se")? + at("sched_entity", "cfs_rq")?,
            cfs_rq_rq: at("cfs_rq", "rq")?,
            rq_curr: at("rq", "curr")?,
            rq_nr_switches: at("rq", "nr_switches")?,
            ti_flags: at("task_struct", "thread_info")? + at("thread_info", "flags")?,
        })
    }
}

/// `map[task->pid] = value`: the key on the stack, an inlined array
/// lookup. Clobbers r0-r2.
fn store_by_tid(
    asm: &mut Asm,
    map: &OwnedFd,
    (task, pid): (u8, i16),
    value: u8,
    skip: &'static str,
) {
    asm.load32(R2, task, pid)
        .store32(R10, -4, R2)
        .lookup(map)
        .jump_if_eq(R0, 0, skip)
        .store64(R0, 0, value);
}

/// `dst = task->se.cfs_rq->rq`, the run queue `task` is on. Uses only
/// `dst`.
fn run_queue(asm: &mut Asm, dst: u8, task: u8, o: &Offsets) {
    asm.load64(dst, task, o.se_cfs_rq)
        .load64(dst, dst, o.cfs_rq_rq);
}

/// At an enqueue of `task` (the clock in r7): with the decision, the
/// need-resched bit of its CPU's running task into r7's low bit and that
/// CPU's switch count into r8. Clobbers r3.
fn enqueue_decision(asm: &mut Asm, task: u8, o: &Offsets) {
    run_queue(asm, R3, task, o);
    asm.load64(R8, R3, o.rq_nr_switches)
        .load64(R3, R3, o.rq_curr)
        .load64(R3, R3, o.ti_flags)
        .rsh_imm(R3, NEED_RESCHED_BIT)
        .and_imm(R3, 1)
        .or(R7, R3);
}

/// The least timer's programs (module doc); with `maps.switches`, the
/// least decision too.
fn timer_programs(maps: &TimerMaps, o: &Offsets) -> Result<Vec<(String, &'static str, Vec<u64>)>> {
    let name = if maps.switches.is_some() {
        "timerd"
    } else {
        "timer"
    };
    // A wakeup: r7 = now; starts[p->pid] = r7 (and switches[p->pid] = r8).
    let mut wakeup = Asm::default();
    wakeup
        .load64(R6, R1, 0)
        .call(HELPER_KTIME_GET_NS)
        .mov(R7, R0);
    if let Some(switches) = &maps.switches {
        enqueue_decision(&mut wakeup, R6, o);
        store_by_tid(&mut wakeup, switches, (R6, o.pid), R8, "out");
    }
    store_by_tid(&mut wakeup, &maps.starts, (R6, o.pid), R7, "out");
    wakeup.label("out").return_zero();
    let wakeup = wakeup.finish()?;

    // A switch (ctx: preempt, prev, next, prev_state, each a u64).
    let mut switch = Asm::default();
    switch.mov(R6, R1).call(HELPER_KTIME_GET_NS).mov(R7, R0);
    // A preempted prev (state 0, TASK_RUNNING) starts waiting now.
    switch.load64(R1, R6, 24).jump_if_ne32(R1, 0, "next");
    switch.load64(R9, R6, 8);
    match &maps.switches {
        Some(switches) => {
            // The clock kept on the stack: the stamp carries the request
            // in its low bit, next's wait needs the clock itself.
            switch.store64(R10, -16, R7);
            enqueue_decision(&mut switch, R9, o);
            store_by_tid(&mut switch, switches, (R9, o.pid), R8, "stamp");
            switch.label("stamp");
            store_by_tid(&mut switch, &maps.starts, (R9, o.pid), R7, "clock");
            switch.label("clock").load64(R7, R10, -16);
        }
        None => store_by_tid(&mut switch, &maps.starts, (R9, o.pid), R7, "next"),
    }
    // next: its wait ends; r7 = now - start.
    switch
        .label("next")
        .load64(R9, R6, 16)
        .load32(R2, R9, o.pid)
        .store32(R10, -4, R2)
        .lookup(&maps.starts)
        .jump_if_eq(R0, 0, "out")
        .load64(R1, R0, 0)
        .jump_if_eq(R1, 0, "out")
        .store64_imm(R0, 0, 0)
        .sub(R7, R1);
    // The decision: r8 = the switches on next's CPU since its enqueue.
    if let Some(switches) = &maps.switches {
        switch
            .mov_imm(R8, 0)
            .load32(R2, R9, o.pid)
            .store32(R10, -4, R2)
            .lookup(switches)
            .jump_if_eq(R0, 0, "log2")
            .load64(R8, R0, 0);
        run_queue(&mut switch, R3, R9, o);
        switch
            .load64(R3, R3, o.rq_nr_switches)
            .sub(R3, R8)
            .mov(R8, R3);
        switch.label("log2");
    }
    // r3 = log2(r7): the binary search runqlat's log2l does, by shifts.
    switch.mov_imm(R3, 0);
    for (shift, skip) in [32, 16, 8, 4, 2, 1]
        .into_iter()
        .zip(["s32", "s16", "s8", "s4", "s2", "s1"])
    {
        switch
            .mov(R1, R7)
            .rsh_imm(R1, shift)
            .jump_if_eq(R1, 0, skip)
            .add_imm(R3, shift)
            .mov(R7, R1)
            .label(skip);
    }
    // histogram[slot] += 1, this CPU's (and the pass-overs' sum).
    switch
        .store32_imm(R10, -4, 0)
        .mov(R9, R3)
        .lookup(&maps.histogram)
        .jump_if_eq(R0, 0, "out");
    if maps.switches.is_some() {
        switch
            .load64(R1, R0, 8 * SLOTS as i16)
            .add(R1, R8)
            .store64(R0, 8 * SLOTS as i16, R1);
    }
    switch
        .lsh_imm(R9, 3)
        .add(R0, R9)
        .load64(R1, R0, 0)
        .add_imm(R1, 1)
        .store64(R0, 0, R1)
        .label("out")
        .return_zero();
    let switch = switch.finish()?;

    Ok(vec![
        (format!("{name}_wakeup"), WAKEUP, wakeup.clone()),
        (format!("{name}_wakeup_new"), WAKEUP_NEW, wakeup),
        (format!("{name}_switch"), SWITCH, switch),
    ])
}

/// Which reference programs `cargo xtask bench-noop` attaches.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Programs {
    Noop,
    Timer,
    TimerDecision,
}

/// Body of `cargo xtask bench-noop`: attach, say so, hold until SIGINT or
/// SIGTERM, detach by exiting.
pub(crate) fn run(programs: Programs) -> Result<()> {
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
    let decision = programs == Programs::TimerDecision;
    let maps = match programs {
        Programs::Noop => None,
        Programs::Timer | Programs::TimerDecision => Some(TimerMaps::create(decision)?),
    };
    let (programs_insns, banner) = match &maps {
        Some(maps) => {
            let offsets = Offsets::resolve(&btf, decision)?;
            let banner = if decision {
                DECISION_BANNER
            } else {
                TIMER_BANNER
            };
            (timer_programs(maps, &offsets)?, banner)
        }
        None => (noop_programs()?, BANNER),
    };
    let mut held = Vec::new();
    for (name, tp, insns) in &programs_insns {
        held.push(attach(name, insns, attach_id(&btf, tp)?)?);
    }
    drop(btf);
    let mut out = std::io::stdout();
    writeln!(out, "{banner}")?;
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
