//! Root: `schedlat serve --web.config.file`, TLS and basic auth in the
//! Prometheus exporters' format, against curl and a real Prometheus, with
//! certificates made by openssl for each run (a CA, the server's, a
//! client's, and a stranger CA's client). Before the web configuration,
//! serve answered anyone who reached the port, POST /snapshot included.

use std::{
    fs,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, pki::Pki, prometheus::Prometheus, require_root, run_schedlat, serve::Server,
};

use crate::common;

impl Pki {
    /// Writes the web configuration `web.yml` (replaced by rename, as an
    /// editor or a Secret update does) and returns its path.
    fn write_config(&self, text: &str) -> String {
        let tmp = self.0.join(".web.yml.tmp");
        fs::write(&tmp, text).unwrap();
        fs::rename(&tmp, self.0.join("web.yml")).unwrap();
        self.path("web.yml")
    }
}

/// `basic_auth_users` with one user, cost 4 (the check of an unknown
/// user costs 10 as in production).
fn users(user: &str, password: &str) -> String {
    format!(
        "basic_auth_users:\n  {user}: {}\n",
        bcrypt::hash(password, 4).unwrap()
    )
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

struct Answer {
    code: u16,
    /// Headers and body (curl --include).
    text: String,
    /// curl's error, if it got no answer.
    error: String,
}

fn curl(pki: &Pki, args: &[&str]) -> Answer {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--include", "--max-time", "10"])
        .args(["--cacert", &pki.path("ca.crt")])
        .args(["--write-out", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (text, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Answer {
        code: code.trim().parse().unwrap_or(0),
        text: text.to_string(),
        error: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Dumps written to `dir` (finished ones: not dot-named).
fn dumps(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Over TLS, only the right password gets /metrics and POST /snapshot;
/// missing, wrong and unknown credentials get 401 with the challenge and
/// make no dump, a flood of them too; `/` stays open for probes; plain
/// HTTP to the TLS port gets no metrics but a 400 that says why, Go's
/// exporters' words (before: the connection was closed, and the scraper
/// saw only "connection reset").
#[test]
fn tls_and_basic_auth_admit_the_right_password_only() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("auth");
    let config = pki.write_config(&format!("{TLS}{}", users("prometheus", "s3cret")));
    let dump_dir = pki.0.join("dumps");
    fs::create_dir_all(&dump_dir).unwrap();
    let server = Server::start(&[
        "--web.config.file",
        &config,
        "--ring",
        "30s",
        "--web.enable-snapshot",
        "--dump-dir",
        dump_dir.to_str().unwrap(),
    ]);
    assert!(
        server
            .stderr()
            .contains(&format!("https://{}/metrics", server.addr)),
        "{}",
        server.stderr()
    );
    let base = format!("https://{}", server.addr);
    let metrics = format!("{base}/metrics");
    let snapshot = format!("{base}/snapshot");

    let right = curl(&pki, &["-u", "prometheus:s3cret", &metrics]);
    assert_eq!(right.code, 200, "{}{}", right.text, right.error);
    assert!(
        right
            .text
            .contains("schedlat_runqueue_latency_seconds_bucket"),
        "{}",
        right.text
    );
    for (what, args) in [
        ("no credentials", vec![metrics.as_str()]),
        ("a wrong password", vec!["-u", "prometheus:wrong", &metrics]),
        ("an unknown user", vec!["-u", "nobody:s3cret", &metrics]),
        (
            "another scheme",
            vec!["-H", "Authorization: Bearer s3cret", &metrics],
        ),
    ] {
        let a = curl(&pki, &args);
        assert_eq!(a.code, 401, "{what}: {}{}", a.text, a.error);
        assert!(
            a.text
                .to_ascii_lowercase()
                .contains("www-authenticate: basic realm=\"schedlat\""),
            "{what}: {}",
            a.text
        );
        assert!(!a.text.contains("schedlat_"), "{what}: {}", a.text);
    }
    let probe = curl(&pki, &[&format!("{base}/")]);
    assert_eq!(probe.code, 200, "{}", probe.text);
    let plain = curl(&pki, &[&format!("http://{}/metrics", server.addr)]);
    assert_eq!(plain.code, 400, "plain HTTP: {}{}", plain.text, plain.error);
    assert!(
        plain
            .text
            .contains("Client sent an HTTP request to an HTTPS server."),
        "{}",
        plain.text
    );
    assert!(!plain.text.contains("schedlat_"), "{}", plain.text);
    // The operator sees it too, and TLS still works on the port.
    assert!(
        server.stderr_shows(
            &["plain HTTP request from 127.0.0.1:", "answered 400"],
            Duration::from_secs(5)
        ),
        "{}",
        server.stderr()
    );
    assert_eq!(curl(&pki, &[&format!("{base}/")]).code, 200);

    // POST /snapshot: 401 and no dump without the password, a flood of
    // wrong ones included; the right one dumps.
    for args in [
        vec!["-X", "POST", snapshot.as_str()],
        vec!["-X", "POST", "-u", "prometheus:wrong", &snapshot],
    ] {
        assert_eq!(curl(&pki, &args).code, 401, "{args:?}");
    }
    let started = Instant::now();
    let script = format!(
        "for i in $(seq 20); do curl --silent --cacert {} -u prometheus:wrong$i --output /dev/null --write-out '%{{http_code}} ' -X POST {snapshot}; done",
        pki.path("ca.crt")
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let codes = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        codes.split_whitespace().filter(|c| *c == "401").count(),
        20,
        "{codes}"
    );
    let flood = started.elapsed();
    thread::sleep(Duration::from_millis(500));
    assert!(dumps(&dump_dir).is_empty(), "{:?}", dumps(&dump_dir));
    assert!(
        !server.stderr().contains("POST /snapshot: dumping"),
        "{}",
        server.stderr()
    );
    // The scrapes still answer at once: a remembered password needs no
    // bcrypt check.
    let again = curl(&pki, &["-u", "prometheus:s3cret", &metrics]);
    assert_eq!(again.code, 200, "{}", again.text);

    let dump = curl(&pki, &["-X", "POST", "-u", "prometheus:s3cret", &snapshot]);
    assert_eq!(dump.code, 202, "{}{}", dump.text, dump.error);
    let deadline = Instant::now() + Duration::from_secs(20);
    while dumps(&dump_dir).is_empty() {
        assert!(Instant::now() < deadline, "no dump: {}", server.stderr());
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(dumps(&dump_dir).len(), 1, "{:?}", dumps(&dump_dir));
    eprintln!("20 wrong-password POSTs answered in {flood:?}");
}

/// A new password in the file takes effect at the next request, without a
/// restart; a broken file keeps the last good configuration and says so,
/// and SIGHUP reads it again.
#[test]
fn a_changed_password_takes_effect_without_restart() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("reload");
    let config = pki.write_config(&format!("{TLS}{}", users("prometheus", "first")));
    let server = Server::start(&["--web.config.file", &config]);
    let metrics = format!("https://{}/metrics", server.addr);
    let code =
        |password: &str| curl(&pki, &["-u", &format!("prometheus:{password}"), &metrics]).code;
    assert_eq!(code("first"), 200);
    assert_eq!(code("second"), 401);

    pki.write_config(&format!("{TLS}{}", users("prometheus", "second")));
    assert_eq!(code("second"), 200, "{}", server.stderr());
    assert_eq!(code("first"), 401, "{}", server.stderr());
    assert!(
        server
            .stderr()
            .contains("web.yml read again (it changed): TLS, basic auth (1 user)"),
        "{}",
        server.stderr()
    );

    pki.write_config(&format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\n{}",
        users("prometheus", "third")
    ));
    assert_eq!(code("second"), 200, "{}", server.stderr());
    let log = server.stderr();
    assert!(
        log.contains("web.yml not taken (it changed): key_file ") && log.contains("missing.key"),
        "{log}"
    );
    assert!(
        log.contains("keeping the previous one (TLS, basic auth (1 user))"),
        "{log}"
    );
    // One line per change, not one per request.
    assert_eq!(code("second"), 200);
    assert_eq!(
        server.stderr().matches("not taken (").count(),
        1,
        "{}",
        server.stderr()
    );

    // SIGHUP re-reads even an unchanged file (here: still broken).
    // SAFETY: kill with a valid pid and signal.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stderr().matches("not taken (").count() < 2 {
        assert!(
            Instant::now() < deadline,
            "SIGHUP not acted on: {}",
            server.stderr()
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server.stderr().contains("web.yml not taken (SIGHUP)"),
        "{}",
        server.stderr()
    );
    assert_eq!(
        code("second"),
        200,
        "SIGHUP ended serve: {}",
        server.stderr()
    );
}

/// `RequireAndVerifyClientCert`: no handshake without a certificate the
/// CA signed; with one, no password is asked. The failed handshakes are
/// logged, at most a line per 10 s.
#[test]
fn client_certificates_are_verified_against_the_ca() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("mtls");
    let config = pki.write_config(&format!(
        "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n"
    ));
    let server = Server::start(&["--web.config.file", &config]);
    let metrics = format!("https://{}/metrics", server.addr);
    let client = curl(
        &pki,
        &[
            "--cert",
            &pki.path("client.crt"),
            "--key",
            &pki.path("client.key"),
            &metrics,
        ],
    );
    assert_eq!(client.code, 200, "{}{}", client.text, client.error);
    for (what, args) in [
        ("no certificate", vec![metrics.clone()]),
        (
            "another CA's",
            vec![
                "--cert".into(),
                pki.path("stranger.crt"),
                "--key".into(),
                pki.path("stranger.key"),
                metrics.clone(),
            ],
        ),
        (
            "TLS 1.2",
            vec![
                "--tls-max".into(),
                "1.2".into(),
                "--cert".into(),
                pki.path("client.crt"),
                "--key".into(),
                pki.path("client.key"),
                metrics.clone(),
            ],
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let a = curl(&pki, &args);
        assert_eq!(a.code, 0, "{what}: answered {}: {}", a.code, a.text);
        assert!(!a.text.contains("schedlat_"), "{what}: {}", a.text);
    }
    let log = server.stderr();
    assert_eq!(
        log.matches("TLS handshake from 127.0.0.1:").count(),
        1,
        "{log}"
    );
}

/// Beyond loopback, a configuration that authenticates is enough (no
/// --web.allow-unauthenticated); one that does not is refused at start,
/// and so is a file with a key schedlat does not implement.
#[test]
fn beyond_loopback_the_configuration_must_authenticate() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("listen");
    let config = pki.write_config(&format!("{TLS}{}", users("prometheus", "s3cret")));
    let server = Server::start_command({
        let mut cmd = Command::new(SCHEDLAT);
        cmd.args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--web.config.file",
            &config,
        ]);
        cmd
    });
    let metrics = format!("https://127.0.0.1:{}/metrics", server.addr.port());
    assert_eq!(
        curl(&pki, &["-u", "prometheus:s3cret", &metrics]).code,
        200,
        "{}",
        server.stderr()
    );
    assert_eq!(curl(&pki, &[&metrics]).code, 401);
    assert!(
        !server.stderr().contains("without authentication"),
        "{}",
        server.stderr()
    );
    drop(server);

    let tls_only = pki.write_config(TLS);
    let (status, _, stderr) = run_schedlat(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--web.config.file",
        &tls_only,
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("lets anyone in") && stderr.contains("basic_auth_users"),
        "{stderr}"
    );

    let unknown = pki.write_config(&format!("{TLS}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"));
    let (status, _, stderr) = run_schedlat(&["serve", "--web.config.file", &unknown]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tls_server_config.cipher_suites is not implemented"),
        "{stderr}"
    );
    let (status, _, stderr) = run_schedlat(&["serve", "--web.config.file", &pki.path("none.yml")]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
}

/// A real Prometheus (Debian's 2.x, and 3.x where setup put it) scrapes
/// over TLS with basic auth: up 1 and the series stored for the right
/// password, up 0 for a wrong one.
#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("prometheus");
    let config = pki.write_config(&format!("{TLS}{}", users("prometheus", "s3cret")));
    let server = Server::start(&["--web.config.file", &config]);
    let mut binaries = vec![PathBuf::from(common::prometheus::PROMETHEUS)];
    binaries.extend(common::prometheus::prometheus3_dir().map(|d| d.join("prometheus")));
    for binary in binaries {
        let job = |name: &str, password: &str| {
            [
                format!("  - job_name: {name}"),
                "    scheme: https".to_string(),
                "    scrape_timeout: 1s".to_string(),
                "    tls_config:".to_string(),
                format!("      ca_file: '{}'", pki.path("ca.crt")),
                "    basic_auth:".to_string(),
                "      username: prometheus".to_string(),
                format!("      password: '{password}'"),
                "    static_configs:".to_string(),
                format!("      - targets: ['{}']", server.addr),
            ]
        };
        let jobs: Vec<String> = job("right", "s3cret")
            .into_iter()
            .chain(job("wrong", "guess"))
            .collect();
        let prometheus = Prometheus::launch_jobs(&binary, &jobs, "1s", &[], &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut up_right, mut up_wrong, mut series) = (None, None, None);
        while Instant::now() < deadline {
            up_right = prometheus.query_value("up{job=\"right\"}", None);
            up_wrong = prometheus.query_value("up{job=\"wrong\"}", None);
            series = prometheus.query_value(
                "count(schedlat_runqueue_latency_seconds_bucket{job=\"right\"})",
                None,
            );
            if up_right == Some(1.0) && up_wrong == Some(0.0) && series.is_some_and(|n| n > 0.0) {
                break;
            }
            thread::sleep(Duration::from_millis(250));
        }
        assert_eq!(
            up_right,
            Some(1.0),
            "{}: right password\n{}",
            binary.display(),
            prometheus.log()
        );
        assert_eq!(up_wrong, Some(0.0), "{}: wrong password", binary.display());
        assert!(
            series.is_some_and(|n| n > 0.0),
            "{}: no series stored: {series:?}",
            binary.display()
        );
        let wrong = prometheus.api("/api/v1/targets?state=active");
        let error = wrong["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["labels"]["job"] == "wrong")
            .map(|t| t["lastError"].to_string())
            .unwrap_or_default();
        assert!(
            error.contains("401"),
            "{}: the wrong job's error: {error}",
            binary.display()
        );
    }
}

/// Rewrites `file` in place `times` times, as `cp` and `cat >` do: truncated,
/// then written in two parts (`text`'s first `split` bytes, a pause, the
/// rest), with a pause after the truncation every third time, and every
/// tenth a writer stalled for longer than serve waits for a file to settle
/// (an empty file, then a half one, each still for 150 ms).
fn rewrite_in_place(file: &Path, text: &str, split: usize, times: usize) {
    use std::io::Write as _;
    for n in 0..times {
        let mut f = fs::File::create(file).unwrap();
        let stall = if n % 10 == 0 { 150 } else { 2 };
        if n % 3 == 0 || n % 10 == 0 {
            thread::sleep(Duration::from_millis(stall.max(3)));
        }
        f.write_all(&text.as_bytes()[..split]).unwrap();
        thread::sleep(Duration::from_millis(stall));
        f.write_all(&text.as_bytes()[split..]).unwrap();
    }
}

/// Plain-HTTP GETs of /metrics without credentials while `busy` runs; the
/// status of each answer.
fn asking_without_password<T: Send + 'static>(
    addr: std::net::SocketAddr,
    busy: impl FnOnce() -> T + Send + 'static,
) -> Vec<u16> {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = done.clone();
    let writer = thread::spawn(move || {
        busy();
        finished.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let mut statuses = Vec::new();
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        if let Ok(r) = common::http::get(addr, "/metrics", None) {
            statuses.push(r.status);
        }
    }
    writer.join().unwrap();
    statuses
}

/// Issue 48, 1: a web configuration rewritten in place (truncated, then
/// written) 200 times let 2,824 password-less requests read /metrics on a
/// loopback listener with basic auth, and a file caught with its users
/// written but not yet its tls_server_config switched the TLS port to
/// plain HTTP. Now a reload takes only a file that stood still, and never
/// one that drops TLS or authentication the running configuration has.
#[test]
fn a_configuration_rewritten_in_place_never_opens_the_door() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("inplace");
    // Basic auth on plain HTTP: a request without a password gets 401.
    let text = users("prometheus", "s3cret");
    let config = pki.write_config(&text);
    let server = Server::start(&["--web.config.file", &config]);
    let file = PathBuf::from(&config);
    let statuses = {
        let (file, text) = (file.clone(), text.clone());
        asking_without_password(server.addr, move || rewrite_in_place(&file, &text, 20, 200))
    };
    let answered = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(
        answered,
        0,
        "{answered} of {} requests without a password were answered:\n{}",
        statuses.len(),
        server.stderr()
    );
    // Each request waits for the reload its change started.
    assert!(statuses.len() >= 5, "{} requests", statuses.len());
    drop(server);

    // TLS and basic auth, the users written first: plain HTTP to the TLS
    // port gets Go's 400 while TLS holds.
    let text = format!("{}{TLS}", users("prometheus", "s3cret"));
    pki.write_config(&text);
    let server = Server::start(&["--web.config.file", &config]);
    let split = text.find("tls_server_config").unwrap();
    let statuses = {
        let (file, text) = (file.clone(), text.clone());
        asking_without_password(server.addr, move || {
            rewrite_in_place(&file, &text, split, 200)
        })
    };
    let plain = statuses.iter().filter(|s| **s != 400).count();
    assert_eq!(
        plain,
        0,
        "{plain} of {} plain HTTP requests were served without TLS:\n{}",
        statuses.len(),
        server.stderr()
    );
    let metrics = format!("https://{}/metrics", server.addr);
    assert_eq!(curl(&pki, &["-u", "prometheus:s3cret", &metrics]).code, 200);
    // The refusals say why.
    let log = server.stderr();
    assert!(
        log.contains("serve never drops TLS or authentication on a reload")
            || !log.contains("not taken"),
        "{log}"
    );
}

/// Issue 48, 1 and 3: `--web.config.file <(...)` was read from the pipe
/// (and lost its users at the first SIGHUP); a FIFO put in the file's
/// place stalled every request; a link to /dev/zero grew serve to 24 GB;
/// cert_file pointing to /dev/zero aborted serve ("memory allocation of
/// 4294967296 bytes failed"). Now each is refused with what it is, the
/// previous configuration kept, and requests answered meanwhile.
#[test]
fn pipes_and_devices_are_refused_and_never_stall_serve() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("kinds");
    let text = format!("{TLS}{}", users("prometheus", "s3cret"));

    // A pipe at start: refused, exit 2, before anything is loaded.
    let fifo = pki.0.join("fifo.yml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let feeder = {
        let (fifo, text) = (fifo.clone(), text.clone());
        // Feeds the pipe if anyone reads it (the old serve did); ends
        // when the test's process does.
        thread::spawn(move || {
            let _ = fs::write(&fifo, text);
        })
    };
    let mut child = Command::new(SCHEDLAT)
        .args(["serve", "--listen", "127.0.0.1:0", "--web.config.file"])
        .arg(&fifo)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve took its configuration from a pipe and serves");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a FIFO") && stderr.contains("not a pipe"),
        "{stderr}"
    );
    // Unblock the feeder if it still waits for a reader (non-blocking: it
    // may be gone already).
    drop(
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo),
    );
    feeder.join().unwrap();

    // While serving: a FIFO, then a link to /dev/zero, put in the file's
    // place. The previous configuration stays, every request is answered.
    let config = pki.write_config(&text);
    let server = Server::start(&["--web.config.file", &config]);
    let metrics = format!("https://{}/metrics", server.addr);
    for (what, swap, says) in [
        ("a FIFO", fifo.clone(), "a FIFO"),
        (
            "a link to /dev/zero",
            PathBuf::from("/dev/zero"),
            "a device",
        ),
    ] {
        let staged = pki.0.join("staged");
        let _ = fs::remove_file(&staged);
        if what == "a FIFO" {
            fs::rename(&swap, &staged).unwrap();
        } else {
            std::os::unix::fs::symlink(&swap, &staged).unwrap();
        }
        fs::rename(&staged, &config).unwrap();
        let started = Instant::now();
        let right = curl(&pki, &["-u", "prometheus:s3cret", &metrics]);
        assert_eq!(
            right.code,
            200,
            "{what}: {}{}\n{}",
            right.text,
            right.error,
            server.stderr()
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            started.elapsed()
        );
        assert_eq!(curl(&pki, &[&metrics]).code, 401, "{what}");
        assert!(
            server.stderr_shows(
                &["not taken (it changed): cannot read it: ", says],
                Duration::from_secs(5)
            ),
            "{what}: {}",
            server.stderr()
        );
    }
    let rss_kb: u64 = fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(rss_kb < 200 * 1024, "serve grew to {rss_kb} kB");
    drop(server);

    // cert_file -> /dev/zero at start: exit 2 with the reason, no abort.
    std::os::unix::fs::symlink("/dev/zero", pki.0.join("zero.crt")).unwrap();
    let zero = pki.write_config(&format!(
        "tls_server_config:\n  cert_file: zero.crt\n  key_file: server.key\n{}",
        users("prometheus", "s3cret")
    ));
    let (status, _, stderr) = run_schedlat(&["serve", "--web.config.file", &zero]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("zero.crt: cannot read it: it is a device"),
        "{stderr}"
    );
}

