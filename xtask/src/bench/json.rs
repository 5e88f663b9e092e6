//! All results as JSON (`--json PATH`): every sample, the medians and the
//! ratios, for tools that track the numbers over time.

use serde_json::{Value, json};

use super::{
    app::App,
    report::{Results, Summary, ms},
    sample::Sample,
    steady::{Steady, mib},
};

/// One JSON document: the comparison at each sleeper level, the
/// steady-state RSS and the application row (when it ran).
pub(super) fn render_all(all: &[(usize, Results)], steady: &Steady, app: Option<&App>) -> String {
    let levels: Vec<Value> = all
        .iter()
        .map(|(n, r)| json!({"sleeping_threads": n, "results": results_json(r)}))
        .collect();
    let mut doc = json!({
        "machine": machine(), "comparisons": levels, "steady_rss": steady_json(steady),
    });
    if let Some(app) = app {
        doc["application"] = app.json();
    }
    pretty(&doc)
}

/// `--app-only`'s document: the machine and the application row.
pub(super) fn render_application(app: &App) -> String {
    pretty(&json!({"machine": machine(), "application": app.json()}))
}

fn pretty(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).expect("JSON values serialize") + "\n"
}

/// Where the numbers were taken: the kernel release and the CPU count.
fn machine() -> Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    json!({"kernel": kernel.trim(), "cpus": cpus})
}

fn steady_json(steady: &Steady) -> Value {
    let tracers: Vec<Value> = steady
        .names
        .iter()
        .zip(&steady.rss)
        .map(|(name, r)| {
            json!({
                "tracer": name, "vm_rss_mib": mib(r.total), "rss_anon_mib": mib(r.anon),
                "rss_file_mib": mib(r.file), "rss_shmem_mib": mib(r.shmem),
            })
        })
        .collect();
    let ratios: Vec<Value> = steady
        .ratios
        .iter()
        .map(|r| r.json(["tracer", "vm_rss_mib", "runqlat_vm_rss_mib"]))
        .collect();
    json!({
        "settle_secs": super::steady::SETTLE.as_secs(), "rounds": steady.rounds,
        "tracers": tracers, "ratios_over_runqlat": ratios,
    })
}

fn results_json(results: &Results) -> Value {
    let samples: Vec<Value> = results.samples.iter().map(sample_json).collect();
    let summary: serde_json::Map<String, Value> = results
        .summaries
        .iter()
        .map(|s| (s.mode.name.to_string(), summary_json(s)))
        .collect();
    let ratios: Vec<Value> = results
        .ratios
        .iter()
        .map(|r| {
            let mut v = r.json(["metric", "schedlat", "runqlat"]);
            v["stretch"] = json!(r.stretch);
            v
        })
        .collect();
    let victims: Vec<Value> = results
        .victims
        .iter()
        .map(|r| r.json(["metric", "victims", "schedlat"]))
        .collect();
    let filtered: Vec<Value> = results
        .filtered
        .iter()
        .map(|r| r.json(["metric", "filtered", "schedlat"]))
        .collect();
    json!({
        "workload": {"command": "perf bench sched pipe", "loops": results.loops, "cpu": results.cpu},
        "syscalls": {"command": "perf bench syscall basic", "loops": results.syscall_loops,
            "schedlat_added_ns": results.syscall_added(super::modes::SCHEDLAT)},
        "rounds": results.rounds,
        "samples": samples,
        "summary": summary,
        "ratios_schedlat_over_runqlat": ratios,
        "ratios_victims_over_schedlat": victims,
        "ratios_filtered_over_schedlat": filtered,
    })
}

fn sample_json(s: &Sample) -> Value {
    let tracer = s.tracer.as_ref().map(|t| {
        let programs: Vec<Value> = t
            .programs
            .iter()
            .map(|p| json!({"name": p.name, "runs": p.runs, "run_ns": p.run_ns, "ns_per_run": p.ns_per_run()}))
            .collect();
        json!({
            "ready_ms": ms(t), "ns_per_switch": t.ns_per_switch, "cpu_secs": t.cpu_secs,
            "max_rss_kib": t.max_rss_kib, "programs": programs,
        })
    });
    json!({"round": s.round, "mode": s.mode.name, "ops_per_sec": s.ops_per_sec,
        "syscall_ns": s.syscall_ns.is_finite().then_some(s.syscall_ns), "tracer": tracer})
}

fn summary_json(s: &Summary) -> Value {
    let tracer = s.tracer.as_ref().map(|t| {
        let programs: serde_json::Map<String, Value> = t
            .programs
            .iter()
            .map(|(name, ns)| (name.clone(), json!(ns)))
            .collect();
        json!({
            "ns_per_switch": t.ns_per_switch, "ready_ms": t.ready_ms, "cpu_secs": t.cpu_secs,
            "peak_rss_mib": t.rss_mib, "program_ns_per_run": programs,
        })
    });
    json!({
        "command": s.mode.command(), "about": s.mode.about, "ops_per_sec": s.ops_per_sec,
        "overhead_pct": s.overhead_pct, "tracer": tracer,
        // ns per system call over the baseline's: null where not measured.
        "syscall_ns": s.syscall_ns.is_finite().then_some(s.syscall_ns),
    })
}
