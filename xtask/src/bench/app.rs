//! The application row: what a tracer costs a real server's requests, the
//! figure a user weighs before leaving it attached to a production host.
//!
//! Debian's nginx (one worker) serves a small file from the bench's CPU to
//! wrk (one thread) on the other CPU, over loopback, for `--app-seconds`
//! per run. With one connection (`--app-connections`, the default) every
//! request wakes nginx's worker on one CPU and wrk's thread on the other:
//! each request crosses two wakeups and four context switches (each CPU's
//! idle task to the woken thread and back), the events the tracers hook,
//! so their cost per event lands on every request. With
//! a handful of connections the worker never sleeps (16 made about 200
//! switches for 300,000 requests when this was written) and no tracer's
//! cost can show; that case says nothing about the tracers.
//!
//! Each round runs the server under runqlat, schedlat's default, the
//! DaemonSet's configuration and the hooks' floor (tp_btf programs on
//! schedlat's hooks that return at once: what any tracer on them costs
//! before it does anything), in an order rotated every round, each run
//! between two runs with no tracer. A tracer's loss is the median over
//! rounds of 1 - its requests/s over the mean of the two runs around it,
//! and its p99 added likewise: the machine drifts by several percent within
//! a minute here, and a comparison with runs seconds away keeps most of
//! that out. The noise floor is shown beside it: how far consecutive runs
//! with no tracer are from each other. A loss below it is not told apart
//! from noise.
//!
//! While the row runs, the CPUs poll instead of halting when idle (0 held
//! in /dev/cpu_dma_latency, as latency-tuned hosts do; `--app-halt` leaves
//! them to halt). On a virtual machine a halted CPU's wakeup goes through
//! the hypervisor: here that made a request take 75 us instead of 24, and
//! moved the no-tracer runs' rate by 15% between rounds, more than any
//! tracer costs.
//!
//! BPF run-time stats are off here (the comparison turns them on): they
//! time every program run, a cost users do not pay.

use std::{
    fmt::Write as _,
    fs,
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{
    modes::{self, Mode},
    options::Options,
    report::{Ratio, Target, median, render_ratios},
    tracer::{TRACER_TIMEOUT, Tools, Tracer},
};

/// Debian's nginx and wrk (`cargo xtask setup` installs both).
const NGINX: &str = "/usr/sbin/nginx";
const WRK: &str = "/usr/bin/wrk";
/// The file served: the size of nginx's own welcome page.
const FILE_BYTES: usize = 615;
/// Time a tracer runs after its banner before the server is loaded.
const SETTLE: Duration = Duration::from_secs(1);
/// How long nginx may take to accept connections.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// What schedlat's loss of requests/s may be, as a share of runqlat's
/// (issue 43), in the default and in the DaemonSet's configuration.
const LOSS_TARGET: f64 = 0.5;

/// The tracers of the application row, in round 1's order; each of their
/// runs sits between two runs with no tracer. The last is the hooks'
/// floor: programs on schedlat's hooks that return at once.
const TRACED: [Mode; 4] = [
    modes::RUNQLAT,
    modes::SCHEDLAT,
    modes::DAEMONSET,
    modes::NOOP,
];

/// One run of wrk against the server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Run {
    pub requests_per_sec: f64,
    pub p99_us: f64,
}

/// A mode's run in one round.
pub(super) struct AppSample {
    pub round: u32,
    pub mode: Mode,
    pub run: Run,
    /// For a tracer's run, the mean of the no-tracer runs just before and
    /// just after it: what it is compared with.
    pub against: Option<Run>,
}

impl AppSample {
    fn baseline(round: u32, run: Run) -> AppSample {
        AppSample {
            round,
            mode: modes::BASELINE,
            run,
            against: None,
        }
    }
}

/// One mode's medians over the rounds; for a traced mode, also what it
/// cost against the same rounds' runs with no tracer.
pub(super) struct AppSummary {
    pub mode: Mode,
    pub requests_per_sec: f64,
    pub p99_us: f64,
    /// Median over rounds of 1 - rps / the rps of the no-tracer runs around
    /// it (None for the no-tracer mode).
    pub lost: Option<f64>,
    /// Median over rounds of p99 less that of the runs around it, in us.
    pub p99_added_us: Option<f64>,
}

