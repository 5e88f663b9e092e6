//! `--listen`: parsing the address and binding it, with errors that say
//! what to do.

use std::{
    io::ErrorKind,
    net::SocketAddr,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use tokio::net::TcpListener;

pub(crate) const DEFAULT: &str = "127.0.0.1:9415";

/// clap value parser: an IP address and a port. Host names are refused:
/// which interface `localhost` means is the resolver's guess, and where the
/// endpoint is reachable from must be explicit.
pub(crate) fn parse(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!(
            "`{s}` is not IP:PORT (e.g. {DEFAULT}, [::1]:9415, or 0.0.0.0:9415 for every interface)"
        )
    })
}

/// Binds `addr`. Port 0 picks a free port; the caller prints the real one.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        let why = match e.kind() {
            ErrorKind::AddrInUse => {
                "the port is already in use (another schedlat serve or exporter?): choose another with --listen".to_string()
            }
            ErrorKind::AddrNotAvailable => {
                "no interface of this machine has that address".to_string()
            }
            ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)".to_string()
            }
            _ => e.to_string(),
        };
        anyhow!("cannot listen on {addr}: {why}")
    })
}

/// Accept errors come in bursts (out of file descriptors: every retry
/// fails), and so do failed TLS handshakes (a scraper with the wrong CA):
/// the first is printed, then at most one line per period saying how many
/// more there were.
pub(crate) struct ErrorLog {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl ErrorLog {
    pub(crate) fn new(period: Duration) -> ErrorLog {
        ErrorLog {
            period,
            last: None,
            suppressed: 0,
        }
    }

    /// The line to print for this accept error, if one is due.
    pub(crate) fn accept_failed(&mut self, error: &std::io::Error) -> Option<String> {
        self.line(&format!("accept failed: {error}"))
    }

    /// The line to print for `what`, if one is due.
    pub(crate) fn line(&mut self, what: &str) -> Option<String> {
        if self.last.is_some_and(|at| at.elapsed() < self.period) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(Instant::now());
        let more = std::mem::take(&mut self.suppressed);
        Some(if more > 0 {
            format!("{what} ({more} more since the last message)")
        } else {
            what.to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_and_port_only() {
        assert_eq!(parse(DEFAULT).unwrap().port(), 9415);
        assert!(parse("[::1]:9415").unwrap().ip().is_loopback());
        assert!(parse("0.0.0.0:0").is_ok());
        for bad in [
            "localhost:9415",
            "127.0.0.1",
            "127.0.0.1:99999",
            ":9415",
            "x",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("is not IP:PORT"), "{bad}: {e}");
        }
    }

    /// Regression: "accept failed" was printed ten times a second while
    /// the descriptors were used up.
    #[test]
    fn accept_errors_are_rate_limited() {
        let mut log = ErrorLog::new(Duration::from_millis(200));
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(
            log.accept_failed(&e)
                .unwrap()
                .starts_with("accept failed: Too many open files")
        );
        assert!((0..50).all(|_| log.accept_failed(&e).is_none()));
        std::thread::sleep(Duration::from_millis(210));
        let line = log.accept_failed(&e).unwrap();
        assert!(line.ends_with("(50 more since the last message)"), "{line}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_port_in_use_says_so() {
        let taken = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = taken.local_addr().unwrap();
        let e = bind(addr).await.unwrap_err().to_string();
        assert!(e.contains("already in use"), "{e}");
        assert!(e.contains(&addr.to_string()), "{e}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_address_not_on_this_machine_says_so() {
        // TEST-NET-1 (RFC 5737): never assigned to a host.
        let e = bind("192.0.2.1:9415".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("no interface of this machine"), "{e}");
    }
}
