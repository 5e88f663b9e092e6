//! The HTTP side: one hyper HTTP/1 connection per task, over TLS when the
//! web configuration says so (the handshake inside the first request's
//! deadline), each request answered by a responder (routes.rs says what).
//! Connections are bounded: a
//! client must send its first request soon after connecting, and at the
//! limit the connection that has been quiet longest is closed for the new
//! one, so idle sockets cannot use up the file descriptors and lock the
//! scrapers out.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    convert::Infallible,
    future::Future,
    rc::Rc,
    time::{Duration, Instant},
};

use http_body_util::Full;
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::Notify,
};
use tokio_rustls::TlsAcceptor;

use super::listen::ErrorLog;

/// How long a connection may sit without a complete request header. hyper
/// counts the idle time between keep-alive requests too, and Prometheus
/// keeps its connection open from one scrape to the next: longer than any
/// usual scrape interval, so that we never close a connection just as the
/// next scrape is sent on it. It still lets go of clients that connect and
/// send nothing.
const HEADER_TIMEOUT: Duration = Duration::from_secs(6 * 60);

/// How long a new connection may take to send its first request: a scraper
/// sends it at once; a client that connects and says nothing is let go.
pub(super) const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Open connections at most: a few Prometheus servers and curl users need
/// a handful; the default fd limit (1024) is far above this. Fewer when
/// the descriptors left after loading are fewer ([`client_slots`]).
pub(super) const MAX_CONNECTIONS: usize = 64;

/// Descriptors kept free beside the clients' for what serving opens
/// itself: a scrape's /proc and cgroup reads, a dump's directory and
/// files, a reload of the web configuration.
pub(super) const KEPT_FOR_SERVING: u64 = 2;

/// How many clients may be connected at once with `open` descriptors in
/// use of `limit` (RLIMIT_NOFILE): at most [`MAX_CONNECTIONS`], one
/// descriptor each, [`KEPT_FOR_SERVING`] kept aside. Err with the numbers
/// when none is left: a serve that says "Serving" and can never accept
/// helps no one.
pub(super) fn client_slots(open: u64, limit: u64) -> Result<usize, String> {
    let free = limit.saturating_sub(open).saturating_sub(KEPT_FOR_SERVING);
    if free == 0 {
        return Err(format!(
            "no file descriptor is left for clients: {open} of the {limit} this process may have (RLIMIT_NOFILE) are open after loading, and serving keeps {KEPT_FOR_SERVING} for itself. EMFILE: raise the limit (`ulimit -n 1024`; LimitNOFILE=1024 in a systemd unit; a container runtime's nofile ulimit)"
        ));
    }
    Ok(usize::try_from(free)
        .unwrap_or(usize::MAX)
        .min(MAX_CONNECTIONS))
}

/// The open connections, for the limit: each one's last activity and a
/// way to close it.
pub(super) struct Connections {
    limit: usize,
    first_request: Duration,
    next_id: Cell<u64>,
    open: Rc<RefCell<BTreeMap<u64, Slot>>>,
}

struct Slot {
    /// When it connected or last sent a request.
    active: Rc<Cell<Instant>>,
    /// Its requests being answered now (one waiting for its password
    /// check, say).
    busy: Rc<Cell<usize>>,
    close: Rc<Notify>,
}

impl Connections {
    pub(super) fn new(limit: usize, first_request: Duration) -> Connections {
        Connections {
            limit: limit.max(1),
            first_request,
            next_id: Cell::new(0),
            open: Rc::new(RefCell::new(BTreeMap::new())),
        }
    }

    pub(super) fn count(&self) -> usize {
        self.open.borrow().len()
    }

    /// Whether more are open than the limit: a connection shed to make
    /// room has not closed yet (or every open one has a request being
    /// answered: see `shed_one`).
    pub(super) fn over_limit(&self) -> bool {
        self.count() > self.limit
    }