pub(super) struct App {
    pub rounds: u32,
    pub seconds: u64,
    pub connections: u32,
    /// Whether idle CPUs halted (`--app-halt`) rather than polled.
    pub halt: bool,
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub samples: Vec<AppSample>,
    pub summaries: Vec<AppSummary>,
    /// The noise floor of a loss: the median over consecutive no-tracer
    /// runs of how far the second's requests/s was from the first's.
    pub noise: f64,
    /// The same for the p99: the median difference, in us, between the
    /// p99s of consecutive runs with no tracer.
    pub p99_noise_us: f64,
    /// schedlat's loss over runqlat's: the default, the DaemonSet's.
    pub ratios: Vec<Ratio>,
}

/// Runs the application row: `--app-rounds` rounds of every mode.
pub(super) fn measure(opts: &Options, tools: &Tools) -> Result<App> {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let client_cpu = if cpus > 1 {
        (opts.cpu + 1) % cpus
    } else {
        opts.cpu
    };
    // The floor's programs, built before anything is measured.
    super::reference::object::build()?;
    let _polling = match opts.app_halt {
        true => None,
        false => Some(PollIdle::hold()?),
    };
    let server = Server::start(opts.cpu)?;
    let log = |round, mode: Mode| {
        eprintln!(
            "bench: application round {round}/{}: nginx and wrk under {}",
            opts.app_rounds,
            mode.command()
        );
    };
    let mut samples = Vec::new();
    for round in 1..=opts.app_rounds {
        log(round, modes::BASELINE);
        let mut before = server.load(client_cpu, opts)?;
        samples.push(AppSample::baseline(round, before));
        for mode in modes::rotated(TRACED, round) {
            log(round, mode);
            let tool = mode
                .tool(
                    &tools.runqlat,
                    &tools.schedlat,
                    server.pid(),
                    &tools.empty_cgroup,
                )?
                .context("a traced mode has a tracer")?;
            let mut tracer = Tracer::spawn(&tool)?;
            tracer.wait_ready(TRACER_TIMEOUT)?;
            // What staying attached costs, not the start's own work just
            // after the banner (its CPU and ready time are the comparison's).
            thread::sleep(SETTLE);
            let run = server.load(client_cpu, opts)?;
            let rss = tracer.peak_rss_kib()?;
            tracer.stop(TRACER_TIMEOUT, rss)?;
            log(round, modes::BASELINE);
            let after = server.load(client_cpu, opts)?;
            let against = Run {
                requests_per_sec: (before.requests_per_sec + after.requests_per_sec) / 2.0,
                p99_us: (before.p99_us + after.p99_us) / 2.0,
            };
            samples.push(AppSample {
                round,
                mode,
                run,
                against: Some(against),
            });
            samples.push(AppSample::baseline(round, after));
            before = after;
        }
    }
    Ok(App::new(opts, (opts.cpu, client_cpu), samples))
}

impl App {
    fn new(
        opts: &Options,
        (server_cpu, client_cpu): (usize, usize),
        samples: Vec<AppSample>,
    ) -> App {
        let summaries: Vec<AppSummary> = [modes::BASELINE]
            .iter()
            .chain(&TRACED)
            .map(|&mode| {
                let runs: Vec<&AppSample> = samples.iter().filter(|s| s.mode == mode).collect();
                let paired = |f: fn(Run, Run) -> f64| {
                    (mode != modes::BASELINE).then(|| {
                        median(
                            runs.iter()
                                .filter_map(|s| Some(f(s.run, s.against?)))
                                .collect(),
                        )
                    })
                };
                AppSummary {
                    mode,
                    requests_per_sec: median(runs.iter().map(|s| s.run.requests_per_sec).collect()),
                    p99_us: median(runs.iter().map(|s| s.run.p99_us).collect()),
                    lost: paired(|r, b| 1.0 - r.requests_per_sec / b.requests_per_sec),
                    p99_added_us: paired(|r, b| r.p99_us - b.p99_us),
                }
            })
            .collect();
        // Consecutive runs with no tracer, for the noise of each figure.
        let baseline: Vec<Run> = (samples.iter())
            .filter(|s| s.mode == modes::BASELINE)
            .map(|s| s.run)
            .collect();
        let noise = median(
            (baseline.windows(2))
                .map(|w| (1.0 - w[1].requests_per_sec / w[0].requests_per_sec).abs())
                .collect(),
        );
        let p99_noise_us = median(
            (baseline.windows(2))
                .map(|w| (w[1].p99_us - w[0].p99_us).abs())
                .collect(),
        );
        let lost = |mode: Mode| {
            summaries
                .iter()
                .find(|s| s.mode == mode)
                .and_then(|s| s.lost)
                .unwrap_or(f64::NAN)
        };
        let ratio = |what, mode| Ratio {
            what,
            schedlat: lost(mode),
            runqlat: lost(modes::RUNQLAT),
            target: Target::AtMost(LOSS_TARGET),
            stretch: None,
        };
        let ratios = vec![
            ratio("app rps lost", modes::SCHEDLAT),
            ratio("app rps lost, ds", modes::DAEMONSET),
        ];
        App {
            rounds: opts.app_rounds,
            seconds: opts.app_seconds,
            connections: opts.app_connections,
            halt: opts.app_halt,
            server_cpu,
            client_cpu,
            samples,
            summaries,
            noise,
            p99_noise_us,
            ratios,
        }
    }

