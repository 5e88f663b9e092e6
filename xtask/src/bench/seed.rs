//! `cargo xtask bench --seed [SECONDS]`: the seed case of docs/decision.md.
//! cyclictest as a SCHED_OTHER task (1 ms period) beside six CPU-bound
//! loops on one CPU for SECONDS (default 180), with `schedlat
//! --comm cyclictest` (the decision split is on by default) tracing the same window: cyclictest's own p99 and
//! max beside schedlat's waits and their decision split (which rule made
//! the slow ones wait, how many were passed over). Several minutes: not
//! part of the comparison run or of CI.
//!
//! Debian's rt-tests 2.4 makes `-p0` a SCHED_FIFO priority 2 thread
//! ("defaulting realtime priority to 2": `-p` selects FIFO), which no fair
//! task can delay; `--policy=other` keeps it in the fair class, as the
//! case needs.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// cyclictest's histogram range in us: latencies above it are counted as
/// overflows (and so above every percentile they would set).
const HISTOGRAM_US: u64 = 50_000;
const LOOPS: usize = 6;

/// cyclictest's `-h` output: the count per microsecond, the overflows, the
/// max.
#[derive(Debug, Default, PartialEq)]
struct Cyclictest {
    counts: Vec<(u64, u64)>,
    overflows: u64,
    max_us: Option<u64>,
    avg_us: Option<u64>,
}

fn parse_cyclictest(text: &str) -> Cyclictest {
    let mut out = Cyclictest::default();
    let field = |line: &str, name: &str| {
        line.strip_prefix(name)
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    for line in text.lines() {
        if let Some(v) = field(line, "# Histogram Overflows:") {
            out.overflows = v;
        } else if let Some(v) = field(line, "# Max Latencies:") {
            out.max_us = Some(v);
        } else if let Some(v) = field(line, "# Avg Latencies:") {
            out.avg_us = Some(v);
        } else if let Some((Ok(us), Ok(n))) = line
            .split_once(' ')
            .map(|(us, n)| (us.parse::<u64>(), n.trim().parse::<u64>()))
        {
            out.counts.push((us, n));
        }
    }
    out
}

impl Cyclictest {
    fn cycles(&self) -> u64 {
        self.counts.iter().map(|&(_, n)| n).sum::<u64>() + self.overflows
    }

    /// The `q` quantile in us; None when it lies among the overflows.
    fn quantile_us(&self, q: f64) -> Option<u64> {
        let rank = (q * self.cycles() as f64).ceil() as u64;
        let mut seen = 0;
        for &(us, n) in &self.counts {
            seen += n;
            if seen >= rank.max(1) {
                return Some(us);
            }
        }
        None
    }
}

fn loops(cpu: usize) -> Result<Vec<Child>> {
    (0..LOOPS)
        .map(|_| {
            Command::new("taskset")
                .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                .spawn()
                .context("taskset (util-linux)")
        })
        .collect()
}

pub(super) fn run(schedlat: &Path, seconds: u64, cpu: usize) -> Result<()> {
    if Command::new("cyclictest").arg("--help").output().is_err() {
        bail!("cyclictest is missing: `cargo xtask setup --test` installs rt-tests");
    }
    let mut loops = loops(cpu)?;
    let result = measure(schedlat, seconds, cpu);
    for l in &mut loops {
        let _ = l.kill();
        let _ = l.wait();
    }
    let (cyclictest, schedlat) = result?;
    print!("{}", report(seconds, cpu, &cyclictest, &schedlat));
    Ok(())
}

/// Both tools over one window: schedlat attached first, then cyclictest for
/// `seconds`, then schedlat's report at SIGINT.
fn measure(schedlat: &Path, seconds: u64, cpu: usize) -> Result<(Cyclictest, Value)> {
    let mut tracer = Command::new(schedlat)
        .args(["--comm", "cyclictest", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", schedlat.display()))?;
    let stderr = tracer.stderr.take().expect("piped");
    let (tx, banner) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("bench: schedlat: {line}");
            if line.contains("Tracing run queue latency") {
                let _ = tx.send(());
            }
        }
    });
    if banner.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = tracer.kill();
        bail!("schedlat did not attach within 60 s");
    }
    eprintln!("bench: seed case: cyclictest beside {LOOPS} loops on CPU {cpu} for {seconds} s");
    let out = Command::new("cyclictest")
        .args(["--policy=other", "-i", "1000", "-t1", "-q", "-m"])
        .args(["-a", &cpu.to_string()])
        .args(["-D", &seconds.to_string()])
        .args(["-h", &HISTOGRAM_US.to_string()])
        .output()
        .context("cyclictest")?;
    // SAFETY: kill has no memory preconditions; the child is not reaped.
    unsafe { libc::kill(tracer.id() as libc::pid_t, libc::SIGINT) };
    let traced = tracer.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "cyclictest failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&traced.stdout);
    let last = text.lines().last().context("schedlat printed no report")?;
    Ok((
        parse_cyclictest(&String::from_utf8_lossy(&out.stdout)),
        serde_json::from_str(last).context("schedlat's JSON")?,
    ))
}

