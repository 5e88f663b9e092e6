//! The diagnosis as a person reads it (numbered like the seed method's
//! steps), or as one JSON object.

use std::fmt::Write as _;

use serde_json::json;

use super::{
    Traced,
    causes::{Cause, Waiting},
    findings::Findings,
    scope::Scope,
};
use crate::analysis::fmt_ns;

/// Everything the report shows.
pub struct Diagnosis<'a> {
    pub scope: &'a Scope,
    pub findings: &'a Findings,
    pub waiting: Waiting,
    pub causes: Vec<Cause>,
    pub traced: Option<&'a Traced>,
    /// Why there is no eBPF part (no privileges).
    pub why_not_traced: Option<&'a str>,
}

pub fn text(d: &Diagnosis) -> String {
    let Diagnosis {
        scope,
        findings: f,
        waiting,
        causes,
        traced,
        why_not_traced,
    } = d;
    let (traced, why_not_traced) = (*traced, *why_not_traced);
    let mut out = format!(
        "schedlat diagnose: {}, {} window\n\n",
        scope.describe(),
        fmt_ns(f.window_ns)
    );
    out.push_str("1. Was it runnable but waiting for a CPU?\n");
    match waiting {
        Waiting::Negligible { evidence } => {
            let _ = writeln!(out, "   {evidence}");
            out.push_str("   -> no: waiting is negligible. This is not a scheduling problem: look at I/O wait, lock contention, or the work itself.\n");
        }
        Waiting::Significant { evidence } => {
            let _ = writeln!(out, "   {evidence}");
            out.push_str("   -> yes: runnable-but-waiting time is significant.\n");
        }
        Waiting::Unknown { reason } => {
            let _ = writeln!(out, "   unknown: {reason}");
        }
    }
    out.push_str("\n2. Run-queue latency over the window (eBPF)\n");
    match (traced, why_not_traced) {
        (Some(t), _) => {
            let _ = writeln!(out, "   {} waits, hook {}", t.waits.count(), t.hook);
            if let Some(p) = &t.percentiles {
                let _ = writeln!(
                    out,
                    "   p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
                    fmt_ns(p.p50_ns),
                    fmt_ns(p.p90_ns),
                    fmt_ns(p.p99_ns),
                    fmt_ns(p.p999_ns),
                    p.max_ns.map_or("-".into(), fmt_ns)
                );
            }
            let _ = writeln!(out, "   shape: {}", t.shape.summary);
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "   {why}");
        }
        (None, None) => out.push_str("   not measured\n"),
    }
    out.push_str("\n3. Causes, strongest first\n");
    if causes.is_empty() {
        if matches!(waiting, Waiting::Significant { .. }) {
            out.push_str("   none of the known causes (quota throttling, CPU saturation, pinning) matched: look at which tasks ran instead\n");
        } else {
            out.push_str("   none\n");
        }
    }
    for c in causes {
        let _ = writeln!(
            out,
            "   - {}: {}\n     next: {}",
            c.name, c.evidence, c.next_step
        );
    }
    out.push_str("\n4. Self-check\n");
    match traced {
        Some(t) if f.schedstat_works && f.schedstat_wait_ns > 0 => {
            let _ = writeln!(
                out,
                "   eBPF measured {} of waits; the kernel's schedstat says {}: {:.0}%",
                fmt_ns(t.waits.sum_ns),
                fmt_ns(f.schedstat_wait_ns),
                t.waits.sum_ns as f64 / f.schedstat_wait_ns as f64 * 100.0
            );
            if f.system_scope {
                out.push_str("   (schedstat only covers threads alive at both ends of the window; eBPF also counts those that came and went)\n");
            }
        }
        Some(_) => out.push_str("   schedstat shows no waiting to compare with\n"),
        None => out.push_str("   needs the eBPF measurement (root)\n"),
    }
    out
}

pub fn json(d: &Diagnosis) -> String {
    let Diagnosis {
        scope,
        findings: f,
        waiting,
        causes,
        traced,
        why_not_traced,
    } = d;
    let ebpf = traced.map(|t| {
        json!({
            "hook": t.hook, "count": t.waits.count(), "sum_ns": t.waits.sum_ns,
            "percentiles": t.percentiles, "shape": t.shape,
            "schedstat_ratio": (f.schedstat_wait_ns > 0)
                .then(|| t.waits.sum_ns as f64 / f.schedstat_wait_ns as f64),
        })
    });
    let object = json!({
        "schema": "schedlat.diagnose.v1",
        "scope": scope.describe(),
        "findings": f,
        "waiting": waiting,
        "causes": causes,
        "ebpf": ebpf,
        "ebpf_unavailable": why_not_traced,
    });
    format!("{object}\n")
}
