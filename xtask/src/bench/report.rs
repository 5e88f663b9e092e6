//! Medians over rounds, schedlat/runqlat ratios against their targets, and
//! the table for people (JSON for tools is in `json`).

use std::fmt::Write as _;

use anyhow::{Result, bail};

use super::{
    modes::{self, Mode, Runs},
    options::Options,
    sample::{SYSCALL_RUNS, Sample, TracerSample},
};

pub(super) struct Results {
    pub(super) rounds: u32,
    pub(super) loops: u64,
    pub(super) syscall_loops: u64,
    pub(super) cpu: usize,
    pub(super) samples: Vec<Sample>,
    pub(super) summaries: Vec<Summary>,
    pub(super) ratios: Vec<Ratio>,
    /// schedlat victims / schedlat (histogram mode), in the same shape:
    /// `schedlat` holds the victims mode's value, `runqlat` the histogram's.
    pub(super) victims: Vec<Ratio>,
    /// schedlat -c EMPTY / schedlat: filtered-out against recorded events.
    pub(super) filtered: Vec<Ratio>,
}

/// One mode's medians over the rounds.
pub(super) struct Summary {
    pub(super) mode: Mode,
    pub(super) ops_per_sec: f64,
    /// ops/s drop against the baseline median, in %.
    pub(super) overhead_pct: f64,
    /// ns per system call of other processes on the CPU (median).
    pub(super) syscall_ns: f64,
    pub(super) tracer: Option<TracerSummary>,
}

pub(super) struct TracerSummary {
    pub(super) ns_per_switch: f64,
    pub(super) ready_ms: f64,
    pub(super) cpu_secs: f64,
    pub(super) rss_mib: f64,
    /// (program name, median ns per run), programs that ran only.
    pub(super) programs: Vec<(String, f64)>,
}

/// What the default may add to a system call of another process (issue
/// 43): nothing measurable.
const SYSCALL_ADDED_NS: f64 = 1.0;

/// schedlat / runqlat for one metric, lower is better.
pub(super) struct Ratio {
    pub(super) what: &'static str,
    pub(super) schedlat: f64,
    pub(super) runqlat: f64,
    pub(super) target: Target,
    /// Some("stretch (issue 10)") for targets not enforced by --strict.
    pub(super) stretch: Option<&'static str>,
}

/// What the ratio must be.
#[derive(Clone, Copy)]
pub(super) enum Target {
    AtMost(f64),
    Below(f64),
}

impl Ratio {
    /// None when runqlat's value is not positive (an overhead lost in noise).
    pub(super) fn value(&self) -> Option<f64> {
        (self.runqlat > 0.0).then(|| self.schedlat / self.runqlat)
    }

    /// The ratio as JSON, under three names: what it measures, then the
    /// keys of its two values (e.g. `metric`, `schedlat`, `runqlat`).
    pub(super) fn json(&self, [what, over, under]: [&str; 3]) -> serde_json::Value {
        serde_json::json!({
            what: self.what, over: self.schedlat, under: self.runqlat,
            "ratio": self.value(), "target": self.target(), "met": self.met(),
        })
    }

    pub(super) fn met(&self) -> bool {
        match (self.value(), self.target) {
            (Some(r), Target::AtMost(bound)) => r <= bound,
            (Some(r), Target::Below(bound)) => r < bound,
            // No meaningful ratio: at least do no worse than runqlat.
            (None, _) => self.schedlat <= self.runqlat,
        }
    }

    pub(super) fn target(&self) -> String {
        // 0.7 as "0.7", 0.45 as "0.45", 1 as "1.0".
        let bound = |b: f64| {
            if (b * 10.0).fract() == 0.0 {
                format!("{b:.1}")
            } else {
                format!("{b:.2}")
            }
        };
        match self.target {
            Target::AtMost(b) => format!("<= {}", bound(b)),
            Target::Below(b) => format!("< {}", bound(b)),
        }
    }
}

