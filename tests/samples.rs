//! Root: the README's samples of output have the form of what the program
//! prints today: the same lines, in the same order, on the same stream
//! (`common/form.rs` says how a sample is marked and compared). Each is
//! checked against a real run of its command, on a sleeper thread of this
//! process sharing its CPU with three CPU hogs, so a line added, removed or
//! moved to another stream fails here instead of drifting in the docs.

use crate::common;
#[path = "common/form.rs"]
mod form;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use common::{SCHEDLAT, http, require_root, serve::Server, workload};
use form::Sample;

/// Every sample name the tests below check.
const CHECKED: [&str; 12] = [
    "first-run",
    "first-run-verbose",
    "causes",
    "causes-tail",
    "waking",
    "histogram-p",
    "victims",
    "victims-trimmed",
    "slow",
    "slow-trimmed",
    "metrics",
    "diagnose",
];

/// The checked samples of README.md and docs/*.md, by name.
fn marked_samples() -> BTreeMap<String, Vec<Sample>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut samples: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for sample in form::samples(&text) {
            samples.entry(sample.name.clone()).or_default().push(sample);
        }
    }
    samples
}

/// Issue 45: the README is a front door of at most 500 lines, and every
/// page of docs/ it links to exists (no root needed).
#[test]
fn the_readme_is_short_and_its_index_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 500, "README.md has {lines} lines, more than 500");
    let mut linked = 0;
    for (i, _) in readme.match_indices("](docs/") {
        let target = &readme[i + 2..];
        let end = target.find([')', '#']).unwrap();
        let page = &target[..end];
        assert!(
            root.join(page).is_file(),
            "README links to {page}, which is missing"
        );
        linked += 1;
    }
    for page in [
        "docs/guide.md",
        "docs/prometheus.md",
        "docs/performance.md",
        "docs/deploy.md",
    ] {
        assert!(
            readme.contains(&format!("[{page}]({page})")),
            "README's index does not list {page}"
        );
    }
    assert!(linked >= 10, "only {linked} links to docs/ in the README");
}

/// No sample is marked that no test checks, and each name checked is
/// marked somewhere (no root needed).
#[test]
fn every_marked_sample_is_checked() {
    let samples = marked_samples();
    for name in samples.keys() {
        assert!(
            CHECKED.contains(&name.as_str()),
            "sample `{name}` is marked but no test checks it"
        );
    }
    for name in CHECKED {
        assert!(
            samples.contains_key(name),
            "no page has a sample marked `{name}`"
        );
    }
}

/// A 1 ms sleeper thread pinned beside three hogs, until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    sleeper: Option<thread::JoinHandle<()>>,
    _hogs: workload::Hogs,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// One load at a time: the tests share the CPU, and the hogs' name.
static ONE_LOAD: Mutex<()> = Mutex::new(());

impl Load {
    fn start() -> Load {
        let turn = ONE_LOAD.lock().unwrap_or_else(|e| e.into_inner());
        let cpu = workload::workload_cpu();
        let hogs = workload::Hogs::start_named(cpu, 3, "schedlat-hog");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sleeper = thread::spawn(move || {
            workload::pin_current_thread(cpu);
            while !flag.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
            }
        });
        Load {
            stop,
            sleeper: Some(sleeper),
            _hogs: hogs,
            _turn: turn,
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.sleeper.take() {
            let _ = s.join();
        }
    }
}

/// What a run printed, line by line, per stream.
struct Printed {
    stdout: Vec<String>,
    stderr: Vec<String>,
}

/// Runs `schedlat ARGS`; with `interrupt`, sends SIGINT that long after
/// the first stdout line (the banner or a header), else waits for its end.
fn run(args: &[&str], interrupt: Option<Duration>) -> Printed {
    let mut child = Command::new(SCHEDLAT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("schedlat runs");
    let collect = |stream: Box<dyn std::io::Read + Send>| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let into = lines.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                into.lock().unwrap().push(line);
            }
        });
        (lines, reader)
    };
    let (stdout, out_reader) = collect(Box::new(child.stdout.take().unwrap()));
    let (stderr, err_reader) = collect(Box::new(child.stderr.take().unwrap()));
    if let Some(after) = interrupt {
        let deadline = Instant::now() + Duration::from_secs(30);
        while stdout.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "{args:?}: nothing on stdout");
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(after);
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let status = child.wait().unwrap();
    out_reader.join().unwrap();
    err_reader.join().unwrap();
    let printed = Printed {
        stdout: stdout.lock().unwrap().clone(),
        stderr: stderr.lock().unwrap().clone(),
    };
    assert!(
        status.success(),
        "{args:?}: {status}\n{}",
        printed.stderr.join("\n")
    );
    printed
}

fn check(samples: &BTreeMap<String, Vec<Sample>>, name: &str, printed: &Printed) {
    let marked = samples
        .get(name)
        .unwrap_or_else(|| panic!("no page has a sample marked `{name}`"));
    for sample in marked {
        form::check(sample, &printed.stdout, &printed.stderr, form::kind);
    }
}

