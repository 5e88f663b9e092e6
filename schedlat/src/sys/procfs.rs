//! Parsers for what the kernel publishes about waiting, without root: PSI,
//! schedstat, /proc/PID/cgroup, cgroup cpu.stat and quotas, /proc/stat.
//! Each parser takes text and returns a typed value or an error naming the
//! line it could not read; none panics on malformed input (tested below).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("cannot parse {what}: {line:?}")]
pub struct ParseError {
    pub what: &'static str,
    pub line: String,
}

fn bad(what: &'static str, line: &str) -> ParseError {
    ParseError {
        what,
        line: line.chars().take(120).collect(),
    }
}

/// The `some` line of a PSI file (/proc/pressure/cpu, cgroup cpu.pressure).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    pub avg10: f64,
    pub avg60: f64,
    /// Cumulative stall time, microseconds.
    pub total_us: u64,
}

pub fn parse_pressure(text: &str) -> Result<Pressure, ParseError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("some "))
        .ok_or_else(|| bad("PSI (no `some` line)", text))?;
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .ok_or_else(|| bad("PSI", line))
    };
    let num = |key: &str| field(key).and_then(|v| v.parse::<f64>().map_err(|_| bad("PSI", line)));
    Ok(Pressure {
        avg10: num("avg10=")?,
        avg60: num("avg60=")?,
        total_us: field("total=")?.parse().map_err(|_| bad("PSI", line))?,
    })
}

/// /proc/PID/schedstat: on-CPU ns, run-queue wait ns, timeslices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Schedstat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

pub fn parse_schedstat(text: &str) -> Result<Schedstat, ParseError> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().map_err(|_| bad("schedstat", text)))
        .collect::<Result<_, _>>()?;
    match fields[..] {
        [run_ns, wait_ns, slices] => Ok(Schedstat {
            run_ns,
            wait_ns,
            slices,
        }),
        _ => Err(bad("schedstat (want 3 numbers)", text)),
    }
}

/// A task's start time from /proc/PID/stat (field 22, clock ticks since
/// boot): with the PID, it names one process, since a PID can be reused once
/// its owner exits. The name in field 2 may hold spaces and parentheses, so
/// fields are counted after the last `)`.
pub fn parse_stat_starttime(text: &str) -> Result<u64, ParseError> {
    let after_name = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| bad("/proc/PID/stat", text))?;
    // Field 3 (state) is the first after the name; field 22 is the 20th.
    after_name
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| bad("/proc/PID/stat (field 22)", text))
}

/// A task's nice value from /proc/PID/stat (field 19), counted after the
/// name as `parse_stat_starttime` does.
pub fn parse_stat_nice(text: &str) -> Option<i32> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Field 3 is the first after the name; field 19 is the 17th.
    after_name.split_whitespace().nth(16)?.parse().ok()
}

/// Whether /proc/PID/stat's task is exiting: `PF_EXITING` (0x4, set by
/// do_exit() before the task leaves its cgroups and kept by a zombie) in
/// its flags (field 9), counted after the name as `parse_stat_starttime`
/// does. None when the text has no such field.
pub fn parse_stat_exiting(text: &str) -> Option<bool> {
    const PF_EXITING: u32 = 0x4;
    let after_name = &text[text.rfind(')')? + 1..];
    // Field 3 is the first after the name; field 9 is the 7th.
    let flags: u32 = after_name.split_whitespace().nth(6)?.parse().ok()?;
    Some(flags & PF_EXITING != 0)
}

/// One line of /proc/PID/cgroup: `hierarchy:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLine {
    pub hierarchy: u32,
    /// Empty for the cgroup v2 line.
    pub controllers: Vec<String>,
    pub path: String,
}

pub fn parse_proc_cgroup(text: &str) -> Result<Vec<CgroupLine>, ParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut parts = line.splitn(3, ':');
            let (Some(h), Some(c), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                return Err(bad("/proc/PID/cgroup", line));
            };
            Ok(CgroupLine {
                hierarchy: h.parse().map_err(|_| bad("/proc/PID/cgroup", line))?,
                controllers: c
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// `key value` lines (cgroup cpu.stat), as (key, value) pairs.
pub fn parse_flat_keyed(text: &str) -> Result<Vec<(String, u64)>, ParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [key, value] => Ok((
                    key.to_string(),
                    value.parse().map_err(|_| bad("cpu.stat", line))?,
                )),
                _ => Err(bad("cpu.stat", line)),
            },
        )
        .collect()
}