/// Issue 48, 2: the one-check-at-a-time bound was held by the request,
/// dropped when the client hung up while bcrypt went on hashing: 16-64
/// clients sending a wrong password and resetting after 5 ms drove serve
/// to 133-254 threads and 1.5 CPUs, and a legitimate first login failed 6-8
/// times of 8. Now one check runs at a time whatever the clients do, and
/// every first login during the flood gets in.
#[test]
fn a_flood_of_early_hangups_runs_one_check_and_lets_logins_in() {
    if !require_root() {
        return;
    }
    use std::{
        io::Write as _,
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
    };
    let pki = Pki::new("flood");
    // Cost 10, htpasswd -B's: tens of milliseconds a check.
    let mut text = "basic_auth_users:\n".to_string();
    for n in 0..4 {
        text += &format!("  login{n}: {}\n", bcrypt::hash("s3cret", 10).unwrap());
    }
    let config = pki.write_config(&text);
    let server = Server::start(&["--web.config.file", &config]);
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("login0:wrong")
    };
    let flooders: Vec<_> = (0..32)
        .map(|_| {
            let (stop, wrong) = (stop.clone(), wrong.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = c.write_all(
                        format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {wrong}\r\n\r\n")
                            .as_bytes(),
                    );
                    thread::sleep(Duration::from_millis(5));
                    // A reset, not a close: SO_LINGER 0.
                    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
                    // SAFETY: a valid socket and option of its size.
                    unsafe {
                        libc::setsockopt(
                            std::os::fd::AsRawFd::as_raw_fd(&c),
                            libc::SOL_SOCKET,
                            libc::SO_LINGER,
                            (&raw const linger).cast(),
                            std::mem::size_of::<libc::linger>() as u32,
                        );
                    }
                }
            })
        })
        .collect();
    let threads = || -> u64 {
        fs::read_to_string(format!("/proc/{}/status", server.pid()))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    let cpu_ticks = || -> u64 {
        let stat = fs::read_to_string(format!("/proc/{}/stat", server.pid())).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    thread::sleep(Duration::from_millis(500));
    let (ticks, started) = (cpu_ticks(), Instant::now());
    let mut most_threads = 0;
    let mut logins = Vec::new();
    for n in 0..4 {
        let sampler_until = Instant::now() + Duration::from_millis(700);
        while Instant::now() < sampler_until {
            most_threads = most_threads.max(threads());
            thread::sleep(Duration::from_millis(20));
        }
        let auth = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(format!("login{n}:s3cret"))
        };
        let asked = Instant::now();
        let answer = common::http::get_with(
            addr,
            "/metrics",
            &[("Authorization", &format!("Basic {auth}"))],
        );
        logins.push((answer.map(|r| r.status).unwrap_or(0), asked.elapsed()));
    }
    // SAFETY: sysconf is always safe to call.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpus = (cpu_ticks() - ticks) as f64 / hz / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    for f in flooders {
        f.join().unwrap();
    }
    eprintln!("flood: first logins {logins:?}, at most {most_threads} threads, {cpus:.2} CPUs");
    assert!(
        logins.iter().all(|(status, _)| *status == 200),
        "first logins during the flood: {logins:?}\n{}",
        server.stderr()
    );
    assert!(most_threads <= 12, "serve ran {most_threads} threads");
    // One check at a time is one CPU; taking the flood's connections and
    // hangups is the rest (1.45 CPUs on a quiet 2-CPU machine, where two
    // checks at once would keep both CPUs busy besides).
    assert!(
        cpus < 1.6,
        "serve used {cpus:.2} CPUs (one check at a time is one CPU, the flood's connections the rest)"
    );
}

