//! A real Prometheus server (Debian's `prometheus` package) on a loopback
//! port, in a temporary directory that holds its configuration, its TSDB
//! and its log. Killed and cleaned up when dropped.

use std::{
    fs,
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use super::http;

pub(crate) const PROMETHEUS: &str = "prometheus";
pub(crate) const PROMTOOL: &str = "promtool";

/// Prometheus 3.x's binaries (`prometheus`, `promtool`), beside Debian 12's
/// 2.x: `SCHEDLAT_PROMETHEUS3_DIR`, else where `cargo xtask setup --test`
/// puts them (`target/tools/prometheus-3`, from Debian unstable). Missing:
/// the caller's test says so and is skipped (None), except under CI=true,
/// where setup must have installed them.
pub(crate) fn prometheus3_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("SCHEDLAT_PROMETHEUS3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/prometheus-3")
        });
    if dir.join("promtool").exists() && dir.join("prometheus").exists() {
        return Some(dir);
    }
    let why = format!(
        "no Prometheus 3.x in {} (`cargo xtask setup --test` installs it, or set SCHEDLAT_PROMETHEUS3_DIR)",
        dir.display()
    );
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "CI=true: {why}");
    eprintln!("skipped: {why}");
    None
}

pub(crate) struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every `interval` (e.g. "1s"), and
    /// waits until it is ready to answer queries.
    pub(crate) fn start(target: SocketAddr, interval: &str) -> Prometheus {
        Prometheus::start_with(target, interval, &[])
    }

    /// The same with `--enable-feature=...` flags (e.g.
    /// `native-histograms`, which makes it ask for protobuf first).
    pub(crate) fn start_with(target: SocketAddr, interval: &str, features: &[&str]) -> Prometheus {
        Prometheus::launch(Path::new(PROMETHEUS), target, interval, features, &[])
    }

    /// `binary` (Debian 12's `prometheus`, or a 3.x one) scraping `target`
    /// every `interval` and evaluating `rule_files` as often.
    pub(crate) fn launch(
        binary: &Path,
        target: SocketAddr,
        interval: &str,
        features: &[&str],
        rule_files: &[PathBuf],
    ) -> Prometheus {
        Prometheus::launch_targets(binary, &[target], interval, features, rule_files)
    }

    /// The same scraping several targets (one job: `instance` tells them
    /// apart).
    pub(crate) fn launch_targets(
        binary: &Path,
        targets: &[SocketAddr],
        interval: &str,
        features: &[&str],
        rule_files: &[PathBuf],
    ) -> Prometheus {
        let targets: Vec<_> = targets.iter().map(|t| format!("'{t}'")).collect();
        let job = vec![
            "  - job_name: schedlat".to_string(),
            format!("    scrape_timeout: {interval}"),
            "    static_configs:".to_string(),
            format!("      - targets: [{}]", targets.join(", ")),
        ];
        Prometheus::launch_jobs(binary, &job, interval, features, rule_files)
    }

    /// The same with the scrape jobs given as YAML lines (each job's
    /// `  - job_name: ...` and what follows), for TLS and authentication.
    pub(crate) fn launch_jobs(
        binary: &Path,
        jobs: &[String],
        interval: &str,
        features: &[&str],
        rule_files: &[PathBuf],
    ) -> Prometheus {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "schedlat-prometheus-{}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        let mut yaml = vec![
            "global:".to_string(),
            format!("  scrape_interval: {interval}"),
            format!("  evaluation_interval: {interval}"),
            "scrape_configs:".to_string(),
        ];
        yaml.extend(jobs.iter().cloned());
        if !rule_files.is_empty() {
            yaml.push("rule_files:".to_string());
            yaml.extend(rule_files.iter().map(|f| format!("  - '{}'", f.display())));
        }
        fs::write(&config, yaml.join("\n") + "\n").unwrap();
        let addr = free_loopback_port();
        let log = fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .args(features.iter().map(|f| format!("--enable-feature={f}")))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `{}` ({e}): install Debian's prometheus package (`cargo xtask setup` does)", binary.display())
            });
        let prometheus = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http::get(addr, "/-/ready", None).is_ok_and(|r| r.status == 200) {
            assert!(
                Instant::now() < deadline,
                "Prometheus not ready within 30 s; its log:\n{}",
                prometheus.log()
            );
            thread::sleep(Duration::from_millis(100));
        }
        prometheus
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// GET an API path (with its query string) and return `data`, checking
    /// `status` is `success`.
    pub(crate) fn api(&self, target: &str) -> serde_json::Value {
        let r = http::get(self.addr, target, None).expect("Prometheus answers");
        let v: serde_json::Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{target}: not JSON ({e}): {}", r.body));
        assert_eq!(v["status"], "success", "{target}: {v}");
        v["data"].clone()
    }

    /// An instant query at `time` (Unix seconds; None = now): the vector.
    pub(crate) fn query(&self, expr: &str, time: Option<f64>) -> Vec<serde_json::Value> {
        let mut target = format!("/api/v1/query?query={}", http::encode_query_value(expr));
        if let Some(t) = time {
            target.push_str(&format!("&time={t:.3}"));
        }
        let data = self.api(&target);
        assert_eq!(data["resultType"], "vector", "{expr}: {data}");
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of a query expected to give at most one sample.
    pub(crate) fn query_value(&self, expr: &str, time: Option<f64>) -> Option<f64> {
        let result = self.query(expr, time);
        assert!(result.len() <= 1, "{expr}: several samples: {result:?}");
        let value = result.first()?["value"][1].as_str()?.to_string();
        value.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SIGTERM: it flushes and exits in well under a second; then make sure.
        // SAFETY: signalling our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nobody listens on right now (the kernel's pick).
pub(crate) fn free_loopback_port() -> SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

/// Seconds since the Unix epoch, as Prometheus' API wants times.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
