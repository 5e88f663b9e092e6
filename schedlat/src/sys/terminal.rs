//! The terminal a live view draws on: whether this process may read it.

use std::os::fd::AsRawFd;

/// A terminal whose foreground process group is not this process's: a
/// background job (`schedlat top &`, or under `timeout`, which moves its
/// child into a process group of its own). The kernel stops such a process
/// with SIGTTIN at its first read of the terminal and SIGTTOU when it sets
/// raw mode (drivers/tty/tty_jobctrl.c, `__tty_check_change`), so a live
/// view would sit stopped on a blank screen.
#[derive(Debug, PartialEq, Eq)]
pub struct Background {
    /// This process's group.
    pub group: libc::pid_t,
    /// The group the terminal reads for.
    pub foreground: libc::pid_t,
}

/// `Some` when `terminal` is this process's controlling terminal and another
/// process group has its foreground; `None` in the foreground, and when the
/// question has no answer (not a terminal, or not this session's).
pub fn background(terminal: &impl AsRawFd) -> Option<Background> {
    // SAFETY: tcgetpgrp only reads the descriptor's terminal state; a
    // background process may call it (only changing the group signals).
    let foreground = unsafe { libc::tcgetpgrp(terminal.as_raw_fd()) };
    // SAFETY: getpgrp has no preconditions and cannot fail.
    let group = unsafe { libc::getpgrp() };
    (foreground > 0 && foreground != group).then_some(Background { group, foreground })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_terminal_has_no_answer() {
        // /dev/null is not a terminal: tcgetpgrp fails with ENOTTY.
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(background(&null), None);
    }
}