/// Issue 48, 7: hashes that can never match (cost 3, cost 99, a digest
/// outside bcrypt's base64) and a user listed twice were taken silently; a
/// cost-31 hash held the only check for days. Now refused at start with
/// what to do. And an unknown user answered in 77 ms where a cost-4 user's
/// wrong password took 3 ms, which told who exists: now both take the
/// costliest user's time.
#[test]
fn hashes_that_cannot_match_are_refused_and_unknown_users_take_as_long() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("hashes");
    let good = bcrypt::hash("s3cret", 4).unwrap();
    for (hash, says) in [
        (good.replacen("$04$", "$31$", 1), "cost 31, outside 4..16"),
        (good.replacen("$04$", "$03$", 1), "cost 3, outside 4..16"),
        (format!("{}!", &good[..good.len() - 1]), "can never match"),
    ] {
        let config = pki.write_config(&format!("basic_auth_users:\n  alice: '{hash}'\n"));
        let started = Instant::now();
        let (status, _, stderr) = run_schedlat(&["serve", "--web.config.file", &config]);
        assert_eq!(status.code(), Some(2), "{hash}: {stderr}");
        assert!(stderr.contains(says), "{hash}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    let twice = pki.write_config(&format!(
        "basic_auth_users:\n  alice: {good}\n  alice: {good}\n"
    ));
    let (status, _, stderr) = run_schedlat(&["serve", "--web.config.file", &twice]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`alice` is listed twice"), "{stderr}");

    let config = pki.write_config(&format!("basic_auth_users:\n  alice: {good}\n"));
    let server = Server::start(&["--web.config.file", &config]);
    let time = |user: &str| {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:wrong"));
        let mut took = Vec::new();
        for _ in 0..5 {
            let asked = Instant::now();
            let r = common::http::get_with(
                server.addr,
                "/metrics",
                &[("Authorization", &format!("Basic {auth}"))],
            )
            .unwrap();
            assert_eq!(r.status, 401);
            took.push(asked.elapsed());
        }
        took.sort();
        took[2]
    };
    let (known, unknown) = (time("alice"), time("nobody"));
    eprintln!("wrong password: a cost-4 user {known:?}, an unknown user {unknown:?}");
    assert!(
        unknown < known * 4 + Duration::from_millis(5),
        "an unknown user took {unknown:?}, a known one {known:?}: the time tells who exists"
    );
}