    /// The row's table, for people.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n=== application: nginx (1 worker, CPU {}) serving {FILE_BYTES} bytes to wrk \
             (1 thread, {} connection(s), CPU {}), {} rounds of {} s, idle CPUs {} ===",
            self.server_cpu,
            self.connections,
            self.client_cpu,
            self.rounds,
            self.seconds,
            self.idle()
        );
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>8} {:>9} {:>10}",
            "mode", "req/s", "lost", "p99 us", "p99 added"
        );
        for s in &self.summaries {
            let lost = s.lost.map_or("-".into(), |l| format!("{:.1}%", l * 100.0));
            let added = s.p99_added_us.map_or("-".into(), |a| format!("{a:+.0}"));
            let _ = writeln!(
                out,
                "{:<12} {:>10.0} {lost:>8} {:>9.0} {added:>10}",
                s.mode.name, s.requests_per_sec, s.p99_us
            );
        }
        let _ = writeln!(
            out,
            "noise: consecutive runs with no tracer differ by {:.1}% in req/s and {:.0} us \
             in p99 (medians)",
            self.noise * 100.0,
            self.p99_noise_us
        );
        render_ratios(&mut out, "over runqlat's", &self.ratios);
        if let Some(floor) = self.floor_of_runqlat() {
            let _ = writeln!(
                out,
                "the hooks' floor (programs that return at once) lost {floor:.2} of runqlat's \
                 loss: no tracer on these hooks loses less"
            );
        }
        out
    }

    /// The floor's loss over runqlat's (None when runqlat lost nothing).
    fn floor_of_runqlat(&self) -> Option<f64> {
        let lost = |mode| self.summaries.iter().find(|s| s.mode == mode)?.lost;
        let runqlat = lost(modes::RUNQLAT).filter(|&r| r > 0.0)?;
        Some(lost(modes::NOOP)? / runqlat)
    }

    /// What idle CPUs did during the row.
    fn idle(&self) -> &'static str {
        match self.halt {
            true => "halt",
            false => "poll",
        }
    }

    pub(super) fn missed_targets(&self) -> Vec<String> {
        self.ratios
            .iter()
            .filter(|r| !r.met())
            .map(|r| r.what.to_string())
            .collect()
    }

    /// The row as JSON: every run, the medians, the ratios.
    pub(super) fn json(&self) -> Value {
        let runs: Vec<Value> = self
            .samples
            .iter()
            .map(|s| {
                json!({
                    "round": s.round, "mode": s.mode.name,
                    "requests_per_sec": s.run.requests_per_sec, "p99_us": s.run.p99_us,
                })
            })
            .collect();
        let summary: serde_json::Map<String, Value> = self
            .summaries
            .iter()
            .map(|s| {
                let v = json!({
                    "requests_per_sec": s.requests_per_sec, "p99_us": s.p99_us,
                    "lost_fraction": s.lost, "p99_added_us": s.p99_added_us,
                });
                (s.mode.name.to_string(), v)
            })
            .collect();
        let ratios: Vec<Value> = (self.ratios.iter())
            .map(|r| r.json(["metric", "schedlat", "runqlat"]))
            .collect();
        json!({
            "server": "nginx", "client": "wrk", "file_bytes": FILE_BYTES,
            "connections": self.connections, "idle": self.idle(), "seconds": self.seconds, "rounds": self.rounds,
            "server_cpu": self.server_cpu, "client_cpu": self.client_cpu,
            "noise_fraction": self.noise, "p99_noise_us": self.p99_noise_us,
            "floor_of_runqlat": self.floor_of_runqlat(),
            "runs": runs, "summary": summary, "ratios_over_runqlat": ratios,
        })
    }
}

