//! The form of a sample of output: which lines it has, in which order, on
//! which stream, whatever the numbers and names in them. The docs' samples
//! of real output are checked against a real run by their form, so a line
//! the program gained, lost or moved to another stream shows as a
//! difference, while another machine's numbers do not.
//!
//! A checked sample is a fenced block right after a marker line that names
//! it and says how it was cut:
//!
//! - `<!-- sample NAME: stderr N -->`: the whole output, its first N lines
//!   all of stderr, the rest all of stdout;
//! - `<!-- sample NAME: stdout -->`: all of stdout (stderr not shown);
//! - `<!-- sample NAME: excerpt -->`: some of stdout's lines, in order.
//!
//! In a whole sample a line `...` stands for any lines the sample leaves
//! out; runs of lines of one kind (histogram slots, table rows, events)
//! count as one, so a sample may show fewer of them than the run printed.

/// How a sample was cut from the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    Stderr(usize),
    Stdout,
    Excerpt,
}

/// A checked sample of a page.
#[derive(Debug)]
pub(crate) struct Sample {
    pub name: String,
    pub cut: Cut,
    pub lines: Vec<String>,
}

/// Every checked sample of `page`.
pub(crate) fn samples(page: &str) -> Vec<Sample> {
    let lines: Vec<&str> = page.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(spec) = line
            .trim()
            .strip_prefix("<!-- sample ")
            .and_then(|s| s.strip_suffix(" -->"))
        else {
            continue;
        };
        let (name, cut) = spec
            .split_once(": ")
            .unwrap_or_else(|| panic!("sample marker without `: CUT`: {line}"));
        let cut = match cut.split_whitespace().collect::<Vec<_>>()[..] {
            ["stderr", n] => Cut::Stderr(n.parse().unwrap_or_else(|_| panic!("{line}"))),
            ["stdout"] => Cut::Stdout,
            ["excerpt"] => Cut::Excerpt,
            _ => panic!("unknown cut in {line}"),
        };
        assert!(
            lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
            "{line} is not followed by a fenced block"
        );
        let body: Vec<String> = lines[i + 2..]
            .iter()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| l.to_string())
            .collect();
        out.push(Sample {
            name: name.to_string(),
            cut,
            lines: body,
        });
    }
    out
}

/// The kind of a line of text output: its leading words with every number
/// (times, PIDs, counts, percentages, ranges) as `#`; table rows (a number
/// first, and three or more bare numbers among the first eight words:
/// histogram slots, tasks, events) are all `row`; a `label:` line is its label; `...` (a cut) is
/// itself. Blank lines are "". A table's header and a line that names
/// every class (EVERY_CLASS) are all their words: a column or a class the
/// program gained shows, where three leading words would not.
pub(crate) fn kind(line: &str) -> String {
    let line = line.trim();
    if line.is_empty() || line == "..." {
        return line.to_string();
    }
    let masked = mask_numbers(line);
    let words: Vec<&str> = masked.split_whitespace().collect();
    if is_header(&words) || EVERY_CLASS.iter().any(|c| line.starts_with(c)) {
        return words.join(" ");
    }
    // A task's name may hold spaces and digits (rustc's `lto cgu.08`).
    if words[0] == "#" && words.iter().take(8).filter(|w| **w == "#").count() >= 3 {
        return "row".into();
    }
    if words[0].ends_with(':') && words[0] != "schedlat:" {
        return words[0].to_string();
    }
    words.iter().take(3).copied().collect::<Vec<_>>().join(" ")
}

/// Lines that name every class of their split whatever the load (a class
/// with no waits reads 0%), so the sample must name the same ones: how the
/// holder left the CPU.
const EVERY_CLASS: [&str; 1] = ["holder left: "];

/// A table's header: three or more words, each in capitals (`PRE%`,
/// `(LONGEST)`), as the victims, culprits and slow tables print them.
fn is_header(words: &[&str]) -> bool {
    words.len() >= 3
        && words.iter().all(|w| {
            w.bytes().any(|c| c.is_ascii_uppercase())
                && w.bytes()
                    .all(|c| c.is_ascii_uppercase() || matches!(c, b'%' | b'(' | b')'))
        })
}