/// Makes a certificate for `key` valid from `start` to `end` (openssl's
/// YYYYMMDDHHMMSSZ), signed by itself, into `name`.
fn dated_certificate(pki: &Pki, name: &str, start: &str, end: &str) {
    fs::write(
        pki.0.join("dated.cnf"),
        "[ca]\ndefault_ca = dated\n[dated]\ndatabase = index.txt\nnew_certs_dir = .\nserial = dated.srl\ndefault_md = sha256\npolicy = any\nunique_subject = no\n[any]\ncommonName = supplied\n[ext]\nbasicConstraints = CA:FALSE\nsubjectAltName = IP:127.0.0.1\n",
    )
    .unwrap();
    fs::write(pki.0.join("index.txt"), "").unwrap();
    fs::write(pki.0.join("dated.srl"), "01\n").unwrap();
    common::pki::openssl(
        &pki.0,
        &[
            "ca",
            "-batch",
            "-config",
            "dated.cnf",
            "-selfsign",
            "-keyfile",
            "server.key",
            "-in",
            "server.csr",
            "-extensions",
            "ext",
            "-startdate",
            start,
            "-enddate",
            end,
            "-out",
            name,
        ],
    );
}

/// Issue 48, 15: an expired or not yet valid server certificate was loaded
/// without a word. Now serve says so with the date, and warns within 7
/// days of the expiry (the test PKI's certificates last 2 days).
#[test]
fn certificates_expired_not_yet_valid_or_expiring_are_warned_about() {
    if !require_root() {
        return;
    }
    let pki = Pki::new("dates");
    dated_certificate(&pki, "expired.crt", "20200101000000Z", "20200102000000Z");
    dated_certificate(&pki, "future.crt", "20400101000000Z", "20410101000000Z");
    for (cert, says) in [
        (
            "expired.crt",
            "the certificate expired on 2020-01-02 00:00:00 UTC",
        ),
        (
            "future.crt",
            "the certificate is not valid before 2040-01-01 00:00:00 UTC",
        ),
        ("server.crt", "the certificate expires on "),
    ] {
        let config = pki.write_config(&format!(
            "tls_server_config:\n  cert_file: {cert}\n  key_file: server.key\n"
        ));
        let server = Server::start(&["--web.config.file", &config]);
        let log = server.stderr();
        assert!(log.contains(says) && log.contains(cert), "{cert}: {log}");
    }
}
