//! `serve --otlp-endpoint`: every `--otlp-interval` the scrape's families
//! (the same read a scrape makes) go to an OpenTelemetry collector over
//! OTLP/HTTP in protobuf, through the bounded queue and backoff of
//! export/otlp/delivery.rs. One request at a time, each bounded by
//! `--otlp-timeout` from connect to the answer's last byte, on serve's
//! one thread beside the scrapes, which a stuck collector never holds up.
//! At exit one last push (within the timeout) sends what was counted
//! since the previous one.

use std::{
    path::PathBuf,
    rc::Rc,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use http_body_util::{BodyExt, Full, Limited};
use hyper::{
    Request,
    body::Bytes,
    header::{CONTENT_ENCODING, CONTENT_TYPE, HOST, RETRY_AFTER, USER_AGENT},
};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, pki_types::ServerName};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    time::Instant,
};
use tokio_rustls::TlsConnector;

pub(crate) use super::otlp_endpoint::Endpoint;
use super::{otlp_tls, scrape::Scraper, unseen::Reader};
use crate::export::otlp::{
    self,
    answer::{PartialSuccess, partial_success},
    delivery::{Attempt, Backoff, Delivery},
    metrics::Times,
};

/// What `--otlp-*` resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OtlpOptions {
    pub endpoint: Endpoint,
    /// `--otlp-header`, `OTEL_EXPORTER_OTLP_(METRICS_)HEADERS`.
    pub headers: Vec<(String, String)>,
    pub interval: Duration,
    pub timeout: Duration,
    /// Requests kept while the collector does not take them.
    pub queue: usize,
    /// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`.
    pub resource: Vec<(String, String)>,
    /// The CA bundle an `https://` collector's certificate is checked
    /// against (`--otlp-certificate`); None: the system's.
    pub ca_file: Option<PathBuf>,
    /// The client certificate and key presented to a collector that asks
    /// (`--otlp-client-certificate`, `--otlp-client-key`).
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Bodies sent gzip-compressed (`--otlp-compression gzip`).
    pub gzip: bool,
}

/// The backoff between failed attempts (export/otlp/delivery.rs): as the
/// OpenTelemetry collector's exporters retry, from a shorter first wait.
const BACKOFF: Backoff = Backoff {
    initial: Duration::from_secs(1),
    max: Duration::from_secs(30),
};
/// The most of a collector's answer read (its partial-success message).
const MAX_ANSWER: usize = 64 * 1024;

/// The push's options and, for `https://`, its TLS configuration.
pub(super) struct Push {
    pub options: OtlpOptions,
    tls: Option<Arc<ClientConfig>>,
    /// The collector's partial-success message last said: each message
    /// is said once, not at every push.
    partial_said: std::cell::RefCell<Option<String>>,
}

impl Push {
    /// The error names the CA file and what is wrong with it.
    pub(super) fn new(options: OtlpOptions) -> Result<Push, String> {
        let tls = match options.endpoint.tls {
            true => Some(otlp_tls::client_config(
                options.ca_file.as_deref(),
                options.client_identity.as_ref(),
            )?),
            false => None,
        };
        Ok(Push {
            options,
            tls,
            partial_said: std::cell::RefCell::default(),
        })
    }
}

/// The push: a request every interval, sent as the queue and backoff
/// allow, until the future is dropped.
pub(super) async fn push(scraper: Rc<Scraper>, push: Rc<Push>, start_unix_ns: u64) {
    let options = &push.options;
    let resource = otlp::resource(&crate::sys::host::hostname(), &options.resource);
    let mut delivery = Delivery::new(options.queue);
    let mut log = FailureLog::default();
    let mut tick = tokio::time::interval(options.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut not_before = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(body) = request(&scraper, &resource, start_unix_ns) {
                    delivery.push(body);
                }
                scraper.otlp_counts(delivery.counts());
            }
            () = tokio::time::sleep_until(not_before), if delivery.next().is_some() => {
                let body = delivery.next().expect("checked").to_vec();
                let outcome = send(&push, body).await;
                let wait = delivery.done(&outcome, &BACKOFF, jitter());
                log.note(&options.endpoint, &outcome, wait);
                not_before = Instant::now() + wait.unwrap_or_default();
                scraper.otlp_counts(delivery.counts());
            }
        }
    }
}

