//! Writing reports to stdout, and noticing that nobody reads it any more
//! (`schedlat slow | head -3`): the modes end quietly then, with status 0.

use std::io::{self, Write};

/// Writes and flushes `text`; an error means stdout is closed (EPIPE: Rust
/// ignores SIGPIPE, so the write fails instead of killing us).
pub fn write(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// True when stdout is a pipe whose reader has gone: the write end then
/// polls as POLLERR (fs/pipe.c pipe_poll()). A mode that writes rarely
/// (slow events) checks this, so it does not run on until its next event.
pub fn reader_gone() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}
