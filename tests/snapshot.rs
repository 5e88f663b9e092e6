//! Root: who may make `schedlat serve` dump or answer. serve runs as root
//! on 127.0.0.1 with a flight recorder; the requests come from curl run as
//! uid 65534 (nobody), any local user. Each case was open before: five
//! requests rotated a SIGHUP dump away, a loop forced a dump per request,
//! a cross-site POST got 202, and a foreign Host read /metrics.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{require_root, serve::Server};

use crate::common;

/// `curl` as uid 65534: the status code, then the body.
fn curl_as_nobody(args: &[&str]) -> (u16, String) {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["curl", "--silent", "--show-error", "--max-time", "10"])
        .args(["--write-out", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("setpriv and curl run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A dump directory for one test, removed when dropped.
struct Dumps(PathBuf);

impl Dumps {
    fn new(name: &str) -> Dumps {
        let dir =
            std::env::temp_dir().join(format!("schedlat-snapshot-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Dumps(dir)
    }

    /// The finished dumps' names, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    /// Waits (bounded) until `n` dumps are whole.
    fn wait_for(&self, n: usize, server: &Server) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let names = self.names();
            let whole = names
                .iter()
                .filter(|d| Path::new(&self.0).join(d).join("dump.jsonl").exists())
                .count();
            if whole >= n {
                return names;
            }
            assert!(
                Instant::now() < deadline,
                "{n} dumps not written within 30 s: {names:?}\n{}",
                server.stderr()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dumps {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn serve_with_ring(dumps: &Dumps, extra: &[&str]) -> Server {
    let mut args = vec!["--ring", "30s", "--dump-dir", dumps.0.to_str().unwrap()];
    args.extend(extra);
    Server::start(&args)
}

#[test]
fn post_snapshot_is_off_unless_enabled() {
    if !require_root() {
        return;
    }
    let dumps = Dumps::new("off");
    let server = serve_with_ring(&dumps, &[]);
    let url = format!("http://{}/snapshot", server.addr);
    let (code, body) = curl_as_nobody(&["-X", "POST", &url]);
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("--web.enable-snapshot"), "{body}");
    thread::sleep(Duration::from_millis(500));
    assert!(dumps.names().is_empty(), "{:?}", dumps.names());
}

/// 30 POSTs as fast as curl goes: one dump, 429 for the others with a
/// Retry-After, one log line about them; a SIGHUP dump made before is not
/// rotated away by the HTTP one even with `--keep 1`.
#[test]
fn a_snapshot_flood_is_bounded_and_rotates_only_its_own() {
    if !require_root() {
        return;
    }
    let dumps = Dumps::new("flood");
    let server = serve_with_ring(&dumps, &["--web.enable-snapshot", "--keep", "1"]);
    // SAFETY: kill with a valid pid and signal.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) }, 0);
    let sighup = dumps.wait_for(1, &server);
    assert!(sighup[0].ends_with("-sighup"), "{sighup:?}");

    let url = format!("http://{}/snapshot", server.addr);
    let script = format!(
        "for i in $(seq 30); do curl --silent --output /dev/null --write-out '%{{http_code}} ' -X POST {url}; done"
    );
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let codes: Vec<&str> = std::str::from_utf8(&out.stdout)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(codes.len(), 30, "{codes:?}");
    let accepted = codes.iter().filter(|c| **c == "202").count();
    let limited = codes.iter().filter(|c| **c == "429").count();
    assert_eq!((accepted, limited), (1, 29), "{codes:?}");
    let (code, body) = curl_as_nobody(&["-X", "POST", "--include", &url]);
    assert_eq!(code, 429, "{body}");
    assert!(
        body.to_ascii_lowercase().contains("retry-after: "),
        "{body}"
    );

    let names = dumps.wait_for(2, &server);
    thread::sleep(Duration::from_millis(500));
    let names_after = dumps.names();
    assert_eq!(names, names_after);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("-sighup")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("-http")), "{names:?}");
    // The log: one line for the dump asked for, at most one per 10 s about
    // the refused ones.
    let log = server.stderr();
    let asked = log
        .lines()
        .filter(|l| l.contains("POST /snapshot: dumping"))
        .count();
    let refused = log.lines().filter(|l| l.contains("refused ")).count();
    assert_eq!(asked, 1, "{log}");
    assert!(refused <= 1, "{refused} lines about refusals:\n{log}");
}

#[test]
fn a_foreign_host_or_origin_is_refused() {
    if !require_root() {
        return;
    }
    let dumps = Dumps::new("origin");
    let server = serve_with_ring(&dumps, &["--web.enable-snapshot"]);
    let metrics = format!("http://{}/metrics", server.addr);
    let (code, body) = curl_as_nobody(&[&metrics]);
    assert_eq!(code, 200, "{body}");
    // DNS rebinding: a page's own name, resolved to 127.0.0.1.
    let host = format!("Host: rebind.example:{}", server.addr.port());
    let (code, body) = curl_as_nobody(&["-H", &host, &metrics]);
    assert_eq!(code, 403, "{body}");
    assert!(!body.contains("schedlat_"), "{body}");
    // A cross-site form POST: text/plain needs no CORS preflight.
    let url = format!("http://{}/snapshot", server.addr);
    let (code, body) = curl_as_nobody(&[
        "-X",
        "POST",
        "-H",
        "Origin: http://evil.example",
        "-H",
        "Content-Type: text/plain",
        "--data",
        "x",
        &url,
    ]);
    assert_eq!(code, 403, "{body}");
    thread::sleep(Duration::from_millis(500));
    assert!(dumps.names().is_empty(), "{:?}", dumps.names());
}
