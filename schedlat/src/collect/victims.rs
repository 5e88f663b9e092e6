//! Reading one interval of the victims mode out of the kernel: flip the
//! epoch, let the programs that read the old one finish, then read the half
//! of the row arrays they stopped writing (schedlat-ebpf/src/victims.rs) and
//! mark it empty, so each interval starts with empty tables. [`Source`] is
//! the histogram with the tables when they loaded, without when they did
//! not (`top`, `diagnose`).

use std::time::Duration;

use aya::{
    Ebpf, Pod,
    maps::{Array, MapData, PerCpuArray},
};
use schedlat_common::{
    names,
    victims::{ModeCounters, WaitStats},
};

use super::interval::HistogramInterval;
use crate::{
    collect::{
        error::{InMap, ReadError},
        tracer::Tracer,
    },
    histogram::Waits,
};

/// A program that read the old epoch runs to its end within microseconds
/// (sched tracepoints run with interrupts off); this is far longer.
const GRACE: Duration = Duration::from_millis(2);

/// One interval's tables and what could not be recorded.
#[derive(Debug, Default)]
pub(crate) struct VictimsInterval {
    pub victims: Vec<WaitStats>,
    pub culprits: Vec<WaitStats>,
    /// Differences over the interval: overflows (and slow-event counts).
    pub counters: ModeCounters,
    /// Enqueues beyond the start array, and waits that ended before they
    /// began (as in histogram mode).
    pub untracked_tid: u64,
    pub discarded_negative: u64,
    /// The interval's histogram, with its extremes: empty unless the
    /// histogram was loaded too (Modes::histogram_and_victims, `top`).
    pub waits: Waits,
}

/// The tables' geometry, and cumulative counters at the previous
/// interval's end.
pub(crate) struct Collector {
    max_tasks: u32,
    idle_rows: u32,
    counters: ModeCounters,
    histogram: HistogramInterval,
}

impl Collector {
    /// Starts the first interval now: whatever the tables hold from before
    /// (the moments between attach and this call) is dropped. `max_tasks`
    /// is what the tables were loaded with (Modes::victims).
    pub(crate) fn start(tracer: &mut Tracer, max_tasks: u32) -> Result<Collector, ReadError> {
        let cpus = aya::util::nr_cpus().map_err(|(path, error)| ReadError::Proc { path, error })?;
        let mut collector = Collector {
            max_tasks,
            idle_rows: u32::try_from(cpus).unwrap_or(u32::MAX),
            counters: ModeCounters::default(),
            histogram: HistogramInterval::default(),
        };
        collector.end_interval(tracer)?;
        Ok(collector)
    }

    pub(crate) fn end_interval(
        &mut self,
        tracer: &mut Tracer,
    ) -> Result<VictimsInterval, ReadError> {
        let half = epoch(&tracer.ebpf)? & 1;
        // Flips the epoch; its per-CPU statistics carry the loss counters
        // (and the histogram, when it is on).
        let waits = self.histogram.end(tracer)?;
        std::thread::sleep(GRACE);
        let ebpf = &mut tracer.ebpf;
        let victims_used = rows_used(ebpf, half, None)?;
        let culprits_used = rows_used(ebpf, 2 + half, None)?;
        let max = self.max_tasks;
        let n = victims_used.min(u64::from(max)) as u32;
        let victims = read_rows::<WaitStats>(ebpf, names::MAP_VICTIM_ROWS, half * max, n)?;
        let culprits = self.culprits(ebpf, half, culprits_used)?;
        // Empty: the programs take rows from 0 again when they next use it.
        rows_used(ebpf, half, Some(0))?;
        rows_used(ebpf, 2 + half, Some(0))?;

        let counters = mode_counters(ebpf)?;
        let interval = VictimsInterval {
            victims,
            culprits,
            counters: minus(&counters, &self.counters),
            untracked_tid: waits.untracked_tid,
            discarded_negative: waits.discarded_negative,
            waits,
        };
        self.counters = counters;
        Ok(interval)
    }

    /// The idle tasks' rows that were used (zeroed for the half's next
    /// turn: the programs never reset them), then the allocated ones: a
    /// row is taken for each task that ran, so those that neither ended a
    /// wait nor ran inside one are left out.
    fn culprits(&self, ebpf: &mut Ebpf, half: u32, used: u64) -> Result<Vec<WaitStats>, ReadError> {
        let name = names::MAP_CULPRIT_ROWS;
        let base = half * (self.idle_rows + self.max_tasks);
        let map = ebpf.map_mut(name).in_map(name)?;
        let mut rows = Array::<&mut MapData, WaitStats>::try_from(map).in_map(name)?;
        let mut out = Vec::new();
        for i in base..base + self.idle_rows {
            let row = rows.get(&i, 0).in_map(name)?;
            if row.count > 0 || row.held_ns > 0 {
                out.push(row);
            }
            // Zeroed even when it charged nothing: the programs write the
            // idle task's identity into it at its first run.
            rows.set(i, WaitStats::default(), 0).in_map(name)?;
        }
        let first = base + self.idle_rows;
        let n = used.min(u64::from(self.max_tasks)) as u32;
        for i in first..first + n {
            let row = rows.get(&i, 0).in_map(name)?;
            if row.count > 0 || row.held_ns > 0 {
                out.push(row);
            }
        }
        Ok(out)
    }
}

