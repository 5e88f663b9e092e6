//! `schedlat serve` as a real process: started on a free loopback port
//! (`--listen 127.0.0.1:0`), ready once it prints the address it serves on,
//! killed if dropped while running.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

use super::SCHEDLAT;

/// What serve prints on stderr once it is attached and listening, then
/// `http://` or (with TLS) `https://` and the address.
pub(crate) const READY: &str = "Serving run queue latency on ";

pub(crate) struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// Everything serve wrote to stderr so far (for failure messages).
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `schedlat serve --listen 127.0.0.1:0 EXTRA...` and waits until
    /// it serves.
    pub(crate) fn start(extra: &[&str]) -> Server {
        Server::spawn("127.0.0.1:0", extra)
    }

    /// The same on another address.
    pub(crate) fn start_on(listen: &str) -> Server {
        Server::spawn(listen, &[])
    }

    fn spawn(listen: &str, extra: &[&str]) -> Server {
        let mut cmd = Command::new(SCHEDLAT);
        cmd.args(["serve", "--listen", listen]).args(extra);
        Server::start_command(cmd)
    }

    /// Starts a `schedlat serve` command line as given (another binary,
    /// another user) and waits until it serves.
    pub(crate) fn start_command(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start schedlat serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        let log = stderr.clone();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                // Logged before the address is sent: once started, the
                // log holds the ready line.
                {
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
                if let Some(rest) = line.strip_prefix(READY) {
                    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
                    let addr = rest.split('/').next().unwrap_or_default().to_string();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "schedlat serve did not serve within 20 s; stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        Server {
            child,
            addr: addr
                .parse()
                .unwrap_or_else(|_| panic!("bad address `{addr}`")),
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether serve's stderr holds every one of `wanted` within `limit`:
    /// a line serve writes after answering (a refused connection's, say)
    /// can reach the log after the client already has its answer.
    pub(crate) fn stderr_shows(&self, wanted: &[&str], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.stderr();
            if wanted.iter().all(|w| log.contains(w)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// One scrape of /metrics in the classic text format (no Accept).
    pub(crate) fn scrape_text(&self) -> String {
        let got = super::http::get(self.addr, "/metrics", None).unwrap();
        assert_eq!(got.status, 200, "{}", got.body);
        got.body
    }

    /// Sends `signal` and waits (bounded) for the exit.
    pub(crate) fn stop_with(mut self, signal: i32) -> ExitStatus {
        // SAFETY: signalling our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "schedlat serve did not exit within 10 s of signal {signal}; stderr:\n{}",
                self.stderr()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
