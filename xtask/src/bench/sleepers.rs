//! Background tasks for the benchmark: N threads that each sleep and wake
//! once a second, pinned away from the load's CPU. They make the system hold
//! many tasks (start-timestamp slots, scheduler state) without adding much
//! load, to show whether a tracer's per-event cost grows with task count.
//!
//! They live in a child process (`cargo xtask bench-sleepers`), not in the
//! bench itself: a tracer forked from a process with 10,000 thread stacks
//! would carry that process's RSS into its own peak RSS until it execs.
//!
//! Idle sleepers (processes only, `--idle`) do not wake by themselves: each
//! wakes once when [`SleeperProcess::wake`] signals their process group, so
//! a scraper started before that sees every one wait once and then not
//! again (the scrape bench's idle keys).

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::{self, JoinHandle},
    time::Duration,
};

use anyhow::{Context, Result, bail};

/// Each thread's sleep: 10,000 threads make 10,000 wakeups/s.
const PERIOD: Duration = Duration::from_secs(1);
/// Small stacks: 10,000 default 8 MiB stacks would be 80 GiB of address space.
const STACK: usize = 64 * 1024;

/// The child process holding the sleepers, and the machine's task count
/// before it; killed when dropped (with it, sleepers that are processes of
/// their own: they die with their parent).
pub(crate) struct SleeperProcess(Child, usize);

/// What the sleepers are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sleeping {
    /// Threads of the child, each waking once a second.
    Threads,
    /// Processes of their own, each waking once a second.
    Processes,
    /// Processes that wake only when [`SleeperProcess::wake`] says so.
    IdleProcesses,
}

impl SleeperProcess {
    pub(crate) fn spawn(n: usize, cpu: usize, sleeping: Sleeping) -> Result<SleeperProcess> {
        let before = tasks().unwrap_or(0);
        let exe = std::env::current_exe().context("finding the xtask binary")?;
        let mut command = Command::new(exe);
        command.args(["bench-sleepers", &n.to_string(), &cpu.to_string()]);
        match sleeping {
            Sleeping::Threads => {}
            Sleeping::Processes => {
                command.arg("--processes");
            }
            Sleeping::IdleProcesses => {
                command.args(["--processes", "--idle"]);
            }
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the sleeper process")?;
        // It prints one line once every thread is started.
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        BufReader::new(stdout).read_line(&mut line)?;
        if !line.starts_with("ready") {
            let _ = child.kill();
            bail!("the sleeper process failed to start {n} threads");
        }
        Ok(SleeperProcess(child, before))
    }

    /// The process holding the sleepers (sleeper processes are its
    /// children).
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Wakes every idle sleeper once (SIGUSR1 to the child's process group:
    /// the child and its sleepers ignore it but for the wakeup).
    pub(crate) fn wake(&self) -> Result<()> {
        let group = libc::pid_t::try_from(self.0.id()).context("sleeper pid")?;
        // SAFETY: signalling the process group our own child leads.
        if unsafe { libc::kill(-group, libc::SIGUSR1) } != 0 {
            bail!(
                "waking the idle sleepers: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}

impl Drop for SleeperProcess {
    /// Kills the child, and waits (up to 30 s) until the machine's task
    /// count is back to what it was: sleeper processes die after their
    /// parent, and 30,000 of them still dying make the next 30,000 forks
    /// fail with EAGAIN.
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while tasks().is_some_and(|n| n > self.1 + 200) && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Room for more tasks: kernel.pid_max less the tasks there are (None:
/// unreadable). A row of 30,000 sleeper processes does not fit under the
/// default pid_max of 32,768 beside a busy machine's own tasks.
pub(crate) fn room_for_tasks() -> Option<usize> {
    let max: usize = (std::fs::read_to_string("/proc/sys/kernel/pid_max").ok()?)
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(tasks()?))
}

/// Tasks on the machine (/proc/loadavg's fourth field, `running/total`).
pub(crate) fn tasks() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// Body of `cargo xtask bench-sleepers N CPU [--processes [--idle]]`:
/// start, say ready, sleep until killed.
pub(crate) fn serve(n: usize, cpu: usize, processes: bool, idle: bool) -> Result<()> {
    if idle && !processes {
        bail!("idle sleepers are processes (--processes)");
    }
    if idle {
        // Its own process group, which the sleepers inherit: one kill wakes
        // them all. SIGUSR1 only interrupts a sleep, here and in them.
        extern "C" fn woken(_: libc::c_int) {}
        // SAFETY: setpgid on ourselves; a handler that does nothing.
        unsafe {
            libc::setpgid(0, 0);
            libc::signal(
                libc::SIGUSR1,
                woken as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let _sleepers = if processes {
        fork_sleepers(n, cpu, idle)?;
        None
    } else {
        Some(Sleepers::start(n, cpu)?)
    };
    println!("ready");
    std::io::stdout().flush()?;
    loop {
        thread::sleep(Duration::from_secs(3600));
    }
}

struct Sleepers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Sleepers {
    /// Starts `n` sleeper threads pinned to `cpu`.
    fn start(n: usize, cpu: usize) -> Result<Sleepers> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let stop = Arc::clone(&stop);
            let handle = thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    pin(cpu);
                    // Spread the wakeups over the period.
                    thread::sleep(PERIOD.mul_f64(i as f64 / n as f64));
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(PERIOD);
                    }
                })
                .with_context(|| format!("starting sleeper thread {i} of {n} (ulimit -u?)"))?;
            threads.push(handle);
        }
        Ok(Sleepers { stop, threads })
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Forks `n` processes that sleep and wake as the threads do (`idle`: only
/// when signalled), and die with this one (PR_SET_PDEATHSIG). Called before
/// this process starts any thread, so the children may use std after fork.
fn fork_sleepers(n: usize, cpu: usize, idle: bool) -> Result<()> {
    // SAFETY: no preconditions.
    let parent = unsafe { libc::getpid() };
    for i in 0..n {
        // SAFETY: single-threaded here (the threads mode is not running).
        match unsafe { libc::fork() } {
            -1 => bail!(
                "fork of sleeper process {i} of {n}: {} (ulimit -u?)",
                std::io::Error::last_os_error()
            ),
            0 => {
                // SAFETY: prctl with an integer argument; getppid has no
                // preconditions. A parent gone before the prctl: exit now.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != parent {
                        libc::_exit(0);
                    }
                }
                pin(cpu);
                if idle {
                    loop {
                        // SAFETY: no preconditions; returns at each signal.
                        unsafe { libc::pause() };
                    }
                }
                thread::sleep(PERIOD.mul_f64(i as f64 / n as f64));
                loop {
                    thread::sleep(PERIOD);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds (cpu < 1024).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