/// Where each interval's numbers come from when the victims tables may or
/// may not have loaded (`top`, `diagnose`).
pub(crate) enum Source {
    /// The histogram mode's programs alone.
    Histogram(HistogramInterval),
    /// The histogram and the victims tables from one load.
    WithVictims(Collector),
}

impl Source {
    /// Starts the first interval now; with `max_tasks`, the victims tables
    /// were loaded with that many rows (Modes::histogram_and_victims).
    pub(crate) fn start(tracer: &mut Tracer, max_tasks: Option<u32>) -> Result<Source, ReadError> {
        Ok(match max_tasks {
            Some(max_tasks) => Source::WithVictims(Collector::start(tracer, max_tasks)?),
            None => Source::Histogram(HistogramInterval::start(tracer)?),
        })
    }

    /// Ends the kernel's interval: its waits, and its victims if loaded.
    pub(crate) fn end_interval(
        &mut self,
        tracer: &mut Tracer,
    ) -> Result<(Waits, Option<VictimsInterval>), ReadError> {
        match self {
            Source::Histogram(histogram) => Ok((histogram.end(tracer)?, None)),
            Source::WithVictims(collector) => {
                let mut interval = collector.end_interval(tracer)?;
                Ok((std::mem::take(&mut interval.waits), Some(interval)))
            }
        }
    }
}

fn epoch(ebpf: &Ebpf) -> Result<u32, ReadError> {
    let name = names::MAP_EPOCH;
    let map = ebpf.map(name).in_map(name)?;
    let epoch = Array::<&MapData, u32>::try_from(map).in_map(name)?;
    epoch.get(&0, 0).in_map(name)
}

/// Rows taken from counter `i` of ROWS_USED; with `set`, then replaced.
fn rows_used(ebpf: &mut Ebpf, i: u32, set: Option<u64>) -> Result<u64, ReadError> {
    let name = names::MAP_ROWS_USED;
    let map = ebpf.map_mut(name).in_map(name)?;
    let mut used = Array::<&mut MapData, u64>::try_from(map).in_map(name)?;
    let value = used.get(&i, 0).in_map(name)?;
    if let Some(new) = set {
        used.set(i, new, 0).in_map(name)?;
    }
    Ok(value)
}

/// `n` rows of an array map from index `first`.
fn read_rows<V: Pod>(
    ebpf: &Ebpf,
    name: &'static str,
    first: u32,
    n: u32,
) -> Result<Vec<V>, ReadError> {
    let map = ebpf.map(name).in_map(name)?;
    let rows = Array::<&MapData, V>::try_from(map).in_map(name)?;
    (first..first + n)
        .map(|i| rows.get(&i, 0).in_map(name))
        .collect()
}

impl Tracer {
    /// The victims and slow-event counters since load, summed over CPUs.
    pub(crate) fn mode_counters(&self) -> Result<ModeCounters, ReadError> {
        mode_counters(&self.ebpf)
    }
}

/// The per-CPU counters, summed.
fn mode_counters(ebpf: &Ebpf) -> Result<ModeCounters, ReadError> {
    let name = names::MAP_MODE_COUNTERS;
    let map = ebpf.map(name).in_map(name)?;
    let cpus = PerCpuArray::<&MapData, ModeCounters>::try_from(map).in_map(name)?;
    let values = cpus.get(&0, 0).in_map(name)?;
    Ok(values
        .iter()
        .fold(ModeCounters::default(), |sum, c| ModeCounters {
            victims_overflow: sum.victims_overflow + c.victims_overflow,
            culprits_overflow: sum.culprits_overflow + c.culprits_overflow,
            slow_events: sum.slow_events + c.slow_events,
            slow_lost: sum.slow_lost + c.slow_lost,
            culprits_unapportioned_ns: sum.culprits_unapportioned_ns + c.culprits_unapportioned_ns,
        }))
}

pub(crate) fn minus(now: &ModeCounters, then: &ModeCounters) -> ModeCounters {
    ModeCounters {
        victims_overflow: now.victims_overflow.saturating_sub(then.victims_overflow),
        culprits_overflow: now.culprits_overflow.saturating_sub(then.culprits_overflow),
        slow_events: now.slow_events.saturating_sub(then.slow_events),
        slow_lost: now.slow_lost.saturating_sub(then.slow_lost),
        culprits_unapportioned_ns: (now.culprits_unapportioned_ns)
            .saturating_sub(then.culprits_unapportioned_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_differences_never_underflow() {
        let then = ModeCounters {
            victims_overflow: 5,
            slow_lost: 2,
            ..Default::default()
        };
        let now = ModeCounters {
            victims_overflow: 7,
            culprits_overflow: 1,
            slow_events: 3,
            slow_lost: 2,
            culprits_unapportioned_ns: 9,
        };
        let d = minus(&now, &then);
        assert_eq!((d.victims_overflow, d.culprits_overflow), (2, 1));
        assert_eq!((d.slow_events, d.slow_lost), (3, 0));
        assert_eq!(d.culprits_unapportioned_ns, 9);
        assert_eq!(minus(&then, &now).victims_overflow, 0);
    }
}
