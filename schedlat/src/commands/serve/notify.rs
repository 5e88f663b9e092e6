//! Readiness for the service manager (sd_notify(3)): under systemd's
//! `Type=notify`, `NOTIFY_SOCKET` names a datagram socket, and a `READY=1`
//! sent there ends `systemctl start`. serve sends it once the programs are
//! attached and the listener is bound, so a start that fails (a port in
//! use, a kernel that refuses) fails `systemctl start` itself, and what
//! starts after schedlat finds it answering. The protocol is one datagram
//! of `KEY=value` lines; written here rather than linking libsystemd.

use std::{
    ffi::OsStr,
    io,
    os::unix::{
        ffi::OsStrExt,
        net::{SocketAddr, UnixDatagram},
    },
};

/// Sends `state` (`READY=1`, `STATUS=...`, `STOPPING=1`) to the service
/// manager; nothing without `NOTIFY_SOCKET` (not started by one).
pub(super) fn notify(state: &str) {
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET")
        && let Err(e) = send(&socket, state)
    {
        say!("schedlat: cannot tell the service manager `{state}` (NOTIFY_SOCKET): {e}");
    }
}

/// `socket` is a path, or `@name` for the abstract namespace.
fn send(socket: &OsStr, state: &str) -> io::Result<()> {
    let addr = match socket.as_bytes() {
        [b'@', name @ ..] => {
            <SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name)?
        }
        [b'/', ..] => SocketAddr::from_pathname(socket)?,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an absolute path or an abstract @name",
            ));
        }
    };
    UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_reaches_a_path_or_an_abstract_socket() {
        let path = std::env::temp_dir().join(format!("schedlat-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let manager = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
        std::fs::remove_file(&path).unwrap();

        let name = format!("schedlat-notify-{}", std::process::id());
        let abstract_addr =
            <SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(&name).unwrap();
        let manager = UnixDatagram::bind_addr(&abstract_addr).unwrap();
        send(OsStr::new(&format!("@{name}")), "READY=1").unwrap();
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[test]
    fn a_relative_or_missing_socket_is_an_error() {
        assert!(send(OsStr::new("notify"), "READY=1").is_err());
        assert!(send(OsStr::new("/nonexistent/notify"), "READY=1").is_err());
    }
}
