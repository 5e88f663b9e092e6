//! The HTTP side: one hyper HTTP/1 connection per task, `/metrics` encoded
//! at request time in the negotiated format.

use std::{convert::Infallible, rc::Rc, time::Duration};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

use super::{negotiate::negotiate, scrape::Source};

/// How long a connection may sit without a complete request header. hyper
/// counts the idle time between keep-alive requests too, and Prometheus
/// keeps its connection open from one scrape to the next: longer than any
/// usual scrape interval, so that we never close a connection just as the
/// next scrape is sent on it. It still lets go of clients that connect and
/// send nothing.
const HEADER_TIMEOUT: Duration = Duration::from_secs(6 * 60);

/// Serves one connection (keep-alive: Prometheus reuses it every scrape)
/// until the client closes it or the task is dropped at shutdown.
pub async fn serve_connection(stream: TcpStream, source: Rc<Source>) {
    let service = service_fn(move |request: Request<Incoming>| {
        let response = respond(&request, &source);
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    // Errors here are the client's (reset, garbage, timeout): nothing to do.
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn respond(request: &Request<Incoming>, source: &Source) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match request.uri().path() {
        "/metrics" => metrics(request, source),
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

fn metrics(request: &Request<Incoming>, source: &Source) -> Response<Full<Bytes>> {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = negotiate(accept);
    let body = match source.serve(format) {
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

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
