//! Intervals out of the kernel's running totals. The kernel's counters only
//! grow; an interval is the difference between two readings, and its
//! extremes are the per-interval ones the epoch flip hands back
//! (Tracer::end_interval). Every command that reports intervals gets them
//! here.

use super::tracer::Tracer;
use crate::{collect::error::ReadError, histogram::Waits};

/// The histogram's intervals: the running totals at the last interval end.
#[derive(Debug, Default)]
pub(crate) struct HistogramInterval {
    previous: Waits,
}

impl HistogramInterval {
    /// Starts the first interval now: what the kernel counted before is not
    /// in it.
    pub(crate) fn start(tracer: &mut Tracer) -> Result<HistogramInterval, ReadError> {
        let mut interval = HistogramInterval::default();
        interval.end(tracer)?;
        Ok(interval)
    }

    /// Ends the current interval and starts the next: the interval's waits,
    /// with its extremes.
    pub(crate) fn end(&mut self, tracer: &mut Tracer) -> Result<Waits, ReadError> {
        let (current, extremes) = tracer.end_interval()?;
        let waits = current.since(&self.previous).with_extremes(&extremes);
        self.previous = current;
        Ok(waits)
    }
}
