//! Per-program load times on request: with SCHEDLAT_LOAD_TIMES set (to
//! anything), each program's BPF_PROG_LOAD (mostly the verifier) is timed
//! and printed on stderr with its verified_insns, one line a program.
//! `cargo xtask vm-test` reads these lines to report what each mode costs
//! at load on each kernel (tests/guest.rs); a user has no use for them, so
//! they are off by default and cost one environment lookup.

use std::time::{Duration, Instant};

use aya::programs::{ProgramError, ProgramInfo};

/// The line's prefix, which tests/guest.rs looks for.
const PREFIX: &str = "schedlat: load-time";

pub(super) fn wanted() -> bool {
    std::env::var_os("SCHEDLAT_LOAD_TIMES").is_some()
}

/// When `wanted` and the load that began at `started` succeeded, prints
/// its wall time and the program's verified_insns (from `info`; "n/a"
/// before 5.16, which lacks the field).
pub(super) fn report<T>(
    wanted: bool,
    program: &str,
    started: Instant,
    result: &Result<(), T>,
    info: impl FnOnce() -> Result<ProgramInfo, ProgramError>,
) {
    if wanted && result.is_ok() {
        print(program, started.elapsed(), info());
    }
}

fn print(program: &str, elapsed: Duration, info: Result<ProgramInfo, ProgramError>) {
    let insns = info
        .ok()
        .and_then(|i| i.verified_instruction_count())
        .map_or("n/a".to_string(), |n| n.to_string());
    eprintln!(
        "{PREFIX} {program} {:.2} ms verified_insns {insns}",
        elapsed.as_secs_f64() * 1e3
    );
}