impl Results {
    pub(super) fn new(opts: &Options, samples: Vec<Sample>) -> Result<Self> {
        let baseline = median(ops_of(&samples, modes::BASELINE));
        let summaries: Vec<Summary> = modes::ALL
            .iter()
            .map(|&mode| summarize(&samples, mode, baseline))
            .collect();
        let of = |mode: Mode| summaries.iter().find(|s| s.mode == mode);
        let (Some(runqlat), Some(schedlat), Some(victims), Some(filtered)) = (
            of(modes::RUNQLAT),
            of(modes::SCHEDLAT),
            of(modes::VICTIMS),
            of(modes::FILTERED),
        ) else {
            bail!("expected one summary per mode");
        };
        let (Some(r), Some(s), Some(v), Some(f)) = (
            &runqlat.tracer,
            &schedlat.tracer,
            &victims.tracer,
            &filtered.tracer,
        ) else {
            bail!("no tracer samples");
        };
        let ratio = |what, schedlat, runqlat, target, stretch| Ratio {
            what,
            schedlat,
            runqlat,
            target,
            stretch,
        };
        let ratios = vec![
            ratio(
                "overhead",
                schedlat.overhead_pct,
                runqlat.overhead_pct,
                Target::AtMost(1.0),
                None,
            ),
            ratio(
                "BPF ns per switch",
                s.ns_per_switch,
                r.ns_per_switch,
                // Issue 24, with the decision split on: out of reach, as the
                // least timer's own ratio (render_floor) shows run by run.
                Target::AtMost(0.45),
                Some("stretch (issue 24: the least timer's ratio bounds it)"),
            ),
            // Issue 17: start as light as runqlat.
            ratio(
                "ready time",
                s.ready_ms,
                r.ready_ms,
                Target::AtMost(0.7),
                None,
            ),
            ratio("peak RSS", s.rss_mib, r.rss_mib, Target::AtMost(1.0), None),
        ];
        // Issue 5: the victims mode costs no more than the histogram. Both
        // do comparable work per switch (two row lookups against the bucket
        // arithmetic), so the target is parity within this benchmark's
        // run-to-run noise: medians of the same mode move by 5-10% between
        // invocations here.
        let victims = vec![
            ratio(
                "overhead",
                victims.overhead_pct,
                schedlat.overhead_pct,
                Target::AtMost(1.1),
                None,
            ),
            ratio(
                "BPF ns per switch",
                v.ns_per_switch,
                s.ns_per_switch,
                Target::AtMost(1.1),
                None,
            ),
        ];
        // Issue 4: an event the filters leave out returns before any map
        // update, so it must cost less than one that is recorded.
        let filtered = vec![ratio(
            "BPF ns per switch",
            f.ns_per_switch,
            s.ns_per_switch,
            Target::Below(1.0),
            None,
        )];
        Ok(Self {
            rounds: opts.rounds,
            loops: opts.loops,
            syscall_loops: opts.syscall_loops,
            cpu: opts.cpu,
            samples,
            summaries,
            ratios,
            victims,
            filtered,
        })
    }

    /// Targets missed, stretch targets excepted (they are goals of later
    /// issues, not regressions).
    pub(super) fn missed_targets(&self) -> Vec<String> {
        let missed = |ratios: &[Ratio], prefix: &str| -> Vec<String> {
            ratios
                .iter()
                .filter(|r| r.stretch.is_none() && !r.met())
                .map(|r| format!("{prefix}{}", r.what))
                .collect()
        };
        let mut all = missed(&self.ratios, "");
        all.extend(missed(&self.victims, "victims mode "));
        all.extend(missed(&self.filtered, "filtered-out "));
        if let Some(added) = self.syscall_added(modes::SCHEDLAT)
            && added > SYSCALL_ADDED_NS
        {
            all.push(format!(
                "the default adds {added:.1} ns to every system call of other processes (target <= {SYSCALL_ADDED_NS} ns)"
            ));
        }
        all
    }