    /// Closes the connection that has been quiet longest, of those with no
    /// request being answered; false if there is none. Used at the limit,
    /// and when accept runs out of descriptors. A request being answered
    /// (a login waiting for its password check behind a flood of wrong
    /// ones) is never cut off for a newcomer: the limit is then passed by
    /// at most the requests in progress, which the password checks bound.
    pub(super) fn shed_one(&self) -> bool {
        let open = self.open.borrow();
        let quietest = (open.values())
            .filter(|slot| slot.busy.get() == 0)
            .min_by_key(|slot| slot.active.get());
        if let Some(slot) = quietest {
            slot.close.notify_one();
        }
        quietest.is_some()
    }

    /// Serves `stream` on a task of the current LocalSet, over TLS with
    /// the acceptor `tls` gives (the web configuration in force, which may
    /// be being read again), each request answered by `respond`
    /// (routes.rs). A failed handshake goes to `handshake_errors`.
    pub(super) fn spawn<R, F, T>(
        &self,
        stream: TcpStream,
        tls: T,
        handshake_errors: &Rc<RefCell<ErrorLog>>,
        respond: R,
    ) where
        R: Fn(Request<Incoming>) -> F + 'static,
        F: Future<Output = Response<Full<Bytes>>> + 'static,
        T: Future<Output = Option<TlsAcceptor>> + 'static,
    {
        // At the limit the quietest connection makes room; it closes at its
        // task's next turn, before this one has sent anything back.
        if self.count() >= self.limit {
            self.shed_one();
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let active = Rc::new(Cell::new(Instant::now()));
        let busy = Rc::new(Cell::new(0));
        let close = Rc::new(Notify::new());
        self.open.borrow_mut().insert(
            id,
            Slot {
                active: active.clone(),
                busy: busy.clone(),
                close: close.clone(),
            },
        );
        let open = self.open.clone();
        let first_request = self.first_request;
        let handshake_errors = handshake_errors.clone();
        tokio::task::spawn_local(async move {
            let connection = Connection {
                active,
                busy,
                close,
                first_request: Instant::now() + first_request,
            };
            let tls = tokio::select! {
                tls = tls => tls,
                () = tokio::time::sleep_until(connection.first_request.into()) => {
                    open.borrow_mut().remove(&id);
                    return;
                }
            };
            match tls {
                None => connection.serve(TokioIo::new(stream), respond).await,
                Some(acceptor) => {
                    if let Some(stream) = connection
                        .handshake(&acceptor, stream, &handshake_errors)
                        .await
                    {
                        connection.serve(TokioIo::new(stream), respond).await;
                    }
                }
            }
            open.borrow_mut().remove(&id);
        });
    }
}

/// What Go's net/http answers a plain HTTP request on a TLS port
/// (server.go, after tlsRecordHeaderLooksLikeHTTP), word for word: the
/// client's operator searches for it.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Whether the client's first bytes are an HTTP request line rather than
/// a TLS record (a handshake record starts with 0x16): the methods a
/// scraper or a browser sends, as Go tells them apart. Peeked, so a TLS
/// client's bytes stay for the handshake.
async fn sends_plain_http(stream: &TcpStream) -> bool {
    let mut head = [0u8; 5];
    matches!(stream.peek(&mut head).await, Ok(5)) && looks_like_http(head)
}

fn looks_like_http(head: [u8; 5]) -> bool {
    [*b"GET /", *b"HEAD ", *b"POST ", *b"PUT /", *b"OPTIO"].contains(&head)
}

/// One connection's task: its last activity, the way to shed it, and the
/// deadline of its first request.
struct Connection {
    active: Rc<Cell<Instant>>,
    busy: Rc<Cell<usize>>,
    close: Rc<Notify>,
    first_request: Instant,
}

impl Connection {
    /// The TLS handshake, bounded by the first request's deadline (a client
    /// that connects and sends nothing is let go as on plain HTTP); None
    /// when it failed, timed out or the connection was shed. A plain HTTP
    /// request instead of a handshake (a scrape configured with `http://`)
    /// gets a 400 that says what is wrong, as Go's exporters answer it.
    async fn handshake(
        &self,
        acceptor: &TlsAcceptor,
        mut stream: TcpStream,
        errors: &RefCell<ErrorLog>,
    ) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
        let from = stream
            .peer_addr()
            .map_or_else(|_| String::new(), |p| format!(" from {p}"));
        let attempt = async {
            if sends_plain_http(&stream).await {
                let _ = stream.write_all(PLAIN_HTTP_ANSWER).await;
                let _ = stream.shutdown().await;
                // Read the request away until the client closes (bounded
                // by the deadline below): closed with it unread, the
                // socket would send a reset that can discard the answer.
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return Err(format!(
                    "plain HTTP request{from} to the TLS port: answered 400 (the client must use https://)"
                ));
            }
            acceptor
                .accept(stream)
                .await
                .map_err(|e| format!("TLS handshake{from} failed: {e}"))
        };
        tokio::select! {
            done = attempt => match done {
                Ok(stream) => Some(stream),
                Err(what) => {
                    if let Some(line) = errors.borrow_mut().line(&what) {
                        say!("schedlat: {line}");
                    }
                    None
                }
            },
            _ = tokio::time::sleep_until(self.first_request.into()) => None,
            _ = self.close.notified() => None,
        }
    }

