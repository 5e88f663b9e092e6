//! What each path answers: `/metrics` read and encoded at request time in
//! the format the scraper asked for, `/snapshot` the flight recorder's
//! dump (snapshot.rs), `/` a line saying where the metrics are; every
//! request past the Host and Origin checks of guard.rs first.

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
};
use crate::{export::negotiate::negotiate, recorder::Flight};

/// What every request is checked and served against.
pub(super) struct Endpoint {
    /// Where serve listens: a loopback listener answers local names only
    /// (guard.rs).
    pub listen: std::net::SocketAddr,
    /// The flight recorder, when `POST /snapshot` may dump it.
    pub snapshot: Option<Rc<RefCell<Flight>>>,
    pub snapshot_limit: RefCell<RateLimit>,
}

/// The responder of every connection: `scraper` on /metrics, and the
/// flight recorder on /snapshot when `endpoint` lets it dump, each request
/// past `endpoint`'s Host and Origin checks first.
pub(super) fn responder(
    scraper: Rc<Scraper>,
    endpoint: Rc<Endpoint>,
) -> impl Fn(&Request<Incoming>) -> Response<Full<Bytes>> + 'static {
    move |request| respond(request, &scraper, &endpoint)
}

/// What a request is answered with, decided from its method, path and
/// headers alone (before any handler runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// 403: the Host or the Origin is not this endpoint's (guard.rs).
    Refused(guard::Refusal),
    /// `/snapshot`, any method: snapshot.rs answers.
    Snapshot,
    /// 405: anything but GET and HEAD elsewhere.
    NotAllowed,
    Metrics,
    Index,
    /// 404.
    NotFound,
}

/// The route of `request` for an endpoint listening on `listen`.
pub(super) fn route<B>(listen: std::net::SocketAddr, request: &Request<B>) -> Route {
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
    if let Err(refusal) = guard::check(listen, header(header::HOST), header(header::ORIGIN)) {
        return Route::Refused(refusal);
    }
    if request.uri().path() == "/snapshot" {
        return Route::Snapshot;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Route::NotAllowed;
    }
    match request.uri().path() {
        "/metrics" => Route::Metrics,
        "/" => Route::Index,
        _ => Route::NotFound,
    }
}

fn respond(
    request: &Request<Incoming>,
    scraper: &Scraper,
    endpoint: &Endpoint,
) -> Response<Full<Bytes>> {
    answer(request, endpoint, || metrics(request, scraper))
}

/// The answer to `request` on `endpoint`, `/metrics` by `metrics`.
pub(super) fn answer(
    request: &Request<Incoming>,
    endpoint: &Endpoint,
    metrics: impl FnOnce() -> Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    match route(endpoint.listen, request) {
        Route::Refused(refusal) => plain(StatusCode::FORBIDDEN, &format!("{refusal}\n")),
        Route::Snapshot => snapshot::respond(
            request,
            endpoint.snapshot.as_deref(),
            &endpoint.snapshot_limit,
        ),
        Route::NotAllowed => {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        Route::Metrics => metrics(),
        Route::Index => plain(
            StatusCode::OK,
            "schedlat: run queue latency for Prometheus; metrics at /metrics\n",
        ),
        Route::NotFound => plain(
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
    let mut response = Response::new(Full::new(Bytes::from(body)));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format.content_type()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    // The body depends on Accept: caches must not mix the formats.
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}