/// The kind of a line of the Prometheus text formats: a sample is its
/// metric name and label names, a comment its first three words.
pub(crate) fn metric_kind(line: &str) -> String {
    let line = line.trim();
    if line.starts_with('#') {
        return line
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
    }
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    let labels: Vec<&str> = match rest.strip_prefix('{').and_then(|r| r.split_once('}')) {
        Some((labels, _)) => labels
            .split(',')
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect(),
        None => Vec::new(),
    };
    format!("{name}{{{}}}", labels.join(","))
}

/// `line` with each number (digits with `.,:/-` inside, an optional `<` or
/// `>` before and `%` after) replaced by `#`: `<0.1%` `13:28:44.4` `4276/4276`
/// `5-8` all read `#`.
fn mask_numbers(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit()
            || (matches!(chars[i], '<' | '>')
                && chars.get(i + 1).is_some_and(char::is_ascii_digit));
        if !starts {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        while i < chars.len() {
            let inside = matches!(chars[i], '.' | ',' | ':' | '/' | '-')
                && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if chars[i].is_ascii_digit() || inside {
                i += 1;
            } else {
                break;
            }
        }
        // An open-ended class (`queue depth 9+`, `3+` pass-overs) is a
        // number too: which class comes first depends on the load.
        if chars.get(i) == Some(&'+') {
            i += 1;
        }
        if chars.get(i) == Some(&'%') {
            i += 1;
        }
        // A duration's unit goes with its number (`p50 8.14 us` and `p50
        // 2.37 ms` are one form: the unit follows the load).
        for unit in [" ns", " us", " ms", " s"] {
            let end = i + unit.len();
            let next = chars.get(end).copied().unwrap_or(' ');
            if chars
                .get(i..end)
                .is_some_and(|w| w.iter().copied().eq(unit.chars()))
                && !next.is_alphanumeric()
            {
                i = end;
                break;
            }
        }
        out.push('#');
    }
    out
}

/// Kinds with runs of the same kind (and of blank lines) as one.
pub(crate) fn collapse(kinds: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in kinds {
        if out.last() != Some(&k) {
            out.push(k);
        }
    }
    out
}

/// Whether `real` has the form `doc` shows: equal, but for `...` in `doc`,
/// which stands for any number of real lines.
pub(crate) fn matches(doc: &[String], real: &[String]) -> bool {
    match doc.split_first() {
        None => real.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=real.len()).any(|skip| matches(rest, &real[skip..]))
        }
        Some((first, rest)) => real.first() == Some(first) && matches(rest, &real[1..]),
    }
}

/// Whether `doc` is a subsequence of `real`.
pub(crate) fn is_excerpt(doc: &[String], real: &[String]) -> bool {
    let mut real = real.iter();
    doc.iter().all(|d| real.any(|r| r == d))
}

/// Lines (by how they start, trimmed) the program prints only when the
/// run had what they describe, so that whether a run prints them depends
/// on the load: the decision block's `not asked:` line (the rule's
/// prediction) needs a wakeup the scheduler declined to act on. They are
/// left out of both forms; the renderers' unit tests check them.
pub(crate) const OPTIONAL: [&str; 1] = ["not asked: "];

