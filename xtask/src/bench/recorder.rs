//! `cargo xtask bench --recorder [SECONDS]`: the flight recorder's cost
//! beside plain histogram mode, under a fork storm (short-lived processes,
//! each a new TID and, with --ring-cgroups, waits in several cgroups).
//! Both run at once on the same load for SECONDS (default 600); their RSS
//! is sampled every second from /proc, and their CPU time read at the end.
//! The recorder's RSS must stay within the bound it states at start (plus
//! the process's fixed part, measured by the plain mode beside it); a
//! benchmark reports, it does not assert.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

struct Watched {
    name: &'static str,
    child: Child,
    stderr: std::path::PathBuf,
    rss_kib: Vec<u64>,
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime in seconds.
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

pub(super) fn run(schedlat: &std::path::Path, seconds: u64, cpu: usize) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("schedlat-bench-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let dump_dir = dir.join("dumps");
    let dump_arg = dump_dir.to_string_lossy().to_string();
    let spawn = |name: &'static str, args: &[&str]| -> Result<Watched> {
        let stderr = dir.join(format!("{name}.stderr"));
        let child = Command::new(schedlat)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .with_context(|| format!("starting {}", schedlat.display()))?;
        Ok(Watched {
            name,
            child,
            stderr,
            rss_kib: Vec::new(),
        })
    };
    let mut tracers = vec![
        spawn("histogram (schedlat 1)", &["1"])?,
        spawn(
            "recorder (record --ring 300s --ring-cgroups)",
            &[
                "record",
                "--ring",
                "300s",
                "--ring-cgroups",
                "--slow-threshold",
                "1ms",
                "--dump-dir",
                &dump_arg,
            ],
        )?,
    ];
    std::thread::sleep(Duration::from_secs(3));
    // The fork storm: a shell spawning short-lived processes back to back,
    // pinned to one CPU.
    let mut storm = Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            "sh",
            "-c",
            "while :; do /bin/true; done",
        ])
        .spawn()
        .context("taskset (util-linux) for the fork storm")?;
    eprintln!("bench: fork storm on CPU {cpu} for {seconds} s; RSS sampled every second");
    let started = Instant::now();
    let cpu_at_start: Vec<f64> = tracers
        .iter()
        .map(|t| cpu_secs(t.child.id()).unwrap_or(0.0))
        .collect();
    let mut dumped = false;
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        for t in &mut tracers {
            if let Some(kib) = rss_kib(t.child.id()) {
                t.rss_kib.push(kib);
            }
        }
        // One dump half-way, so its cost is in the numbers.
        if !dumped && started.elapsed() >= Duration::from_secs(seconds / 2) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(tracers[1].child.id() as i32, libc::SIGHUP) };
            dumped = true;
        }
    }
    let _ = storm.kill();
    let _ = storm.wait();
    let elapsed = started.elapsed().as_secs_f64();
    let forks = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().last().map(str::to_string))
        .unwrap_or_default();
    println!(
        "\n=== recorder vs histogram mode, {elapsed:.0} s of fork storm (last pid {forks}) ==="
    );
    println!(
        "{:<46} {:>10} {:>12} {:>12} {:>12}",
        "", "CPU %", "RSS first", "RSS max", "RSS last"
    );
    for (t, start) in tracers.iter_mut().zip(cpu_at_start) {
        let used = cpu_secs(t.child.id()).unwrap_or(0.0) - start;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(t.child.id() as i32, libc::SIGINT) };
        let _ = t.child.wait();
        let mib = |k: Option<&u64>| k.map_or(0.0, |k| *k as f64 / 1024.0);
        println!(
            "{:<46} {:>9.2}% {:>9.1} MiB {:>8.1} MiB {:>8.1} MiB",
            t.name,
            100.0 * used / elapsed,
            mib(t.rss_kib.first()),
            mib(t.rss_kib.iter().max()),
            mib(t.rss_kib.last())
        );
    }
    let log = std::fs::read_to_string(&tracers[1].stderr).unwrap_or_default();
    if let Some(line) = log.lines().find(|l| l.contains("recording the last")) {
        println!("recorder's stated bound: {line}");
    }
    for line in log.lines().filter(|l| l.contains("dump")) {
        println!("{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
