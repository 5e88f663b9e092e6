//! The OTLP push rows of `cargo xtask bench --scrape N --sleeper-processes`:
//! what one `serve --otlp-endpoint` export of 1k and of 10k keys costs in
//! serve's CPU, beside a text scrape of the same keys.
//!
//! Per key count, that many sleeper processes (each waking once a second,
//! so each is a `--pids` key that waited since the previous export) run on
//! another CPU, and two serves are measured in turn, each for N exports one
//! second apart:
//!
//! - `text`: `serve --pids`, scraped with Prometheus' Accept header once a
//!   second (bench/serve_client.rs's connection);
//! - `otlp`: `serve --pids --otlp-endpoint` pushing once a second
//!   (`--otlp-interval 1s`, no compression) to a sink in this process that
//!   reads each request and answers 200 at once, and is never scraped.
//!
//! serve's CPU (every thread, /proc/PID/task/*/schedstat) over the N
//! exports, divided by N: both include whatever serve does in a second
//! besides exporting, so the ratio compares the exports themselves.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    pid_max,
    serve_client::{ACCEPT, Conn, Serve, content_length, cpu_ns},
    sleepers::{SleeperProcess, Sleeping, tasks},
};

/// The key counts of the rows.
const KEYS: [usize; 2] = [1_000, 10_000];

/// Time between two exports (scrapes, pushes).
const INTERVAL: Duration = Duration::from_secs(1);

/// The rows, sleepers on CPU `other`, `exports` of each kind per row.
pub(super) fn run(exe: &Path, other: usize, exports: u32) -> Result<()> {
    let largest = KEYS[KEYS.len() - 1];
    // Room for the largest row's sleepers, restored when this returns.
    let _raised = match tasks() {
        Some(now) => pid_max::raise_for(largest + 1_000, now)?,
        None => None,
    };
    println!(
        "OTLP push vs text scrape, serve --pids: {exports} exports per row, one a second; serve's CPU per export"
    );
    println!(
        "{:>8}  {:>13}  {:>13}  {:>7}  {:>10}  {:>10}  {:>7}",
        "keys", "text CPU us", "otlp CPU us", "ratio", "text bytes", "otlp bytes", "series"
    );
    for keys in KEYS {
        eprintln!("bench: starting {keys} sleeping/waking processes on CPU {other}");
        let sleepers = SleeperProcess::spawn(keys, other, Sleeping::Processes)?;
        // Room for every sleeper's key and the machine's other processes,
        // and a series for each (not --max-series' 250 of the top keys and
        // an overflow): the export is of every key.
        let max_keys = (keys + 4096).to_string();
        let pids = ["--pids", "--max-keys", &max_keys, "--max-series", &max_keys];
        let text = scrape_cost(exe, &pids, exports)?;
        let otlp = push_cost(exe, &pids, exports)?;
        drop(sleepers);
        println!(
            "{keys:>8}  {:>13.0}  {:>13.0}  {:>7.2}  {:>10}  {:>10}  {:>7}",
            text.cpu_us,
            otlp.cpu_us,
            otlp.cpu_us / text.cpu_us,
            text.bytes,
            otlp.bytes,
            text.series
        );
    }
    Ok(())
}

/// serve's CPU per export and the last export's size.
struct Cost {
    cpu_us: f64,
    bytes: u64,
    /// The per-process series of the last text scrape (0 for a push): the
    /// keys exported, overflow included.
    series: usize,
}

/// Settles serve (every sleeper has waited, so has its key), lets the
/// first export go untimed (it faults in the encoder's code and buffers),
/// then times serve's CPU over `exports` more calls of `export` (each
/// returns when its export is done, with its size).
fn cost(
    server: &Serve,
    exports: u32,
    mut export: impl FnMut() -> Result<(u64, usize)>,
) -> Result<Cost> {
    thread::sleep(Duration::from_millis(1_500));
    export()?;
    let before = cpu_ns(server.pid())?;
    let (mut bytes, mut series) = (0, 0);
    for _ in 0..exports {
        (bytes, series) = export()?;
    }
    let after = cpu_ns(server.pid())?;
    Ok(Cost {
        cpu_us: (after - before) as f64 / 1e3 / f64::from(exports),
        bytes,
        series,
    })
}

/// `serve extra`, scraped for text once an interval.
fn scrape_cost(exe: &Path, extra: &[&str], exports: u32) -> Result<Cost> {
    let server = Serve::start(exe, extra)?;
    let mut conn = Conn::open(server.addr, ACCEPT)?;
    let mut started = Instant::now();
    cost(&server, exports, || {
        thread::sleep(INTERVAL.saturating_sub(started.elapsed()));
        started = Instant::now();
        let body = conn.scrape()?;
        let series = String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| l.starts_with("schedlat_process_runqueue_latency_seconds_count{"))
            .count();
        Ok((body.len() as u64, series))
    })
}

