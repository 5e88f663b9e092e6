//! `POST /snapshot`: with `--ring` and `--web.enable-snapshot`, dumps the
//! flight recorder's window as SIGHUP does (on the writer's thread, under a
//! temporary name renamed into place) and answers at once with the dump's
//! path. At most one dump per [`INTERVAL`]; the refused requests get 429
//! and one log line per interval with their number. A request answered
//! 409 (a dump still being written) made none, and does not use the
//! interval's one.

use std::{
    cell::RefCell,
    time::{Duration, Instant},
};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
};

use super::{guard::RateLimit, http::plain};
use crate::recorder::{DumpKind, Flight, Refused};

/// The shortest time between two dumps asked for over HTTP: a dump is
/// fsynced megabytes, and a loop of requests must not turn into a stream
/// of them (518 dumps, 2.8 GiB written in 30 s, before this bound).
pub(super) const INTERVAL: Duration = Duration::from_secs(10);

/// Answers `request` with `flight` (None: POST /snapshot is off), at most
/// one dump per `limit`'s interval.
pub(super) fn respond(
    request: &Request<Incoming>,
    flight: Option<&RefCell<Flight>>,
    limit: &RefCell<RateLimit>,
) -> Response<Full<Bytes>> {
    let Some(flight) = flight else {
        return plain(
            StatusCode::NOT_FOUND,
            "POST /snapshot is off: start serve with --ring DURATION and --web.enable-snapshot (SIGHUP dumps the ring without it)\n",
        );
    };
    if request.method() != Method::POST {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /snapshot dumps the flight recorder's window\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let now = Instant::now();
    let mut limit = limit.borrow_mut();
    let admitted = limit.admit(now);
    if let Some(line) = limit.refusals_line(now) {
        say!("schedlat: {line}");
    }
    if let Err(wait) = admitted {
        let secs = wait.as_secs_f64().ceil() as u64;
        let mut r = plain(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "at most one dump per {} s: ask again in {secs} s\n",
                INTERVAL.as_secs()
            ),
        );
        if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    // Borrowed only here and in serve's once-a-second step, never across
    // an await: the two cannot overlap on the one thread.
    match flight
        .borrow()
        .dump_now("HTTP POST /snapshot", DumpKind::Http)
    {
        Ok(path) => {
            say!("schedlat: POST /snapshot: dumping to {}", path.display());
            plain(
                StatusCode::ACCEPTED,
                &format!(
                    "dump: {}\nwritten in the background; complete once that directory exists\n",
                    path.display()
                ),
            )
        }
        Err(Refused::Busy) => {
            // Nothing was dumped: the interval's slot stays free.
            limit.give_back();
            plain(
                StatusCode::CONFLICT,
                "a dump is being written; ask again once it is done\n",
            )
        }
        Err(Refused::Stopped) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the dump writer has stopped; see serve's stderr\n",
        ),
        Err(Refused::Spent) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the dump directory's sequence numbers are spent; see serve's stderr\n",
        ),
    }
}
