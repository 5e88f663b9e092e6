//! Every `schedlat ...` command line the documentation gives (the README,
//! docs/, the mixin's runbooks and alerts, deploy/) parses: a runbook an
//! on-call engineer pastes at 3 a.m. must not answer with a usage error
//! (`schedlat diagnose -c CGROUP 10` once did: the window is `-d 10`).
//! The commands are taken from code: fenced blocks' command lines (after
//! a `$ ` or `# ` prompt, `sudo`, `ExecStart=/usr/bin/`), and inline code
//! spans that start with `schedlat`, up to a pipe, a redirection or a
//! shell comment. Placeholders in capitals (PID, CGROUP) parse as the
//! values they stand for wherever the option takes any text; those of
//! typed options are given a value of their type below.

use std::{
    fs,
    path::{Path, PathBuf},
};

use clap::Parser;

use super::Cli;

/// A command line found, and where.
struct Found {
    file: String,
    line: usize,
    command: String,
}

/// The files that give commands, relative to the workspace root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "mixin", "mixin/alerts", "deploy", "packaging"] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = (entries.flatten())
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == "md" || e == "libsonnet" || e == "yaml")
            })
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

/// The command in `text` from its `schedlat` on: None when there is none
/// (the word in prose, or output such as `schedlat diagnose: watching`).
fn command_in(text: &str) -> Option<String> {
    let text = text.trim();
    let text = (text.strip_prefix("$ "))
        .or_else(|| text.strip_prefix("# "))
        .unwrap_or(text)
        .trim_start();
    let text = text.strip_prefix("sudo ").unwrap_or(text);
    let at = ["ExecStart=/usr/bin/", "ExecStartPre=/usr/bin/", "/usr/bin/"]
        .iter()
        .find_map(|p| text.find(p).map(|i| i + p.len()))
        .unwrap_or(0);
    let text = &text[at..];
    if at == 0 && !text.starts_with("schedlat") {
        return None;
    }
    let rest = text.strip_prefix("schedlat")?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    // Up to a pipe, a redirection, a command separator or a comment.
    let end = [" | ", " > ", " 2>", " && ", "; ", " # ", " &"]
        .iter()
        .filter_map(|s| text.find(s))
        .min()
        .unwrap_or(text.len());
    let command = text[..end].trim().trim_end_matches('\\').trim();
    // Output lines ("schedlat diagnose: watching ..."), elided ones, and
    // synopses (`schedlat victims [-p PID] [INTERVAL]`, `--cgroups | --pids`).
    let first = command.split_whitespace().nth(1).unwrap_or("");
    if first.ends_with(':') || ["...", "…", "[", "|"].iter().any(|s| command.contains(s)) {
        return None;
    }
    Some(command.to_string())
}

/// The inline code spans of a paragraph (its lines joined), with the line
/// each starts on.
fn spans(paragraph: &[(usize, &str)]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for &(line, text) in paragraph {
        for (i, part) in text.split('`').enumerate() {
            if i > 0 {
                match open.take() {
                    Some(span) => found.push(span),
                    None => open = Some((line, String::new())),
                }
            }
            if let Some((_, span)) = &mut open {
                if i == 0 && !span.is_empty() {
                    span.push(' ');
                }
                // A span broken over lines: the indentation is not in it.
                span.push_str(if i == 0 { part.trim_start() } else { part });
            }
        }
    }
    found
}

fn commands(file: &Path, root: &Path) -> Vec<Found> {
    let text = fs::read_to_string(file).unwrap_or_default();
    let name = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let mut found = Vec::new();
    let mut push = |line: usize, command: String| {
        found.push(Found {
            file: name.clone(),
            line,
            command,
        })
    };
    let markdown = file.extension().is_some_and(|e| e == "md");
    let mut fenced = false;
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).peekable();
    while let Some((n, line)) = lines.next() {
        if markdown && line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !markdown {
            // A command continued with `\` is one command.
            let mut whole = line.to_string();
            while whole.trim_end().ends_with('\\') {
                let Some((_, next)) = lines.next() else { break };
                whole = format!(
                    "{} {}",
                    whole.trim_end().trim_end_matches('\\'),
                    next.trim()
                );
            }
            if fenced {
                // Columns of output (`schedlat top  hook tp_btf  scope`)
                // are not a command.
                if let Some(c) = command_in(&whole).filter(|c| !c.contains("  ")) {
                    push(n, c);
                }
                continue;
            }
        }
        if line.trim().is_empty() {
            for (at, span) in spans(&paragraph) {
                if let Some(c) = command_in(&span) {
                    push(at, c);
                }
            }
            paragraph.clear();
        } else {
            paragraph.push((n, line));
        }
    }
    for (at, span) in spans(&paragraph) {
        if let Some(c) = command_in(&span) {
            push(at, c);
        }
    }
    found
}

/// Spans that start like a command and are not one.
const NOT_COMMANDS: &[&str] = &[
    // What a user types before pressing Tab (docs/development.md).
    "schedlat se",
];

/// Placeholders of typed options, as a value of their type.
fn filled(word: &str) -> &str {
    match word {
        "PID" | "TID" | "N" | "SECONDS" | "COUNT" | "INTERVAL" => "1",
        "BOUND" | "THRESHOLD" => "1ms",
        "DURATION" => "1",
        "CPU" | "CPUS" => "0",
        w => w,
    }
}

#[test]
fn every_documented_command_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found: Vec<Found> = (documents(&root).iter())
        .flat_map(|f| commands(f, &root))
        .collect();
    // The runbooks give the commands an alert's reader runs first.
    assert!(
        found
            .iter()
            .any(|f| f.file.contains("runbooks") && f.command.starts_with("schedlat diagnose")),
        "no diagnose command found in the runbooks"
    );
    let bad: Vec<String> = found
        .iter()
        .filter(|f| !NOT_COMMANDS.contains(&f.command.as_str()))
        .filter_map(|f| {
            let words = shlex::split(&f.command)?;
            let e = Cli::try_parse_from(words.iter().map(|w| filled(w))).err()?;
            let why = e.to_string();
            let why = why.lines().next().unwrap_or_default().to_string();
            // A command or an option named in prose (`schedlat compare`,
            // `schedlat slow --threshold`): not a line to run.
            let last = words.last().map_or("", String::as_str);
            let named = e.kind() == clap::error::ErrorKind::MissingRequiredArgument
                || (last.starts_with('-') && why.contains("a value is required"));
            (!named).then(|| format!("{}:{}: `{}`: {why}", f.file, f.line, f.command))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} documented commands do not parse:\n{}",
        bad.len(),
        found.len(),
        bad.join("\n")
    );
}

#[test]
fn commands_are_found_in_spans_fences_and_units_but_not_in_output() {
    assert_eq!(
        command_in("$ sudo schedlat diagnose -c web -d 10 | head").as_deref(),
        Some("schedlat diagnose -c web -d 10")
    );
    assert_eq!(
        command_in("ExecStart=/usr/bin/schedlat serve --cgroups").as_deref(),
        Some("schedlat serve --cgroups")
    );
    assert_eq!(command_in("schedlat diagnose: watching cgroup x"), None);
    assert_eq!(command_in("schedlat: error: no cgroup"), None);
    assert_eq!(command_in("schedlats"), None);
    let para = [(1, "run `schedlat diagnose -c"), (2, "CGROUP 10` then")];
    assert_eq!(
        spans(&para),
        [(1, "schedlat diagnose -c CGROUP 10".to_string())]
    );
    assert!(Cli::try_parse_from(["schedlat", "diagnose", "-c", "CGROUP", "10"]).is_err());
}
