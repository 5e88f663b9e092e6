//! The cost figures the README and docs quote, generated from a bench run's
//! `--json` output (kept in `docs/bench.json`), so that no figure is typed
//! and none drifts from the run it came from.
//!
//! A generated part of a page sits between two markers that name a block:
//! `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`. `cargo xtask
//! bench-docs` rewrites every such part of README.md and docs/*.md from the
//! JSON; `--check` (and a unit test, so `cargo xtask test`) fails when a
//! page differs from what the JSON gives. A new run: `cargo xtask bench
//! --json docs/bench.json`, then `cargo xtask bench-docs`.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::modes::{self, Mode};
use crate::util::workspace_root;

/// Where the run the docs quote is kept, relative to the workspace.
pub(crate) const RESULTS: &str = "docs/bench.json";

/// `cargo xtask bench-docs [--check] [--from PATH]`.
pub(crate) fn run(check: bool, from: Option<&Path>) -> Result<()> {
    let root = workspace_root();
    let from = from.map_or_else(|| root.join(RESULTS), Path::to_path_buf);
    let bench = read_results(&from)?;
    let mut stale = Vec::new();
    for page in pages(&root)? {
        let text =
            fs::read_to_string(&page).with_context(|| format!("reading {}", page.display()))?;
        let generated = apply(&text, &bench).with_context(|| format!("in {}", page.display()))?;
        if generated == text {
            continue;
        }
        if check {
            stale.push(page.display().to_string());
        } else {
            fs::write(&page, generated).with_context(|| format!("writing {}", page.display()))?;
            eprintln!("bench-docs: rewrote {}", page.display());
        }
    }
    if !stale.is_empty() {
        bail!(
            "figures not from {}: {} (run `cargo xtask bench-docs`)",
            from.display(),
            stale.join(", ")
        );
    }
    Ok(())
}

fn read_results(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (written by `cargo xtask bench --json PATH`)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// README.md, every page under docs/, and the DaemonSet (its comments
/// say what it costs).
fn pages(root: &Path) -> Result<Vec<PathBuf>> {
    let mut pages = vec![
        root.join("README.md"),
        root.join("deploy/kubernetes/base/daemonset.yaml"),
    ];
    for entry in fs::read_dir(root.join("docs")).context("listing docs/")? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    Ok(pages)
}

/// `text` with every generated part rewritten from `bench`.
pub(crate) fn apply(text: &str, bench: &Value) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!-- bench:") {
        let after = &rest[start + "<!-- bench:".len()..];
        let name_end = after
            .find(" -->")
            .context("a `<!-- bench:` marker is not closed")?;
        let name = &after[..name_end];
        let open = format!("<!-- bench:{name} -->");
        let close = format!("<!-- /bench:{name} -->");
        let body = &rest[start + open.len()..];
        let end = body
            .find(&close)
            .with_context(|| format!("`{open}` has no `{close}`"))?;
        // A block on lines of its own keeps them; one inside a sentence
        // stays inline.
        let own_lines = body.starts_with('\n');
        let figures = block(name, bench).with_context(|| format!("block {name}"))?;
        out.push_str(&rest[..start]);
        out.push_str(&open);
        if own_lines {
            out.push('\n');
            out.push_str(&figures);
        } else {
            out.push_str(figures.trim_end());
        }
        out.push_str(&close);
        rest = &body[end + close.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The figures of one named block.
fn block(name: &str, bench: &Value) -> Result<String> {
    let runs = Kept::of(bench)?;
    match name {
        "modes" => Ok(modes_table(&runs)),
        "conditions" => Ok(conditions(&runs, bench)),
        "startup" => startup_table(&runs, bench),
        "programs" => Ok(programs_table(&runs)),
        "victims" => Ok(victims_sentence(&runs)),
        "filtered" => Ok(filtered_sentence(&runs)),
        "waking" => Ok(waking_sentence(&runs)),
        "ready-causes" => Ok(ready_causes_sentence(&runs)),
        "cost" => cost_paragraph(&runs, bench),
        "deploy-cost" => Ok(format!("{}\n", deploy_cost(&runs)?)),
        "daemonset-cost" => Ok(yaml_comment(&deploy_cost(&runs)?, "          ")),
        "application" => application_table(bench),
        other => bail!("no block named `{other}` (see xtask/src/bench/docs.rs)"),
    }
}

/// The comparisons of one run, one per number of sleeping threads.
struct Kept<'a> {
    levels: Vec<Level<'a>>,
}

/// The medians with some number of sleeping threads elsewhere.
struct Level<'a> {
    threads: u64,
    results: &'a Value,
}

