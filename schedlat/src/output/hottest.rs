//! What the holders a report names were running (analysis/hottest.rs): a
//! line of evidence under each holder (diagnose's report, victims' culprit
//! rows), and in JSON each holder's object and the `stacks` object's
//! counts.

use serde_json::json;

use crate::{
    analysis::{
        fmt_ns,
        holder::NamedHolder,
        hottest::{Hottest, Window},
        task::TaskJson,
    },
    output::escape,
    sys::cgroup_of::Which,
};

/// Frames a text line quotes: the innermost, where the holder was, which
/// a reader looks for first (a folded stack lists its callers before it,
/// so a cut line keeps its end).
const QUOTED_FRAMES: usize = 6;

/// "hottest stack behind NAME (61% of 4.20 s of waits over 1.00 ms, 37
/// waits): …;main;compress"; a cgroup's says which of its tasks ran it.
/// None when no slow wait with a stack ended behind the holder.
pub(crate) fn line(window: &Window, holder: &NamedHolder) -> Option<String> {
    let h = window.behind(holder)?;
    let (name, task) = match holder {
        NamedHolder::Task(t) => (escape::short(t), String::new()),
        NamedHolder::Cgroup { name, .. } => (
            escape::printable(name).into_owned(),
            format!("in {}: ", escape::printable(&h.comm)),
        ),
    };
    Some(format!(
        "hottest stack behind {name} ({:.0}% of {} of waits over {}, {} waits): {task}{}",
        h.share() * 100.0,
        fmt_ns(h.wait_ns),
        fmt_ns(window.threshold_ns),
        h.waits,
        escape::printable(&innermost(&h.stack))
    ))
}

/// The innermost QUOTED_FRAMES frames of a folded stack, with `…;` before
/// them when it had more.
fn innermost(stack: &str) -> String {
    if stack.is_empty() {
        return "(no frame named)".to_string();
    }
    let frames: Vec<&str> = stack.split(';').collect();
    match frames.len().checked_sub(QUOTED_FRAMES) {
        Some(cut) if cut > 0 => format!("…;{}", frames[cut..].join(";")),
        _ => stack.to_string(),
    }
}

/// The line that says what the stacks cover (diagnose's section 2, each
/// victims interval): how many slow waits, and how many lost; or why none
/// were taken.
pub(crate) fn summary(stacks: &Result<Window, String>) -> String {
    match stacks {
        Ok(w) => {
            let mut line = format!(
                "holder stacks: {} waits over {} read",
                w.events,
                fmt_ns(w.threshold_ns)
            );
            if w.lost > 0 {
                line.push_str(&format!(
                    ", {} lost (the ring buffer was full: the shares below leave them out)",
                    w.lost
                ));
            }
            line
        }
        Err(why) => format!("holder stacks: not taken: {}", escape::printable(why)),
    }
}

/// Diagnose's `stacks` object: what the stacks cover, and the hottest
/// stack behind each of `holders` that has one, the folded stack whole.
pub(crate) fn json(w: &Window, holders: &[NamedHolder]) -> serde_json::Value {
    let behind: Vec<serde_json::Value> = (holders.iter())
        .filter_map(|holder| Some(holder_json(holder, w.behind(holder)?)))
        .collect();
    let mut v = counts_json(w);
    v["holders"] = json!(behind);
    v
}

/// What the stacks cover: the threshold, the slow waits read, lost and
/// unfolded (a victims interval's `stacks` object, its holders on their
/// rows).
pub(crate) fn counts_json(w: &Window) -> serde_json::Value {
    json!({
        "threshold_ns": w.threshold_ns,
        "events": w.events,
        "lost": w.lost,
        "unfolded": w.unfolded,
    })
}

