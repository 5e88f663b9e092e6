//! Exemplars (`serve --exemplars`): on each latency histogram series, the
//! buckets that counted a slow wait point to the latest such wait's task
//! (collect/exemplar_waits.rs), so that a dashboard goes from a tail
//! bucket to a thread: labels `pid`, `tid`, `comm`, and on the
//! whole-system series the task's `cgroup` (a per-cgroup series names its
//! own); the value is the wait in seconds, the timestamp when it ended.
//! OpenMetrics text and protobuf carry them, the classic text format not.
//!
//! A name (comm, cgroup path) that would need escaping in the exposition
//! (a `"`, `\` or newline) is left out of the exemplar, never altered:
//! any local user names their tasks and their own cgroups, and Python's
//! prometheus_client rejects a whole OpenMetrics body over one escaped
//! quote in an exemplar. The TID stays the link to the task.

use super::model::{Exemplar, Labels};
use crate::collect::exemplar_waits::{BucketWaits, ExemplarWaits, TaskCgroup, Wait};

/// OpenMetrics' bound on an exemplar's label set: names and values
/// together, in characters. Prometheus refuses a longer one.
const MAX_LABEL_CHARS: usize = 128;

/// The whole-system series' exemplars, oldest first.
pub(crate) fn total(waits: &ExemplarWaits) -> Vec<Exemplar> {
    of(waits.total(), true)
}

/// A key's series' exemplars, oldest first.
pub(crate) fn key(waits: &ExemplarWaits, key: u64) -> Vec<Exemplar> {
    waits.key(key).map_or_else(Vec::new, |b| of(b, false))
}

/// Oldest first, as Prometheus appends a series' exemplars.
fn of(buckets: &BucketWaits, cgroup: bool) -> Vec<Exemplar> {
    let mut out: Vec<Exemplar> = buckets.values().map(|w| exemplar(w, cgroup)).collect();
    out.sort_by_key(|e| e.unix_ns);
    out
}

/// The exemplar of a wait; with `cgroup`, its task's cgroup path too, cut
/// from the front to fit the bound (a path's end names the container or
/// unit).
fn exemplar(wait: &Wait, cgroup: bool) -> Exemplar {
    let mut labels: Labels = vec![("pid", wait.pid.to_string()), ("tid", wait.tid.to_string())];
    if plain(&wait.comm) {
        labels.push(("comm", wait.comm.clone()));
    }
    if let (true, TaskCgroup::Path(path)) = (cgroup, &wait.cgroup)
        && plain(path)
    {
        let used: usize = (labels.iter())
            .map(|(name, value)| name.len() + value.chars().count())
            .sum();
        let room = MAX_LABEL_CHARS.saturating_sub(used + "cgroup".len());
        if let Some(path) = tail(path, room) {
            labels.push(("cgroup", path));
        }
    }
    Exemplar {
        labels,
        wait_ns: wait.wait_ns,
        unix_ns: wait.unix_ns,
    }
}

/// Whether `name` is written as it is in a label value: nothing in it
/// needs the exposition's escapes.
fn plain(name: &str) -> bool {
    !name.contains(['"', '\\', '\n'])
}

/// `path` in at most `room` characters: whole, or its end after "…".
fn tail(path: &str, room: usize) -> Option<String> {
    let chars = path.chars().count();
    if chars <= room {
        return Some(path.to_string());
    }
    (room >= 2).then(|| {
        let kept: String = path.chars().skip(chars - (room - 1)).collect();
        format!("…{kept}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(comm: &str, cgroup: Option<&str>) -> Wait {
        Wait {
            wait_ns: 3_000_000,
            unix_ns: 1_700_000_000_123_456_789,
            pid: 4_194_304,
            tid: 4_194_303,
            comm: comm.into(),
            cgroup: cgroup.map_or(TaskCgroup::Unknown, |p| TaskCgroup::Path(p.into())),
        }
    }

    fn chars(labels: &Labels) -> usize {
        labels
            .iter()
            .map(|(n, v)| n.len() + v.chars().count())
            .sum()
    }

    #[test]
    fn the_total_names_the_cgroup_and_a_key_does_not() {
        let e = exemplar(&wait("web", Some("/system.slice/nginx.service")), true);
        assert_eq!(
            e.labels,
            vec![
                ("pid", "4194304".to_string()),
                ("tid", "4194303".to_string()),
                ("comm", "web".to_string()),
                ("cgroup", "/system.slice/nginx.service".to_string()),
            ]
        );
        assert_eq!(
            (e.wait_ns, e.unix_ns),
            (3_000_000, 1_700_000_000_123_456_789)
        );
        let e = exemplar(&wait("web", Some("/system.slice/nginx.service")), false);
        assert!(e.labels.iter().all(|(n, _)| *n != "cgroup"));
    }

    /// A kubelet's cgroup paths run to 150 characters and more; the
    /// exemplar keeps their end (the container) within the bound.
    #[test]
    fn a_long_path_is_cut_from_the_front_to_the_bound() {
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope",
            "0123abcd_4567_89ef_0123_456789abcdef",
            "f".repeat(64)
        );
        let e = exemplar(&wait("fifteen-chars-x", Some(&path)), true);
        assert_eq!(chars(&e.labels), MAX_LABEL_CHARS);
        let cut = &e.labels[3].1;
        assert!(
            cut.starts_with('…') && path.ends_with(&cut[cut.len() - 60..]),
            "{cut}"
        );
        // No room at all: no cgroup label rather than a useless one.
        assert_eq!(tail(&path, 1), None);
        assert_eq!(tail("/a", 2).as_deref(), Some("/a"));
    }

    /// Issue 48, 16: a task named with a quote put `\"` in an exemplar,
    /// and Python's prometheus_client refused the whole body. Such a name
    /// is left out (never altered); the pid and tid stay.
    #[test]
    fn names_that_need_escaping_are_left_out() {
        for (comm, path) in [("a\"b", "/x\"y"), ("a\\b", "/x\\y"), ("a\nb", "/x\ny")] {
            let e = exemplar(&wait(comm, Some(path)), true);
            let names: Vec<&str> = e.labels.iter().map(|(n, _)| *n).collect();
            assert_eq!(names, ["pid", "tid"], "{comm:?}");
        }
        let e = exemplar(&wait("a'b c", Some("/x'y z")), true);
        assert_eq!(e.labels[2], ("comm", "a'b c".to_string()));
        assert_eq!(e.labels[3], ("cgroup", "/x'y z".to_string()));
    }
}
