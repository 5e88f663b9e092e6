//! The monitoring mixin (mixin/): it renders with Debian's jsonnet to
//! exactly the checked-in files, its rules pass `promtool check rules` and
//! its rule tests (firing and not firing, per alert) pass with Prometheus
//! 2.x's and 3.x's promtool, and the dashboard is well formed and uses only
//! rules the mixin records: no root. Then (root) the rules loaded into a
//! real Prometheus 2.x and 3.x scraping `schedlat serve --cgroups --pairs`
//! under a load: every rule evaluates without error, every dashboard query
//! answers without error, with data where schedlat exports its inputs, and
//! the neighbour ratio NoisyNeighbour reads names the cgroup whose task held
//! the CPU.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::Duration,
};

use common::{
    cgroup::{HOG, Procs, SLEEPER, TestCgroup, other_cpu, pinned_sh, v2_root},
    kube_node::KubeNode,
    prometheus::{PROMETHEUS, PROMTOOL, Prometheus, prometheus3_dir},
    require_root,
    serve::Server,
    workload::workload_cpu,
};

use crate::common;

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

/// The dashboard's queries, as (panel title, expression).
fn dashboard_queries() -> Vec<(String, String)> {
    let text = fs::read_to_string(mixin_dir().join("rendered/schedlat.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push((
                panel["title"].as_str().unwrap().to_string(),
                target["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// Series the mixin reads that this schedlat does not export (yet): the
/// queries on them must answer without error, and with no data. Any other
/// query must return data.
const NOT_EXPORTED: [&str; 0] = [];

fn reads_unexported(expr: &str) -> bool {
    NOT_EXPORTED
        .iter()
        .any(|m| m.split('|').any(|part| expr.contains(part)))
}

/// Every rule of `prometheus` evaluated without error (health "ok").
fn rules_healthy(prometheus: &Prometheus) -> Vec<String> {
    let data = prometheus.api("/api/v1/rules");
    let mut bad = Vec::new();
    let mut n = 0;
    for group in data["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            n += 1;
            if rule["health"] != "ok" {
                bad.push(format!(
                    "{}: {} {}",
                    rule["name"], rule["health"], rule["lastError"]
                ));
            }
        }
    }
    // Every rule of the rendered files loaded (41: 36 recording, 5 alerts).
    let rendered = ["rules.yaml", "alerts.yaml"]
        .iter()
        .map(|f| fs::read_to_string(mixin_dir().join("rendered").join(f)).unwrap())
        .flat_map(|text| {
            text.lines()
                .filter(|l| {
                    let l = l.trim_start().trim_start_matches("- ");
                    l.starts_with("record:") || l.starts_with("alert:")
                })
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .count();
    assert_eq!((n, rendered), (41, 41), "rules loaded: {data}");
    bad
}

/// The queries of one Prometheus: each answers (`api` checks `success`);
/// returns those without data.
fn empty_queries(prometheus: &Prometheus) -> Vec<String> {
    let mut empty = Vec::new();
    for (title, expr) in dashboard_queries() {
        let concrete = expr
            .replace("$__rate_interval", "10s")
            .replace("$job", ".+")
            .replace("$instance", ".+");
        if prometheus.query(&concrete, None).is_empty() {
            empty.push(format!("{title}: {expr}"));
        }
    }
    empty
}

/// The rules and the dashboard against a real Prometheus, 2.x (classic
/// buckets over OpenMetrics) and 3.x (native histograms over protobuf),
/// both scraping `serve --cgroups --pairs` every second on a node laid out
/// as the kubelet does (tests/common/kube_node.rs): pod jobs/batch-7's hog
/// and sleeper share a CPU with pod shop/web-1's sleeper, and cgroup B's
/// sleeper has a CPU of its own.
#[test]
fn rules_and_dashboard_queries_answer_from_a_real_prometheus() {
    if !require_root() {
        return;
    }
    let root = v2_root();
    let node = KubeNode::new(&root);
    let b = TestCgroup::new(&root, "mixin-b");
    // -c on the v2 root: the per-cgroup family keys by that hierarchy
    // (else by the cpu controller's, on a hybrid host).
    let server = Server::start(&["--cgroups", "--pairs", "-c", &root.to_string_lossy()]);
    let cpu = workload_cpu();
    let procs = Procs(vec![
        pinned_sh(cpu, HOG),
        pinned_sh(cpu, SLEEPER),
        pinned_sh(cpu, SLEEPER),
        pinned_sh(other_cpu(), SLEEPER),
    ]);
    let (batch, web) = (&node.batch, &node.web);
    batch.add(procs.0[0].id());
    batch.add(procs.0[1].id());
    web.add(procs.0[2].id());
    b.add(procs.0[3].id());
    let rules = [
        mixin_dir().join("rendered/rules.yaml"),
        mixin_dir().join("rendered/alerts.yaml"),
    ];
    let mut servers = vec![(
        "2.x",
        Prometheus::launch(Path::new(PROMETHEUS), server.addr, "1s", &[], &rules),
    )];
    if let Some(dir) = prometheus3_dir() {
        servers.push((
            "3.x",
            Prometheus::launch(
                &dir.join("prometheus"),
                server.addr,
                "1s",
                &["native-histograms"],
                &rules,
            ),
        ));
    }
    // A few scrapes and rule evaluations: rate() over the rules' 5 m window
    // needs two samples, a ratio of recorded series one evaluation more.
    thread::sleep(Duration::from_secs(12));
    for (version, prometheus) in &servers {
        let bad = rules_healthy(prometheus);
        assert!(
            bad.is_empty(),
            "Prometheus {version}: rules failing: {bad:#?}"
        );
        let empty = empty_queries(prometheus);
        // A Prometheus stores a histogram one way: 2.x (no native feature)
        // classic buckets only, 3.x with the feature native only.
        let other_format = |q: &str| match *version {
            "2.x" => q.starts_with("Wait distribution (native histogram)"),
            _ => q.starts_with("Wait distribution (classic buckets)"),
        };
        let unexpected: Vec<&String> = (empty.iter())
            .filter(|q| !reads_unexported(q) && !other_format(q))
            .collect();
        assert!(
            unexpected.is_empty(),
            "Prometheus {version}: dashboard queries without data: {unexpected:#?}\n(all empty: {empty:#?})\nlog:\n{}",
            prometheus.log()
        );
        let now_exported: Vec<String> = (dashboard_queries().into_iter())
            .filter(|(_, e)| reads_unexported(e))
            .map(|(t, e)| format!("{t}: {e}"))
            .filter(|q| !empty.contains(q))
            .collect();
        assert!(
            now_exported.is_empty(),
            "Prometheus {version}: these now have data: take them out of NOT_EXPORTED: {now_exported:#?}"
        );
        let (holder, share) = main_neighbour(prometheus, &web.cgroup);
        let named = |label: &str| holder[label].as_str().unwrap_or_default().to_string();
        assert_eq!(
            (
                named("holder_cgroup"),
                named("holder_namespace"),
                named("holder_pod")
            ),
            (batch.cgroup.clone(), "jobs".into(), "batch-7".into()),
            "Prometheus {version}: web-1's waits are named behind {holder} ({share:.2} of its wait time), not behind pod jobs/batch-7, whose hog shares its CPU; all its neighbours: {:?}",
            prometheus.query(
                &format!(
                    "cgroup_holder:schedlat_neighbour_wait_seconds:ratio_rate5m{{cgroup=\"{}\"}}",
                    web.cgroup
                ),
                None
            )
        );
    }
    drop(servers);
    drop(procs);
    drop(server);
}

/// Of the test's cgroups, the holder with the largest share of `victim`'s
/// wait time, from the recorded ratio NoisyNeighbour reads (its labels),
/// and that share. (On a busy machine the root cgroup's tasks share the
/// CPU too.)
fn main_neighbour(prometheus: &Prometheus, victim: &str) -> (serde_json::Value, f64) {
    let expr = format!(
        "topk(1, cgroup_holder:schedlat_neighbour_wait_seconds:ratio_rate5m{{cgroup=\"{victim}\",holder_cgroup=~\"/schedlat-test-.*\"}})"
    );
    let result = prometheus.query(&expr, None);
    let top = result.first().unwrap_or_else(|| {
        panic!(
            "{expr}: no neighbour of the victim recorded\nlog:\n{}",
            prometheus.log()
        )
    });
    let holder = top["metric"].clone();
    let share = top["value"][1].as_str().unwrap().parse().unwrap();
    (holder, share)
}
