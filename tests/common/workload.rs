//! Workloads whose run-queue waits are known from their construction, not
//! from a recorded run.

use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

/// Pins the calling thread to `cpu`.
pub(crate) fn pin_current_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity({cpu}): {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Makes the calling thread SCHED_FIFO at `priority` (needs root).
pub(crate) fn make_current_thread_fifo(priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid param; pid 0 = calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    assert_eq!(
        rc,
        0,
        "sched_setscheduler: {}",
        std::io::Error::last_os_error()
    );
}

/// The CPU the pinned workloads use: the last one, away from CPU 0 where
/// the benchmark's load and most housekeeping run.
pub(crate) fn workload_cpu() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

fn spin_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Known waits: a SCHED_FIFO "blocker" and a normal "victim" thread share one
/// CPU. Each round the blocker wakes the victim (a byte on a socket), then
/// keeps the CPU for `hold` by spinning, then sleeps for `gap`. A normal task
/// cannot preempt a FIFO one, so every victim wakeup waits on the run queue
/// for `hold` (plus a few microseconds of switching), exactly `rounds` times.
pub(crate) fn fifo_blocker(cpu: usize, hold: Duration, gap: Duration, rounds: u32) {
    blocker_and_victim([cpu, cpu], hold, gap, rounds, None);
}

/// `fifo_blocker` with a SCHED_FIFO victim, one priority below the blocker:
/// it still waits for the whole hold (FIFO never preempts an equal or higher
/// priority), but then runs at once, ahead of every normal task, so its
/// waits stay `hold` however busy the rest of the machine is.
pub(crate) fn fifo_blocker_fifo_victim(cpu: usize, hold: Duration, gap: Duration, rounds: u32) {
    blocker_and_victim([cpu, cpu], hold, gap, rounds, Some(49));
}

/// `fifo_blocker_fifo_victim` with the blocker moved to `blocker_cpu`:
/// the victim, woken from there, preempts whatever normal task runs on
/// `victim_cpu` at once, so its waits are a few microseconds however busy
/// that CPU is (the fix of the scenario above, by construction).
pub(crate) fn fifo_blocker_elsewhere(
    victim_cpu: usize,
    blocker_cpu: usize,
    hold: Duration,
    gap: Duration,
    rounds: u32,
) {
    blocker_and_victim([victim_cpu, blocker_cpu], hold, gap, rounds, Some(49));
}

/// The victim on `cpus[0]`, the blocker on `cpus[1]`.
fn blocker_and_victim(
    cpus: [usize; 2],
    hold: Duration,
    gap: Duration,
    rounds: u32,
    victim_fifo: Option<i32>,
) {
    let [victim_cpu, blocker_cpu] = cpus;
    let (mut waker, mut sleeper) = UnixStream::pair().expect("socketpair");
    let victim = thread::spawn(move || {
        pin_current_thread(victim_cpu);
        if let Some(priority) = victim_fifo {
            make_current_thread_fifo(priority);
        }
        let mut byte = [0u8; 1];
        for _ in 0..rounds {
            sleeper.read_exact(&mut byte).expect("victim read");
        }
    });
    let blocker = thread::spawn(move || {
        pin_current_thread(blocker_cpu);
        // Let the victim block in read() before the first round.
        thread::sleep(Duration::from_millis(20));
        make_current_thread_fifo(50);
        for _ in 0..rounds {
            waker.write_all(&[1]).expect("blocker write");
            spin_for(hold);
            thread::sleep(gap);
        }
    });
    blocker.join().expect("blocker thread");
    victim.join().expect("victim thread");
}

/// Many short waits: two threads on one CPU bounce a byte `rounds` times
/// (each hand-off wakes the other: a wakeup, then a switch-in).
pub(crate) fn ping_pong(cpu: usize, rounds: u32) {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let peer = thread::spawn(move || {
        pin_current_thread(cpu);
        let mut byte = [0u8; 1];
        for _ in 0..rounds {
            b.read_exact(&mut byte).expect("peer read");
            b.write_all(&byte).expect("peer write");
        }
    });
    let initiator = thread::spawn(move || {
        pin_current_thread(cpu);
        let mut byte = [7u8; 1];
        for _ in 0..rounds {
            a.write_all(&byte).expect("write");
            a.read_exact(&mut byte).expect("read");
        }
    });
    initiator.join().expect("initiator thread");
    peer.join().expect("peer thread");
}

/// CPU-bound processes pinned to one CPU (`taskset -c CPU sh -c 'while :; do
/// :; done'`), killed when dropped.
pub(crate) struct Hogs(Vec<std::process::Child>);

impl Hogs {
    pub(crate) fn start(cpu: usize, n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    std::process::Command::new("taskset")
                        .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset (util-linux) runs")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A periodic sleeper thread in this process, pinned to `cpu`: sleeps
/// `period` `rounds` times (cyclictest's loop, without the measurement).
pub(crate) fn sleeper(cpu: usize, period: Duration, rounds: u32) {
    thread::spawn(move || {
        pin_current_thread(cpu);
        for _ in 0..rounds {
            thread::sleep(period);
        }
    })
    .join()
    .expect("sleeper thread");
}

/// `sleeper` at SCHED_FIFO `priority` (needs root): each wakeup preempts
/// whatever normal task runs on `cpu` at once, so its waits stay a few
/// microseconds however busy the CPU is (foreign work included).
pub(crate) fn fifo_sleeper(cpu: usize, period: Duration, rounds: u32, priority: i32) {
    thread::spawn(move || {
        pin_current_thread(cpu);
        make_current_thread_fifo(priority);
        for _ in 0..rounds {
            thread::sleep(period);
        }
    })
    .join()
    .expect("FIFO sleeper thread");
}

/// `n` threads of this process spinning on `cpu` for `duration`.
pub(crate) fn spinning_threads(cpu: usize, n: usize, duration: Duration) {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            thread::spawn(move || {
                pin_current_thread(cpu);
                spin_for(duration);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("spinning thread");
    }
}

/// Simultaneous waits: a SCHED_FIFO waker and `sleepers` normal threads
/// share one CPU. Each round the waker wakes every sleeper (a byte on each
/// one's socket), keeps the CPU for `hold`, then sleeps for `gap`, in which
/// the sleepers run one after another. So every round all the sleepers wait
/// on the run queue at the same time: `sleepers * rounds` waits, which only
/// a tracer that keeps one start time per TID counts (one that reads the
/// wrong TIDs, say the same value for every task, counts one per round).
pub(crate) fn wake_burst(cpu: usize, sleepers: usize, hold: Duration, gap: Duration, rounds: u32) {
    let (wakers, threads): (Vec<UnixStream>, Vec<_>) = (0..sleepers)
        .map(|_| {
            let (waker, mut sleeper) = UnixStream::pair().expect("socketpair");
            let thread = thread::spawn(move || {
                pin_current_thread(cpu);
                let mut byte = [0u8; 1];
                for _ in 0..rounds {
                    sleeper.read_exact(&mut byte).expect("sleeper read");
                }
            });
            (waker, thread)
        })
        .unzip();
    let waker = thread::spawn(move || {
        pin_current_thread(cpu);
        // Let the sleepers block in read() before the first round.
        thread::sleep(Duration::from_millis(20));
        make_current_thread_fifo(50);
        for _ in 0..rounds {
            for mut socket in &wakers {
                socket.write_all(&[1]).expect("waker write");
            }
            spin_for(hold);
            thread::sleep(gap);
        }
    });
    waker.join().expect("waker thread");
    for thread in threads {
        thread.join().expect("sleeper thread");
    }
}

impl Hogs {
    /// `n` hogs as `start`, but named `comm`, as a shell script's loop would be: each
    /// runs the shell through a symlink called `comm` (a process's comm is
    /// the basename of the path it was exec'd by: fs/exec.c
    /// __set_task_comm()). Returns once every hog runs under that name.
    pub(crate) fn start_named(cpu: usize, n: usize, comm: &str) -> Hogs {
        let dir = std::env::temp_dir().join(format!("schedlat-hogs-{}-{comm}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir for the hog link");
        let link = dir.join(comm);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/bin/sh", &link).expect("symlink to /bin/sh");
        let hogs = Hogs(
            (0..n)
                .map(|_| {
                    std::process::Command::new("taskset")
                        .args(["-c", &cpu.to_string()])
                        .arg(&link)
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset (util-linux) runs")
                })
                .collect(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        for pid in hogs.pids() {
            while std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map_or(true, |c| c.trim() != comm)
            {
                assert!(Instant::now() < deadline, "hog {pid} never became {comm}");
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        hogs
    }

    /// Process ids (taskset execs in place: they are the hogs').
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.0.iter().map(|c| c.id()).collect()
    }
}

/// `sleeper` in a thread named `name` (its comm, at most 15 bytes); returns
/// the thread's TID once it has exited.
pub(crate) fn named_sleeper(cpu: usize, period: Duration, rounds: u32, name: &str) -> u32 {
    thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            pin_current_thread(cpu);
            for _ in 0..rounds {
                thread::sleep(period);
            }
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        })
        .expect("spawn the sleeper")
        .join()
        .expect("sleeper thread")
}

/// Sets the calling thread's nice value (a lower one needs root).
pub(crate) fn nice_current_thread(nice: i32) {
    // SAFETY: gettid has no preconditions; setpriority on a TID sets that
    // thread's nice (Linux: PRIO_PROCESS takes a TID).
    let rc = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    assert_eq!(
        rc,
        0,
        "setpriority({nice}): {}",
        std::io::Error::last_os_error()
    );
}

/// Two CPU-bound threads of this process pinned to `cpu` for `duration`:
/// a hog at `hog_nice` and a victim at nice 0. The fair class shares the
/// CPU by weight (nice -10: 9548 vs 1024 at nice 0, kernel/sched/core.c
/// sched_prio_to_weight), so the victim runs about a tenth of the time
/// and waits, behind the hog, the rest.
pub(crate) fn nice_hog_and_victim(cpu: usize, hog_nice: i32, duration: Duration) {
    let hog = thread::spawn(move || {
        pin_current_thread(cpu);
        nice_current_thread(hog_nice);
        spin_for(duration);
    });
    let victim = thread::spawn(move || {
        pin_current_thread(cpu);
        spin_for(duration);
    });
    hog.join().expect("hog thread");
    victim.join().expect("victim thread");
}

/// The calling thread's own CPU time (CLOCK_THREAD_CPUTIME_ID): work
/// measured by it is the same under emulation, where wall time stretches.
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The holder's function: what every stack of it must name.
pub(crate) const HOLDER_SPIN: &str = "schedlat_test_holder_spin";

/// Spins in user space until `stop`: no system call, so the holder only
/// leaves the CPU when the scheduler takes it (an interrupt's return to
/// user space). The loop is assembly, calls nothing (a test build calls
/// even `AtomicBool::load`, and a stack taken there names that), so the
/// innermost user frame is always in here.
#[inline(never)]
#[unsafe(no_mangle)]
pub(crate) extern "C" fn schedlat_test_holder_spin(stop: &AtomicBool) {
    let stop = stop.as_ptr().cast_const();
    // SAFETY: reads the flag's byte, which outlives the call; touches no
    // other memory and no register but the flag's and the flags.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("2:", "pause", "cmp byte ptr [{stop}], 0", "je 2b", stop = in(reg) stop);
    }
    // SAFETY: as above, with a scratch register.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("2:", "ldrb {t:w}, [{stop}]", "cbz {t:w}, 2b", stop = in(reg) stop, t = out(reg) _);
    }
}

/// A 1 ms sleeper on `cpu` for `rounds` beside a holder thread spinning
/// in HOLDER_SPIN there (docs/stacks.md's tests); their TIDs.
pub(crate) fn sleeper_behind_holder(cpu: usize, rounds: u32) -> (u32, u64) {
    behind_holder(cpu, || {
        named_sleeper(cpu, Duration::from_millis(1), rounds, "stack-sleeper")
    })
}

/// Runs `sleeper` (which returns its TID) beside a holder thread spinning
/// in HOLDER_SPIN on `cpu`; the sleeper's TID and the holder's.
pub(crate) fn behind_holder(cpu: usize, sleeper: impl FnOnce() -> u32) -> (u32, u64) {
    // The holder: at nice -10 it has nine in ten of the CPU's time against
    // a nice 0 task (kernel/sched/core.c sched_prio_to_weight), so the
    // sleeper's waits end behind it, not behind other load on that CPU.
    let stop = Arc::new(AtomicBool::new(false));
    let holder_tid = Arc::new(AtomicU32::new(0));
    let holder = {
        let (stop, tid) = (stop.clone(), holder_tid.clone());
        thread::Builder::new()
            .name("stack-holder".into())
            .spawn(move || {
                pin_current_thread(cpu);
                nice_current_thread(-10);
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() } as u32, Ordering::SeqCst);
                schedlat_test_holder_spin(&stop)
            })
            .unwrap()
    };
    let sleeper = sleeper();
    stop.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    (sleeper, u64::from(holder_tid.load(Ordering::SeqCst)))
}

/// A SCHED_BATCH thread on `cpu` sleeping 1 ms `rounds` times; its TID. A
/// batch task's wakeup never preempts the running task (the tick and the
/// holder's slice end its wait), so each of its waits is behind whatever
/// holds the CPU, for every kernel's scheduler alike.
pub(crate) fn batch_sleeper(cpu: usize, rounds: u32) -> u32 {
    thread::spawn(move || {
        pin_current_thread(cpu);
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: valid param; pid 0 is the calling thread.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        assert_eq!(rc, 0, "SCHED_BATCH: {}", std::io::Error::last_os_error());
        for _ in 0..rounds {
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    })
    .join()
    .expect("the batch sleeper")
}
