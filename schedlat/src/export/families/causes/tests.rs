use std::{
    io::Write,
    process::{Command, Stdio},
};

use schedlat_common::{
    CpuStats, bucket_index,
    causes::{CauseStats, KeyCauses},
    scope::Breakdown,
};

use super::*;
use crate::{
    export::{
        cgroup_splits::CgroupSplits,
        encode::Format,
        families::{KeyedScrape, Scrape},
        key_buckets::KeyBuckets,
        labels::overflow as overflow_labels,
        model::Folded,
    },
    histogram::{CauseFacts, Waits},
    kernel::hook::HookMode,
};

/// 3 waits of 3 ms, woken, on their CPU, behind another cgroup; IRQ time
/// measurable (1 ms of it), steal and throttling not.
fn total() -> Waits {
    let mut cpu = CpuStats::ZERO;
    cpu.buckets[bucket_index(3_000_000)] = 3;
    cpu.sum_ns = 9_000_000;
    let mut split = CauseStats::ZERO;
    for class in [
        Cause::Woken,
        Cause::SameCpu,
        Cause::HeldByOtherCgroup,
        Cause::Depth1,
    ] {
        split.count[class as usize] = 3;
        split.sum_ns[class as usize] = 9_000_000;
    }
    split.overlap_ns[OVERLAP_IRQ] = 1_000_000;
    split.overlap_waits = 3;
    split.overlap_wait_ns = 9_000_000;
    let m = CauseFacts {
        irq: true,
        held_by: true,
        queue_depth: true,
        ..CauseFacts::default()
    };
    Waits {
        causes: Some(CauseCounts::from_cpus(m, &[split])),
        ..Waits::from_cpus(&[cpu])
    }
}

fn scrape(waits: Waits) -> Scrape {
    Scrape::system(HookMode::Btf, waits, Vec::new(), None)
}

fn has(out: &str, line: &str) {
    assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
}