    /// Serves the connection (keep-alive: Prometheus reuses it every
    /// scrape) until the client closes it, it sends no request in time, it
    /// is shed, or the task is dropped at shutdown.
    async fn serve<I, R, F>(&self, io: I, respond: R)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
        R: Fn(Request<Incoming>) -> F + 'static,
        F: Future<Output = Response<Full<Bytes>>> + 'static,
    {
        let requests = Rc::new(Cell::new(0u64));
        let seen = requests.clone();
        let last = self.active.clone();
        let busy = self.busy.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            seen.set(seen.get() + 1);
            last.set(Instant::now());
            let response = respond(request);
            let in_progress = InProgress::new(busy.clone());
            async move {
                let response = response.await;
                drop(in_progress);
                Ok::<_, Infallible>(response)
            }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT);
        let connection = builder.serve_connection(io, service);
        tokio::pin!(connection);
        let deadline = tokio::time::sleep_until(self.first_request.into());
        tokio::pin!(deadline);
        // Errors from the connection are the client's (reset, garbage,
        // timeout): nothing to do. Dropping it closes the socket. The
        // deadline only matters if no request came before it: a request may
        // arrive while this select is waiting, so it is checked when it
        // fires.
        let mut deadline_passed = false;
        loop {
            tokio::select! {
                _ = &mut connection => return,
                _ = self.close.notified() => return,
                _ = &mut deadline, if !deadline_passed => {
                    if requests.get() == 0 {
                        return;
                    }
                    deadline_passed = true;
                }
            }
        }
    }
}

/// Counts a request as being answered while it lives (also when the
/// client hangs up and the request is dropped).
struct InProgress(Rc<Cell<usize>>);

impl InProgress {
    fn new(busy: Rc<Cell<usize>>) -> InProgress {
        busy.set(busy.get() + 1);
        InProgress(busy)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// A plain-text answer.
pub(super) fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::TcpStream as Client,
        sync::mpsc,
    };

    use super::*;

    /// Issue 48 item 11: the clients' share of the descriptors left.
    #[test]
    fn clients_get_the_descriptors_left_or_none_is_an_error() {
        assert_eq!(client_slots(51, 1024), Ok(MAX_CONNECTIONS));
        assert_eq!(client_slots(51, 60), Ok(7));
        let e = client_slots(51, 53).unwrap_err();
        assert!(e.contains("51 of the 53") && e.contains("EMFILE"), "{e}");
        assert!(client_slots(60, 48).is_err());
    }

