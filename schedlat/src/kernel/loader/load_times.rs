//! Per-program load times on request: with SCHEDLAT_LOAD_TIMES set (to
//! anything), each program's BPF_PROG_LOAD (mostly the verifier) is timed
//! and printed on stderr with its verified_insns, one line a program.
//! `cargo xtask vm-test` reads these lines to report what each mode costs
//! at load on each kernel (tests/guest.rs); a user has no use for them, so
//! they are off by default and cost one environment lookup.
//!
//! Each line has the load's wall time and the loading thread's CPU time:
//! the verifier runs in the loading thread's system call, so its CPU time
//! is the verifier's work, which other processes on a busy host do not
//! inflate the way they do the wall time (on the 2-CPU VM with a build
//! beside it, the wall time of one load varied 40-83 ms).

use std::time::{Duration, Instant};

use aya::programs::{ProgramError, ProgramInfo};

/// The line's prefix, which tests/guest.rs looks for.
const PREFIX: &str = "schedlat: load-time";

pub(super) fn wanted() -> bool {
    std::env::var_os("SCHEDLAT_LOAD_TIMES").is_some()
}

/// When a load began: the wall clock and the calling thread's CPU clock.
#[derive(Clone, Copy)]
pub(super) struct Started {
    wall: Instant,
    cpu: Duration,
}

impl Started {
    pub(super) fn now() -> Started {
        Started {
            wall: Instant::now(),
            cpu: thread_cpu(),
        }
    }
}

/// When `wanted` and the load that began at `started` (on this thread)
/// succeeded, prints its wall and CPU time and the program's
/// verified_insns (from `info`; "n/a" before 5.16, which lacks the field).
pub(super) fn report<T>(
    wanted: bool,
    program: &str,
    started: Started,
    result: &Result<(), T>,
    info: impl FnOnce() -> Result<ProgramInfo, ProgramError>,
) {
    if wanted && result.is_ok() {
        let cpu = thread_cpu().saturating_sub(started.cpu);
        print(program, (started.wall.elapsed(), cpu), info());
    }
}

fn print(
    program: &str,
    (wall, cpu): (Duration, Duration),
    info: Result<ProgramInfo, ProgramError>,
) {
    let insns = info
        .ok()
        .and_then(|i| i.verified_instruction_count())
        .map_or("n/a".to_string(), |n| n.to_string());
    eprintln!(
        "{PREFIX} {program} {:.2} ms verified_insns {insns} cpu {:.2} ms",
        wall.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3
    );
}

/// The calling thread's CPU time, user and system (zero if the clock
/// cannot be read, which Linux does not refuse).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
