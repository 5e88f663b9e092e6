//! The OTLP request against the Prometheus protobuf exposition of the
//! same scrape: the same histograms bucket for bucket, one index apart.

use std::time::Duration;

use prost::Message;
use schedlat_common::{CpuStats, bucket_index, scope::Breakdown};

use super::{
    delivery::{Attempt, Backoff, Delivery, MAX_ATTEMPTS},
    metrics::{Times, dense},
    proto::{Any, Data, ExportMetricsServiceRequest, KeyValue, Number},
    *,
};
use crate::{
    export::{
        cgroup_splits::CgroupSplits,
        encode::protobuf::{self, HISTOGRAM, messages::MetricFamily},
        families::{KeyedScrape, Scrape},
        key_buckets::KeyBuckets,
        model::{Exemplar, Folded},
    },
    histogram::{Waits, native::NativeBuckets},
    kernel::hook::HookMode,
};

const TIMES: Times = Times {
    start_unix_ns: 1_700_000_000_000_000_000,
    now_unix_ns: 1_700_000_060_000_000_000,
};

fn waits(ns: &[u64]) -> Waits {
    let mut cpu = CpuStats::ZERO;
    for &w in ns {
        cpu.buckets[bucket_index(w)] += 1;
        cpu.sum_ns += w;
    }
    Waits::from_cpus(&[cpu])
}

/// The total (0 ns, 1.5 us, 3 ms x3, 100 s) and two cgroups, one of them
/// a pod's container.
fn scrape() -> Scrape {
    let total = waits(&[0, 1_500, 3_000_000, 3_000_000, 3_000_000, 100_000_000_000]);
    let layout = KeyBuckets::Log2.layout();
    let keyed = KeyedScrape {
        series: vec![
            (
                vec![
                    ("cgroup", "/kubepods/pod1/c1".into()),
                    ("namespace", "shop".into()),
                    ("pod", "web-1".into()),
                    ("container", "nginx".into()),
                ],
                Folded::of(layout, &waits(&[2_000, 40_000, 3_000_000])),
            ),
            (
                vec![("cgroup", "/system.slice".into())],
                Folded::of(layout, &waits(&[70_000_000])),
            ),
        ],
        keys: vec![11, 12],
        overflow_keys: 0,
    };
    Scrape::system(HookMode::Btf, total, Vec::new(), None)
        .with_keyed(
            Breakdown::Cgroup,
            (KeyBuckets::Log2, CgroupSplits::Alerting),
            keyed,
            0,
            None,
        )
        .with_exemplars(
            vec![Exemplar {
                labels: vec![("pid", "7".into())],
                wait_ns: 3_000_000,
                unix_ns: 1_700_000_059_000_000_000,
            }],
            |_| Vec::new(),
        )
}

fn request() -> ExportMetricsServiceRequest {
    let resource = resource(
        "node-a",
        &[("deployment.environment".into(), "prod".into())],
    );
    let body = encode(&scrape().families(), &resource, TIMES);
    ExportMetricsServiceRequest::decode(body.as_slice()).expect("decodes")
}

fn attribute<'a>(kvs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    let kv = kvs.iter().find(|kv| kv.key == key)?;
    match kv.value.as_ref()?.value.as_ref()? {
        Any::StringValue(s) => Some(s),
    }
}

/// Prometheus' native buckets, expanded: (index, count) per bucket.
fn expanded(spans: &[(i32, u32)], deltas: &[i64]) -> Vec<(i32, u64)> {
    let (mut index, mut count, mut deltas) = (0, 0i64, deltas.iter());
    let mut out = Vec::new();
    for &(offset, length) in spans {
        index += offset;
        for _ in 0..length {
            count += deltas.next().unwrap();
            out.push((index, count as u64));
            index += 1;
        }
    }
    out
}