fn us(ns: &Value) -> String {
    ns.as_f64()
        .map_or("-".into(), |ns| format!("{:.0} us", ns / 1000.0))
}

fn report(seconds: u64, cpu: usize, c: &Cyclictest, s: &Value) -> String {
    let opt = |v: Option<u64>| v.map_or("over the histogram".into(), |v| format!("{v} us"));
    let mut out = format!(
        "\n=== seed case: cyclictest --policy=other -i 1000 beside {LOOPS} loops on CPU {cpu}, {seconds} s ===\n"
    );
    out.push_str(&format!(
        "cyclictest: {} cycles, avg {}, p50 {}, p99 {}, p99.9 {}, max {} ({} over {HISTOGRAM_US} us)\n",
        c.cycles(),
        opt(c.avg_us),
        opt(c.quantile_us(0.5)),
        opt(c.quantile_us(0.99)),
        opt(c.quantile_us(0.999)),
        opt(c.max_us),
        c.overflows
    ));
    let p = &s["percentiles"];
    out.push_str(&format!(
        "schedlat:   {} waits, p50 {}, p99 {}, p99.9 {}, max {}\n",
        s["count"],
        us(&p["p50_ns"]),
        us(&p["p99_ns"]),
        us(&p["p99_9_ns"]),
        us(&p["max_ns"])
    ));
    out.push_str(&format!(
        "  shape: {}\n",
        s["shape"]["summary"].as_str().unwrap_or("-")
    ));
    let d = &s["decision"];
    if let Some(outcomes) = d["outcomes"].as_object() {
        let line: Vec<String> = outcomes
            .iter()
            .map(|(k, v)| format!("{k} {} ({} over 1 ms)", v["count"], v["over_1ms"]))
            .collect();
        out.push_str(&format!("  decision outcomes: {}\n", line.join(", ")));
    }
    if let Some(decisions) = d["decisions"].as_object() {
        let line: Vec<String> = decisions
            .iter()
            .filter(|(_, v)| v["count"].as_u64().unwrap_or(0) > 0)
            .map(|(k, v)| format!("{k} {}", v["count"]))
            .collect();
        out.push_str(&format!("  at the wakeup: {}\n", line.join(", ")));
    }
    if let Some(passes) = d["pass_overs"].as_object() {
        let line: Vec<String> = passes
            .iter()
            .map(|(k, v)| format!("{k}: {}", v["count"]))
            .collect();
        out.push_str(&format!("  pass-overs: {}\n", line.join(", ")));
    }
    let k = &s["kernel_context"];
    out.push_str(&format!(
        "  design bound {} (slice {} + tick): {} waits beyond it\n",
        us(&k["design_bound_ns"]),
        us(&k["base_slice"]["ns"]),
        k["beyond_design_bound"]
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cyclictest 2.4's `-q -h 20` output, captured on the 6.18 VM (the
    /// middle cut).
    const CAPTURED: &str = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\n000012 000000\n000013 000019\n000014 000034\n000015 000040\n000016 000010\n000017 000007\n000018 000005\n000019 000010\n# Total: 000000125\n# Min Latencies: 00013\n# Avg Latencies: 00041\n# Max Latencies: 01531\n# Histogram Overflows: 00872\n# Histogram Overflow at cycle number:\n# Thread 0: 00000 00005 # 00852 others\n";

    #[test]
    fn cyclictest_histograms_parse() {
        let c = parse_cyclictest(CAPTURED);
        assert_eq!(c.cycles(), 125 + 872);
        assert_eq!(
            (c.max_us, c.avg_us, c.overflows),
            (Some(1531), Some(41), 872)
        );
        assert_eq!(c.quantile_us(0.05), Some(14));
        assert_eq!(c.quantile_us(0.99), None, "among the overflows");
    }
}
