//! The exposition as a whole, in each format: the family list written by
//! the encoders.
use prost::Message;
use schedlat_common::{CpuStats, bucket_index};

use super::*;
use crate::{
    collect::bpf_cost::ProgramCost,
    export::{
        encode::protobuf::{self, COUNTER, GAUGE, HISTOGRAM, messages::MetricFamily},
        labels,
        model::Exemplar,
    },
};

/// Two CPUs: 3 waits of 3 ms, one of 1.5 us, one of 100 s (beyond the
/// last boundary), 2 discarded, 1 untracked.
fn known() -> Scrape {
    let mut a = CpuStats::ZERO;
    let mut b = CpuStats::ZERO;
    for ns in [3_000_000, 3_000_000, 1_500] {
        a.buckets[bucket_index(ns)] += 1;
        a.sum_ns += ns;
    }
    for ns in [3_000_000, 100_000_000_000] {
        b.buckets[bucket_index(ns)] += 1;
        b.sum_ns += ns;
    }
    b.discarded_negative = 2;
    a.untracked_tid = 1;
    let bpf = BpfCost {
        stats_enabled: Some(false),
        programs: vec![ProgramCost {
            name: "sched_switch".into(),
            run_time_ns: 1_500_000_000,
            runs: 42,
        }],
    };
    Scrape::system(
        HookMode::Btf,
        Waits::from_cpus(&[a, b]),
        Vec::new(),
        Some(bpf),
    )
}

fn lines_of(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(String::from)
        .collect()
}

#[test]
fn text_format_histogram_is_cumulative_in_seconds() {
    let out = known().encode_text(Format::Text);
    let h = "schedlat_runqueue_latency_seconds";
    assert!(out.contains(&format!("# TYPE {h} histogram\n")), "{out}");
    assert!(out.contains(&format!("{h}_count 5\n")), "{out}");
    assert!(out.contains(&format!("{h}_sum 100.0090015\n")), "{out}");
    let buckets = lines_of(&out, &format!("{h}_bucket{{"));
    assert_eq!(buckets.len(), 106, "105 boundaries and +Inf");
    // Under 1.024 us: none; 1.5 us is in (1.28, 1.536] us. (Small
    // bounds print in exponent form, as Go's clients print them.)
    assert_eq!(buckets[0], format!("{h}_bucket{{le=\"1.024e-06\"}} 0"));
    assert_eq!(buckets[1], format!("{h}_bucket{{le=\"1.28e-06\"}} 0"));
    assert_eq!(buckets[2], format!("{h}_bucket{{le=\"1.536e-06\"}} 1"));
    // 3 ms is in (2.62, 3.15] ms.
    assert!(buckets.contains(&format!("{h}_bucket{{le=\"0.00262144\"}} 1")));
    assert!(buckets.contains(&format!("{h}_bucket{{le=\"0.003145728\"}} 4")));
    // 100 s is beyond 68.7 s: only in +Inf.
    assert_eq!(buckets[104], format!("{h}_bucket{{le=\"68.719476736\"}} 4"));
    assert_eq!(buckets[105], format!("{h}_bucket{{le=\"+Inf\"}} 5"));
    let counts: Vec<u64> = buckets
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "cumulative");
}

#[test]
fn text_format_counters_info_and_bpf_cost() {
    let out = known().encode_text(Format::Text);
    let info = format!(
        "schedlat_info{{hook=\"tp_btf\",version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    for line in [
        "# TYPE schedlat_dropped_untracked_tid_total counter",
        "schedlat_dropped_untracked_tid_total 1",
        "schedlat_discarded_negative_delta_total 2",
        &info,
        "schedlat_bpf_stats_enabled 0",
        "schedlat_bpf_run_time_seconds_total{program=\"sched_switch\"} 1.5",
        "schedlat_bpf_runs_total{program=\"sched_switch\"} 42",
    ] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
    }
    // Stats off: the HELP says so.
    let help = lines_of(&out, "# HELP schedlat_bpf_runs_total");
    assert!(
        help[0].contains("kernel.bpf_stats_enabled is 0"),
        "{help:?}"
    );
    assert!(!out.contains("# EOF"));
}