#[test]
fn the_total_is_split_by_bounded_labels_and_unavailable_overlaps_are_absent() {
    let out = scrape(total()).encode_text(Format::Text);
    for line in [
        "# TYPE schedlat_runqueue_waits_by_cause_total counter",
        "schedlat_runqueue_waits_by_cause_total{split=\"began\",cause=\"woken\"} 3",
        "schedlat_runqueue_waits_by_cause_total{split=\"began\",cause=\"preempted\"} 0",
        "schedlat_runqueue_waits_by_cause_total{split=\"held_by\",cause=\"other_cgroup\"} 3",
        "schedlat_runqueue_waits_by_cause_total{split=\"queue_depth\",cause=\"1\"} 3",
        "schedlat_runqueue_waits_by_cause_total{split=\"queue_depth\",cause=\"3-4\"} 0",
        "schedlat_runqueue_wait_by_cause_seconds_total{split=\"placement\",cause=\"same_cpu\"} 0.009",
        "schedlat_runqueue_wait_overlap_seconds_total{overlap=\"irq\"} 0.001",
        "schedlat_runqueue_wait_overlap_measured_seconds_total 0.009",
        "schedlat_runqueue_wait_overlap_measured_waits_total 3",
    ] {
        has(&out, line);
    }
    // Unavailable: absent, not 0; no topology: no crossed split.
    assert!(!out.contains("overlap=\"steal\"") && !out.contains("overlap=\"throttled\""));
    assert!(!out.contains("split=\"crossed\""), "{out}");
    // Every split adds up to the histogram's count.
    for split in ["began", "placement", "held_by", "queue_depth"] {
        let sum: u64 = out
            .lines()
            .filter(|l| l.starts_with("schedlat_runqueue_waits_by_cause_total{"))
            .filter(|l| l.contains(&format!("split=\"{split}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, 3, "{split}: {out}");
    }
}

#[test]
fn without_the_split_or_any_overlap_the_families_are_absent() {
    let out = scrape(Waits::default()).encode_text(Format::Text);
    assert!(
        !out.contains("by_cause") && !out.contains("overlap"),
        "{out}"
    );
    let mut waits = total();
    waits.causes.as_mut().unwrap().measurable.irq = false;
    let out = scrape(waits).encode_text(Format::Text);
    assert!(
        out.contains("waits_by_cause") && !out.contains("overlap"),
        "{out}"
    );
}

fn cgroup_folded(n: u32) -> Folded {
    let mut stats = KeyCauses::ZERO;
    stats.count[Cause::Preempted as usize] = n;
    stats.sum_ns[Cause::Preempted as usize] = u64::from(n) * 1_000_000;
    let mut one = CpuStats::ZERO;
    one.buckets[bucket_index(1_000_000)] = u64::from(n);
    one.sum_ns = u64::from(n) * 1_000_000;
    let waits = Waits {
        causes: Some(CauseCounts::from_key(CauseFacts::default(), &stats)),
        ..Waits::from_cpus(&[one])
    };
    Folded::of(KeyBuckets::Log2.layout(), &waits)
}

#[test]
fn cgroups_get_their_own_family_and_processes_none() {
    let keyed = || KeyedScrape {
        series: vec![
            (vec![("cgroup", "/a".into())], cgroup_folded(2)),
            (overflow_labels(Breakdown::Cgroup), cgroup_folded(5)),
        ],
        keys: vec![11],
        overflow_keys: 1,
    };
    let out = scrape(total())
        .with_keyed(
            Breakdown::Cgroup,
            (KeyBuckets::Log2, CgroupSplits::Full),
            keyed(),
            0,
            None,
        )
        .encode_text(Format::Text);
    for line in [
        "schedlat_cgroup_runqueue_waits_by_cause_total{cgroup=\"/a\",split=\"began\",cause=\"preempted\"} 2",
        "schedlat_cgroup_runqueue_waits_by_cause_total{cgroup=\"__overflow__\",split=\"began\",cause=\"preempted\"} 5",
        "schedlat_cgroup_runqueue_wait_by_cause_seconds_total{cgroup=\"/a\",split=\"began\",cause=\"preempted\"} 0.002",
        // The total's family is unchanged beside it.
        "schedlat_runqueue_waits_by_cause_total{split=\"began\",cause=\"woken\"} 3",
    ] {
        has(&out, line);
    }
    // Nothing measurable per cgroup: no overlap family of its own.
    assert!(
        !out.contains("schedlat_cgroup_runqueue_wait_overlap"),
        "{out}"
    );
    promtool_check(&out);
    let keyed = KeyedScrape {
        series: vec![(
            vec![("pid", "7".into()), ("comm", "x".into())],
            cgroup_folded(2),
        )],
        keys: vec![7],
        overflow_keys: 0,
    };
    let out = scrape(total())
        .with_keyed(
            Breakdown::Process,
            (KeyBuckets::Log2, CgroupSplits::Alerting),
            keyed,
            0,
            None,
        )
        .encode_text(Format::Text);
    assert!(!out.contains("pid=\"7\",split"), "{out}");
}

/// By default (`--cgroup-splits alerting`) a cgroup's series has the
/// held_by split's seconds (NoisyNeighbour's) and the overlaps' seconds
/// (QuotaThrottlingWaits'); the total keeps every split and the counts.
#[test]
fn alerting_cgroups_have_what_the_alerts_read() {
    let mut folded = cgroup_folded(2);
    let causes = folded.causes.as_mut().unwrap();
    causes.measurable.throttled = true;
    causes.count[Cause::HeldByOtherCgroup as usize] = 2;
    causes.sum_ns[Cause::HeldByOtherCgroup as usize] = 2_000_000;
    causes.overlap_wait_ns = 2_000_000;
    causes.overlap_ns[OVERLAP_THROTTLED] = 500_000;
    let keyed = KeyedScrape {
        series: vec![(vec![("cgroup", "/a".into())], folded)],
        keys: vec![11],
        overflow_keys: 0,
    };
    let splits = (KeyBuckets::Log2, CgroupSplits::Alerting);
    let out = scrape(total())
        .with_keyed(Breakdown::Cgroup, splits, keyed, 0, None)
        .encode_text(Format::Text);
    for line in [
        "schedlat_cgroup_runqueue_wait_by_cause_seconds_total{cgroup=\"/a\",split=\"held_by\",cause=\"other_cgroup\"} 0.002",
        "schedlat_cgroup_runqueue_wait_overlap_seconds_total{cgroup=\"/a\",overlap=\"throttled\"} 0.0005",
        "schedlat_cgroup_runqueue_wait_overlap_measured_seconds_total{cgroup=\"/a\"} 0.002",
        "schedlat_runqueue_waits_by_cause_total{split=\"began\",cause=\"woken\"} 3",
        "schedlat_runqueue_wait_overlap_measured_waits_total 3",
    ] {
        has(&out, line);
    }
    let per_cgroup: Vec<&str> = (out.lines())
        .filter(|l| l.starts_with("schedlat_cgroup_runqueue_wait") && l.contains("by_cause"))
        .collect();
    // held_by's six classes, nothing else.
    assert_eq!(per_cgroup.len(), 6, "{out}");
    assert!(per_cgroup.iter().all(|l| l.contains("split=\"held_by\"")));
    for absent in [
        "schedlat_cgroup_runqueue_waits_by_cause_total",
        "schedlat_cgroup_runqueue_wait_overlap_measured_waits_total",
    ] {
        assert!(!out.contains(absent), "{absent} in {out}");
    }
    promtool_check(&out);
}

#[test]
fn openmetrics_names_and_units() {
    let out = scrape(total()).encode_text(Format::OpenMetrics { version: "1.0.0" });
    for line in [
        "# TYPE schedlat_runqueue_waits_by_cause counter",
        "# TYPE schedlat_runqueue_wait_by_cause_seconds counter",
        "# UNIT schedlat_runqueue_wait_by_cause_seconds seconds",
        "schedlat_runqueue_wait_overlap_seconds_total{overlap=\"irq\"} 0.001",
    ] {
        has(&out, line);
    }
    assert!(out.ends_with("# EOF\n"));
}

/// `promtool check metrics` passes on `body`, where promtool is installed
/// (`cargo xtask setup` installs it for the tests; tests/serve.rs checks
/// the real exposition with it and fails without it).
fn promtool_check(body: &str) {
    let Ok(mut promtool) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: not checked here");
        return;
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && report.trim().is_empty(),
        "{report}\n{body}"
    );
}