/// The last push at exit: what was counted since the previous one, one
/// attempt within the timeout.
pub(super) async fn last_push(scraper: &Scraper, push: &Push, start_unix_ns: u64) {
    let options = &push.options;
    let resource = otlp::resource(&crate::sys::host::hostname(), &options.resource);
    if let Some(body) = request(scraper, &resource, start_unix_ns)
        && let outcome @ (Attempt::Retry { .. } | Attempt::Rejected { .. }) = send(push, body).await
    {
        say!(
            "schedlat: the last OTLP push to {} failed: {}",
            options.endpoint.url,
            reason(&outcome)
        );
    }
}

/// This moment, nanoseconds since the Unix epoch.
pub(super) fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One request's body: a scrape, encoded; None if the kernel's maps could
/// not be read (said, and tried again at the next interval).
fn request(
    scraper: &Scraper,
    resource: &[(String, String)],
    start_unix_ns: u64,
) -> Option<Vec<u8>> {
    match scraper.scrape(Reader::Push) {
        Ok(scrape) => {
            let times = Times {
                start_unix_ns,
                now_unix_ns: unix_now_ns(),
            };
            Some(otlp::encode(&scrape.families(), resource, times))
        }
        Err(e) => {
            say!("schedlat: OTLP push: reading the kernel's maps: {e}");
            None
        }
    }
}

/// In [0, 1): where in the backoff's jitter this wait falls.
fn jitter() -> f64 {
    f64::from(unix_now_ns() as u32 % 1000) / 1000.0
}

fn reason(outcome: &Attempt) -> &str {
    match outcome {
        Attempt::Sent => "sent",
        Attempt::Retry { reason, .. } | Attempt::Rejected { reason } => reason,
    }
}

/// One attempt, bounded by the timeout.
async fn send(push: &Push, body: Vec<u8>) -> Attempt {
    let options = &push.options;
    match tokio::time::timeout(options.timeout, attempt(push, body)).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Attempt::Retry {
            reason: e,
            retry_after: None,
        },
        Err(_) => Attempt::Retry {
            reason: format!(
                "no answer within {} (--otlp-timeout)",
                crate::analysis::fmt_ns(options.timeout.as_nanos() as u64)
            ),
            retry_after: None,
        },
    }
}

async fn attempt(push: &Push, body: Vec<u8>) -> Result<Attempt, String> {
    let endpoint = &push.options.endpoint;
    let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|e| format!("connecting to {}: {e}", endpoint.authority()))?;
    match &push.tls {
        None => exchange(stream, push, body).await,
        Some(config) => {
            let name = ServerName::try_from(endpoint.host.clone())
                .map_err(|e| format!("{}: {e}", endpoint.host))?;
            let stream = (TlsConnector::from(config.clone())
                .connect(name, stream)
                .await)
                .map_err(|e| format!("TLS with {}: {e}", endpoint.authority()))?;
            exchange(stream, push, body).await
        }
    }
}

/// The request and its answer on a connected stream.
async fn exchange(
    stream: impl AsyncRead + AsyncWrite + Unpin + 'static,
    push: &Push,
    body: Vec<u8>,
) -> Result<Attempt, String> {
    let options = &push.options;
    let endpoint = &options.endpoint;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    // The connection is driven beside the request, and ends with it: also
    // when the timeout drops this future before the answer came.
    let _connection = AbortOnDrop(tokio::task::spawn_local(connection));
    let mut request = Request::post(endpoint.path.as_str())
        .header(HOST, endpoint.authority())
        .header(CONTENT_TYPE, otlp::CONTENT_TYPE)
        .header(USER_AGENT, concat!("schedlat/", env!("CARGO_PKG_VERSION")));
    for (name, value) in &options.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let body = if options.gzip {
        request = request.header(CONTENT_ENCODING, "gzip");
        gzipped(&body)
    } else {
        body
    };
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("building the request: {e}"))?;
    let response = (sender.send_request(request).await)
        .map_err(|e| format!("sending: {}", with_causes(&e)))?;
    let status = response.status().as_u16();
    let retry_after = (response.headers().get(RETRY_AFTER))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let outcome = Attempt::of_status(status, retry_after.as_deref());
    if outcome == Attempt::Sent {
        // A partial success: the collector kept some points only.
        let partial = match Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
        {
            Ok(answer) => partial_success(&answer.to_bytes()),
            Err(_) => None,
        };
        if let Some(line) = partial_line(&push.partial_said, &endpoint.url, partial) {
            say!("{line}");
        }
    }
    Ok(outcome)
}

