//! Reading an exposition in the tests: its samples, and `promtool check
//! metrics` on it.

use std::process::Command;

use super::prometheus::PROMTOOL;

/// The value of an unlabelled sample line `name value` in an exposition.
pub(crate) fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The labelled samples `name{labels} value` of an exposition, as
/// (labels, value); `labels` is the text between the braces.
pub(crate) fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `promtool check metrics` (lint included) passes on `body`.
pub(crate) fn promtool_check(body: &str) {
    let mut promtool = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; `cargo xtask setup` installs it)");
    {
        use std::io::Write;
        let mut stdin = promtool.stdin.take().unwrap();
        stdin.write_all(body.as_bytes()).unwrap();
    }
    let checked = promtool.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(
        checked.status.success() && report.trim().is_empty(),
        "promtool check metrics: {}\n{report}\n{body}",
        checked.status,
    );
}