    /// ns `mode` adds to a system call of another process on its CPU,
    /// against no tracer (medians).
    pub(super) fn syscall_added(&self, mode: Mode) -> Option<f64> {
        let of = |m: Mode| {
            self.summaries
                .iter()
                .find(|s| s.mode == m)
                .map(|s| s.syscall_ns)
        };
        Some(of(mode)? - of(modes::BASELINE)?)
    }

    /// What each tracer costs a system call of any process on its CPU.
    fn render_syscalls(&self, out: &mut String) {
        let Some(none) = self
            .summaries
            .iter()
            .find(|s| s.mode == modes::BASELINE)
            .map(|s| s.syscall_ns)
        else {
            return;
        };
        let _ = writeln!(
            out,
            "\ncost to other processes: perf bench syscall basic (getppid(), {} calls, best of {} a round) on CPU {}, median of {} rounds",
            self.syscall_loops, SYSCALL_RUNS, self.cpu, self.rounds
        );
        let _ = writeln!(
            out,
            "{:<27} {:>9} {:>9} {:>11}",
            "mode", "ns/call", "added ns", "x no tracer"
        );
        for s in &self.summaries {
            let _ = writeln!(
                out,
                "{:<27} {:>9.1} {:>9.1} {:>11.3}",
                s.mode.command(),
                s.syscall_ns,
                s.syscall_ns - none,
                s.syscall_ns / none
            );
        }
        if let Some(added) = self.syscall_added(modes::SCHEDLAT) {
            let met = if added <= SYSCALL_ADDED_NS {
                "yes"
            } else {
                "NO"
            };
            let _ = writeln!(
                out,
                "the default adds {added:.1} ns per call (target <= {SYSCALL_ADDED_NS} ns, issue 43): met {met}"
            );
        }
    }

    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        let (rounds, loops, cpu) = (self.rounds, self.loops, self.cpu);
        let _ = writeln!(
            out,
            "\nperf bench sched pipe -l {loops} on CPU {cpu}, median of {rounds} rounds\n"
        );
        self.render_table(&mut out);
        render_ratios(&mut out, "schedlat/runqlat", &self.ratios);
        render_ratios(&mut out, "victims/schedlat", &self.victims);
        render_ratios(&mut out, "filtered/schedlat", &self.filtered);
        self.render_syscalls(&mut out);
        self.render_floor(&mut out);
        self.render_raw(&mut out);
        out
    }

    /// The noop programs' ns/switch (what the hooks cost a program that
    /// does nothing) and the least timer's against runqlat's, and each
    /// tracer's above the floor: the part of its ratio that is its own work.
    fn render_floor(&self, out: &mut String) {
        let ns = |mode: Mode| {
            self.summaries
                .iter()
                .find(|s| s.mode == mode)
                .and_then(|s| s.tracer.as_ref())
                .map(|t| t.ns_per_switch)
        };
        let (Some(floor), Some(runqlat)) = (ns(modes::NOOP), ns(modes::RUNQLAT)) else {
            return;
        };
        let _ = writeln!(
            out,
            "
the hooks' floor (programs that return at once): {floor:.0} ns/switch, {:.2} x runqlat's",
            floor / runqlat
        );
        if let Some(timer) = ns(modes::TIMER) {
            let _ = writeln!(
                out,
                "the least timer (a clock stamp per wakeup, a log2 bucket per switch-in, nothing \
                 else): {timer:.0} ns/switch, {:.2} x runqlat's: no tool that times waits on these \
                 hooks goes below it",
                timer / runqlat
            );
        }
        if let Some(least) = ns(modes::TIMER_DECISION) {
            let _ = writeln!(
                out,
                "the least timer and decision (the timer, and the request bit and switch count at \
                 each enqueue, the pass-overs at each switch-in): {least:.0} ns/switch, {:.2} x \
                 runqlat's: no decision split goes below it",
                least / runqlat
            );
        }
        let _ = writeln!(
            out,
            "{:<27} {:>13} {:>10}",
            "above the floor", "ns/switch", "/runqlat"
        );
        for s in self.summaries.iter().filter(|s| s.mode.is_users()) {
            if let Some(t) = &s.tracer {
                let _ = writeln!(
                    out,
                    "{:<27} {:>13.0} {:>10.2}",
                    s.mode.command(),
                    t.ns_per_switch - floor,
                    (t.ns_per_switch - floor) / (runqlat - floor)
                );
            }
        }
    }

    fn render_table(&self, out: &mut String) {
        let runqlat = self.summaries.iter().find(|s| s.mode.runs == Runs::Runqlat);
        let runqlat_ns = runqlat
            .and_then(|s| s.tracer.as_ref())
            .map(|t| t.ns_per_switch);
        let _ = writeln!(
            out,
            "{:<27} {:>9} {:>9} {:>14} {:>8} {:>9} {:>13} {:>13}",
            "mode",
            "ops/s",
            "overhead",
            "BPF ns/switch",
            "/runqlat",
            "ready ms",
            "tracer CPU s",
            "peak RSS MiB"
        );
        for s in &self.summaries {
            let _ = write!(out, "{:<27} {:>9.0} ", s.mode.command(), s.ops_per_sec);
            match &s.tracer {
                None => {
                    let _ = writeln!(
                        out,
                        "{:>9} {:>14} {:>8} {:>9} {:>13} {:>13}",
                        "-", "-", "-", "-", "-", "-"
                    );
                }
                Some(t) => {
                    let ratio = runqlat_ns
                        .map_or_else(|| "-".into(), |r| format!("{:.2}", t.ns_per_switch / r));
                    let _ = writeln!(
                        out,
                        "{:>7.1} % {:>14.0} {ratio:>8} {:>9.1} {:>13.3} {:>13.1}",
                        s.overhead_pct, t.ns_per_switch, t.ready_ms, t.cpu_secs, t.rss_mib
                    );
                }
            }
        }
        let _ = writeln!(out, "\nBPF ns per run, by program (median):");
        for s in &self.summaries {
            if let Some(t) = &s.tracer {
                let programs: Vec<String> = t
                    .programs
                    .iter()
                    .map(|(name, ns)| format!("{name} {ns:.0} ns"))
                    .collect();
                let _ = writeln!(out, "  {:<27} {}", s.mode.command(), programs.join(", "));
            }
        }
    }

    /// Every round's numbers, so the spread behind each median is visible.
    fn render_raw(&self, out: &mut String) {
        let _ = writeln!(out, "\nper round (rounds 1..{}, in order):", self.rounds);
        for mode in modes::ALL {
            let mut samples: Vec<&Sample> =
                self.samples.iter().filter(|s| s.mode == mode).collect();
            samples.sort_by_key(|s| s.round);
            let row = |label: &str, f: &dyn Fn(&Sample) -> Option<String>| {
                let cells: Vec<String> = samples.iter().filter_map(|s| f(s)).collect();
                format!("  {:<27} {label:<10} {}\n", mode.command(), cells.join(" "))
            };
            out.push_str(&row("ops/s", &|s| Some(format!("{:.0}", s.ops_per_sec))));
            out.push_str(&row("syscall ns", &|s| {
                Some(format!("{:.1}", s.syscall_ns))
            }));
            if mode.runs == Runs::Nothing {
                continue;
            }
            let t = |f: fn(&TracerSample) -> String| move |s: &Sample| s.tracer.as_ref().map(f);
            out.push_str(&row("ns/switch", &t(|t| format!("{:.0}", t.ns_per_switch))));
            out.push_str(&row("ready ms", &t(|t| format!("{:.1}", ms(t)))));
            out.push_str(&row("CPU s", &t(|t| format!("{:.3}", t.cpu_secs))));
            out.push_str(&row("RSS MiB", &t(|t| format!("{:.1}", mib(t)))));
        }
    }
}