/// The line to log for a push's partial success, if it is news: the
/// collector's message (made printable and cut) is said once per change;
/// a push without one ends the episode, so the next is said again.
fn partial_line(
    said: &std::cell::RefCell<Option<String>>,
    url: &str,
    partial: Option<PartialSuccess>,
) -> Option<String> {
    let mut said = said.borrow_mut();
    let Some(partial) = partial else {
        *said = None;
        return None;
    };
    if said.as_deref() == Some(partial.message.as_str()) {
        return None;
    }
    *said = Some(partial.message.clone());
    Some(format!(
        "schedlat: the OTLP collector at {url} rejected {} data points: {} (said once until the message changes)",
        partial.rejected_data_points, partial.message
    ))
}

/// [`partial_line`], for the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn partial_line_for_fuzzing(
    said: &std::cell::RefCell<Option<String>>,
    partial: PartialSuccess,
) -> Option<String> {
    partial_line(said, "http://collector:4318/v1/metrics", Some(partial))
}

/// An error and what caused it: hyper's "connection error" alone hides
/// the collector's TLS alert (a client certificate it wanted or refused).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut said = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let cause_said = cause.to_string();
        if !said.contains(&cause_said) {
            said = format!("{said}: {cause_said}");
        }
        next = cause.source();
    }
    said
}

/// A task ended when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `body` compressed with gzip (flate2's default level: the collectors'
/// OTLP receivers take `Content-Encoding: gzip`).
fn gzipped(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("a Vec grows as needed");
    encoder.finish().expect("a Vec grows as needed")
}

/// Says the first failure of a run, a change of reason, and the recovery;
/// not every retry.
#[derive(Default)]
struct FailureLog {
    failing: Option<String>,
    failed: u64,
}

impl FailureLog {
    fn note(&mut self, endpoint: &Endpoint, outcome: &Attempt, wait: Option<Duration>) {
        match outcome {
            Attempt::Sent => {
                if self.failing.take().is_some() {
                    say!(
                        "schedlat: OTLP push to {} delivered again, after {} failed attempts",
                        endpoint.url,
                        self.failed
                    );
                }
                self.failed = 0;
            }
            Attempt::Retry { reason, .. } | Attempt::Rejected { reason } => {
                self.failed += 1;
                if self.failing.as_deref() != Some(reason.as_str()) {
                    let next = match (outcome, wait) {
                        (Attempt::Rejected { .. }, _) => "request dropped".to_string(),
                        (_, Some(wait)) => format!(
                            "retrying with backoff, next in {}",
                            crate::analysis::fmt_ns(wait.as_nanos() as u64)
                        ),
                        _ => "retrying".to_string(),
                    };
                    say!(
                        "schedlat: OTLP push to {} failed: {reason}; {next}",
                        endpoint.url
                    );
                    self.failing = Some(reason.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48, 12: a collector answering every push with a message
    /// had it logged at every push (41,526 lines in 25 s).
    #[test]
    fn a_partial_success_is_said_once_per_message() {
        let said = std::cell::RefCell::new(None);
        let partial = |message: &str| {
            Some(PartialSuccess {
                rejected_data_points: 2,
                message: message.to_string(),
            })
        };
        let url = "http://c:4318/v1/metrics";
        let first = partial_line(&said, url, partial("bad points")).unwrap();
        assert!(
            first.contains("rejected 2 data points: bad points"),
            "{first}"
        );
        for _ in 0..100 {
            assert_eq!(partial_line(&said, url, partial("bad points")), None);
        }
        assert!(partial_line(&said, url, partial("other")).is_some());
        assert_eq!(partial_line(&said, url, None), None);
        assert!(partial_line(&said, url, partial("other")).is_some());
    }

    #[test]
    fn gzip_bodies_decompress_to_the_request() {
        use std::io::Read as _;
        let body: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let packed = gzipped(&body);
        assert!(
            packed.len() < body.len() / 10,
            "{} of {}",
            packed.len(),
            body.len()
        );
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, body);
    }
}
