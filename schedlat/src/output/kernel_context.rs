//! The kernel's context under a report (docs/decision.md): what the
//! scheduler was configured to do, and the waits its design does not
//! explain (longer than one slice plus one tick). Text lines and the JSON
//! `kernel` object (docs/json.md).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::{
    analysis::{fmt_ns, shape::slow_waits},
    histogram::Waits,
    sys::sched_context::SchedContext,
};

/// Four lines: `kernel: ...`, the features, the mechanisms of 6.12 and
/// later (sched_ext, the fair deadline server, delayed dequeue), and the
/// design bound.
pub(crate) fn text(c: &SchedContext, waits: &Waits) -> String {
    let mut out = String::new();
    let hz =
        c.hz.map_or("HZ unknown".to_string(), |hz| format!("HZ {hz}"));
    let preemption = c
        .preemption
        .as_ref()
        .map_or("preemption unknown".to_string(), |p| {
            format!("preemption {} ({})", p.model, p.source)
        });
    let slice = &c.base_slice;
    let _ = writeln!(
        out,
        "kernel: {}, {} CPUs, {hz}, {preemption}, base slice {} ({})",
        c.release,
        c.cpus,
        fmt_ns(slice.ns),
        slice.source
    );
    let known: Vec<String> = c
        .features
        .iter()
        .filter_map(|(name, on)| {
            on.map(|on| {
                if on {
                    name.clone()
                } else {
                    format!("NO_{name}")
                }
            })
        })
        .collect();
    let unknown: Vec<&str> = c
        .features
        .iter()
        .filter(|(_, on)| on.is_none())
        .map(|(name, _)| name.as_str())
        .collect();
    let mut features = known.join(" ");
    if !unknown.is_empty() {
        if !features.is_empty() {
            features.push_str("; ");
        }
        let why = c
            .features_unknown
            .as_deref()
            .map_or(String::new(), |why| format!(" ({why})"));
        let _ = write!(features, "{} unknown{why}", unknown.join(" "));
    }
    let _ = writeln!(out, "  features: {features}");
    let _ = writeln!(out, "  scheduler: {}", c.mechanisms.summary());
    match c.design_bound_ns() {
        Some(bound) => {
            let total = waits.count();
            let beyond = slow_waits(waits, bound);
            let _ = write!(
                out,
                "  design bound {} (base slice + one tick): ",
                fmt_ns(bound)
            );
            if beyond == 0 {
                let _ = writeln!(out, "no wait beyond it");
            } else {
                let _ = writeln!(
                    out,
                    "{beyond} of {total} waits ({:.1}%) beyond it, not explained by the design",
                    beyond as f64 * 100.0 / total.max(1) as f64
                );
            }
        }
        None => {
            let _ = writeln!(
                out,
                "  design bound unknown: needs the live base slice and HZ"
            );
        }
    }
    out
}

/// The `kernel` object of a JSON interval.
pub(crate) fn json(c: &SchedContext, waits: &Waits) -> Value {
    let features: serde_json::Map<String, Value> = c
        .features
        .iter()
        .map(|(name, on)| (name.clone(), json!(on)))
        .collect();
    let bound = c.design_bound_ns();
    json!({
        "release": c.release,
        "cpus": c.cpus,
        "hz": c.hz,
        "tick_ns": c.tick_ns(),
        "preemption": c.preemption,
        "base_slice": {
            "ns": c.base_slice.ns,
            "source": c.base_slice.source,
            "live": c.base_slice.is_live(),
        },
        "features": features,
        "features_unknown": c.features_unknown,
        "mechanisms": c.mechanisms,
        "design_bound_ns": bound,
        "beyond_design_bound": bound.map(|b| slow_waits(waits, b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::shape::tests::waits,
        sys::{sched_context::Preemption, sched_mechanisms::Mechanisms, slice::Slice},
    };

    /// This project's 6.18 VM as schedlat reads it (lockdown refuses
    /// debugfs).
    fn vm() -> SchedContext {
        SchedContext {
            release: "6.18.44".into(),
            cpus: 2,
            hz: Some(250),
            preemption: Some(Preemption {
                model: "none".into(),
                source: "PREEMPT_DYNAMIC default".into(),
            }),
            base_slice: Slice::fixed(1_400_000, "se.slice in /proc/self/sched"),
            features: crate::sys::sched_context::FEATURES
                .iter()
                .map(|f| (f.to_string(), None))
                .collect(),
            features_unknown: Some(
                "/sys/kernel/debug/sched/features: Operation not permitted".into(),
            ),
            mechanisms: Mechanisms {
                fair_server_unknown: Some("debugfs is not mounted".into()),
                ..Mechanisms::default()
            },
        }
    }

    /// The worker case's shape: 686 fast waits, 900 of 2-16 ms, of which
    /// those over slice + tick (5.4 ms) are flagged.
    #[test]
    fn waits_beyond_slice_plus_tick_are_flagged() {
        let w = waits(&[(10_000, 686), (3_000_000, 500), (8_000_000, 400)]);
        let text = text(&vm(), &w);
        assert!(
            text.starts_with("kernel: 6.18.44, 2 CPUs, HZ 250, preemption none"),
            "{text}"
        );
        assert!(text.contains("base slice 1.40 ms (se.slice"), "{text}");
        assert!(
            text.contains(
                "RUN_TO_PARITY PREEMPT_SHORT NEXT_BUDDY PLACE_LAG unknown (/sys/kernel/debug"
            ),
            "{text}"
        );
        assert!(
            text.contains("design bound 5.40 ms (base slice + one tick): 400 of 1586 waits (25.2%) beyond it, not explained by the design"),
            "{text}"
        );
        let j = json(&vm(), &w);
        assert_eq!(j["design_bound_ns"], 5_400_000);
        assert_eq!(j["beyond_design_bound"], 400);
        assert_eq!(j["base_slice"]["live"], true);
        assert_eq!(j["features"]["RUN_TO_PARITY"], Value::Null);
        assert_eq!(j["preemption"]["model"], "none");
    }

    #[test]
    fn an_assumed_slice_gives_no_bound() {
        let mut c = vm();
        c.base_slice.not_live = Some("lockdown".into());
        c.features[0].1 = Some(true);
        c.features[2].1 = Some(false);
        let text = text(&c, &waits(&[(10_000, 300)]));
        assert!(
            text.contains("features: RUN_TO_PARITY NO_NEXT_BUDDY; PREEMPT_SHORT PLACE_LAG unknown"),
            "{text}"
        );
        assert!(text.contains("design bound unknown"), "{text}");
        assert_eq!(json(&c, &waits(&[]))["beyond_design_bound"], Value::Null);
    }
}
