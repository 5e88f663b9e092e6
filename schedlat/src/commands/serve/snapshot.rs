//! `POST /snapshot`: with `--ring`, dumps the flight recorder's window as
//! SIGHUP does (on the writer's thread, under a temporary name renamed
//! into place) and answers at once with the dump's path.

use std::cell::RefCell;

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
};

use super::http::plain;
use crate::recorder::{Flight, Refused};

pub fn respond(
    request: &Request<Incoming>,
    flight: Option<&RefCell<Flight>>,
) -> Response<Full<Bytes>> {
    let Some(flight) = flight else {
        return plain(
            StatusCode::NOT_FOUND,
            "no flight recorder: start serve with --ring DURATION (and --dump-dir DIR) to dump it on POST /snapshot\n",
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
    // Borrowed only here and in serve's once-a-second step, never across
    // an await: the two cannot overlap on the one thread.
    match flight.borrow().dump_now("HTTP POST /snapshot", "http") {
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
        Err(Refused::Busy) => plain(
            StatusCode::CONFLICT,
            "a dump is being written; ask again once it is done\n",
        ),
        Err(Refused::Stopped) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the dump writer has stopped; see serve's stderr\n",
        ),
    }
}