/// `serve extra --otlp-endpoint <the sink>`, pushing once an interval.
fn push_cost(exe: &Path, extra: &[&str], exports: u32) -> Result<Cost> {
    let sink = Sink::start()?;
    let url = format!("http://{}/v1/metrics", sink.addr);
    let mut args = extra.to_vec();
    args.extend(["--otlp-endpoint", &url, "--otlp-interval", "1s"]);
    let server = Serve::start(exe, &args)?;
    cost(&server, exports, || {
        Ok((sink.wait_next(Duration::from_secs(10))?, 0))
    })
}

/// An OTLP/HTTP collector that keeps nothing: it reads each request's
/// body and answers 200 with an empty response, counting requests and
/// noting the last body's size.
struct Sink {
    addr: std::net::SocketAddr,
    requests: Arc<AtomicU64>,
    last_bytes: Arc<AtomicU64>,
    seen: std::cell::Cell<u64>,
}

impl Sink {
    fn start() -> Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the OTLP sink")?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let last_bytes = Arc::new(AtomicU64::new(0));
        let (r, b) = (requests.clone(), last_bytes.clone());
        // Detached: it ends with the bench (serve reconnects as it likes).
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let (r, b) = (r.clone(), b.clone());
                thread::spawn(move || {
                    let _ = answer(stream, |bytes| {
                        b.store(bytes, Ordering::SeqCst);
                        r.fetch_add(1, Ordering::SeqCst);
                    });
                });
            }
        });
        Ok(Sink {
            addr,
            requests,
            last_bytes,
            seen: std::cell::Cell::new(0),
        })
    }

    /// Waits for the request after the last one waited for; its body size.
    fn wait_next(&self, within: Duration) -> Result<u64> {
        let deadline = Instant::now() + within;
        let want = self.seen.get() + 1;
        while self.requests.load(Ordering::SeqCst) < want {
            if Instant::now() > deadline {
                bail!("serve pushed no request to the OTLP sink within {within:?}");
            }
            thread::sleep(Duration::from_millis(5));
        }
        self.seen.set(want);
        Ok(self.last_bytes.load(Ordering::SeqCst))
    }
}

/// Answers the HTTP/1.1 requests of one connection (keep-alive) with 200
/// and an empty body, calling `got` with each request's body size.
fn answer(stream: TcpStream, mut got: impl FnMut(u64)) -> Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    while let Some(body) = read_request(&mut reader)? {
        out.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        )?;
        got(body);
    }
    Ok(())
}

/// One request from `reader`: its body's size once read (by
/// Content-Length); None at the end of the connection.
fn read_request(reader: &mut impl BufRead) -> Result<Option<u64>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    if !line.starts_with("POST ") {
        bail!("the OTLP sink got `{}`, not a POST", line.trim());
    }
    let length = content_length(reader)? as u64;
    let read = std::io::copy(&mut reader.take(length), &mut std::io::sink())?;
    if read != length {
        bail!("the connection ended after {read} of {length} body bytes");
    }
    Ok(Some(length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_reads_keep_alive_requests_by_their_length() {
        let two = b"POST /v1/metrics HTTP/1.1\r\ncontent-length: 3\r\n\r\nabcPOST /v1/metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
        let mut reader = &two[..];
        assert_eq!(read_request(&mut reader).unwrap(), Some(3));
        assert_eq!(read_request(&mut reader).unwrap(), Some(0));
        assert_eq!(read_request(&mut reader).unwrap(), None);
    }

    #[test]
    fn a_short_body_or_a_missing_length_is_an_error() {
        let short = b"POST /v1/metrics HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc";
        let err = read_request(&mut &short[..]).unwrap_err().to_string();
        assert!(err.contains("3 of 9"), "{err}");
        let none = b"POST /v1/metrics HTTP/1.1\r\n\r\n";
        let err = read_request(&mut &none[..]).unwrap_err().to_string();
        assert!(err.contains("no Content-Length"), "{err}");
        let cut = b"POST /v1/metrics HTTP/1.1\r\nContent-Length: 3\r\n";
        let err = read_request(&mut &cut[..]).unwrap_err().to_string();
        assert!(err.contains("ended in the headers"), "{err}");
        let get = b"GET /metrics HTTP/1.1\r\n\r\n";
        assert!(read_request(&mut &get[..]).is_err());
    }
}
