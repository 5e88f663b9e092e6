//! Random families for the encoders' tests: every kind of metric and
//! value, labels that need escaping, exemplars, every bucket layout, and
//! the total's kernel buckets; reproducible from a seed.

use schedlat_common::bucket::NR_BUCKETS;

use crate::{
    export::model::{
        Exemplar, Family, Folded, Histograms, Labels, Metric, MetricUnit, Sample, Series, Value,
    },
    histogram::{
        layout::{LAYOUT, LOG2, Layout, SLO},
        native::{FINE_MAP, LOG2_MAP, NativeMap, SLO_MAP},
    },
};

/// xorshift64*: reproducible inputs without a dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len() as u64) as usize]
    }
}

const NAMES: [&str; 5] = ["pid", "comm", "cgroup", "split", "holder_cgroup"];
const VALUES: [&str; 8] = [
    "",
    "1234",
    "/kubepods.slice/pod\"quoted\"",
    "back\\slash",
    "two\nlines",
    "__overflow__",
    "naïve ✓",
    "/system.slice/nginx.service",
];

fn labels(rng: &mut Rng) -> Labels {
    (0..rng.below(4))
        .map(|_| (*rng.pick(&NAMES), rng.pick(&VALUES).to_string()))
        .collect()
}

fn value(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 => Value::Count(rng.next() >> rng.below(64)),
        1 => Value::Int(rng.next() as i64 >> rng.below(64)),
        2 => Value::Float(rng.below(1_000_000_000_000) as f64 / 1e9),
        3 => Value::Float(f64::from_bits(rng.next() >> 2)),
        4 => Value::Float(0.0),
        5 => Value::Float(*rng.pick(&[f64::INFINITY, f64::NEG_INFINITY, f64::NAN])),
        _ => Value::seconds_of_ns(rng.below(10_000)),
    }
}

fn histograms(rng: &mut Rng) -> Histograms {
    let (layout, native): (&'static Layout, &'static NativeMap) = match rng.below(3) {
        0 => (&LAYOUT, &FINE_MAP),
        1 => (&LOG2, &LOG2_MAP),
        _ => (&SLO, &SLO_MAP),
    };
    let series = (0..rng.below(4))
        .map(|_| {
            let buckets: Vec<u64> = (0..=layout.edges_ns().len())
                .map(|_| rng.below(3) * rng.below(1_000))
                .collect();
            let exemplars = (0..rng.below(4))
                .map(|_| {
                    let magnitude = 1 << rng.below(40);
                    Exemplar {
                        labels: labels(rng),
                        wait_ns: rng.below(magnitude),
                        // Whole seconds and the epoch too: a Timestamp
                        // leaves its zero fields out.
                        unix_ns: match rng.below(4) {
                            0 => 0,
                            1 => 1_700_000_000_000_000_000,
                            _ => 1_700_000_000_000_000_000 + rng.below(1 << 50),
                        },
                    }
                })
                .collect();
            Series {
                labels: labels(rng),
                waits: Folded {
                    buckets,
                    sum_ns: rng.below(1 << 50),
                    ..Folded::default()
                },
                // The total's series carries the kernel's own buckets.
                kernel: (rng.below(4) == 0).then(|| {
                    (0..NR_BUCKETS)
                        .map(|_| rng.below(2) * rng.below(50))
                        .collect()
                }),
                exemplars,
            }
        })
        .collect();
    Histograms {
        layout,
        native,
        series,
    }
}

pub(crate) fn families(rng: &mut Rng) -> Vec<Family> {
    (0..rng.below(6))
        .map(|i| {
            let samples = |rng: &mut Rng| {
                (0..rng.below(4))
                    .map(|_| Sample {
                        labels: labels(rng),
                        value: value(rng),
                    })
                    .collect()
            };
            let metric = match rng.below(4) {
                0 => Metric::Counter(samples(rng)),
                1 => Metric::Gauge(samples(rng)),
                2 => Metric::Info(labels(rng)),
                _ => Metric::Histogram(histograms(rng)),
            };
            Family {
                name: format!("schedlat_family_{i}"),
                help: rng
                    .pick(&["Waits.", "A \"quoted\" help", "a\\b", ""])
                    .to_string(),
                unit: (rng.below(2) == 0).then_some(MetricUnit::Seconds),
                metric,
            }
        })
        .collect()
}