/// nginx, one worker, pinned to a CPU, serving one file on a free loopback
/// port from a directory of its own; stopped and removed when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Server {
    fn start(cpu: usize) -> Result<Server> {
        if !Path::new(NGINX).is_file() || !Path::new(WRK).is_file() {
            bail!("{NGINX} or {WRK} is missing: run `cargo xtask setup` (Debian's nginx and wrk)");
        }
        let dir = std::env::temp_dir().join(format!("schedlat-bench-nginx-{}", std::process::id()));
        fs::create_dir_all(dir.join("html"))
            .with_context(|| format!("creating {}", dir.display()))?;
        // nginx's worker runs as nobody: the tree must be readable by all.
        fs::write(dir.join("html/small.html"), "x".repeat(FILE_BYTES))?;
        let port = free_port()?;
        fs::write(dir.join("nginx.conf"), config(&dir, port))?;
        let mut command = Command::new("taskset");
        command
            .args(["-c", &cpu.to_string(), NGINX, "-p"])
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = command.spawn().context("starting nginx")?;
        let mut server = Server { child, dir, port };
        server.wait_listening()?;
        Ok(server)
    }

    /// nginx's master: its worker is the one process it forked.
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait()? {
                let log = fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                bail!("nginx exited before it listened ({status}): {}", log.trim());
            }
            if Instant::now() > deadline {
                bail!(
                    "nginx did not listen on 127.0.0.1:{} within {LISTEN_TIMEOUT:?}",
                    self.port
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// One run of wrk from `cpu`.
    fn load(&self, cpu: usize, opts: &Options) -> Result<Run> {
        let url = format!("http://127.0.0.1:{}/small.html", self.port);
        let out = Command::new("taskset")
            .args(["-c", &cpu.to_string(), WRK, "-t1"])
            .arg(format!("-c{}", opts.app_connections))
            .arg(format!("-d{}s", opts.app_seconds))
            .args(["--latency", &url])
            .output()
            .context("running wrk")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "wrk failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        parse_wrk(&stdout).with_context(|| format!("reading wrk's report:\n{stdout}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: nginx's fast shutdown, the worker with it.
        // SAFETY: signalling our own unreaped child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The CPUs kept out of idle states deeper than polling while this is
/// held (the PM QoS request of /dev/cpu_dma_latency, dropped when its file
/// is closed).
struct PollIdle(#[allow(dead_code, reason = "held open: closing it ends the request")] fs::File);

impl PollIdle {
    fn hold() -> Result<PollIdle> {
        const PATH: &str = "/dev/cpu_dma_latency";
        let mut file = fs::OpenOptions::new()
            .write(true)
            .open(PATH)
            .with_context(|| format!("opening {PATH} (or run with --app-halt)"))?;
        std::io::Write::write_all(&mut file, &0i32.to_ne_bytes())
            .with_context(|| format!("asking {PATH} for 0 us"))?;
        Ok(PollIdle(file))
    }
}

/// A loopback port free now (the kernel's pick, released at once).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// nginx's configuration: in the foreground, one worker, no access log
/// (its writes would be the server's main work), every path in `dir`.
fn config(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
         server {{ listen 127.0.0.1:{port}; root {d}/html; }}\n}}\n"
    )
}

/// Requests/s and the 99th percentile from `wrk --latency`'s report; a run
/// with socket errors or non-2xx answers is refused, not counted.
fn parse_wrk(report: &str) -> Result<Run> {
    for bad in ["Socket errors", "Non-2xx or 3xx responses"] {
        if let Some(line) = report.lines().find(|l| l.contains(bad)) {
            bail!("the run had errors: {}", line.trim());
        }
    }
    let requests_per_sec = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("no `Requests/sec:` line")?;
    let p99 = report
        .lines()
        .skip_while(|l| !l.contains("Latency Distribution"))
        .find_map(|l| l.trim().strip_prefix("99%"))
        .context("no 99% line under `Latency Distribution` (wrk --latency)")?;
    Ok(Run {
        requests_per_sec,
        p99_us: duration_us(p99.trim()).with_context(|| format!("99% is `{}`", p99.trim()))?,
    })
}

/// One of wrk's durations (`512.00us`, `1.23ms`, `2.00s`, `1.00m`) in us.
fn duration_us(text: &str) -> Result<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .context("no unit")?;
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        other => bail!("unknown unit `{other}`"),
    };
    Ok(number.parse::<f64>().context("not a number")? * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "Running 5s test @ http://127.0.0.1:18080/small.html
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    73.21us   20.13us   1.50ms   95.12%
    Req/Sec    13.30k   512.33    14.10k    70.59%
  Latency Distribution
     50%   70.00us
     75%   75.00us
     90%   82.00us
     99%  143.00us
  66429 requests in 5.10s, 53.85MB read
Requests/sec:  13025.42
Transfer/sec:     10.56MB
";

    #[test]
    fn wrk_report_gives_rate_and_p99() {
        let run = parse_wrk(REPORT).unwrap();
        assert_eq!(run.requests_per_sec, 13025.42);
        assert_eq!(run.p99_us, 143.0);
        let ms = REPORT.replace("143.00us", "1.25ms");
        assert_eq!(parse_wrk(&ms).unwrap().p99_us, 1250.0);
    }

    #[test]
    fn wrk_runs_with_errors_are_refused() {
        let bad = format!("{REPORT}  Socket errors: connect 0, read 3, write 0, timeout 0\n");
        let err = parse_wrk(&bad).unwrap_err().to_string();
        assert!(err.contains("read 3"), "{err}");
        assert!(parse_wrk("Requests/sec: 12").is_err(), "no p99: refused");
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(duration_us("512.00us").unwrap(), 512.0);
        assert_eq!(duration_us("2.00s").unwrap(), 2e6);
        assert!(duration_us("3.0h").is_err());
        assert!(duration_us("12").is_err());
    }

    #[test]
    fn loss_is_paired_with_the_runs_around_it() {
        // The machine drifts: the no-tracer runs go 10,000, 8,000, 10,000,
        // 8,000, 10,000 req/s. Against the mean of its neighbours (9,000),
        // runqlat lost 10%, the default 4%, the DaemonSet's configuration
        // 6% and the floor 3%.
        let run = |rps: f64, p99| Run {
            requests_per_sec: rps,
            p99_us: p99,
        };
        let mut samples = vec![AppSample::baseline(1, run(10_000.0, 100.0))];
        for (i, (mode, kept, p99)) in [
            (modes::RUNQLAT, 0.9, 130.0),
            (modes::SCHEDLAT, 0.96, 110.0),
            (modes::DAEMONSET, 0.94, 120.0),
            (modes::NOOP, 0.97, 100.0),
        ]
        .into_iter()
        .enumerate()
        {
            let against = run(9_000.0, 100.0);
            let run = run(9_000.0 * kept, p99);
            samples.push(AppSample {
                round: 1,
                mode,
                run,
                against: Some(against),
            });
            let after = if i % 2 == 0 { 8_000.0 } else { 10_000.0 };
            samples.push(AppSample::baseline(
                1,
                Run {
                    requests_per_sec: after,
                    p99_us: 100.0,
                },
            ));
        }
        let opts = <Options as clap::FromArgMatches>::from_arg_matches(
            &<Options as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from(["t"]),
        )
        .unwrap();
        let app = App::new(&opts, (0, 1), samples);
        let default = &app.summaries[2];
        assert_eq!(default.mode, modes::SCHEDLAT);
        assert!((default.lost.unwrap() - 0.04).abs() < 1e-9);
        assert_eq!(default.p99_added_us, Some(10.0));
        assert!(app.summaries[0].lost.is_none());
        assert!((app.ratios[0].value().unwrap() - 0.4).abs() < 1e-9);
        assert!((app.ratios[1].value().unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(app.missed_targets(), ["app rps lost, ds"]);
        // 10,000 -> 8,000 is 20%, 8,000 -> 10,000 is 25%: the median of
        // 20, 25, 20, 25.
        assert!((app.noise - 0.225).abs() < 1e-9, "{}", app.noise);
        assert_eq!(app.p99_noise_us, 0.0, "every no-tracer p99 was 100 us");
        assert!((app.floor_of_runqlat().unwrap() - 0.3).abs() < 1e-9);
        assert!(app.render().contains("lost 0.30 of runqlat's loss"));
        assert!(app.render().contains("4.0%"));
    }

    #[test]
    fn every_mode_leads_a_round() {
        let firsts: Vec<&str> = (1..=4).map(|r| modes::rotated(TRACED, r)[0].name).collect();
        assert_eq!(firsts, ["runqlat", "schedlat", "daemonset", "noop"]);
    }
}
