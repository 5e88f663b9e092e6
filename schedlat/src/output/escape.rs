//! Names from the kernel as text output shows them. A task names itself
//! (prctl PR_SET_NAME, /proc/PID/comm) and anyone who may create a cgroup
//! names it, so both can hold bytes a terminal acts on: ESC sequences that
//! clear root's screen, hide a row (`ESC[8m`) or move the cursor, newlines
//! that forge a line of output. Every text renderer shows them through
//! [`printable`], which replaces each such character with `?`, as ps and top
//! do (procps' escape_str). `--json` keeps the exact name (JSON escapes
//! control characters itself), and so do Prometheus labels (the exposition
//! format escapes `\`, `"` and newlines; a label must equal the name other
//! exporters give the same cgroup or process for joins to work).

use std::{borrow::Cow, collections::HashSet};

use schedlat_common::victims::TaskInfo;

use crate::analysis::task;

/// Whether a terminal or a text viewer would act on `c` rather than show
/// it: the C0 and C1 controls and DEL (ps's set), and beyond ps the
/// bidirectional overrides and isolates, which reorder what follows them
/// on the line (a name could make the next column read backwards), and the
/// Unicode line and paragraph separators.
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
                | '\u{2028}' | '\u{2029}'
        )
}

/// `name` with every character a terminal would act on replaced by `?`;
/// borrowed, without a copy, when there is none (the usual case).
pub(crate) fn printable(name: &str) -> Cow<'_, str> {
    if !name.chars().any(acts) {
        return Cow::Borrowed(name);
    }
    Cow::Owned(
        name.chars()
            .map(|c| if acts(c) { '?' } else { c })
            .collect(),
    )
}

/// A task's name, for text output.
pub(crate) fn comm(t: &TaskInfo) -> String {
    printable(&task::comm(t)).into_owned()
}

/// `name pid/tid`, for text output (analysis::task::short).
pub(crate) fn short(t: &TaskInfo) -> String {
    printable(&task::short(t)).into_owned()
}

/// A culprit as text output names it (analysis::task::culprit).
pub(crate) fn culprit(t: &TaskInfo, victim_pid: u32, throttled: &HashSet<u32>) -> String {
    printable(&task::culprit(t, victim_pid, throttled)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_question_marks_and_the_rest_is_kept() {
        // The probes' names: a screen clear, a hidden row, a forged line.
        assert_eq!(printable("\x1b[2J\x1b[Hx"), "?[2J?[Hx");
        assert_eq!(printable("a\x1b[8m"), "a?[8m");
        assert_eq!(printable("x\nFAKE 1 waits"), "x?FAKE 1 waits");
        assert_eq!(printable("tab\there\r\x7f\u{9b}"), "tab?here???");
        assert_eq!(printable("a\u{202e}b\u{2066}c\u{2028}"), "a?b?c?");
        // Names a user would pick are untouched and not copied.
        for name in [
            "kworker/0:1H-events",
            "système",
            "/sys/fs/cgroup/a b",
            "日本",
        ] {
            assert!(matches!(printable(name), Cow::Borrowed(n) if n == name));
        }
    }
}
