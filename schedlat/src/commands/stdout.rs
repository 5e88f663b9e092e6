//! Writing reports to stdout, and noticing that nobody reads it any more
//! (`schedlat slow | head -3`): the commands end quietly then, with status
//! 0. Any other failure to write (a full disk, `> /dev/full`) is an error:
//! the report was lost, and the exit status says so.

use std::io::{self, Write};

use anyhow::{Context, Result};

/// Writes and flushes `text`. Ok(false) when stdout is closed (EPIPE: Rust
/// ignores SIGPIPE, so the write fails instead of killing us); an error
/// when the write failed otherwise.
pub(crate) fn write(text: &str) -> Result<bool> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// True when stdout is a pipe whose reader has gone: the write end then
/// polls as POLLERR (fs/pipe.c pipe_poll()). A command that writes rarely
/// (slow events) checks this, so it does not run on until its next event.
pub(crate) fn reader_gone() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}
