//! Steady-state memory: what a tracer left running keeps resident. Each
//! round starts `runqlat 1`, `schedlat 1` and `schedlat serve` side by side,
//! lets them run for `SETTLE`, then reads their /proc/PID/status: VmRSS, and
//! its split into anonymous memory (heap, stacks: what the program keeps),
//! file-backed pages (the binary's and libraries' code and data that were
//! touched) and shared memory. Peak RSS (rusage, in the comparison) says
//! what loading costs; this says what staying costs.

use std::{
    fmt::Write as _,
    fs,
    io::Read,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::Duration,
};

use anyhow::{Context, Result, bail};

use super::report::{Ratio, Target, render_ratios};

/// How long each tracer runs before its memory is read.
pub(super) const SETTLE: Duration = Duration::from_secs(10);

/// A tracer command whose resident memory is measured.
pub(super) struct Subject {
    pub name: &'static str,
    pub path: String,
    pub args: Vec<String>,
}

/// Resident memory of one process, in KiB (/proc/PID/status).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Rss {
    pub total: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
}

impl Rss {
    fn parse(status: &str) -> Result<Rss> {
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
                .with_context(|| format!("no {name} in /proc/PID/status (kernel >= 4.5)"))
        };
        Ok(Rss {
            total: field("VmRSS")?,
            anon: field("RssAnon")?,
            file: field("RssFile")?,
            shmem: field("RssShmem")?,
        })
    }
}

/// Per subject (in order), the median over `rounds` of each field.
pub(super) fn measure(subjects: &[Subject], rounds: u32) -> Result<Vec<Rss>> {
    let mut samples: Vec<Vec<Rss>> = vec![Vec::new(); subjects.len()];
    for round in 1..=rounds {
        eprintln!(
            "bench: steady RSS round {round}/{rounds}: {} side by side for {SETTLE:?}",
            subjects.len()
        );
        let mut running = Vec::new();
        for s in subjects {
            running.push(Running::start(s)?);
        }
        thread::sleep(SETTLE);
        for (i, r) in running.iter_mut().enumerate() {
            samples[i].push(r.rss()?);
        }
    }
    Ok(samples.into_iter().map(|s| median_rss(&s)).collect())
}

fn median_rss(samples: &[Rss]) -> Rss {
    let median = |f: fn(&Rss) -> u64| {
        let mut v: Vec<u64> = samples.iter().map(f).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    Rss {
        total: median(|r| r.total),
        anon: median(|r| r.anon),
        file: median(|r| r.file),
        shmem: median(|r| r.shmem),
    }
}

/// A running tracer; SIGINT then SIGKILL when dropped, always reaped.
struct Running {
    name: &'static str,
    child: Child,
}

impl Running {
    fn start(subject: &Subject) -> Result<Running> {
        let child = Command::new(&subject.path)
            .args(&subject.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", subject.name))?;
        Ok(Running {
            name: subject.name,
            child,
        })
    }

    /// Its memory now; an error (with its stderr) if it has exited.
    fn rss(&mut self) -> Result<Rss> {
        if let Some(status) = self.child.try_wait()? {
            let mut stderr = String::new();
            if let Some(mut pipe) = self.child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            bail!("{} exited early ({status}): {}", self.name, stderr.trim());
        }
        let path = format!("/proc/{}/status", self.child.id());
        let status = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        Rss::parse(&status).with_context(|| format!("{}: {path}", self.name))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, not reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        for _ in 0..500 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The medians, and each schedlat row against the first (runqlat).
pub(super) struct Steady {
    pub names: Vec<&'static str>,
    pub rss: Vec<Rss>,
    pub rounds: u32,
    pub ratios: Vec<Ratio>,
}

impl Steady {
    pub(super) fn new(subjects: &[Subject], rss: Vec<Rss>, rounds: u32) -> Steady {
        let anchor = mib(rss[0].total);
        // Issue 17: a tracer left running keeps at most half of runqlat's.
        let ratios = subjects
            .iter()
            .zip(&rss)
            .skip(1)
            .map(|(s, r)| Ratio {
                what: s.name,
                schedlat: mib(r.total),
                runqlat: anchor,
                target: Target::AtMost(0.5),
                stretch: None,
            })
            .collect();
        Steady {
            names: subjects.iter().map(|s| s.name).collect(),
            rss,
            rounds,
            ratios,
        }
    }

    pub(super) fn render(&self) -> String {
        let mut out = render(&self.names, &self.rss, self.rounds);
        render_ratios(&mut out, "steady VmRSS / runqlat", &self.ratios);
        out
    }

    pub(super) fn missed_targets(&self) -> Vec<String> {
        self.ratios
            .iter()
            .filter(|r| !r.met())
            .map(|r| format!("steady RSS of {}", r.what))
            .collect()
    }
}

/// The table: one row per subject, MiB.
fn render(names: &[&str], rss: &[Rss], rounds: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nsteady-state RSS, {} s after start, side by side (median of {rounds} rounds, MiB):",
        SETTLE.as_secs()
    );
    let _ = writeln!(
        out,
        "{:<16} {:>7} {:>8} {:>8} {:>9}",
        "tracer", "VmRSS", "RssAnon", "RssFile", "RssShmem"
    );
    for (name, r) in names.iter().zip(rss) {
        let _ = writeln!(
            out,
            "{:<16} {:>7.1} {:>8.1} {:>8.1} {:>9.1}",
            name,
            mib(r.total),
            mib(r.anon),
            mib(r.file),
            mib(r.shmem)
        );
    }
    out
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `path ARGS` as a subject.
pub(super) fn subject(name: &'static str, path: &Path, args: &[&str]) -> Subject {
    Subject {
        name,
        path: path.display().to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status() {
        let status = "Name:\tx\nVmHWM:\t  9000 kB\nVmRSS:\t  8000 kB\nRssAnon:\t  3000 kB\n\
                      RssFile:\t  4900 kB\nRssShmem:\t   100 kB\n";
        let r = Rss::parse(status).unwrap();
        assert_eq!((r.total, r.anon, r.file, r.shmem), (8000, 3000, 4900, 100));
        assert!(Rss::parse("VmRSS:\t1 kB\n").is_err());
    }

    #[test]
    fn measures_a_running_process_and_reports_an_exited_one() {
        let sleep = subject("sleep", Path::new("/bin/sleep"), &["30"]);
        let mut running = Running::start(&sleep).unwrap();
        let rss = running.rss().unwrap();
        assert!(rss.total > 0 && rss.total >= rss.anon + rss.file, "{rss:?}");
        let fail = subject("false", Path::new("/bin/false"), &[]);
        let mut failed = Running::start(&fail).unwrap();
        thread::sleep(Duration::from_millis(200));
        let e = failed.rss().unwrap_err();
        assert!(e.to_string().contains("exited early"), "{e}");
    }
}
