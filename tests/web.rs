//! Root: `schedlat serve --web.config.file`, TLS and basic auth in the
//! Prometheus exporters' format, against curl and a real Prometheus, with
//! certificates made by openssl for each run (a CA, the server's, a
//! client's, and a stranger CA's client). Before the web configuration,
//! serve answered anyone who reached the port, POST /snapshot included.

mod common;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, pki::Pki, prometheus::Prometheus, require_root, run_schedlat, serve::Server,
};

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

    pki.write_config("tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\nbasic_auth_users: {}\n");
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
