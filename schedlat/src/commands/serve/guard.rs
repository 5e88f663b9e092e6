//! Who may ask what of the endpoint, before any handler runs.
//!
//! - A loopback listener (the unit's default) answers only requests whose
//!   `Host` names an address, or `localhost`: a page elsewhere that has a
//!   browser resolve its own name to 127.0.0.1 (DNS rebinding) sends its
//!   own name there, and would otherwise read the PIDs, process names and
//!   cgroup paths of /metrics. Beyond loopback a fleet scrapes by many
//!   names, so the Host is not judged there: who may reach such a
//!   listener is the network's to decide (a firewall, a NetworkPolicy).
//! - A request that carries an `Origin` other than its own `Host` comes
//!   from a page of another site (browsers send it on cross-origin
//!   requests, and a form POST with `Content-Type: text/plain` needs no
//!   preflight): refused. Scrapers and curl send no Origin.
//! - `POST /snapshot` dumps at most once per interval; the refusals are
//!   counted and logged once per interval with their number.

use std::{
    net::{IpAddr, SocketAddr},
    time::{Duration, Instant},
};

/// Why a request was refused (403), in words for the response and log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    ForeignHost(String),
    ForeignOrigin(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ForeignHost(host) => write!(
                f,
                "Host `{host}` is not this machine's address: a loopback listener answers requests to an IP address or localhost only"
            ),
            Refusal::ForeignOrigin(origin) => write!(
                f,
                "Origin `{origin}` is another site: requests from web pages elsewhere are refused"
            ),
        }
    }
}

/// Checks `Host` and `Origin` for a server listening on `listen`.
pub(super) fn check(
    listen: SocketAddr,
    host: Option<&str>,
    origin: Option<&str>,
) -> Result<(), Refusal> {
    if listen.ip().is_loopback()
        && let Some(host) = host
        && !names_an_address(host)
    {
        return Err(Refusal::ForeignHost(host.to_string()));
    }
    match origin {
        None => Ok(()),
        Some(origin) if same_origin(origin, host) => Ok(()),
        Some(origin) => Err(Refusal::ForeignOrigin(origin.to_string())),
    }
}

/// `Host` is `name[:port]`, the name an IP literal (IPv6 in brackets) or
/// `localhost`, the port digits. Anything else is refused: found by the
/// `http` fuzz target, `127.0.0.1:9415p@ain` passed as 127.0.0.1 while
/// hyper reads it as userinfo before the host `ain`.
fn names_an_address(host: &str) -> bool {
    // RFC 3986: port = *DIGIT.
    let port_ok = |rest: &str| {
        rest.is_empty()
            || rest
                .strip_prefix(':')
                .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inside, rest)) => return port_ok(rest) && inside.parse::<IpAddr>().is_ok(),
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if port_ok(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

/// `Origin` is `scheme://authority`: the same origin when its authority is
/// the request's `Host`. `null` (sandboxed pages, files) never is.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some((_, authority)) = origin.split_once("://") else {
        return false;
    };
    host.is_some_and(|host| authority.eq_ignore_ascii_case(host))
}

/// At most one admitted event per `interval`.
#[derive(Debug)]
pub(super) struct RateLimit {
    interval: Duration,
    last: Option<Instant>,
    /// `last` before the latest admission, for [`RateLimit::give_back`].
    before_last: Option<Instant>,
    /// Refused since the last line logged about them.
    refused: u64,
    last_logged: Option<Instant>,
}

impl RateLimit {
    pub(super) fn new(interval: Duration) -> RateLimit {
        RateLimit {
            interval,
            last: None,
            before_last: None,
            refused: 0,
            last_logged: None,
        }
    }

    /// Ok when admitted; else how long until the next one would be.
    pub(super) fn admit(&mut self, now: Instant) -> Result<(), Duration> {
        if let Some(last) = self.last {
            let since = now.saturating_duration_since(last);
            if since < self.interval {
                self.refused += 1;
                return Err(self.interval - since);
            }
        }
        self.before_last = self.last.replace(now);
        Ok(())
    }