#[test]
fn openmetrics_has_units_totals_and_eof() {
    let out = known().encode_text(Format::OpenMetrics { version: "1.0.0" });
    let h = "schedlat_runqueue_latency_seconds";
    for line in [
        format!("# TYPE {h} histogram"),
        format!("# UNIT {h} seconds"),
        format!("{h}_count 5"),
        format!("{h}_bucket{{le=\"+Inf\"}} 5"),
        "# TYPE schedlat_dropped_untracked_tid counter".into(),
        "schedlat_dropped_untracked_tid_total 1".into(),
        "# TYPE schedlat info".into(),
    ] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
    }
    assert!(out.ends_with("# EOF\n"));
}

#[test]
fn bpf_cost_is_left_out_when_unreadable() {
    let mut s = known();
    s.bpf = None;
    let out = s.encode_text(Format::Text);
    assert!(!out.contains("schedlat_bpf_"), "{out}");
    let mut s = known();
    s.bpf.as_mut().unwrap().stats_enabled = Some(true);
    let out = s.encode_text(Format::Text);
    assert!(out.contains("schedlat_bpf_stats_enabled 1\n"));
    assert!(!out.contains("may stand still"));
}

#[test]
fn keyed_family_is_its_own_with_overflow_and_counters() {
    let mut one = CpuStats::ZERO;
    one.buckets[bucket_index(3_000_000)] = 2;
    one.sum_ns = 6_000_000;
    let waits = Folded::of(KeyBuckets::Log2.layout(), &Waits::from_cpus(&[one]));
    let keyed = KeyedScrape {
        series: vec![
            (
                vec![("pid", "7".into()), ("comm", "a \"b\"".into())],
                waits.clone(),
            ),
            (labels::overflow(Breakdown::Process), waits),
        ],
        keys: vec![7],
        overflow_keys: 3,
    };
    let scope = ("scope", "cpu=0".to_string());
    let out = known()
        .with_keyed(
            Breakdown::Process,
            (KeyBuckets::Log2, CgroupSplits::Alerting),
            keyed,
            4,
            Some(&scope),
        )
        .encode_text(Format::Text);
    let h = "schedlat_process_runqueue_latency_seconds";
    for line in [
        format!("# TYPE {h} histogram"),
        format!("{h}_count{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\"}} 2"),
        format!("{h}_count{{pid=\"__overflow__\",comm=\"__overflow__\",scope=\"cpu=0\"}} 2"),
        format!("{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"+Inf\"}} 2"),
        // One boundary per power of two: 3 ms is in (2.10, 4.19] ms.
        format!(
            "{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"0.002097152\"}} 0"
        ),
        format!(
            "{h}_bucket{{pid=\"7\",comm=\"a \\\"b\\\"\",scope=\"cpu=0\",le=\"0.004194304\"}} 2"
        ),
        "schedlat_unkeyed_waits_total 4".into(),
        "schedlat_overflow_keys 3".into(),
        "schedlat_keyed_series 2".into(),
        // The whole-system family is unchanged.
        "schedlat_runqueue_latency_seconds_count 5".into(),
    ] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
    }
    // Without a breakdown, no keyed counters.
    let out = known().encode_text(Format::Text);
    assert!(
        !out.contains("unkeyed") && !out.contains("overflow"),
        "{out}"
    );
}

/// The families of a delimited stream.
fn decode(mut body: &[u8]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    while !body.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut body).unwrap());
    }
    out
}