/// Issue 28: the first run, `-p`, the causes lines, `--waking`, victims and
/// slow, as the README and docs show them (before: the banner was said to go to stderr, the
/// first run lacked the three `causes:` lines and the base-slice notice).
#[test]
fn the_readmes_samples_have_the_programs_form() {
    if !require_root() {
        return;
    }
    let samples = marked_samples();
    let _load = Load::start();
    let me = std::process::id().to_string();

    // The README's first run is the default (the sentences); the guide's
    // and the causes' excerpts are `-v`'s tables.
    check(&samples, "first-run", &run(&["2", "1"], None));
    let verbose = run(&["-v", "-T", "2", "1"], None);
    check(&samples, "first-run-verbose", &verbose);
    check(&samples, "causes", &verbose);
    check(&samples, "causes-tail", &verbose);
    check(
        &samples,
        "waking",
        &run(&["-v", "--waking", "2", "1"], None),
    );
    check(
        &samples,
        "histogram-p",
        &run(&["-v", "-p", &me, "2", "1"], None),
    );
    let victims = run(&["victims", "-p", &me, "--top", "3", "2", "1"], None);
    check(&samples, "victims", &victims);
    check(&samples, "victims-trimmed", &victims);
    let slow = run(&["slow", "1000", "-p", &me], Some(Duration::from_secs(2)));
    check(&samples, "slow", &slow);
    check(&samples, "slow-trimmed", &slow);
    let diagnose = run(&["diagnose", "-p", &me, "-d", "2"], None);
    check_diagnose(&samples, &diagnose);
}

/// `diagnose`'s report against the README's by form: its steps and their
/// labelled lines, in order. What depends on the rest of the machine at the
/// time reads as one kind each: step 1's answer (yes on a quiet host; no
/// when foreign load on the CPU makes the sleeper's waits healthy, as the
/// README says), which causes are named (pinning on a quiet host,
/// saturation on a busy one, none after a no), which tasks fill the victims
/// and culprits tables, and which of the self-check's sentences applies.
fn check_diagnose(samples: &BTreeMap<String, Vec<Sample>>, printed: &Printed) {
    let marked = samples
        .get("diagnose")
        .expect("no page has a sample marked `diagnose`");
    for sample in marked {
        let sample = Sample {
            name: sample.name.clone(),
            cut: sample.cut,
            lines: diagnose_form(&sample.lines),
        };
        form::check(&sample, &diagnose_form(&printed.stdout), &[], form::kind);
    }
}

/// The lines of a `diagnose` report with its machine-dependent ones
/// replaced by their kind (`check_diagnose`).
fn diagnose_form(lines: &[String]) -> Vec<String> {
    let mut in_self_check = false;
    let mut in_causes = false;
    lines
        .iter()
        .map(|line| {
            let t = line.trim();
            in_self_check |= t.starts_with("4. Self-check");
            in_causes = (in_causes || t.starts_with("3. Causes")) && !in_self_check;
            let kind = if t.is_empty() || t == "..." || t.starts_with("4. Self-check") {
                None
            } else if in_self_check && !t.starts_with("eBPF measured") {
                Some("(a self-check sentence)")
            } else if t.starts_with("-> yes: ") || t.starts_with("-> no: ") {
                Some("(the answer)")
            } else if t.starts_with("- ") || t.starts_with("next: ") || in_causes && t == "none" {
                Some("(a named cause)")
            } else if is_task_row(t) {
                Some("(a task row)")
            } else {
                None
            };
            kind.map_or_else(|| line.clone(), str::to_string)
        })
        .collect()
}

/// A victims or culprits row: `NAME TID/PID (POLICY NICE): ...`, the name
/// possibly with spaces.
fn is_task_row(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).any(|w| {
        w[1].starts_with('(')
            && w[0].split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
            })
    })
}

/// Issue 28: the `/metrics` sample's lines exist, in that order, and every
/// family of docs/prometheus.md's table has the type the exposition gives it
/// (`schedlat_info` was said to be an info; in the text format it is a
/// gauge).
#[test]
fn the_readmes_metrics_sample_and_table_are_the_exposition() {
    if !require_root() {
        return;
    }
    let samples = marked_samples();
    let _load = Load::start();
    let server = Server::start(&[]);
    thread::sleep(Duration::from_millis(500));
    let text = http::get(server.addr, "/metrics", Some("text/plain"))
        .expect("scrape")
        .body;
    let status = server.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let lines: Vec<String> = text.lines().map(String::from).collect();
    for sample in &samples["metrics"] {
        form::check(sample, &lines, &[], form::metric_kind);
    }

    // The table's rows: `| `name{labels}` | type | meaning |`.
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/prometheus.md"),
    )
    .unwrap();
    let types = |exposition: &str| -> BTreeMap<String, String> {
        exposition
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    };
    let text_types = types(&text);
    let mut checked = 0;
    for row in readme.lines().filter(|l| l.starts_with("| `schedlat_")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let documented = cells[1].trim();
        for name in cells[0]
            .trim_start_matches("| ")
            .split(", ")
            .map(|n| n.trim_matches('`'))
            .map(|n| n.split('{').next().unwrap_or(n))
        {
            // The text format's name: counters end in _total.
            let family = name.strip_suffix("_total").unwrap_or(name);
            let Some(real) = text_types.get(name).or_else(|| text_types.get(family)) else {
                continue;
            };
            checked += 1;
            // The column gives the text format's type; a note may add
            // what OpenMetrics calls it.
            assert_eq!(
                documented.split_whitespace().next(),
                Some(real.as_str()),
                "docs/prometheus.md says `{name}` is `{documented}`; the text format says {real}"
            );
        }
    }
    assert!(
        checked >= 5,
        "only {checked} documented families found in a plain scrape"
    );
}
