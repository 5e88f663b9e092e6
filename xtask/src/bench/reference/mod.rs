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
//! The programs are Rust eBPF, as schedlat's are, in a crate of their own
//! (xtask/bench-ebpf, one object per mode), so they ship in no schedlat
//! binary; built on demand (object.rs), loaded and attached with aya, the
//! offsets they read set from the kernel's BTF as read-only globals
//! (offsets.rs).

pub(crate) mod object;
mod offsets;

use std::io::Write as _;

use anyhow::{Context, Result, bail};
use aya::{EbpfLoader, programs::BtfTracePoint};

/// The line the bench waits for, as it waits for runqlat's and schedlat's.
pub(crate) const BANNER: &str = "Tracing run queue latency (noop: programs that return at once)";
/// The same for `--timer`.
pub(crate) const TIMER_BANNER: &str = "Tracing run queue latency (timer: the least a timer does)";
/// The same for `--timer --decision`.
pub(crate) const DECISION_BANNER: &str =
    "Tracing run queue latency (timer-decision: the least timer and decision)";

/// The timer objects' maps that hold a slot per thread id, sized to
/// pid_max at load.
const STARTS: &str = "timer_starts";
const SWITCHES: &str = "timer_switches";

/// Which reference programs `cargo xtask bench-noop` attaches.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Programs {
    Noop,
    Timer,
    TimerDecision,
}

impl Programs {
    /// Its object: the bench-ebpf bin of the same name as the bench mode.
    fn object(self) -> &'static str {
        match self {
            Programs::Noop => "noop",
            Programs::Timer => "timer",
            Programs::TimerDecision => "timer-decision",
        }
    }

    fn banner(self) -> &'static str {
        match self {
            Programs::Noop => BANNER,
            Programs::Timer => TIMER_BANNER,
            Programs::TimerDecision => DECISION_BANNER,
        }
    }

    /// Each program with its tracepoint, in the order they attach. Names
    /// with "switch" count the switches (progs.rs ns_per_switch), as
    /// schedlat's and runqlat's do.
    fn programs(self) -> [(&'static str, &'static str); 3] {
        match self {
            Programs::Noop => [
                ("noop_wakeup", "sched_wakeup"),
                ("noop_wakeup_new", "sched_wakeup_new"),
                ("noop_switch", "sched_switch"),
            ],
            Programs::Timer => [
                ("timer_wakeup", "sched_wakeup"),
                ("timer_wakeup_new", "sched_wakeup_new"),
                ("timer_switch", "sched_switch"),
            ],
            Programs::TimerDecision => [
                ("timerd_wakeup", "sched_wakeup"),
                ("timerd_wakeup_new", "sched_wakeup_new"),
                ("timerd_switch", "sched_switch"),
            ],
        }
    }
}

/// Body of `cargo xtask bench-noop`: attach, say so, hold until SIGINT or
/// SIGTERM, detach by exiting. With `prebuilt` (the bench, which built the
/// objects before its rounds) the objects are only loaded, so that no
/// build counts in the time to attach.
pub(crate) fn run(programs: Programs, prebuilt: bool) -> Result<()> {
    crate::util::require_root("the noop programs are eBPF programs")?;
    let objects = match prebuilt {
        true => object::dir(),
        false => object::build()?,
    };
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
    let decision = programs == Programs::TimerDecision;
    let offsets = match programs {
        Programs::Noop => None,
        Programs::Timer | Programs::TimerDecision => {
            let btf = btf_rs::Btf::from_file_with_backend(
                "/sys/kernel/btf/vmlinux",
                btf_rs::Backend::Mmap,
            )
            .or_else(|_| btf_rs::Btf::from_file("/sys/kernel/btf/vmlinux"))
            .context("reading /sys/kernel/btf/vmlinux")?;
            Some(offsets::resolve(&btf, decision)?)
        }
    };
    let mut loader = EbpfLoader::new();
    if let Some(offsets) = &offsets {
        // The slots of an array indexed by thread id.
        let pid_max = u32::try_from(super::pid_max::read()?).context("pid_max beyond u32")?;
        loader
            .override_global(offsets::SYMBOL, offsets, true)
            .map_max_entries(STARTS, pid_max);
        if decision {
            loader.map_max_entries(SWITCHES, pid_max);
        }
    }
    let path = objects.join(programs.object());
    let mut ebpf = loader
        .load_file(&path)
        .with_context(|| format!("loading {}", path.display()))?;
    // The attach ids of the tracepoints' `btf_trace_*` typedefs.
    let btf = aya::Btf::from_sys_fs().context("reading the kernel's BTF")?;
    for (name, tracepoint) in programs.programs() {
        let program: &mut BtfTracePoint = ebpf
            .program_mut(name)
            .with_context(|| format!("{} has no program {name}", path.display()))?
            .try_into()?;
        program
            .load(tracepoint, &btf)
            .with_context(|| format!("loading {name}"))?;
        program
            .attach()
            .with_context(|| format!("attaching {name}"))?;
    }
    drop(btf);
    let mut out = std::io::stdout();
    writeln!(out, "{}", programs.banner())?;
    out.flush()?;
    let mut signal = 0;
    // SAFETY: a valid set and out-pointer.
    if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
        bail!("waiting for SIGINT");
    }
    drop(ebpf);
    Ok(())
}
