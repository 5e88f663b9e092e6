//! The kernel's context under a report (docs/decision.md): what the
//! scheduler was configured to do, and the waits its design does not
//! explain (longer than one slice plus one tick). Text lines and the JSON
//! `kernel` object (docs/json.md).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::{
    analysis::{fmt_ns, shape::slow_waits},
    histogram::Waits,
    sys::{sched_context, sched_context::SchedContext},
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
    let _ = writeln!(
        out,
        "  features: {}",
        features_text(c, sched_context::debugfs_allowed())
    );
    let _ = writeln!(out, "  scheduler: {}", c.mechanisms.summary());
    if let Some(ext) = super::verdict::decided_by_ext(c, waits) {
        let _ = writeln!(out, "  design bound: not EEVDF's here: {ext}");
        return out;
    }
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

/// The features read, `NO_` where off; those not read are said unknown
/// apart, with the reason, and a hint only where it works on this boot
/// (`allowed`: whether lockdown lets debugfs be read, and its mode).
fn features_text(c: &SchedContext, allowed: (Option<bool>, Option<String>)) -> String {
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
    if unknown.is_empty() {
        return known.join(" ");
    }
    let why = match c.features_unknown.as_deref() {
        Some(why) if why.starts_with("debugfs is not mounted") => match allowed {
            (Some(true), _) => {
                format!("debugfs is not mounted; as root: mount -t debugfs none {DEBUGFS}")
            }
            (Some(false), mode) => format!(
                "debugfs is not mounted, and kernel lockdown ({}) refuses it: not readable on this boot",
                mode.unwrap_or_default()
            ),
            (None, _) => format!(
                "debugfs is not mounted; as root, where kernel lockdown allows it: mount -t debugfs none {DEBUGFS}"
            ),
        },
        Some(why) => why.to_string(),
        None => "not in this kernel's list".to_string(),
    };
    if known.is_empty() {
        format!("unknown ({why})")
    } else {
        format!(
            "{}; not read: {} ({why})",
            known.join(" "),
            unknown.join(" ")
        )
    }
}

const DEBUGFS: &str = "/sys/kernel/debug";

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
    use crate::analysis::shape::tests::waits;

    fn vm() -> SchedContext {
        SchedContext::this_vm()
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
            text.contains("features: unknown (/sys/kernel/debug/sched/features: Operation"),
            "{text}"
        );
        // Issue 45: the names of features not read no longer lead the
        // line (they read as "on"), and the mount hint is given only where
        // lockdown lets it work.
        let mut unmounted = vm();
        unmounted.features_unknown =
            Some("debugfs is not mounted at /sys/kernel/debug: mount".into());
        assert_eq!(
            features_text(&unmounted, (Some(false), Some("integrity".into()))),
            "unknown (debugfs is not mounted, and kernel lockdown (integrity) refuses it: not readable on this boot)"
        );
        assert_eq!(
            features_text(&unmounted, (Some(true), Some("none".into()))),
            "unknown (debugfs is not mounted; as root: mount -t debugfs none /sys/kernel/debug)"
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
            text.contains(
                "features: RUN_TO_PARITY NO_NEXT_BUDDY; not read: PREEMPT_SHORT PLACE_LAG"
            ),
            "{text}"
        );
        assert!(text.contains("design bound unknown"), "{text}");
        assert_eq!(json(&c, &waits(&[]))["beyond_design_bound"], Value::Null);
    }
}
