//! `cargo xtask bench --scrape N`: what a Prometheus scrape of `schedlat
//! serve` costs, with few and with many tasks on the machine (the
//! `--sleepers` values).
//!
//! A scrape reads the per-CPU statistics map (one lookup returns every
//! CPU), lists the BPF programs for schedlat's own run-time counters, and
//! encodes about 10 KB of text. Per `--sleepers` value, this starts the
//! release `schedlat serve` on a free loopback port and scrapes it N times
//! back to back over one keep-alive connection with Prometheus' Accept
//! header, as Prometheus does, and reports:
//!
//! - latency seen by the scraper (request written to last body byte);
//! - the server's CPU time per scrape, from /proc/PID/schedstat (ns on CPU,
//!   every thread of serve: it has one once loaded);
//! - the body size.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};

use super::{Options, sleepers::SleeperProcess};
use crate::util::{require_root, workspace_root};

/// What serve prints once it is attached and listening.
const READY: &str = "Serving run queue latency on http://";
/// Prometheus 2.x's scrape Accept header.
const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

pub fn run(opts: &Options, scrapes: u32) -> Result<()> {
    require_root("schedlat serve loads eBPF programs")?;
    let exe = workspace_root().join("target/release/schedlat");
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let other = if cpus > 1 {
        (opts.cpu + 1) % cpus
    } else {
        opts.cpu
    };
    println!("scrapes of `schedlat serve`: {scrapes} per row, over one keep-alive connection");
    println!(
        "{:>8}  {:>9} {:>9} {:>9} {:>9}  {:>13}  {:>7}  {:>10}",
        "tasks", "p50 us", "p99 us", "max us", "mean us", "serve CPU us", "bytes", "BPF progs"
    );
    for &n in &opts.sleepers {
        eprintln!("bench: starting {n} sleeping/waking threads on CPU {other}");
        let sleepers = SleeperProcess::spawn(n, other)?;
        let row = measure(&exe, scrapes)?;
        drop(sleepers);
        println!(
            "{n:>8}  {:>9.0} {:>9.0} {:>9.0} {:>9.0}  {:>13.0}  {:>7}  {:>10}",
            row.p50_us, row.p99_us, row.max_us, row.mean_us, row.cpu_us, row.bytes, row.programs
        );
    }
    Ok(())
}

struct Row {
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    mean_us: f64,
    /// serve's CPU time per scrape.
    cpu_us: f64,
    bytes: usize,
    /// BPF programs on the host: serve lists them all for its own run-time
    /// counters, so this is what scales a scrape's syscalls (3 per program).
    programs: usize,
}

fn measure(exe: &std::path::Path, scrapes: u32) -> Result<Row> {
    let server = Serve::start(exe)?;
    let programs = aya::programs::loaded_programs().count();
    let mut conn = Conn::open(server.addr)?;
    // The first scrape also faults in the encoder's code and buffers.
    conn.scrape()?;
    let cpu_before = cpu_ns(server.pid())?;
    let mut latencies = Vec::with_capacity(scrapes as usize);
    let mut bytes = 0;
    for _ in 0..scrapes {
        let start = Instant::now();
        bytes = conn.scrape()?;
        latencies.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let cpu_after = cpu_ns(server.pid())?;
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok(Row {
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
        mean_us: latencies.iter().sum::<f64>() / latencies.len() as f64,
        cpu_us: (cpu_after - cpu_before) as f64 / 1e3 / f64::from(scrapes),
        bytes,
        programs,
    })
}

/// Time on CPU of every thread of `pid`, in ns (schedstat's first field).
fn cpu_ns(pid: u32) -> Result<u64> {
    let mut total = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        let text = fs::read_to_string(&path)
            .with_context(|| format!("reading {} (CONFIG_SCHED_INFO?)", path.display()))?;
        total += text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("unexpected {}: {text}", path.display()))?;
    }
    Ok(total)
}

/// One HTTP/1.1 keep-alive connection, reading bodies by Content-Length.
struct Conn {
    reader: BufReader<TcpStream>,
    request: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {ACCEPT}\r\n\r\n")
            .into_bytes();
        Ok(Conn {
            reader: BufReader::new(stream),
            request,
        })
    }

    /// One scrape; returns the body's size.
    fn scrape(&mut self) -> Result<usize> {
        self.reader.get_mut().write_all(&self.request)?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        if !line.starts_with("HTTP/1.1 200") {
            bail!("scrape answered `{}`", line.trim());
        }
        let mut length = None;
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            if line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let length = length.ok_or_else(|| anyhow!("no Content-Length"))?;
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok(length)
    }
}

/// The release `schedlat serve`, stopped with SIGINT when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(exe: &std::path::Path) -> Result<Serve> {
        let mut child = Command::new(exe)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", exe.display()))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let addr = line
                    .strip_prefix(READY)
                    .and_then(|rest| rest.split('/').next())
                    .map(str::to_string);
                let _ = tx.send(addr.ok_or(line));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut said = Vec::new();
        let addr = loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Ok(addr)) => break addr,
                Ok(Err(line)) => said.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "schedlat serve did not serve within 10 s: {}",
                        said.join("\n")
                    );
                }
            }
        };
        let addr = addr
            .parse()
            .with_context(|| format!("schedlat serve printed a bad address `{addr}`"))?;
        Ok(Serve { child, addr })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, not reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