impl<'a> Kept<'a> {
    fn of(bench: &'a Value) -> Result<Kept<'a>> {
        let levels = bench["comparisons"]
            .as_array()
            .context("no `comparisons` array: not `cargo xtask bench --json` output")?
            .iter()
            .map(|l| {
                Ok(Level {
                    threads: l["sleeping_threads"]
                        .as_u64()
                        .context("no sleeping_threads")?,
                    results: &l["results"],
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if levels.is_empty() {
            bail!("no comparison in the results");
        }
        Ok(Kept { levels })
    }

    /// `f` of `mode` at every level, joined by " / ".
    fn each(&self, mode: &Mode, f: impl Fn(&Value) -> Option<String>) -> String {
        self.each_with(mode, |summary, _| f(summary))
    }

    /// `f` of `mode`'s summary and of all the level's summaries (by mode
    /// name), at every level, joined by " / ".
    fn each_with(&self, mode: &Mode, f: impl Fn(&Value, &Value) -> Option<String>) -> String {
        self.levels
            .iter()
            .map(|l| {
                let all = &l.results["summary"];
                f(&all[mode.name], all).unwrap_or_else(|| "-".into())
            })
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// A tracer median of `mode` at the first level.
    fn first(&self, mode: &Mode, field: &str) -> Option<f64> {
        self.levels[0].results["summary"][mode.name]["tracer"][field].as_f64()
    }

    fn threads(&self) -> String {
        let threads: Vec<String> = self.levels.iter().map(|l| thousands(l.threads)).collect();
        threads.join(" / ")
    }
}

fn ns_per_switch(summary: &Value) -> Option<f64> {
    summary["tracer"]["ns_per_switch"].as_f64()
}

/// The ns per run of `program`, or of its decision-split twin when that
/// was loaded instead (`sched_wakeup_decision`, which the kernel names
/// `sched_wakeup_de`: BPF object names keep 15 characters).
fn program_ns(summary: &Value, program: &str) -> Option<f64> {
    let programs = &summary["tracer"]["program_ns_per_run"];
    programs[program]
        .as_f64()
        .or_else(|| programs[format!("{program}_de")].as_f64())
}

/// Modes added after the kept run (docs/bench.json) was taken: the bench
/// measures and prints them, and their rows join the docs' tables with
/// the next kept run (then they leave this list).
const NOT_YET_KEPT: [&str; 2] = ["record-ring-holder-stacks", "record-ring-stacks"];

/// Whether the kept run is expected to have `mode`'s row.
fn kept(mode: &Mode) -> bool {
    !NOT_YET_KEPT.contains(&mode.name)
}

/// Every mode's cost, against runqlat's, at every level.
fn modes_table(runs: &Kept) -> String {
    let mut out = String::from(
        "| command | what | BPF ns per switch | of runqlat's | load overhead | ready |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    for mode in modes::ALL.iter().filter(|m| m.is_users() && kept(m)) {
        let ns = runs.each(mode, |s| ns_per_switch(s).map(|v| format!("{v:.0}")));
        let ratio = runs.each_with(mode, |s, all| {
            let runqlat = ns_per_switch(&all[modes::RUNQLAT.name])?;
            Some(format!("{:.2}", ns_per_switch(s)? / runqlat))
        });
        let overhead = runs.each(mode, |s| {
            s["overhead_pct"].as_f64().map(|v| format!("{v:.1}%"))
        });
        let ready = runs.each(mode, |s| {
            s["tracer"]["ready_ms"]
                .as_f64()
                .map(|v| format!("{v:.1} ms"))
        });
        let _ = writeln!(
            out,
            "| `{}` | {} | {ns} | {ratio} | {overhead} | {ready} |",
            mode.command(),
            mode.about
        );
    }
    out
}

/// How the figures were taken, in one sentence.
fn conditions(runs: &Kept, bench: &Value) -> String {
    let first = runs.levels[0].results;
    let kernel = bench["machine"]["kernel"].as_str().unwrap_or("?");
    let cpus = bench["machine"]["cpus"].as_u64().unwrap_or(0);
    format!(
        "Medians of {} rounds of `perf bench sched pipe -l {}` pinned to CPU {}, \
         with {} sleeping threads on another CPU, on Linux {kernel} with {cpus} CPUs \
         (`cargo xtask bench`; the run is kept in `docs/bench.json`).\n",
        first["rounds"],
        thousands(first["workload"]["loops"].as_u64().unwrap_or(0)),
        first["workload"]["cpu"],
        runs.threads()
    )
}

/// Start-up and memory against runqlat, at the first level, and the
/// steady-state RSS of the long-running forms.
fn startup_table(runs: &Kept, bench: &Value) -> Result<String> {
    let (r, s) = (&modes::RUNQLAT, &modes::SCHEDLAT);
    let row = |what: &str, field: &str, unit: &str| -> Result<String> {
        let (Some(a), Some(b)) = (runs.first(r, field), runs.first(s, field)) else {
            bail!("no {field} for runqlat and schedlat");
        };
        Ok(format!(
            "| {what} | {a:.1} {unit} | {b:.1} {unit} | {:.2} |\n",
            b / a
        ))
    };
    let mut out = String::from("| | runqlat | schedlat | ratio |\n|---|---|---|---|\n");
    out += &row("exec to attached, cause split on", "ready_ms", "ms")?;
    out += &row("peak RSS", "peak_rss_mib", "MiB")?;
    let steady = bench["steady_rss"]["ratios_over_runqlat"]
        .as_array()
        .context("no steady_rss ratios")?;
    for ratio in steady {
        let (Some(tracer), Some(a), Some(b)) = (
            ratio["tracer"].as_str(),
            ratio["runqlat_vm_rss_mib"].as_f64(),
            ratio["vm_rss_mib"].as_f64(),
        ) else {
            bail!("a steady_rss ratio lacks its fields");
        };
        let secs = bench["steady_rss"]["settle_secs"].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "| RSS after {secs} s, `{tracer}` | {a:.1} MiB | {b:.1} MiB | {:.2} |",
            b / a
        );
    }
    Ok(out)
}

/// BPF ns per run of each program, per mode, at the first level.
fn programs_table(runs: &Kept) -> String {
    let mut out = String::from("| command | BPF ns per run, by program |\n|---|---|\n");
    let first = &runs.levels[0].results["summary"];
    for mode in modes::ALL.iter().filter(|m| m.is_users() && kept(m)) {
        let Some(programs) = first[mode.name]["tracer"]["program_ns_per_run"].as_object() else {
            continue;
        };
        let programs: Vec<String> = programs
            .iter()
            .filter_map(|(name, ns)| Some(format!("{name} {:.0}", ns.as_f64()?)))
            .collect();
        let _ = writeln!(out, "| `{}` | {} |", mode.command(), programs.join(", "));
    }
    out
}

/// The victims mode against the histogram's, at every level.
fn victims_sentence(runs: &Kept) -> String {
    let ns = |m: &Mode| runs.each(m, |s| ns_per_switch(s).map(|v| format!("{v:.0}")));
    let overhead = |m: &Mode| {
        runs.each(m, |s| {
            s["overhead_pct"].as_f64().map(|v| format!("{v:.1}%"))
        })
    };
    format!(
        "{} ns of BPF time per switch in the victims mode against {} in histogram mode \
         (runqlat: {}), and load overheads of {} against {}, with {} sleeping threads",
        ns(&modes::VICTIMS),
        ns(&modes::SCHEDLAT),
        ns(&modes::RUNQLAT),
        overhead(&modes::VICTIMS),
        overhead(&modes::SCHEDLAT),
        runs.threads()
    )
}

/// Filtered-out events against recorded ones, at the first level.
fn filtered_sentence(runs: &Kept) -> String {
    let (f, s) = (
        runs.first(&modes::FILTERED, "ns_per_switch")
            .unwrap_or(f64::NAN),
        runs.first(&modes::SCHEDLAT, "ns_per_switch")
            .unwrap_or(f64::NAN),
    );
    format!("measured {:.2}, {f:.0} against {s:.0} ns", f / s)
}

/// What `--waking` adds, at the first level.
fn waking_sentence(runs: &Kept) -> String {
    let first = &runs.levels[0].results["summary"];
    let waking = &first["waking"];
    let default = &first[modes::SCHEDLAT.name];
    let ns =
        |s: &Value, p: &str| program_ns(s, p).map_or_else(|| "-".into(), |v| format!("{v:.0}"));
    format!(
        "`sched_waking` took {} ns per run, and `sched_wakeup` {} ns against {} without \
         `--waking`; all of schedlat's BPF time per switch was {} ns against {}",
        ns(waking, "sched_waking"),
        ns(waking, "sched_wakeup"),
        ns(default, "sched_wakeup"),
        ns_per_switch(waking).map_or_else(|| "-".into(), |v| format!("{v:.0}")),
        ns_per_switch(default).map_or_else(|| "-".into(), |v| format!("{v:.0}")),
    )
}

/// Ready time with and without the cause split, at the first level.
fn ready_causes_sentence(runs: &Kept) -> String {
    let ready = |m: &Mode| runs.first(m, "ready_ms").unwrap_or(f64::NAN);
    let (with, runqlat) = (ready(&modes::SCHEDLAT), ready(&modes::RUNQLAT));
    let without = runs.levels[0].results["summary"]["no-causes"]["tracer"]["ready_ms"]
        .as_f64()
        .unwrap_or(f64::NAN);
    format!(
        "with {} sleeping threads schedlat was ready in {with:.1} ms with it ({:.2} of \
         runqlat's), and in {without:.1} ms with `--no-causes`",
        thousands(runs.levels[0].threads),
        with / runqlat
    )
}

/// The README's paragraph of what the default and the DaemonSet's
/// configuration (its `serve`, modes::DAEMONSET) cost, each against runqlat in the
/// same run: per switch, the load's overhead, per system call where the
/// run timed them (a mode's summary `syscall_ns` less the baseline's: what
/// the tracer adds to each system call of every process), memory and
/// start-up.
fn cost_paragraph(runs: &Kept, bench: &Value) -> Result<String> {
    let first = &runs.levels[0].results["summary"];
    let (default, runqlat) = (&first[modes::SCHEDLAT.name], &first[modes::RUNQLAT.name]);
    let daemonset = &first[modes::DAEMONSET.name];
    let ns = |s: &Value| ns_per_switch(s).context("no ns_per_switch");
    let (d, r, k) = (ns(default)?, ns(runqlat)?, ns(daemonset)?);
    let overhead = |s: &Value| s["overhead_pct"].as_f64().context("no overhead_pct");
    let ready = |s: &Value| s["tracer"]["ready_ms"].as_f64().context("no ready_ms");
    let kernel = bench["machine"]["kernel"].as_str().unwrap_or("?");
    let cpus = bench["machine"]["cpus"].as_u64().unwrap_or(0);
    let mut out = format!(
        "Measured by `cargo xtask bench` against libbpf-tools runqlat in the same run \
         (Linux {kernel}, {cpus} CPUs, {} sleeping threads; the run is kept in \
         `docs/bench.json`). **Per context switch**, the default's BPF programs took \
         {d:.0} ns against runqlat's {r:.0} ({:.2} of runqlat's), and a load that is \
         nothing but wakeups and switches (`perf bench sched pipe`) lost {:.1}% of its \
         rate against {:.1}% under runqlat; the DaemonSet's `serve --cgroups --pairs` \
         took {k:.0} ns ({:.2} of runqlat's). ",
        thousands(runs.levels[0].threads),
        d / r,
        overhead(default)?,
        overhead(runqlat)?,
        k / r
    );
    // A mode's syscall_ns is ns per call with its tracer attached; what it
    // adds is over the baseline's (no tracer), in the same run.
    let baseline = first[modes::BASELINE.name]["syscall_ns"].as_f64();
    let syscall = |s: &Value| Some(s["syscall_ns"].as_f64()? - baseline?);
    match (syscall(default), syscall(daemonset)) {
        (Some(a), Some(b)) => {
            let _ = write!(
                out,
                "**Per system call** of every process (`perf bench syscall basic`), the \
                 default added {} and the DaemonSet's `serve` {} (runqlat: {}). ",
                added_ns(a),
                added_ns(b),
                syscall(runqlat).map_or("-".into(), added_ns)
            );
        }
        _ => out.push_str(
            "**Per system call**: not timed in this run (it times switches; a mode \
             that enables a system call tracepoint puts every system call of every \
             process on the kernel's traced entry path, which a switch does not show). ",
        ),
    }
    let steady = bench["steady_rss"]["ratios_over_runqlat"]
        .as_array()
        .context("no steady_rss ratios")?;
    let rss: Vec<String> = steady
        .iter()
        .filter_map(|r| {
            Some(format!(
                "`{}` {:.1} MiB",
                r["tracer"].as_str()?,
                r["vm_rss_mib"].as_f64()?
            ))
        })
        .collect();
    let runqlat_rss = steady
        .first()
        .and_then(|r| r["runqlat_vm_rss_mib"].as_f64())
        .context("no runqlat RSS")?;
    if let Ok(app) = application(bench) {
        let lost = |name: &str| app["summary"][name]["lost_fraction"].as_f64();
        if let (Some(d), Some(k), Some(r)) = (
            lost(modes::SCHEDLAT.name),
            lost(modes::DAEMONSET.name),
            lost(modes::RUNQLAT.name),
        ) {
            let _ = write!(
                out,
                "**An application**, nginx answering wrk one request at a time, lost {:.1}% \
                 of its requests/s under the default and {:.1}% under the DaemonSet's, \
                 against {:.1}% under runqlat and {:.1}% under programs that return at once \
                 on the same hooks (runs without a tracer differ by {:.1}%). ",
                d * 100.0,
                k * 100.0,
                r * 100.0,
                lost(modes::NOOP.name).unwrap_or(f64::NAN) * 100.0,
                app["noise_fraction"].as_f64().unwrap_or(f64::NAN) * 100.0
            );
        }
    }
    let _ = write!(
        out,
        "**Memory** after {} s: {} against runqlat's {runqlat_rss:.1} MiB. \
         **Start-up**, exec to attached: {:.1} ms against runqlat's {:.1} ms.",
        bench["steady_rss"]["settle_secs"].as_u64().unwrap_or(0),
        rss.join(", "),
        ready(default)?,
        ready(runqlat)?
    );
    out.push('\n');
    Ok(out)
}

/// The application row (`bench::app`): what nginx serving wrk lost under
/// each tracer, against the runs with no tracer around it.
fn application_table(bench: &Value) -> Result<String> {
    let app = application(bench)?;
    let connections = match app["connections"].as_u64() {
        Some(1) => "one connection".to_string(),
        n => format!("{} connections", n.unwrap_or(0)),
    };
    let mut out = format!(
        "nginx (one worker, CPU {}) serving a {}-byte file to wrk (one thread, \
         {connections}, CPU {}), idle CPUs {}; medians of {} rounds of {} s, each tracer's \
         run between two runs with no tracer. Consecutive runs with no tracer differed by \
         {:.1}% in requests/s and {:.0} us in p99 (the noise under each figure).\n\n\
         | tracer | requests/s | lost | of runqlat's loss | p99 | p99 added |\n\
         |---|---:|---:|---:|---:|---:|\n",
        app["server_cpu"],
        app["file_bytes"],
        app["client_cpu"],
        app["idle"].as_str().unwrap_or("?"),
        app["rounds"],
        app["seconds"],
        app["noise_fraction"]
            .as_f64()
            .context("no noise_fraction")?
            * 100.0,
        app["p99_noise_us"].as_f64().context("no p99_noise_us")?,
    );
    let summary = &app["summary"];
    let runqlat_lost = summary[modes::RUNQLAT.name]["lost_fraction"].as_f64();
    for mode in [
        modes::BASELINE,
        modes::RUNQLAT,
        modes::SCHEDLAT,
        modes::DAEMONSET,
        modes::NOOP,
    ] {
        let s = &summary[mode.name];
        let rps = s["requests_per_sec"]
            .as_f64()
            .with_context(|| format!("no requests_per_sec for {}", mode.name))?;
        let lost = s["lost_fraction"].as_f64();
        let of_runqlat = match (lost, runqlat_lost) {
            (Some(l), Some(r)) if mode != modes::RUNQLAT && r > 0.0 => format!("{:.2}", l / r),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {of_runqlat} | {:.0} us | {} |",
            application_name(mode),
            thousands(rps.round() as u64),
            lost.map_or("-".into(), |l| format!("{:.1}%", l * 100.0)),
            s["p99_us"].as_f64().unwrap_or(f64::NAN),
            s["p99_added_us"].as_f64().map_or("-".into(), p99_added),
        );
    }
    Ok(out)
}

/// A p99 added; one below zero reads as the noise it is.
fn p99_added(us: f64) -> String {
    match us < 0.0 {
        true => format!("{us:.0} us: noise"),
        false => format!("{us:+.0} us"),
    }
}

/// The kept run's application row.
fn application(bench: &Value) -> Result<&Value> {
    let app = &bench["application"];
    if app.is_null() {
        bail!("the kept run has no application row (`cargo xtask bench` without --app-rounds 0)");
    }
    Ok(app)
}

fn application_name(mode: Mode) -> &'static str {
    match mode.name {
        "baseline" => "none",
        "runqlat" => "`runqlat 1`",
        "schedlat" => "`schedlat 1` (the default)",
        "noop" => "programs that return at once on schedlat's hooks (the floor)",
        _ => "the DaemonSet's `serve`",
    }
}

/// What the default and the DaemonSet's configuration cost per switch
/// and per system call, for docs/deploy.md and the DaemonSet's comments.
fn deploy_cost(runs: &Kept) -> Result<String> {
    let first = &runs.levels[0].results["summary"];
    let ns = |name: &str| {
        ns_per_switch(&first[name]).with_context(|| format!("no ns_per_switch for {name}"))
    };
    let (d, r, k) = (
        ns(modes::SCHEDLAT.name)?,
        ns(modes::RUNQLAT.name)?,
        ns(modes::DAEMONSET.name)?,
    );
    let baseline = first[modes::BASELINE.name]["syscall_ns"].as_f64();
    let syscall = |name: &str| Some(first[name]["syscall_ns"].as_f64()? - baseline?);
    let per_call = match (
        syscall(modes::SCHEDLAT.name),
        syscall(modes::DAEMONSET.name),
    ) {
        (Some(a), Some(b)) => format!(
            "per system call of every process, {} added for the default and {} for this DaemonSet's `serve`",
            added_ns(a),
            added_ns(b)
        ),
        _ => "per system call: not timed in that run".to_string(),
    };
    Ok(format!(
        "Cost, from the run kept in docs/bench.json (`cargo xtask bench`, {} sleeping threads): \
         BPF time per context switch {d:.0} ns for the default `schedlat` and {k:.0} ns for \
         this DaemonSet's `serve` (its arguments, read from this manifest), against \
         runqlat's {r:.0} ns; {per_call}.",
        thousands(runs.levels[0].threads)
    ))
}

/// ns added per system call, one decimal; a difference of the noise's
/// size either way (under 0.05 ns) reads 0.0, not -0.0, and a run faster
/// than the one without a tracer reads as the noise it is.
fn added_ns(ns: f64) -> String {
    if ns <= -0.05 {
        return format!("0.0 ns (measured {ns:.1}: noise)");
    }
    let ns = if ns.abs() < 0.05 { 0.0 } else { ns };
    format!("{ns:.1} ns")
}

/// `text` as YAML comment lines at `indent`, wrapped at 76 columns, ending
/// with the indent and `# ` the closing marker's line continues.
fn yaml_comment(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + 2 + line.len() + 1 + word.len() > 76 {
            let _ = writeln!(out, "{indent}# {line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}# {line}");
    }
    let _ = write!(out, "{indent}# ");
    out
}

/// 10000 -> "10,000".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_cost_reads_as_noise() {
        assert_eq!(added_ns(1.25), "1.2 ns");
        assert_eq!(added_ns(-0.01), "0.0 ns");
        assert_eq!(added_ns(-0.2), "0.0 ns (measured -0.2: noise)");
    }

    /// With the decision split, the wakeup program the kernel lists is
    /// `sched_wakeup_de`: the waking sentence printed `-` for it before.
    #[test]
    fn program_ns_finds_the_decision_twin() {
        let summary = serde_json::json!({"tracer": {"program_ns_per_run": {
            "sched_wakeup_de": 108.0, "sched_wakeup_ne": 514.0, "sched_waking": 69.0}}});
        assert_eq!(program_ns(&summary, "sched_wakeup"), Some(108.0));
        assert_eq!(program_ns(&summary, "sched_waking"), Some(69.0));
        assert_eq!(program_ns(&summary, "sched_switch"), None);
    }

    #[test]
    fn blocks_are_rewritten_in_place_and_unknown_ones_refused() {
        let bench = serde_json::json!({"comparisons": [{"sleeping_threads": 100, "results": {
            "rounds": 3, "workload": {"loops": 200000, "cpu": 0}, "summary": {}}}],
            "machine": {"kernel": "6.18", "cpus": 2}});
        let text = "a\n<!-- bench:conditions -->\nold\n<!-- /bench:conditions -->\nb \
                    <!-- bench:conditions -->x<!-- /bench:conditions --> c\n";
        let out = apply(text, &bench).unwrap();
        assert!(
            out.starts_with("a\n<!-- bench:conditions -->\nMedians of 3 rounds"),
            "{out}"
        );
        assert!(out.contains("Linux 6.18 with 2 CPUs"), "{out}");
        assert!(!out.contains("old") && !out.contains(">x<"), "{out}");
        assert!(
            out.ends_with("`docs/bench.json`).<!-- /bench:conditions --> c\n"),
            "{out}"
        );
        assert_eq!(
            apply(&out, &bench).unwrap(),
            out,
            "applying twice changes nothing"
        );
        let e = apply("<!-- bench:nope -->\n<!-- /bench:nope -->", &bench).unwrap_err();
        assert!(format!("{e:#}").contains("no block named `nope`"), "{e:#}");
        let e = apply("<!-- bench:modes -->\n", &bench).unwrap_err();
        assert!(format!("{e:#}").contains("has no"), "{e:#}");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(100), "100");
    }

    /// Issue 28: the README's and docs' cost figures are the kept run's,
    /// and that run has a row for every mode a user runs.
    #[test]
    fn the_docs_figures_come_from_the_kept_bench_run() {
        let root = workspace_root();
        let bench = read_results(&root.join(RESULTS)).unwrap();
        for level in Kept::of(&bench).unwrap().levels {
            for mode in modes::ALL.iter().filter(|m| m.is_users() && kept(m)) {
                assert!(
                    ns_per_switch(&level.results["summary"][mode.name]).is_some(),
                    "{RESULTS} has no `{}` row",
                    mode.command()
                );
            }
        }
        let mut blocks = 0;
        for page in pages(&root).unwrap() {
            let text = fs::read_to_string(&page).unwrap();
            blocks += text.matches("<!-- bench:").count();
            let generated = apply(&text, &bench).unwrap();
            assert!(
                generated == text,
                "{}: figures differ from {RESULTS}; run `cargo xtask bench-docs`",
                page.display()
            );
        }
        // The README's cost table and start-up table at least.
        assert!(blocks >= 2, "only {blocks} generated blocks");
    }
}
