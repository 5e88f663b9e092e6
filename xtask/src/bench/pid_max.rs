//! Room for a bench row's tasks: kernel.pid_max raised for the run and
//! restored after, on every way out (return, error, panic unwinding,
//! Ctrl-C or SIGTERM).
//!
//! The default pid_max of 32,768 cannot hold a row of 30,000 sleeper
//! processes beside the machine's own tasks (fork fails with EAGAIN). A
//! larger pid_max costs nothing until PIDs above the old one are handed
//! out; while it lasts, a schedlat that loads sizes its per-thread start
//! array from it (8 bytes a possible TID), and after the restore a task
//! still running with a PID above the old limit is beyond the start arrays
//! of later loads (its waits counted as dropped).

use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{Context, Result};

const PATH: &str = "/proc/sys/kernel/pid_max";
/// The kernel's PID_MAX_LIMIT on 64-bit (include/linux/threads.h).
const LIMIT: usize = 4 * 1024 * 1024;

/// The value to restore from a signal handler (0: nothing to restore).
static RESTORE: AtomicI32 = AtomicI32::new(0);

pub(crate) fn read() -> Result<usize> {
    let text = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("parsing {PATH}: {text:?}"))
}

fn write(value: usize) -> Result<()> {
    std::fs::write(PATH, format!("{value}\n")).with_context(|| format!("writing {value} to {PATH}"))
}

/// kernel.pid_max raised while this lives.
pub(crate) struct Raised {
    old: usize,
    pub(crate) new: usize,
}

/// pid_max raised so `tasks` more fit beside `now` tasks (None: they fit
/// already): to the next power of two, at most the kernel's limit.
pub(crate) fn raise_for(tasks: usize, now: usize) -> Result<Option<Raised>> {
    let old = read()?;
    let Some(new) = target(old, now + tasks) else {
        return Ok(None);
    };
    RESTORE.store(i32::try_from(old)?, Ordering::SeqCst);
    install_handlers();
    write(new)?;
    Ok(Some(Raised { old, new }))
}

/// The pid_max that holds `needed` tasks, when `old` does not.
fn target(old: usize, needed: usize) -> Option<usize> {
    (needed > old).then(|| needed.next_power_of_two().min(LIMIT))
}

impl Raised {
    pub(crate) fn old(&self) -> usize {
        self.old
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        RESTORE.store(0, Ordering::SeqCst);
        match write(self.old) {
            Ok(()) => eprintln!("bench: kernel.pid_max restored to {}", self.old),
            Err(e) => eprintln!(
                "bench: {e:#}: restore it with `sysctl kernel.pid_max={}`",
                self.old
            ),
        }
    }
}

/// SIGINT and SIGTERM restore pid_max, then end the bench as the signal
/// would have (the sleepers, in the same process group, get Ctrl-C too).
fn install_handlers() {
    extern "C" fn restore_and_die(signal: libc::c_int) {
        let old = RESTORE.swap(0, Ordering::SeqCst);
        if old > 0 {
            // Only async-signal-safe calls: the digits by hand, then
            // open/write/close.
            let mut digits = [0u8; 12];
            let mut at = digits.len() - 1;
            digits[at] = b'\n';
            let mut v = old as u32;
            loop {
                at -= 1;
                digits[at] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            // SAFETY: a NUL-terminated path and a buffer that outlives the
            // calls.
            unsafe {
                let fd = libc::open(c"/proc/sys/kernel/pid_max".as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, digits[at..].as_ptr().cast(), digits.len() - at);
                    libc::close(fd);
                }
            }
        }
        // SAFETY: back to the default action, then the same signal again.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    // SAFETY: the handler only makes async-signal-safe calls.
    unsafe {
        let handler = restore_and_die as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_to_the_next_power_of_two_only_when_the_tasks_do_not_fit() {
        // 30,000 sleepers and a margin of 1,000 beside 400 tasks fit, beside
        // 2,000 they do not.
        assert_eq!(target(32_768, 31_400), None);
        assert_eq!(target(32_768, 33_000), Some(65_536));
        assert_eq!(target(32_768, 65_537), Some(131_072));
        assert_eq!(target(32_768, 5_000_000), Some(LIMIT));
    }
}
