//! Intervals out of the kernel's running totals. The kernel's counters only
//! grow; an interval is the difference between two readings, and its
//! extremes are the per-interval ones the epoch flip hands back
//! (Tracer::end_interval). Every command that reports intervals gets them
//! here.

use super::{
    tracer::Tracer,
    victims::{self, Collector},
};
use crate::{collect::error::ReadError, histogram::Waits};

/// The histogram's intervals: the running totals at the last interval end.
#[derive(Debug, Default)]
pub struct HistogramInterval {
    previous: Waits,
}

impl HistogramInterval {
    /// Starts the first interval now: what the kernel counted before is not
    /// in it.
    pub fn start(tracer: &mut Tracer) -> Result<HistogramInterval, ReadError> {
        let mut interval = HistogramInterval::default();
        interval.end(tracer)?;
        Ok(interval)
    }

    /// Ends the current interval and starts the next: the interval's waits,
    /// with its extremes.
    pub fn end(&mut self, tracer: &mut Tracer) -> Result<Waits, ReadError> {
        let (current, extremes) = tracer.end_interval()?;
        let waits = current.since(&self.previous).with_extremes(&extremes);
        self.previous = current;
        Ok(waits)
    }
}

/// Where each interval's numbers come from when the victims tables may or
/// may not have loaded (`top`, `diagnose`).
pub enum Source {
    /// The histogram mode's programs alone.
    Histogram(HistogramInterval),
    /// The histogram and the victims tables from one load.
    WithVictims(Collector),
}

impl Source {
    /// Starts the first interval now; with `max_tasks`, the victims tables
    /// were loaded with that many rows (Modes::histogram_and_victims).
    pub fn start(tracer: &mut Tracer, max_tasks: Option<u32>) -> Result<Source, ReadError> {
        Ok(match max_tasks {
            Some(max_tasks) => Source::WithVictims(Collector::start(tracer, max_tasks)?),
            None => Source::Histogram(HistogramInterval::start(tracer)?),
        })
    }

    /// Ends the kernel's interval: its waits, and its victims if loaded.
    pub fn end_interval(
        &mut self,
        tracer: &mut Tracer,
    ) -> Result<(Waits, Option<victims::Interval>), ReadError> {
        match self {
            Source::Histogram(histogram) => Ok((histogram.end(tracer)?, None)),
            Source::WithVictims(collector) => {
                let mut interval = collector.end_interval(tracer)?;
                Ok((std::mem::take(&mut interval.waits), Some(interval)))
            }
        }
    }
}
