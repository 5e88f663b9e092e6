//! `cargo xtask bench --soak [SECS]`: schedlat left running under a fork
//! storm must not grow. Runs `schedlat -P 1` (a histogram per process,
//! printed every second) and `schedlat serve --pids` (scraped every 5 s)
//! side by side for SECS seconds (default 600) while two shell loops fork
//! short-lived processes as fast as they can, so that process keys come
//! and go all the time. Every SECS/20 seconds it samples, per tracer:
//!
//! - resident memory (VmRSS of /proc/PID/status);
//! - open file descriptors (/proc/PID/fd);
//! - kernel memory of its BPF maps (the `memlock` of each map fd's
//!   /proc/PID/fdinfo entry).
//!
//! It prints the samples and, per tracer and quantity, the change from the
//! first sample after warm-up (a quarter of the run) to the last: flat when RSS grew by at most
//! 10% (or 2 MiB), fds by at most 2, map memory not at all. Benchmarks
//! report: a growth fails only with `--strict`.

use std::{
    fs,
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    options::{Options, schedlat_binary},
    serve_client::{ACCEPT, Conn, Serve},
};

/// One sample of one process.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    rss_kib: u64,
    fds: u64,
    map_kib: u64,
}

fn usage(pid: u32) -> Result<Usage> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let mut fds = 0;
    let mut map_bytes = 0u64;
    for entry in fs::read_dir(format!("/proc/{pid}/fd"))?.flatten() {
        fds += 1;
        let info = fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        if info.lines().any(|l| l.starts_with("map_type:")) {
            map_bytes += info
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(Usage {
        rss_kib,
        fds,
        map_kib: map_bytes / 1024,
    })
}

/// Processes created so far on the machine (/proc/stat `processes`).
fn forks() -> u64 {
    fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("processes "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A child killed (and reaped) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, not reaped yet. SIGINT lets
        // schedlat print its last interval and detach.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `schedlat -P 1`, its stdout drained by a thread.
fn histogram(exe: &std::path::Path) -> Result<Killed> {
    let mut child = Command::new(exe)
        .args(["-P", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} -P 1", exe.display()))?;
    let stdout = child.stdout.take().expect("piped");
    thread::spawn(move || for _ in BufReader::new(stdout).lines().map_while(Result::ok) {});
    Ok(Killed(child))
}

/// Two shell loops forking `true` as fast as they can.
fn fork_storm() -> Result<Vec<Killed>> {
    (0..2)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do /bin/true; done"])
                .stdin(Stdio::null())
                .spawn()
                .map(Killed)
                .context("starting the fork storm")
        })
        .collect()
}

pub(super) fn run(opts: &Options, secs: u64) -> Result<()> {
    let exe = schedlat_binary(opts)?;
    let storm = fork_storm()?;
    let hist = histogram(&exe)?;
    let serve = Serve::start(&exe, &["--pids"])?;
    let mut conn = Conn::open(serve.addr, ACCEPT)?;
    let duration = Duration::from_secs(secs);
    let every = Duration::from_secs((secs / 20).max(1));
    let started = Instant::now();
    let forks_before = forks();
    let mut samples: Vec<(Duration, Usage, Usage)> = Vec::new();
    let mut next_sample = Duration::ZERO;
    let mut next_scrape = Duration::ZERO;
    eprintln!("bench: soak for {secs} s under a fork storm, sampling every {every:?}");
    while started.elapsed() <= duration {
        let now = started.elapsed();
        if now >= next_scrape {
            conn.scrape().context("scraping serve --pids")?;
            next_scrape = now + Duration::from_secs(5);
        }
        if now >= next_sample {
            let h = usage(hist.0.id()).context("schedlat -P 1 exited")?;
            let s = usage(serve.pid()).context("schedlat serve --pids exited")?;
            samples.push((now, h, s));
            next_sample = now + every;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let forked = forks() - forks_before;
    drop(storm);
    print_report(secs, forked, &samples)
}

fn print_report(secs: u64, forked: u64, samples: &[(Duration, Usage, Usage)]) -> Result<()> {
    println!(
        "\n=== soak: {secs} s, {forked} processes forked ({:.0}/s) ===",
        forked as f64 / secs.max(1) as f64
    );
    println!(
        "{:>7}  {:>22}  {:>22}",
        "t (s)", "schedlat -P 1", "serve --pids"
    );
    println!(
        "{:>7}  {:>9} {:>4} {:>7}  {:>9} {:>4} {:>7}",
        "", "RSS KiB", "fds", "map KiB", "RSS KiB", "fds", "map KiB"
    );
    for (t, h, s) in samples {
        println!(
            "{:>7.0}  {:>9} {:>4} {:>7}  {:>9} {:>4} {:>7}",
            t.as_secs_f64(),
            h.rss_kib,
            h.fds,
            h.map_kib,
            s.rss_kib,
            s.fds,
            s.map_kib
        );
    }
    // Warm-up: for the first tens of seconds the key map fills (4096
    // keys under a fork storm), and with it the tracers' per-key tables and
    // the allocator's arenas (measured: RSS climbs for about 30 s, then
    // stays within 1%). Judge from the first sample after a quarter of the
    // run.
    let warm = samples
        .iter()
        .find(|(t, _, _)| t.as_secs() >= secs / 4)
        .or(samples.first());
    let (Some(first), Some(last)) = (warm, samples.last()) else {
        bail!("no samples");
    };
    println!(
        "(warm-up: judged from t = {:.0} s to the end)",
        first.0.as_secs_f64()
    );
    let mut grew = Vec::new();
    for (name, a, b) in [
        ("schedlat -P 1", first.1, last.1),
        ("serve --pids", first.2, last.2),
    ] {
        let rss_ok = b.rss_kib <= a.rss_kib + (a.rss_kib / 10).max(2048);
        let fds_ok = b.fds <= a.fds + 2;
        let map_ok = b.map_kib == a.map_kib;
        println!(
            "{name}: RSS {} -> {} KiB {}, fds {} -> {} {}, BPF maps {} -> {} KiB {}",
            a.rss_kib,
            b.rss_kib,
            verdict(rss_ok),
            a.fds,
            b.fds,
            verdict(fds_ok),
            a.map_kib,
            b.map_kib,
            verdict(map_ok)
        );
        if !(rss_ok && fds_ok && map_ok) {
            grew.push(name);
        }
    }
    if grew.is_empty() {
        println!("soak: flat");
        Ok(())
    } else {
        println!("soak: GROWS ({})", grew.join(", "));
        Err(anyhow::anyhow!("grew: {}", grew.join(", ")))
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "(flat)" } else { "(GROWS)" }
}