/// Checks `sample` against a real run's stdout and stderr lines, with
/// `kind` for each line (OPTIONAL lines left out); panics with both
/// forms side by side when they differ.
pub(crate) fn check(
    sample: &Sample,
    stdout: &[String],
    stderr: &[String],
    kind: fn(&str) -> String,
) {
    let forms = |lines: &[String]| {
        collapse(
            lines
                .iter()
                .filter(|l| !OPTIONAL.iter().any(|o| l.trim_start().starts_with(o)))
                .map(|l| kind(l)),
        )
    };
    let show = |what: &str, doc: &[String], real: &[String]| {
        panic!(
            "sample `{}` ({what}) has not the program's form.\nthe doc's:\n  {}\nthe program's:\n  {}\n(the doc's lines:\n{})",
            sample.name,
            doc.join("\n  "),
            real.join("\n  "),
            sample.lines.join("\n")
        )
    };
    match sample.cut {
        Cut::Stderr(n) => {
            assert!(
                n <= sample.lines.len(),
                "{}: stderr {n} > its lines",
                sample.name
            );
            let (doc_err, doc_out) = sample.lines.split_at(n);
            let (doc_err, real_err) = (forms(doc_err), forms(stderr));
            if !matches(&doc_err, &real_err) {
                show("stderr", &doc_err, &real_err);
            }
            let (doc_out, real_out) = (forms(doc_out), forms(stdout));
            if !matches(&doc_out, &real_out) {
                show("stdout", &doc_out, &real_out);
            }
        }
        Cut::Stdout => {
            let (doc, real) = (forms(&sample.lines), forms(stdout));
            if !matches(&doc, &real) {
                show("stdout", &doc, &real);
            }
        }
        Cut::Excerpt => {
            // An excerpt may leave lines out anywhere: a `...` says so
            // again.
            let doc: Vec<String> = forms(&sample.lines)
                .into_iter()
                .filter(|k| k != "...")
                .collect();
            let real = forms(stdout);
            if !is_excerpt(&doc, &real) {
                show("an excerpt of stdout", &doc, &real);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind("schedlat: hook mode tp_btf"), "schedlat: hook mode");
        assert_eq!(kind("00:03:03"), "#");
        assert_eq!(kind("         0 -> 1          : 88       |**   |"), "row");
        assert_eq!(kind("total 5199 waits, mean 25.3 usecs"), "total # waits,");
        assert_eq!(kind("p50 6.80 us, p90 57.9 us, p99 139 us"), "p# #, p#");
        // Units and open-ended classes follow the load, not the form.
        assert_eq!(
            kind("p50 6.80 us, p90 57.9 us"),
            kind("p50 2.37 ms, p90 28.9 ms")
        );
        assert_eq!(kind("queue depth 9+: 83%"), kind("queue depth 3-4: 38%"));
        assert_eq!(kind("shape: healthy: p99 139 us"), "shape:");
        assert_eq!(
            kind("        migrated <0.1% of waits, p99 10.8 us;"),
            kind("        migrated 0% of waits; steal")
        );
        assert_eq!(kind("queue depth 5-8: 80%"), kind("queue depth 0: 88%"));
        assert_eq!(
            kind("    4276    4276 sleeper          normal 0        2181"),
            "row"
        );
        assert_eq!(kind("200 waits of at least 1.00 ms; lost 0"), "# waits of");
        assert_eq!(
            kind("   18190   18054 lto cgu.08       normal 0         12    20.1 ms"),
            "row"
        );
        assert_eq!(
            kind("13:28:44 victims over 5.01 s (tasks that"),
            "# victims over"
        );
        // A column or a holder class the program gained is a new form.
        let header = "     TID     PID COMM             SCHED  CPU PRE% MIG% GRNT%";
        assert_eq!(kind(header), "TID PID COMM SCHED CPU PRE% MIG% GRNT%");
        assert_ne!(kind(header), kind(&format!("{header} HOLDER LEFT")));
        assert_ne!(
            kind("  holder left: blocked 48%, preempted 21%, exited 0.5%"),
            kind("  holder left: blocked 48%, preempted 21%, exited 0.5%, idle 0%")
        );
        assert_eq!(
            kind("  holder left: blocked 48%, preempted <0.1%"),
            "holder left: blocked #, preempted #"
        );
        assert_eq!(
            metric_kind(r#"schedlat_info{hook="tp_btf",version="0.1.0"} 1"#),
            "schedlat_info{hook,version}"
        );
        assert_eq!(
            metric_kind("schedlat_scrapes_total 3"),
            "schedlat_scrapes_total{}"
        );
    }

    /// The decision block's `not asked:` line is optional: a run without
    /// it has the form of a sample with it, but every other line counts.
    #[test]
    fn optional_lines_may_be_absent() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let doc = v(&[
            "  holder left: blocked 18%, preempted 33%",
            "  not asked: the rule predicted 690 us mean, the wait was 12.5 ms",
            "kernel: 6.18",
        ]);
        let sample = Sample {
            name: "t".into(),
            cut: Cut::Stdout,
            lines: doc.clone(),
        };
        check(&sample, &v(&[&doc[0], &doc[2]]), &[], kind);
        check(&sample, &doc, &[], kind);
        let without_kernel = std::panic::catch_unwind(|| check(&sample, &doc[..2], &[], kind));
        assert!(without_kernel.is_err(), "a missing non-optional line fails");
    }

    #[test]
    fn cuts() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(matches(&v(&["a", "...", "d"]), &v(&["a", "b", "c", "d"])));
        assert!(matches(&v(&["a", "...", "d"]), &v(&["a", "d"])));
        assert!(!matches(&v(&["a", "d"]), &v(&["a", "b", "d"])));
        assert!(is_excerpt(&v(&["a", "c"]), &v(&["a", "b", "c"])));
        assert!(!is_excerpt(&v(&["c", "a"]), &v(&["a", "b", "c"])));
    }
}