/// A ratios table: `title` (which value over which), ratio, target, met.
pub(super) fn render_ratios(out: &mut String, title: &str, ratios: &[Ratio]) {
    let _ = writeln!(out, "\n{:<18} {:>6}  {:<7} met", title, "ratio", "target");
    for r in ratios {
        let value = r
            .value()
            .map_or_else(|| "n/a".into(), |v| format!("{v:.2}"));
        let met = if r.met() { "yes" } else { "NO" };
        let stretch = r.stretch.map(|s| format!("  {s}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<18} {value:>6}  {:<7} {met}{stretch}",
            r.what,
            r.target()
        );
    }
}

fn summarize(samples: &[Sample], mode: Mode, baseline_ops: f64) -> Summary {
    let ops_per_sec = median(ops_of(samples, mode));
    let tracers: Vec<&TracerSample> = samples
        .iter()
        .filter(|s| s.mode == mode)
        .filter_map(|s| s.tracer.as_ref())
        .collect();
    let of = |f: fn(&TracerSample) -> f64| median(tracers.iter().map(|t| f(t)).collect());
    let tracer = (!tracers.is_empty()).then(|| TracerSummary {
        ns_per_switch: of(|t| t.ns_per_switch),
        ready_ms: of(ms),
        cpu_secs: of(|t| t.cpu_secs),
        rss_mib: of(mib),
        programs: program_medians(&tracers),
    });
    let syscall_ns = median(
        samples
            .iter()
            .filter(|s| s.mode == mode)
            .map(|s| s.syscall_ns)
            .collect(),
    );
    Summary {
        mode,
        ops_per_sec,
        overhead_pct: (baseline_ops - ops_per_sec) / baseline_ops * 100.0,
        syscall_ns,
        tracer,
    }
}

/// Median ns per run of each program name, over the rounds where it ran.
fn program_medians(tracers: &[&TracerSample]) -> Vec<(String, f64)> {
    let mut names: Vec<&str> = tracers
        .iter()
        .flat_map(|t| {
            t.programs
                .iter()
                .filter(|p| p.runs > 0)
                .map(|p| p.name.as_str())
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let per_run = tracers
                .iter()
                .flat_map(|t| t.programs.iter().filter(|p| p.name == name))
                .filter_map(|p| p.ns_per_run())
                .collect();
            (name.to_string(), median(per_run))
        })
        .collect()
}

fn ops_of(samples: &[Sample], mode: Mode) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.mode == mode)
        .map(|s| s.ops_per_sec)
        .collect()
}

pub(super) fn ms(t: &TracerSample) -> f64 {
    t.ready.as_secs_f64() * 1e3
}

fn mib(t: &TracerSample) -> f64 {
    t.max_rss_kib as f64 / 1024.0
}

/// Median; the mean of the middle two for an even count, NaN when empty.
pub(super) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn ratio_targets() {
        let r = |schedlat, runqlat, target| Ratio {
            what: "x",
            schedlat,
            runqlat,
            target,
            stretch: None,
        };
        let (at_most, below) = (Target::AtMost(1.0), Target::Below(1.0));
        assert!(r(1.0, 1.0, at_most).met());
        assert!(!r(1.0, 1.0, below).met());
        assert!(r(0.5, 1.0, below).met());
        assert!(!r(0.6, 1.0, Target::AtMost(0.5)).met());
        // runqlat's overhead lost in noise: no ratio, compare directly.
        assert_eq!(r(-1.0, 0.0, at_most).value(), None);
        assert!(r(-1.0, 0.0, at_most).met());
        assert!(!r(2.0, -1.0, at_most).met());
    }
}
