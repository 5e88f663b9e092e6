//! A client of the release `schedlat serve` for the scrape and OTLP
//! benches: serve started and stopped, one keep-alive HTTP/1.1
//! connection, and the CPU time serve used.

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

/// What serve prints once it is attached and listening.
const READY: &str = "Serving run queue latency on http://";
/// Prometheus 2.x's scrape Accept header.
pub(super) const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Time on CPU of every thread of `pid`, in ns (schedstat's first field).
pub(super) fn cpu_ns(pid: u32) -> Result<u64> {
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
pub(super) struct Conn {
    reader: BufReader<TcpStream>,
    request: Vec<u8>,
}

impl Conn {
    pub(super) fn open(addr: SocketAddr, accept: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n")
            .into_bytes();
        Ok(Conn {
            reader: BufReader::new(stream),
            request,
        })
    }

    /// One scrape; returns the body.
    pub(super) fn scrape(&mut self) -> Result<Vec<u8>> {
        self.reader.get_mut().write_all(&self.request)?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        if !line.starts_with("HTTP/1.1 200") {
            bail!("scrape answered `{}`", line.trim());
        }
        let length = content_length(&mut self.reader)?;
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok(body)
    }
}

/// Reads an HTTP/1.1 message's headers, up to the blank line after them;
/// its Content-Length (the bench's bodies all have one).
pub(super) fn content_length(reader: &mut impl BufRead) -> Result<usize> {
    let mut line = String::new();
    let mut length = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("the connection ended in the headers");
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    length.ok_or_else(|| anyhow!("no Content-Length"))
}

/// The release `schedlat serve`, stopped with SIGINT when dropped.
pub(super) struct Serve {
    child: Child,
    pub(super) addr: SocketAddr,
}

impl Serve {
    pub(super) fn start(exe: &std::path::Path, extra: &[&str]) -> Result<Serve> {
        let mut child = Command::new(exe)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
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

    pub(super) fn pid(&self) -> u32 {
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