/// The hottest stack behind one holder: the folded stack whole, its wait
/// time and share, and who the holder is (a task, or a cgroup).
pub(crate) fn holder_json(holder: &NamedHolder, h: &Hottest) -> serde_json::Value {
    let mut v = json!({
        "folded": h.folded(),
        "stack_ns": h.stack_ns,
        "share": h.share(),
        "wait_ns": h.wait_ns,
        "waits": h.waits,
    });
    match holder {
        NamedHolder::Task(t) => v["task"] = json!(TaskJson::from(t)),
        NamedHolder::Cgroup {
            path,
            hierarchy,
            name,
        } => {
            v["cgroup"] = json!({
                "path": path,
                "hierarchy": match hierarchy {
                    Which::V1Cpu => "v1-cpu",
                    Which::V2 => "v2",
                    Which::Other => "v1-other",
                },
                "name": name,
            });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use schedlat_common::victims::SlowEvent;

    use super::*;
    use crate::{
        analysis::{hottest::Folding, task::tests::task},
        sys::{cgroup_of::TaskCgroups, procfs::parse_proc_cgroup},
    };

    /// A window of waits behind `holder`, each with a user stack of these
    /// frames (outermost first), in cgroup /batch.
    fn window(holder: schedlat_common::victims::TaskInfo, waits: &[(u64, &[&str])]) -> Window {
        let mut f = Folding::new(1_000_000);
        for (wait_ns, frames) in waits {
            let stacks = crate::analysis::stacks::fixtures::user_stacks(frames);
            let event = SlowEvent {
                wait_ns: *wait_ns,
                culprit: holder,
                ..SlowEvent::default()
            };
            f.add(&event, Some(stacks));
        }
        let cgroups = TaskCgroups {
            by_pid: [(holder.tgid, parse_proc_cgroup("0::/batch\n").ok())]
                .into_iter()
                .collect(),
            ..TaskCgroups::default()
        };
        f.end(3, &cgroups)
    }

    #[test]
    fn the_line_quotes_the_share_the_waits_and_the_innermost_frames() {
        let batch = task(70, 70, "batch-7", 0, 0, 0);
        let deep: &[&str] = &[
            "_start", "main", "run", "pool", "job", "compress", "block", "emit",
        ];
        let w = window(batch, &[(3_000_000, deep), (1_000_000, &["main", "read"])]);
        let line = line(&w, &NamedHolder::Task(batch)).unwrap();
        assert_eq!(
            line,
            "hottest stack behind batch-7 70/70 (75% of 4.00 ms of waits over 1.00 ms, 2 waits): …;run;pool;job;compress;block;emit"
        );
        let group = NamedHolder::Cgroup {
            path: "/batch".into(),
            hierarchy: Which::V2,
            name: "unit batch.service".into(),
        };
        let line = super::line(&w, &group).unwrap();
        assert!(
            line.starts_with("hottest stack behind unit batch.service (75% of")
                && line.ends_with("2 waits): in batch-7: …;run;pool;job;compress;block;emit"),
            "{line}"
        );
        // Who had no slow wait behind it gets no line.
        assert_eq!(
            super::line(&w, &NamedHolder::Task(task(71, 70, "idle-thread", 0, 0, 0))),
            None
        );
        let j = json(&w, &[NamedHolder::Task(batch), group]);
        assert_eq!(j["lost"], 3);
        assert_eq!(j["holders"][0]["task"]["tid"], 70);
        // JSON has the stack whole, as a folded file's line.
        assert_eq!(
            j["holders"][0]["folded"],
            "batch-7;_start;main;run;pool;job;compress;block;emit"
        );
        assert_eq!(j["holders"][1]["cgroup"]["hierarchy"], "v2");
        assert_eq!(j["holders"][1]["wait_ns"], 4_000_000);
    }

    #[test]
    fn a_comm_or_frame_cannot_forge_a_line() {
        let evil = task(72, 72, "x\x1b[2J", 0, 0, 0);
        let w = window(evil, &[(2_000_000, &["main", "f\nFAKE"])]);
        let line = line(&w, &NamedHolder::Task(evil)).unwrap();
        assert!(!line.contains('\x1b') && !line.contains('\n'), "{line}");
    }

    #[test]
    fn a_long_stack_keeps_its_innermost_frames() {
        assert_eq!(innermost("main;spin"), "main;spin");
        let six = "a;b;c;d;e;f";
        assert_eq!(innermost(six), six);
        assert_eq!(innermost("start;a;b;c;d;e;f"), "…;a;b;c;d;e;f");
        assert_eq!(innermost(""), "(no frame named)");
    }
}
