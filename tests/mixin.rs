//! The monitoring mixin (mixin/): it renders with Debian's jsonnet to
//! exactly the checked-in files, its rules pass `promtool check rules` and
//! its rule tests (firing and not firing, per alert) pass with Prometheus
//! 2.x's and 3.x's promtool, and the dashboard is well formed and uses only
//! rules the mixin records. No root: nothing here loads eBPF.

mod common;

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use common::prometheus::{PROMTOOL, prometheus3_dir};

fn mixin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mixin")
}

/// Runs `program args` in `dir`; panics with its output unless it succeeds.
fn run_ok(program: &Path, args: &[&str], dir: &Path) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e})", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n{text}",
        program.display(),
        args.join(" "),
        out.status
    );
    text
}

#[test]
fn renders_to_the_checked_in_files() {
    let out = std::env::temp_dir().join(format!("schedlat-mixin-{}", std::process::id()));
    fs::create_dir_all(&out).unwrap();
    let listed = run_ok(
        Path::new("jsonnet"),
        &[
            "-J",
            ".",
            "-S",
            "-m",
            out.to_str().unwrap(),
            "render.jsonnet",
        ],
        &mixin_dir(),
    );
    let rendered: BTreeSet<String> = listed
        .lines()
        .map(|l| {
            Path::new(l)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let checked_in: BTreeSet<String> = fs::read_dir(mixin_dir().join("rendered"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        rendered, checked_in,
        "mixin/rendered/ holds other files than render.jsonnet writes"
    );
    for name in &rendered {
        let fresh = fs::read_to_string(out.join(name)).unwrap();
        let kept = fs::read_to_string(mixin_dir().join("rendered").join(name)).unwrap();
        assert!(
            fresh == kept,
            "mixin/rendered/{name} is not what the jsonnet renders: run `cd mixin && jsonnet -J . -S -m rendered render.jsonnet`"
        );
    }
    fs::remove_dir_all(&out).unwrap();
}

/// promtool 2.x (Debian 12's) and, where installed, 3.x.
fn promtools() -> Vec<PathBuf> {
    let mut tools = vec![PathBuf::from(PROMTOOL)];
    tools.extend(prometheus3_dir().map(|d| d.join("promtool")));
    tools
}

#[test]
fn rules_and_alerts_pass_promtool_check() {
    for promtool in promtools() {
        let report = run_ok(
            &promtool,
            &[
                "check",
                "rules",
                "rendered/rules.yaml",
                "rendered/alerts.yaml",
            ],
            &mixin_dir(),
        );
        assert!(report.contains("SUCCESS"), "{report}");
    }
}

/// tests/alerts.yaml (classic histograms) with both promtools, and
/// tests/native.yaml (native histograms) with 3.x, which alone can read
/// native series in a rule test.
#[test]
fn rule_tests_pass_with_prometheus_2_and_3() {
    let report = run_ok(
        Path::new(PROMTOOL),
        &["test", "rules", "tests/alerts.yaml"],
        &mixin_dir(),
    );
    assert!(report.contains("SUCCESS"), "{report}");
    let Some(dir) = prometheus3_dir() else {
        return;
    };
    let report = run_ok(
        &dir.join("promtool"),
        &["test", "rules", "tests/alerts.yaml", "tests/native.yaml"],
        &mixin_dir(),
    );
    assert_eq!(report.matches("SUCCESS").count(), 2, "{report}");
}

/// Every alert has a firing and a not-firing case: each appears in an
/// `alert_rule_test` with expected alerts and, for the same or another
/// workload, none (checked by promtool, which compares the whole list).
#[test]
fn every_alert_has_a_rule_test_and_a_runbook() {
    let alerts = fs::read_to_string(mixin_dir().join("rendered/alerts.yaml")).unwrap();
    let tests = fs::read_to_string(mixin_dir().join("tests/alerts.yaml")).unwrap();
    let runbooks = fs::read_to_string(mixin_dir().join("runbooks.md")).unwrap();
    let names: Vec<&str> = alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|n| n.trim_matches('"'))
        .collect();
    assert_eq!(names.len(), 5, "{alerts}");
    for name in names {
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{name} has no alert_rule_test in mixin/tests/alerts.yaml"
        );
        assert!(
            runbooks.contains(&format!("\n## {name}\n")),
            "{name} has no section in mixin/runbooks.md"
        );
        assert!(
            alerts.contains(&format!("runbooks.md#{}\"", name.to_lowercase())),
            "{name}'s runbook_url does not point at its section"
        );
    }
}

/// The dashboard: Grafana's JSON model with unique panel ids, panels inside
/// the 24-column grid, every query on the `${datasource}` variable, and
/// every recorded series it reads recorded by the mixin's rules.
#[test]
fn dashboard_is_well_formed_and_reads_recorded_series() {
    let text = fs::read_to_string(mixin_dir().join("rendered/schedlat.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rules = fs::read_to_string(mixin_dir().join("rendered/rules.yaml")).unwrap();
    let recorded: BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("record: "))
        .map(|n| n.trim_matches('"'))
        .collect();
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    let mut queries = 0;
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: duplicate id"
        );
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(x + w <= 24 && w > 0, "{title}: outside the grid: {grid}");
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            let expr = target["expr"].as_str().unwrap();
            queries += 1;
            for word in expr.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                if word.contains(':') && !word.chars().all(|c| c.is_ascii_digit() || c == ':') {
                    assert!(
                        recorded.contains(word),
                        "{title}: {word} is not recorded by the mixin's rules"
                    );
                }
            }
        }
    }
    assert!(queries >= 15, "{queries} queries");
}