    /// The latest admission made nothing (the dump writer was busy): its
    /// slot is free again, so a request once the writer is done may dump.
    pub(super) fn give_back(&mut self) {
        self.last = self.before_last.take();
    }

    /// The line to log about refusals, at most one per interval: how many
    /// were refused since the previous one.
    pub(super) fn refusals_line(&mut self, now: Instant) -> Option<String> {
        if self.refused == 0
            || self
                .last_logged
                .is_some_and(|at| now.saturating_duration_since(at) < self.interval)
        {
            return None;
        }
        self.last_logged = Some(now);
        let n = std::mem::take(&mut self.refused);
        Some(format!(
            "refused {n} POST /snapshot (at most one dump per {} s)",
            self.interval.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SocketAddr {
        "127.0.0.1:9415".parse().unwrap()
    }

    #[test]
    fn a_loopback_listener_answers_addresses_and_localhost_only() {
        for host in [
            "127.0.0.1:9415",
            "127.0.0.1",
            "localhost:9415",
            "LOCALHOST",
            "[::1]:9415",
            "[::1]",
        ] {
            assert_eq!(check(loopback(), Some(host), None), Ok(()), "{host}");
        }
        for host in [
            "evil.example:9415",
            "evil.example",
            "127.0.0.1.nip.io:9415",
            "[evil]:1",
            // Not a port: hyper reads userinfo before a host `ain`.
            "127.0.0.1:9415p@ain;q=0.2",
            "[::1]@evil:1",
            "localhost:80x",
        ] {
            assert!(
                matches!(
                    check(loopback(), Some(host), None),
                    Err(Refusal::ForeignHost(_))
                ),
                "{host}"
            );
        }
        // HTTP/1.0 without Host: nothing to judge.
        assert_eq!(check(loopback(), None, None), Ok(()));
        // Beyond loopback, the fleet's own names are fine.
        let any: SocketAddr = "0.0.0.0:9415".parse().unwrap();
        assert_eq!(check(any, Some("node-17.example:9415"), None), Ok(()));
    }

    #[test]
    fn another_sites_origin_is_refused() {
        let host = Some("127.0.0.1:9415");
        assert_eq!(
            check(loopback(), host, Some("http://127.0.0.1:9415")),
            Ok(())
        );
        for origin in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:8080",
            "garbage",
        ] {
            assert!(
                matches!(
                    check(loopback(), host, Some(origin)),
                    Err(Refusal::ForeignOrigin(_))
                ),
                "{origin}"
            );
        }
    }

    #[test]
    fn one_dump_per_interval_and_one_line_per_interval() {
        let mut limit = RateLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.admit(t0), Ok(()));
        assert_eq!(limit.refusals_line(t0), None);
        for i in 1..=5 {
            let wait = limit.admit(t0 + Duration::from_secs(i)).unwrap_err();
            assert_eq!(wait, Duration::from_secs(10 - i));
        }
        let line = limit.refusals_line(t0 + Duration::from_secs(5)).unwrap();
        assert!(line.starts_with("refused 5 POST /snapshot"), "{line}");
        let _ = limit.admit(t0 + Duration::from_secs(6));
        assert_eq!(limit.refusals_line(t0 + Duration::from_secs(7)), None);
        assert_eq!(limit.admit(t0 + Duration::from_secs(10)), Ok(()));
        let line = limit.refusals_line(t0 + Duration::from_secs(16)).unwrap();
        assert!(line.starts_with("refused 1 "), "{line}");
    }

    /// Regression: a POST answered 409 (a dump being written) used the
    /// interval's one dump, and the next one got 429 for 10 s.
    #[test]
    fn a_slot_given_back_admits_the_next_request() {
        let mut limit = RateLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.admit(t0), Ok(()));
        let t1 = t0 + Duration::from_secs(20);
        assert_eq!(limit.admit(t1), Ok(()));
        limit.give_back();
        assert_eq!(limit.admit(t1 + Duration::from_secs(1)), Ok(()));
        // The first admission still counts from t0's successor on.
        assert!(limit.admit(t1 + Duration::from_secs(2)).is_err());
    }
}
