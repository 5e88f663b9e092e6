//! The endpoint's request handling on raw bytes, without a socket or a
//! tracer: what a client sends goes through hyper's HTTP/1 parser (the
//! request line, the headers, the bodies) and the routes and guard of every
//! request, exactly as `serve` runs them; only `/metrics` is answered by a
//! stand-in for the scrape, which needs the kernel, and there is no web
//! configuration (the `web_config` target has its basic auth). The `http`
//! fuzz target feeds it whatever a client could send.

use std::{cell::RefCell, convert::Infallible, net::SocketAddr, rc::Rc};

use hyper::{
    Request, Response, StatusCode, body::Incoming, server::conn::http1, service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    guard::RateLimit,
    http::plain,
    routes::{Endpoint, answer},
    snapshot,
};

/// One request as the handlers saw it, and the status it was answered with.
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    pub method: String,
    pub path: String,
    /// The headers as text (None: absent, or not visible ASCII).
    pub host: Option<String>,
    pub origin: Option<String>,
    pub status: u16,
}

/// What an endpoint listening on `listen` answers to the bytes `sent` on
/// one connection (the client then closes its side): each request
/// handled, and every byte written back.
pub(crate) fn exchange(listen: SocketAddr, sent: &[u8]) -> (Vec<Answered>, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let endpoint = Rc::new(Endpoint {
        listen,
        snapshot: None,
        snapshot_limit: RefCell::new(RateLimit::new(snapshot::INTERVAL)),
        web: None,
    });
    let answered = Rc::new(RefCell::new(Vec::new()));
    let seen = answered.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let (endpoint, seen) = (endpoint.clone(), seen.clone());
        async move {
            let response = answer(&request, &endpoint, || {
                plain(StatusCode::OK, "the scrape would answer here\n")
            })
            .await;
            seen.borrow_mut().push(answered_of(&request, &response));
            Ok::<_, Infallible>(response)
        }
    });
    let received = runtime.block_on(async move {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let mut builder = http1::Builder::new();
        // The client's end of its bytes is a half-close: the answers to
        // what it sent are still written back.
        builder.timer(TokioTimer::new()).half_close(true);
        let connection = builder.serve_connection(TokioIo::new(server), service);
        let send = async move {
            // The server may close first (a request it cannot parse).
            let _ = to_server.write_all(sent).await;
            let _ = to_server.shutdown().await;
        };
        let mut received = Vec::new();
        let receive = from_server.read_to_end(&mut received);
        let (_, _, _) = tokio::join!(connection, send, receive);
        received
    });
    let answered = answered.borrow().clone();
    (answered, received)
}

fn answered_of<B1, B2>(request: &Request<B1>, response: &Response<B2>) -> Answered {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    Answered {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
        host: header(hyper::header::HOST),
        origin: header(hyper::header::ORIGIN),
        status: response.status().as_u16(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SocketAddr {
        "127.0.0.1:9415".parse().unwrap()
    }

    #[test]
    fn a_scrape_a_rebinding_page_and_a_cross_site_post_on_one_connection() {
        let sent = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9415\r\nAccept: text/plain\r\n\r\n\
            GET /metrics HTTP/1.1\r\nHost: evil.example:9415\r\n\r\n\
            POST /snapshot HTTP/1.1\r\nHost: 127.0.0.1:9415\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi\
            DELETE / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let (answered, received) = exchange(loopback(), sent);
        let statuses: Vec<u16> = answered.iter().map(|a| a.status).collect();
        assert_eq!(statuses, [200, 403, 403, 405], "{answered:?}");
        let text = String::from_utf8_lossy(&received);
        assert_eq!(text.matches("HTTP/1.1 ").count(), 4, "{text}");
        assert!(text.contains("Host `evil.example:9415` is not"), "{text}");
    }

    #[test]
    fn garbage_gets_an_error_or_nothing_and_no_handler_runs() {
        for sent in [&b"\x00\x01\x02"[..], b"GET / HTTP/9.9\r\n\r\n", b"GET /"] {
            let (answered, received) = exchange(loopback(), sent);
            assert!(answered.is_empty(), "{answered:?}");
            assert!(
                received.is_empty() || received.starts_with(b"HTTP/1.1 4"),
                "{}",
                String::from_utf8_lossy(&received)
            );
        }
    }
}
