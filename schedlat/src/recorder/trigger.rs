//! `--trigger`: when the recorder dumps by itself. `p99>5ms` (or p50, p90,
//! p999, max) is judged on the total histogram of the last
//! `--trigger-window` seconds, merged, every second; `slow>20ms` fires on a
//! single wait at least that long.

use crate::{
    analysis::{fmt_ns, percentiles::quantile_ns, recording::Second},
    histogram::Waits,
    sys::clock::parse_duration_ns,
};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Trigger {
    /// The q-quantile (1.0 = the longest wait) over the window.
    Quantile {
        label: &'static str,
        q: f64,
        over_ns: u64,
    },
    /// One slow wait at least this long.
    Slow { over_ns: u64 },
}

impl Trigger {
    pub(crate) fn parse(s: &str) -> Result<Trigger, String> {
        let (what, value) = s
            .split_once('>')
            .ok_or_else(|| format!("`{s}`: a trigger reads like p99>5ms or slow>20ms"))?;
        let over_ns = parse_duration_ns(value)?;
        let quantile = |label, q| Trigger::Quantile { label, q, over_ns };
        Ok(match what.trim() {
            "p50" => quantile("p50", 0.50),
            "p90" => quantile("p90", 0.90),
            "p99" => quantile("p99", 0.99),
            "p999" | "p99.9" => quantile("p99.9", 0.999),
            "max" => quantile("max", 1.0),
            "slow" => Trigger::Slow { over_ns },
            other => {
                return Err(format!(
                    "`{other}`: a trigger watches p50, p90, p99, p999, max or slow"
                ));
            }
        })
    }

    /// Why it fired, when it does: on the last seconds (`window`, the
    /// newest last; a percentile trigger judges `full` of them and waits
    /// until there are that many) and the slow waits of the newest second.
    pub(crate) fn check(
        &self,
        window: &[&Second],
        full: usize,
        newest_slow: &[u64],
    ) -> Option<String> {
        match *self {
            Trigger::Quantile { label, q, over_ns } => {
                // Not before its window is full: the first second of a run
                // (the tracer's attach, the process starting) alone would
                // otherwise decide a "p99 over 5 s".
                if window.len() < full {
                    return None;
                }
                let mut w = Waits::default();
                for s in window {
                    if let Some(t) = s.total() {
                        w.merge(&t.waits());
                    }
                }
                let v = if q >= 1.0 {
                    w.max_ns?
                } else {
                    quantile_ns(&w, q)?
                };
                (v > over_ns).then(|| {
                    format!(
                        "{label} {} > {} over {} s",
                        fmt_ns(v),
                        fmt_ns(over_ns),
                        window.len()
                    )
                })
            }
            Trigger::Slow { over_ns } => {
                let longest = newest_slow.iter().copied().max()?;
                (longest >= over_ns)
                    .then(|| format!("a wait of {} >= {}", fmt_ns(longest), fmt_ns(over_ns)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use schedlat_common::{CpuStats, bucket_index};

    use super::*;
    use crate::analysis::recording::CompactWaits;

    fn second(values: &[u64]) -> Second {
        let mut cpu = CpuStats::ZERO;
        for &v in values {
            cpu.buckets[bucket_index(v)] += 1;
        }
        Second {
            start_mono_ns: 0,
            end_mono_ns: 1,
            series: vec![("total".into(), CompactWaits::of(&Waits::from_cpus(&[cpu])))],
            series_dropped: 0,
            slow_lost: 0,
        }
    }

    #[test]
    fn parses_and_fires_on_the_merged_window() {
        let t = Trigger::parse("p99>5ms").unwrap();
        let quiet = second(&[10_000; 100]);
        let busy = second(&[8_000_000; 10]);
        assert_eq!(t.check(&[&quiet, &quiet], 2, &[]), None);
        let why = t.check(&[&quiet, &busy], 2, &[]).unwrap();
        assert!(
            why.starts_with("p99 ") && why.contains("> 5.00 ms over 2 s"),
            "{why}"
        );
        let slow = Trigger::parse("slow>20ms").unwrap();
        assert_eq!(slow.check(&[], 5, &[19_000_000]), None);
        assert!(slow.check(&[], 5, &[25_000_000]).is_some());
        assert!(Trigger::parse("p98>1ms").unwrap_err().contains("p50, p90"));
        assert!(Trigger::parse("p99=1ms").unwrap_err().contains("p99>5ms"));
        assert!(Trigger::parse("p99>1").unwrap_err().contains("unit"));
    }

    /// Issue 28: "p99 2.32 ms > 2.00 ms over 1 s" fired in the first
    /// second of a 5 s trigger window: start-up alone dumped. A percentile
    /// trigger waits for its window; a slow wait fires from the start.
    #[test]
    fn a_percentile_trigger_waits_for_its_window() {
        let t = Trigger::parse("p99>2ms").unwrap();
        let busy = second(&[3_000_000; 10]);
        for filled in 1..5 {
            let window = vec![&busy; filled];
            assert_eq!(t.check(&window, 5, &[]), None, "{filled} s of 5");
        }
        let why = t.check(&[&busy; 5], 5, &[]).unwrap();
        assert!(why.ends_with("over 5 s"), "{why}");
        let slow = Trigger::parse("slow>2ms").unwrap();
        assert!(slow.check(&[&busy], 5, &[3_000_000]).is_some());
    }
}