    /// Runs a server with `conns` on the current thread while `clients`
    /// runs on another; returns what `clients` returns.
    fn with_server<T: Send + 'static>(
        conns: Connections,
        clients: impl FnOnce(std::net::SocketAddr) -> T + Send + 'static,
    ) -> T {
        with_server_answering(conns, |_| async { plain(StatusCode::OK, "ok\n") }, clients)
    }

    /// The same, each request answered by `respond`.
    fn with_server_answering<T: Send + 'static, R, F>(
        conns: Connections,
        respond: R,
        clients: impl FnOnce(std::net::SocketAddr) -> T + Send + 'static,
    ) -> T
    where
        R: Fn(Request<Incoming>) -> F + Clone + 'static,
        F: Future<Output = Response<Full<Bytes>>> + 'static,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let errors = Rc::new(RefCell::new(ErrorLog::new(Duration::from_secs(10))));
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || tx.send(clients(addr)).unwrap());
            loop {
                tokio::select! {
                    Ok((stream, _)) = listener.accept() => {
                        conns.spawn(stream, async { None }, &errors, respond.clone());
                    }
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {
                        if let Ok(v) = rx.try_recv() {
                            return v;
                        }
                    }
                }
            }
        })
    }

    /// Whether the server closed `c` (EOF) within a second.
    fn closed(c: &mut Client) -> bool {
        c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        matches!(c.read(&mut [0u8; 64]), Ok(0))
    }

    fn get(addr: std::net::SocketAddr) -> String {
        let mut c = Client::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    /// A request line is plain HTTP; a TLS handshake record (0x16, the
    /// version) and anything else is not.
    #[test]
    fn plain_http_is_told_from_a_handshake() {
        for head in [b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO"] {
            assert!(looks_like_http(*head), "{head:?}");
        }
        for head in [b"\x16\x03\x01\x02\x00", b"GET  ", b"get /", b"PATCH"] {
            assert!(!looks_like_http(*head), "{head:?}");
        }
    }

    /// Regression: a client that connected and sent nothing held its
    /// descriptor for 6 minutes.
    #[test]
    fn a_silent_client_is_let_go_quickly() {
        let conns = Connections::new(8, Duration::from_millis(200));
        let (silent_closed, answered) = with_server(conns, |addr| {
            let mut silent = Client::connect(addr).unwrap();
            (closed(&mut silent), get(addr))
        });
        assert!(silent_closed, "a silent connection stayed open");
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    }

    /// A kept-alive connection that sent its first request in time stays
    /// open past the first-request deadline (Prometheus reuses it).
    #[test]
    fn a_client_that_asked_stays_past_the_deadline() {
        let conns = Connections::new(8, Duration::from_millis(200));
        let (first, second) = with_server(conns, |addr| {
            let mut c = Client::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let ask = |c: &mut Client| {
                c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut buf = [0u8; 512];
                let n = c.read(&mut buf).unwrap_or(0);
                String::from_utf8_lossy(&buf[..n]).into_owned()
            };
            let first = ask(&mut c);
            std::thread::sleep(Duration::from_millis(400));
            (first, ask(&mut c))
        });
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(
            second.starts_with("HTTP/1.1 200"),
            "closed after the deadline: {second:?}"
        );
    }

    /// Regression: idle connections piled up without limit until accept
    /// failed and scrapes timed out; now the quietest makes room.
    #[test]
    fn at_the_limit_the_quietest_connection_makes_room() {
        let conns = Connections::new(2, Duration::from_secs(60));
        let (first_closed, second_open, answered) = with_server(conns, |addr| {
            let mut first = Client::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let mut second = Client::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let answered = get(addr);
            second
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let second_open = matches!(
                second.read(&mut [0u8; 8]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut
            );
            (closed(&mut first), second_open, answered)
        });
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
        assert!(first_closed, "the quietest connection was not shed");
        assert!(second_open, "a newer connection was shed instead");
    }

    /// Regression: a login waiting for its password check behind a flood
    /// was the quietest connection and was closed for a newcomer. A
    /// connection with a request being answered is not shed, even when it
    /// is the oldest.
    #[test]
    fn a_connection_being_answered_is_not_shed() {
        let conns = Connections::new(2, Duration::from_secs(60));
        let slow = |request: Request<Incoming>| async move {
            if request.uri().path() == "/slow" {
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            plain(StatusCode::OK, "ok\n")
        };
        let (waiting, idle_closed, newcomer) = with_server_answering(conns, slow, |addr| {
            let mut waiting = Client::connect(addr).unwrap();
            waiting
                .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let mut idle = Client::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let newcomer = get(addr);
            waiting
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let mut answer = String::new();
            let _ = waiting.read_to_string(&mut answer);
            (answer, closed(&mut idle), newcomer)
        });
        assert!(newcomer.starts_with("HTTP/1.1 200"), "{newcomer}");
        assert!(
            waiting.starts_with("HTTP/1.1 200"),
            "the waiting request was cut: {waiting:?}"
        );
        assert!(idle_closed, "the idle connection was not shed");
    }
}