#[test]
fn every_histogram_equals_its_native_histogram_one_index_down() {
    let prometheus: Vec<MetricFamily> = {
        let body = protobuf::encode(scrape().families());
        let mut buf = body.as_slice();
        std::iter::from_fn(|| MetricFamily::decode_length_delimited(&mut buf).ok()).collect()
    };
    let otlp = request();
    let points: Vec<_> = (otlp.resource_metrics.iter())
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter_map(|m| match &m.data {
            Some(Data::ExponentialHistogram(h)) => {
                assert_eq!(h.aggregation_temporality, proto::CUMULATIVE);
                Some(h.data_points.iter().map(move |p| (m.name.clone(), p)))
            }
            _ => None,
        })
        .flatten()
        .collect();
    let mut compared = 0;
    for family in prometheus.iter().filter(|f| f.r#type == Some(HISTOGRAM)) {
        for metric in &family.metric {
            let h = metric.histogram.as_ref().unwrap();
            let cgroup = (metric.label.iter())
                .find(|l| l.name.as_deref() == Some("cgroup"))
                .and_then(|l| l.value.clone());
            let (_, p) = points
                .iter()
                .find(|(name, p)| {
                    *name == *family.name.as_ref().unwrap()
                        && attribute(&p.attributes, "cgroup") == cgroup.as_deref()
                })
                .unwrap_or_else(|| panic!("{:?} {cgroup:?} pushed", family.name));
            assert_eq!(p.scale, h.schema.unwrap());
            assert_eq!(p.zero_count, h.zero_count.unwrap());
            assert_eq!(p.zero_threshold, h.zero_threshold.unwrap());
            assert_eq!(p.count, h.sample_count.unwrap());
            assert_eq!(p.sum, h.sample_sum);
            let spans: Vec<(i32, u32)> = (h.positive_span.iter())
                .map(|s| (s.offset.unwrap(), s.length.unwrap()))
                .collect();
            let native = expanded(&spans, &h.positive_delta);
            let positive = p.positive.as_ref().unwrap();
            let pushed: Vec<(i32, u64)> = (positive.bucket_counts.iter())
                .enumerate()
                .map(|(k, &n)| (positive.offset + k as i32 + 1, n))
                .filter(|&(_, n)| n > 0)
                .collect();
            let nonzero: Vec<(i32, u64)> = native.into_iter().filter(|&(_, n)| n > 0).collect();
            assert_eq!(pushed, nonzero, "{:?} {cgroup:?}", family.name);
            assert_eq!(
                p.zero_count + positive.bucket_counts.iter().sum::<u64>(),
                p.count,
                "OTLP: count = zero + buckets"
            );
            assert_eq!(
                (p.start_time_unix_nano, p.time_unix_nano),
                (1_700_000_000_000_000_000, 1_700_000_060_000_000_000)
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 3, "the total and two cgroups");
    // The total's 0 ns wait is the zero bucket, the exemplar its point's.
    let (_, total) = (points.iter())
        .find(|(name, _)| name == "schedlat_runqueue_latency_seconds")
        .unwrap();
    assert_eq!(total.zero_count, 1);
    assert_eq!(total.exemplars.len(), 1);
    assert_eq!(total.exemplars[0].as_double, 0.003);
    assert_eq!(
        attribute(&total.exemplars[0].filtered_attributes, "pid"),
        Some("7")
    );
}

#[test]
fn a_value_on_a_boundary_is_in_the_bucket_below_it_in_both_conventions() {
    // Prometheus index 8 is (2^(7/8), 2] s; OTLP's 7 the same bucket.
    let native = NativeBuckets {
        zero_count: 0,
        spans: vec![(8, 1), (2, 2)],
        deltas: vec![4, -3, 5],
    };
    // 8: 4; 9, 10: gap; 11: 1; 12: 6.
    assert_eq!(dense(&native), (7, vec![4, 0, 0, 1, 6]));
    assert_eq!(dense(&NativeBuckets::default()), (0, Vec::new()));
}

#[test]
fn a_pods_series_is_its_own_resource_and_counters_are_cumulative_sums() {
    let otlp = request();
    assert_eq!(otlp.resource_metrics.len(), 2, "the host and the pod");
    let host = &otlp.resource_metrics[0];
    let attrs = &host.resource.as_ref().unwrap().attributes;
    assert_eq!(attribute(attrs, "service.name"), Some("schedlat"));
    assert_eq!(attribute(attrs, "host.name"), Some("node-a"));
    assert_eq!(attribute(attrs, "service.instance.id"), Some("node-a"));
    assert_eq!(attribute(attrs, "deployment.environment"), Some("prod"));
    assert_eq!(attribute(attrs, "k8s.pod.name"), None);
    let pod = &otlp.resource_metrics[1];
    let attrs = &pod.resource.as_ref().unwrap().attributes;
    assert_eq!(attribute(attrs, "host.name"), Some("node-a"));
    assert_eq!(attribute(attrs, "k8s.namespace.name"), Some("shop"));
    assert_eq!(attribute(attrs, "k8s.pod.name"), Some("web-1"));
    assert_eq!(attribute(attrs, "k8s.container.name"), Some("nginx"));
    let metrics = &pod.scope_metrics[0].metrics;
    assert_eq!(metrics.len(), 1, "{metrics:?}");
    let Some(Data::ExponentialHistogram(h)) = &metrics[0].data else {
        panic!("{metrics:?}")
    };
    assert_eq!(metrics[0].name, "schedlat_cgroup_runqueue_latency_seconds");
    assert_eq!(metrics[0].unit, "s");
    assert_eq!(h.data_points.len(), 1);
    // The labels stay the points' attributes, as the scrape's labels.
    assert_eq!(
        attribute(&h.data_points[0].attributes, "pod"),
        Some("web-1")
    );
    // Counters: monotonic cumulative sums under the exposition's name.
    let host_metrics = &host.scope_metrics[0].metrics;
    let untracked = (host_metrics.iter())
        .find(|m| m.name == "schedlat_dropped_untracked_tid_total")
        .unwrap_or_else(|| {
            panic!(
                "{:?}",
                host_metrics.iter().map(|m| &m.name).collect::<Vec<_>>()
            )
        });
    let Some(Data::Sum(sum)) = &untracked.data else {
        panic!("{untracked:?}")
    };
    assert!(sum.is_monotonic);
    assert_eq!(sum.aggregation_temporality, proto::CUMULATIVE);
    assert_eq!(sum.data_points[0].value, Some(Number::AsInt(0)));
    assert!(host_metrics.iter().any(|m| m.name == "schedlat_info"));
}

#[test]
fn configured_resource_attributes_win_over_the_defaults() {
    let r = resource("node-a", &[("service.name".into(), "runq".into())]);
    assert_eq!(
        r,
        [
            (
                "service.version".to_string(),
                env!("CARGO_PKG_VERSION").to_string()
            ),
            ("host.name".into(), "node-a".into()),
            ("service.instance.id".into(), "node-a".into()),
            ("service.name".into(), "runq".into()),
        ]
    );
}

const BACKOFF: Backoff = Backoff {
    initial: Duration::from_secs(1),
    max: Duration::from_secs(30),
};

#[test]
fn backoff_doubles_to_its_cap_and_honours_retry_after() {
    let secs = |failures| BACKOFF.delay(failures, None, 0.0).as_secs();
    assert_eq!([1, 2, 3, 4, 5, 6, 40].map(secs), [1, 2, 4, 8, 16, 30, 30]);
    // Jitter adds at most 20%.
    assert_eq!(BACKOFF.delay(2, None, 1.0), Duration::from_millis(2_400));
    // Retry-After is a floor, capped.
    let after = |s| Some(Duration::from_secs(s));
    assert_eq!(BACKOFF.delay(1, after(7), 0.0), Duration::from_secs(7));
    assert_eq!(BACKOFF.delay(6, after(7), 0.0), Duration::from_secs(30));
    assert_eq!(
        BACKOFF.delay(1, after(86_400), 0.0),
        Duration::from_secs(300)
    );
}

#[test]
fn answers_are_sent_retried_or_rejected() {
    assert_eq!(Attempt::of_status(200, None), Attempt::Sent);
    assert_eq!(
        Attempt::of_status(503, Some("2")),
        Attempt::Retry {
            reason: "HTTP 503".into(),
            retry_after: Some(Duration::from_secs(2))
        }
    );
    for status in [408, 429, 502, 504] {
        assert!(matches!(
            Attempt::of_status(status, None),
            Attempt::Retry { .. }
        ));
    }
    // An HTTP date is not taken: the backoff decides.
    assert!(matches!(
        Attempt::of_status(429, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
        Attempt::Retry {
            retry_after: None,
            ..
        }
    ));
    for status in [400, 401, 404, 413] {
        assert!(matches!(
            Attempt::of_status(status, None),
            Attempt::Rejected { .. }
        ));
    }
}

#[test]
fn the_queue_is_bounded_and_a_request_has_bounded_attempts() {
    let mut d = Delivery::new(3);
    for i in 0..5u8 {
        d.push(vec![i; 10]);
    }
    // The two oldest were superseded.
    assert_eq!(d.next(), Some(&[2u8; 10][..]));
    let c = d.counts();
    assert_eq!((c.queued, c.queued_bytes, c.dropped), (3, 30, 2));
    let retry = Attempt::Retry {
        reason: "HTTP 503".into(),
        retry_after: None,
    };
    let mut waits = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        waits.push(d.done(&retry, &BACKOFF, 0.0).unwrap().as_secs());
    }
    assert_eq!(waits, [1, 2, 4, 8, 16]);
    // Out of attempts: dropped, the next one is up.
    assert_eq!(d.next(), Some(&[3u8; 10][..]));
    assert_eq!(d.done(&Attempt::Sent, &BACKOFF, 0.0), None);
    let rejected = Attempt::Rejected {
        reason: "HTTP 400".into(),
    };
    assert_eq!(d.done(&rejected, &BACKOFF, 0.0), None);
    assert_eq!(d.next(), None);
    let c = d.counts();
    assert_eq!(
        (c.sent, c.failed_attempts, c.dropped, c.queued),
        (1, MAX_ATTEMPTS as u64 + 1, 4, 0)
    );
    // A success reset the backoff.
    d.push(vec![9]);
    assert_eq!(d.done(&retry, &BACKOFF, 0.0), Some(Duration::from_secs(1)));
}