/// A CPU bandwidth limit: quota per period, both microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub quota_us: u64,
    pub period_us: u64,
}

impl Quota {
    /// How many CPUs' worth of time the quota allows.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// cgroup v2 `cpu.max`: `max 100000` (no limit) or `50000 100000`.
pub fn parse_cpu_max(text: &str) -> Result<Option<Quota>, ParseError> {
    match text.split_whitespace().collect::<Vec<_>>()[..] {
        ["max", period] => period
            .parse::<u64>()
            .map(|_| None)
            .map_err(|_| bad("cpu.max", text)),
        [quota, period] => Ok(Some(Quota {
            quota_us: quota.parse().map_err(|_| bad("cpu.max", text))?,
            period_us: period.parse().map_err(|_| bad("cpu.max", text))?,
        })),
        _ => Err(bad("cpu.max", text)),
    }
}

/// cgroup v1 `cpu.cfs_quota_us` (-1 = no limit) and `cpu.cfs_period_us`.
pub fn parse_cfs_quota(quota: &str, period: &str) -> Result<Option<Quota>, ParseError> {
    let q: i64 = quota
        .trim()
        .parse()
        .map_err(|_| bad("cpu.cfs_quota_us", quota))?;
    let p: u64 = period
        .trim()
        .parse()
        .map_err(|_| bad("cpu.cfs_period_us", period))?;
    Ok((q >= 0).then_some(Quota {
        quota_us: q as u64,
        period_us: p,
    }))
}

/// Per-CPU busy and total jiffies from /proc/stat, and procs_running.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// (busy, total) per CPU, in clock ticks.
    pub per_cpu: Vec<(u64, u64)>,
    pub procs_running: u64,
}

pub fn parse_proc_stat(text: &str) -> Result<CpuTimes, ParseError> {
    let mut times = CpuTimes::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some(name) if name.starts_with("cpu") && name.len() > 3 => {
                let v: Vec<u64> = words
                    .map(|w| w.parse().map_err(|_| bad("/proc/stat", line)))
                    .collect::<Result<_, _>>()?;
                if v.len() < 5 {
                    return Err(bad("/proc/stat", line));
                }
                // user nice system idle iowait irq softirq steal ...
                // Found by fuzzing: the sums are checked, a corrupt line is
                // an error rather than a wrapped or panicking total.
                let total = v
                    .iter()
                    .take(8)
                    .try_fold(0u64, |sum, &t| sum.checked_add(t))
                    .ok_or_else(|| bad("/proc/stat", line))?;
                let idle = v[3].saturating_add(v[4]).min(total);
                times.per_cpu.push((total - idle, total));
            }
            Some("procs_running") => {
                times.procs_running = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| bad("/proc/stat", line))?;
            }
            _ => {}
        }
    }
    if times.per_cpu.is_empty() {
        return Err(bad("/proc/stat (no cpuN lines)", ""));
    }
    Ok(times)
}

