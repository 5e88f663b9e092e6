//! What each path answers: `/metrics` read and encoded at request time in
//! the format the scraper asked for, `/snapshot` the flight recorder's
//! dump (snapshot.rs), `/` a line saying where the metrics are; every
//! request past the Host and Origin checks of guard.rs first, then, but
//! for `/` (the probes' path, which says nothing), past the basic
//! authentication of the web configuration (web/): 401 before any route
//! runs, so no dump is made for a wrong password.

use std::{cell::RefCell, rc::Rc};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
};

use super::{
    guard::{self, RateLimit},
    http::plain,
    scrape::Scraper,
    snapshot,
    web::{Admission, Web},
};
use crate::{
    export::{content_coding::Coding, negotiate::negotiate},
    recorder::Flight,
};

/// What every request is checked and served against.
pub(super) struct Endpoint {
    /// Where serve listens: a loopback listener answers local names only
    /// (guard.rs).
    pub listen: std::net::SocketAddr,
    /// The flight recorder, when `POST /snapshot` may dump it.
    pub snapshot: Option<Rc<RefCell<Flight>>>,
    pub snapshot_limit: RefCell<RateLimit>,
    /// `--web.config.file`: who may ask.
    pub web: Option<Rc<Web>>,
}

/// The challenge of a 401 (RFC 7617).
const CHALLENGE: &str = "Basic realm=\"schedlat\", charset=\"UTF-8\"";

/// Answers one request of a connection: `scraper` on /metrics, and the
/// flight recorder on /snapshot when `endpoint` lets it dump, each request
/// past `endpoint`'s Host and Origin checks and its authentication first.
pub(super) async fn respond(
    request: Request<Incoming>,
    scraper: Rc<Scraper>,
    endpoint: Rc<Endpoint>,
) -> Response<Full<Bytes>> {
    answer(&request, &endpoint, || metrics(&request, &scraper)).await
}

/// The answer to `request` on `endpoint`, `/metrics` by `metrics` (the
/// scrape; serve/raw.rs gives a stand-in).
pub(super) async fn answer(
    request: &Request<Incoming>,
    endpoint: &Endpoint,
    metrics: impl FnOnce() -> Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
    if let Err(refusal) = guard::check(
        endpoint.listen,
        header(header::HOST),
        header(header::ORIGIN),
    ) {
        return plain(StatusCode::FORBIDDEN, &format!("{refusal}\n"));
    }
    let admission = match &endpoint.web {
        Some(web) if request.uri().path() != "/" => web.admits(header(header::AUTHORIZATION)).await,
        _ => Admission::Admitted,
    };
    if admission == Admission::Busy {
        // Too many password checks waiting: the client tries again.
        let mut r = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many password checks waiting; try again in a second\n",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    }
    if admission == Admission::Refused {
        let mut r = plain(
            StatusCode::UNAUTHORIZED,
            "a user and password of the web configuration are needed (basic auth)\n",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(CHALLENGE),
        );
        return r;
    }
    if request.uri().path() == "/snapshot" {
        return snapshot::respond(
            request,
            endpoint.snapshot.as_deref(),
            &endpoint.snapshot_limit,
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match request.uri().path() {
        "/metrics" => metrics(),
        "/" => plain(
            StatusCode::OK,
            "schedlat: run queue latency for Prometheus; metrics at /metrics\n",
        ),
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found: metrics are at /metrics\n",
        ),
    }
}

fn metrics(request: &Request<Incoming>, scraper: &Scraper) -> Response<Full<Bytes>> {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = negotiate(accept);
    let coding = Coding::negotiate(
        request
            .headers()
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let body = match scraper.serve(format) {
        Ok(body) => body,
        Err(e) => {
            say!("schedlat: scrape failed: {e}");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("reading the kernel's counters failed: {e}\n"),
            );
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(coding.apply(body))));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format.content_type()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Some(encoding) = coding.header() {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    // The body depends on Accept and Accept-Encoding: caches must not mix
    // the formats or the codings.
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Accept, Accept-Encoding"),
    );
    response
}