/// Waits of 3 ms (x3), 1.5 us and 100 s; one unlabelled series.
fn protobuf_sample() -> Scrape {
    let mut cpu = CpuStats::ZERO;
    for ns in [3_000_000, 3_000_000, 3_000_000, 1_500, 100_000_000_000] {
        cpu.buckets[bucket_index(ns)] += 1;
        cpu.sum_ns += ns;
    }
    cpu.untracked_tid = 2;
    Scrape::system(HookMode::Btf, Waits::from_cpus(&[cpu]), Vec::new(), None)
}

#[test]
fn histograms_carry_classic_and_native_buckets() {
    let families = decode(&protobuf_sample().encode(Format::Protobuf));
    let h = &families[0];
    assert_eq!(h.name.as_deref(), Some("schedlat_runqueue_latency_seconds"));
    assert_eq!(h.r#type, Some(HISTOGRAM));
    assert!(h.help.as_deref().unwrap().contains("within 12.2%"));
    let hist = h.metric[0].histogram.as_ref().unwrap();
    assert_eq!(hist.sample_count, Some(5));
    assert!((hist.sample_sum.unwrap() - 100.0090015).abs() < 1e-9);
    // Classic: the text formats' 105 finite boundaries, cumulative; the
    // 100 s wait only in the implicit +Inf.
    assert_eq!(hist.bucket.len(), 105);
    assert_eq!(hist.bucket.last().unwrap().cumulative_count, Some(4));
    assert_eq!(hist.bucket[0].upper_bound, Some(1.024e-6));
    // Native: schema 3; three buckets with 1, 3 and 1 waits.
    assert_eq!(hist.schema, Some(3));
    assert_eq!(hist.zero_count, Some(0));
    let mut counts = Vec::new();
    let mut n = 0;
    for d in &hist.positive_delta {
        n += d;
        counts.push(n);
    }
    assert_eq!(counts, [1, 3, 1]);
    let lengths: u32 = hist.positive_span.iter().map(|s| s.length.unwrap()).sum();
    assert_eq!(lengths, 3);
    // 3 ms lies in its native bucket (b^(i-1), b^i].
    let first = hist.positive_span[0].offset.unwrap();
    let second = first + hist.positive_span[1].offset.unwrap() + 1;
    let b = 2f64.powf(1.0 / 8.0);
    assert!(b.powi(second - 1) < 0.003 && 0.003 <= b.powi(second) * 1.13);
}

#[test]
fn counters_gauges_and_info_keep_the_text_formats_names() {
    let families = decode(&protobuf_sample().encode(Format::Protobuf));
    let by_name = |name: &str| {
        families
            .iter()
            .find(|f| f.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let untracked = by_name("schedlat_dropped_untracked_tid_total");
    assert_eq!(untracked.r#type, Some(COUNTER));
    assert_eq!(
        untracked.metric[0].counter.as_ref().unwrap().value,
        Some(2.0)
    );
    let info = by_name("schedlat_info");
    assert_eq!(info.r#type, Some(GAUGE));
    let labels: Vec<_> = (info.metric[0].label.iter())
        .map(|l| (l.name.clone().unwrap(), l.value.clone().unwrap()))
        .collect();
    assert_eq!(labels[0], ("hook".into(), "tp_btf".into()));
}

#[test]
fn per_cpu_counters_are_the_cpus_the_total_sums() {
    let mut a = CpuStats::ZERO;
    let mut b = CpuStats::ZERO;
    a.buckets[bucket_index(2_000)] = 3;
    a.sum_ns = 6_000;
    b.buckets[bucket_index(1_000_000_000)] = 1;
    b.sum_ns = 1_000_000_000;
    let stats = [a, b];
    let scope = vec![("scope", "cpu=0-1".to_string())];
    let mut scrape = Scrape::system(HookMode::Btf, Waits::from_cpus(&stats), scope.clone(), None);
    scrape.cpus = cpu::per_cpu(&stats);
    let out = scrape.encode_text(Format::OpenMetrics { version: "1.0.0" });
    for line in [
        "# TYPE schedlat_cpu_runqueue_waits counter",
        "schedlat_cpu_runqueue_waits_total{cpu=\"0\",scope=\"cpu=0-1\"} 3",
        "schedlat_cpu_runqueue_waits_total{cpu=\"1\",scope=\"cpu=0-1\"} 1",
        "# UNIT schedlat_cpu_runqueue_wait_seconds seconds",
        "schedlat_cpu_runqueue_wait_seconds_total{cpu=\"0\",scope=\"cpu=0-1\"} 0.000006",
        "schedlat_cpu_runqueue_wait_seconds_total{cpu=\"1\",scope=\"cpu=0-1\"} 1.0",
        "schedlat_runqueue_latency_seconds_count{scope=\"cpu=0-1\"} 4",
    ] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
    }
    // Not read per CPU: no family.
    let out = known().encode_text(Format::Text);
    assert!(!out.contains("schedlat_cpu_"), "{out}");
}

#[test]
fn neighbour_pairs_name_both_sides_both_roles_and_the_levels_and_count_the_unpaired() {
    use crate::collect::pairs::PairCounts;
    let pair = |count, sum_ns| PairCounts {
        count,
        sum_ns,
        max_ns: 0,
    };
    let mut scrape = known();
    scrape.neighbours = Some(NeighbourScrape {
        series: vec![
            (
                vec![
                    ("cgroup", "/web".into()),
                    ("holder_cgroup", "/batch".into()),
                ],
                pair(10, 3_000_000),
            ),
            (labels::overflow_pair(), pair(2, 1_000)),
        ],
        overflow_pairs: 1,
        unpaired: pair(5, 50),
        unapportioned: pair(3, 2_000_000_000),
        shares: vec![(
            vec![
                ("cgroup", "/web".into()),
                ("holder_cgroup", "/batch".into()),
                ("group", "/kubepods".into()),
            ],
            pair(4, 2_000_000),
        )],
        levels: vec![
            (
                vec![("cgroup", "/web".into()), ("group", "/kubepods".into())],
                pair(6, 5_000_000),
            ),
            (labels::overflow_level(), pair(1, 1_000_000)),
        ],
    });
    let out = scrape.encode_text(Format::Text);
    for line in [
        "# TYPE schedlat_neighbour_share_seconds_total counter",
        "schedlat_neighbour_share_waits_total{cgroup=\"/web\",holder_cgroup=\"/batch\",group=\"/kubepods\"} 4",
        "schedlat_neighbour_share_seconds_total{cgroup=\"/web\",holder_cgroup=\"/batch\",group=\"/kubepods\"} 0.002",
        "# TYPE schedlat_neighbour_level_wait_seconds_total counter",
        "schedlat_neighbour_level_waits_total{cgroup=\"/web\",group=\"/kubepods\"} 6",
        "schedlat_neighbour_level_wait_seconds_total{cgroup=\"/web\",group=\"/kubepods\"} 0.005",
        "schedlat_neighbour_level_waits_total{cgroup=\"__overflow__\",group=\"__overflow__\"} 1",
        "# TYPE schedlat_neighbour_waits_total counter",
        "schedlat_neighbour_waits_total{cgroup=\"/web\",holder_cgroup=\"/batch\"} 10",
        "schedlat_neighbour_wait_seconds_total{cgroup=\"/web\",holder_cgroup=\"/batch\"} 0.003",
        "schedlat_neighbour_waits_total{cgroup=\"__overflow__\",holder_cgroup=\"__overflow__\"} 2",
        "schedlat_unpaired_waits_total 5",
        "schedlat_unapportioned_wait_seconds_total 2.0",
        "schedlat_overflow_pairs 1",
    ] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}");
    }
    let out = known().encode_text(Format::Text);
    assert!(
        !out.contains("neighbour") && !out.contains("pairs"),
        "{out}"
    );
}

/// `serve --exemplars`: each exemplar on the bucket that counts its wait,
/// in OpenMetrics (value in seconds, timestamp in Unix seconds)
/// and protobuf (the classic bucket and the native histogram's list); the
/// classic text format has none.
#[test]
fn exemplars_sit_on_the_bucket_that_counts_their_wait() {
    let mut one = CpuStats::ZERO;
    one.buckets[bucket_index(3_000_000)] = 2;
    one.sum_ns = 6_000_000;
    let waits = Folded::of(KeyBuckets::Log2.layout(), &Waits::from_cpus(&[one]));
    let keyed = || KeyedScrape {
        series: vec![
            (vec![("cgroup", "/a".into())], waits.clone()),
            (vec![("cgroup", "/b".into())], waits.clone()),
        ],
        keys: vec![11, 12],
        overflow_keys: 0,
    };
    let exemplar = |tid: u32, wait_ns: u64| Exemplar {
        labels: vec![("pid", "7".into()), ("tid", tid.to_string())],
        wait_ns,
        unix_ns: 1_700_000_000_250_000_000,
    };
    let scrape = || {
        known()
            .with_keyed(
                Breakdown::Cgroup,
                (KeyBuckets::Log2, CgroupSplits::Alerting),
                keyed(),
                0,
                None,
            )
            .with_exemplars(vec![exemplar(8, 3_000_000)], |key| match key {
                // Key 12 has none.
                11 => vec![exemplar(9, 3_100_000), exemplar(10, 9_000_000)],
                _ => Vec::new(),
            })
    };
    let out = scrape().encode_text(Format::OpenMetrics { version: "1.0.0" });
    let with: Vec<&str> = out.lines().filter(|l| l.contains(" # {")).collect();
    assert_eq!(
        with,
        [
            // The total's fine layout: 3 ms is in (2.90, 3.36] ms.
            "schedlat_runqueue_latency_seconds_bucket{le=\"0.003145728\"} 4 # {pid=\"7\",tid=\"8\"} 0.003 1700000000.25",
            // log2: 3.1 ms is in (2.10, 4.19] ms (the library writes
            // `le` first in OpenMetrics).
            "schedlat_cgroup_runqueue_latency_seconds_bucket{le=\"0.004194304\",cgroup=\"/a\"} 2 # {pid=\"7\",tid=\"9\"} 0.0031 1700000000.25",
            // Each bucket its own: 9 ms is in (8.39, 16.8] ms.
            "schedlat_cgroup_runqueue_latency_seconds_bucket{le=\"0.016777216\",cgroup=\"/a\"} 2 # {pid=\"7\",tid=\"10\"} 0.009 1700000000.25",
        ],
        "{out}"
    );
    let classic = scrape().encode_text(Format::Text);
    assert!(!classic.contains(" # {"), "{classic}");

    let families = decode(&scrape().encode(Format::Protobuf));
    let keyed = families
        .iter()
        .find(|f| f.name.as_deref() == Some("schedlat_cgroup_runqueue_latency_seconds"))
        .unwrap();
    let a = keyed.metric[0].histogram.as_ref().unwrap();
    let on: Vec<(f64, &protobuf::messages::Exemplar)> = (a.bucket.iter())
        .filter_map(|b| Some((b.upper_bound?, b.exemplar.as_ref()?)))
        .collect();
    assert_eq!(on.len(), 2, "{a:?}");
    assert_eq!((on[0].0, on[1].0), (0.004194304, 0.016777216));
    assert_eq!(a.exemplars, vec![on[0].1.clone(), on[1].1.clone()]);
    let e = &a.exemplars[0];
    assert_eq!(e.value, Some(0.0031));
    let at = e.timestamp.as_ref().unwrap();
    assert_eq!((at.seconds, at.nanos), (1_700_000_000, 250_000_000));
    assert_eq!(e.label[1].value.as_deref(), Some("9"));
    let b = keyed.metric[1].histogram.as_ref().unwrap();
    assert!(b.exemplars.is_empty() && b.bucket.iter().all(|b| b.exemplar.is_none()));
}