/// A CPU list as in /proc/PID/status `Cpus_allowed_list`: `0-3,8,10-11`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, ParseError> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let range = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        match range {
            (Ok(a), Ok(b)) if a <= b && b < 65536 => cpus.extend(a..=b),
            _ => return Err(bad("CPU list", text)),
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_starttime_counts_fields_after_the_name() {
        let stat =
            "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(parse_stat_starttime(stat), Ok(987_654));
        assert!(parse_stat_starttime("4242 (x) S 1 2").is_err());
        assert!(parse_stat_starttime("no name here").is_err());
    }

    #[test]
    fn stat_flags_tell_an_exiting_task() {
        // A zombie `sleep` read on Linux 6.18 (flags 0x40800c: PF_EXITING
        // among them), then a sleeping shell (0x400100).
        let zombie = "552 (sleep) Z 461 459 17311 0 -1 4227084 76 0 1 0 0 0 0 0 20 0 1 0 3465061";
        assert_eq!(parse_stat_exiting(zombie), Some(true));
        let alive = "7300 (s) h) S 1 7300 7300 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 9";
        assert_eq!(parse_stat_exiting(alive), Some(false));
        assert_eq!(parse_stat_exiting("7300 (sh) S 1 2"), None);
        assert_eq!(parse_stat_exiting("no name"), None);
    }

    #[test]
    fn pressure() {
        let p = parse_pressure(
            "some avg10=3.78 avg60=8.58 avg300=9.68 total=485024479\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!((p.avg10, p.total_us), (3.78, 485_024_479));
        assert!(parse_pressure("full avg10=0.00").is_err());
        assert!(parse_pressure("some avg10=x avg60=1 total=2").is_err());
        assert!(parse_pressure("").is_err());
    }

    #[test]
    fn schedstat() {
        let s = parse_schedstat("181540258 6373558 367\n").unwrap();
        assert_eq!(
            (s.run_ns, s.wait_ns, s.slices),
            (181_540_258, 6_373_558, 367)
        );
        assert!(parse_schedstat("1 2").is_err());
        assert!(parse_schedstat("1 two 3").is_err());
    }

    #[test]
    fn proc_cgroup_v1_and_v2() {
        let lines =
            parse_proc_cgroup("1:cpu,cpuacct:/batch\n0::/system.slice/x.service\n").unwrap();
        assert_eq!(lines[0].controllers, ["cpu", "cpuacct"]);
        assert_eq!(lines[1].path, "/system.slice/x.service");
        assert!(lines[1].controllers.is_empty());
        assert!(parse_proc_cgroup("garbage").is_err());
        assert!(parse_proc_cgroup("x::/").is_err());
    }

    #[test]
    fn cpu_stat_and_quotas() {
        let kv = parse_flat_keyed("nr_periods 10\nnr_throttled 3\nthrottled_time 12345\n").unwrap();
        assert_eq!(kv[1], ("nr_throttled".to_string(), 3));
        assert!(parse_flat_keyed("nr_periods\n").is_err());
        assert_eq!(parse_cpu_max("max 100000\n").unwrap(), None);
        let q = parse_cpu_max("50000 100000").unwrap().unwrap();
        assert_eq!(q.cpus(), 0.5);
        assert!(parse_cpu_max("fifty 100000").is_err());
        assert_eq!(parse_cfs_quota("-1\n", "100000\n").unwrap(), None);
        assert_eq!(
            parse_cfs_quota("10000", "100000")
                .unwrap()
                .unwrap()
                .quota_us,
            10_000
        );
        assert!(parse_cfs_quota("", "100000").is_err());
    }

    #[test]
    fn proc_stat() {
        let t = parse_proc_stat(
            "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0 0 0\nprocs_running 3\n",
        )
        .unwrap();
        assert_eq!(t.per_cpu, vec![(10, 50), (10, 50)]);
        assert_eq!(t.procs_running, 3);
        assert!(parse_proc_stat("cpu0 1 2\n").is_err());
        assert!(parse_proc_stat("intr 5\n").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn no_parser_panics_on_arbitrary_bytes() {
        // A cheap fuzz: every prefix of every fixture, and some noise.
        let samples = [
            "some avg10=3.78 avg60=8.58 avg300=9.68 total=485024479",
            "1:cpu,cpuacct:/batch\n0::/",
            "cpu0 5 0 5 40 0 0 0 0 0 0\nprocs_running 3",
            "0-3,8,10-11",
            "\u{0}\u{ff}:::--,,\n\n\t 18446744073709551616",
        ];
        for s in samples {
            for end in (0..=s.len()).filter(|&i| s.is_char_boundary(i)) {
                let t = &s[..end];
                let _ = parse_pressure(t);
                let _ = parse_schedstat(t);
                let _ = parse_proc_cgroup(t);
                let _ = parse_flat_keyed(t);
                let _ = parse_cpu_max(t);
                let _ = parse_cfs_quota(t, t);
                let _ = parse_proc_stat(t);
                let _ = parse_cpu_list(t);
            }
        }
    }
}
