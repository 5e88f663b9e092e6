//! What the push does with a request the collector did not take: the
//! bounded queue, which answers are worth a retry, and how long to wait
//! before the next one. No I/O here: serve's push (commands/serve/otlp.rs)
//! sends and tells the outcome.
//!
//! Every request is cumulative (each holds everything counted since
//! schedlat attached), so a newer one supersedes the older ones: when the
//! queue is full the oldest goes, and nothing counted is lost, only the
//! resolution of the time series the collector builds. Requests go out in
//! order, one at a time. After a failure the next attempt waits
//! `initial * 2^(failures-1)`, at most `max`, plus up to 20% of jitter so
//! that a fleet does not retry in step, and never less than the
//! collector's `Retry-After`; a success resets it. A request that failed
//! [`MAX_ATTEMPTS`] times is dropped, as is one the collector rejects
//! outright (a 4xx other than 408 and 429: retrying cannot help).

use std::{collections::VecDeque, time::Duration};

/// Attempts of one request before it is dropped.
pub(crate) const MAX_ATTEMPTS: u32 = 5;
/// The longest `Retry-After` taken as said (a collector asking for more
/// gets this much).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The exponential backoff between failed attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The wait after the `failures`-th failure in a row (1 or more);
    /// `jitter` in [0, 1) picks where in the 20% of jitter it falls.
    pub(crate) fn delay(
        &self,
        failures: u32,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> Duration {
        let doubled = self
            .initial
            .saturating_mul(1u32 << failures.saturating_sub(1).min(20));
        let base = doubled.min(self.max);
        let jittered = base.mul_f64(1.0 + 0.2 * jitter.clamp(0.0, 1.0));
        match retry_after {
            Some(asked) => jittered.max(asked.min(MAX_RETRY_AFTER)),
            None => jittered,
        }
    }
}

/// What became of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The collector took it (2xx).
    Sent,
    /// Worth another try: a connection error, a timeout, 408, 429, 5xx;
    /// with the `Retry-After` the collector asked for.
    Retry {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Refused for good (another 4xx): dropped.
    Rejected { reason: String },
}

impl Attempt {
    /// The outcome of an HTTP answer: its status and `Retry-After` value.
    pub(crate) fn of_status(status: u16, retry_after: Option<&str>) -> Attempt {
        match status {
            200..=299 => Attempt::Sent,
            408 | 429 | 500..=599 => Attempt::Retry {
                reason: format!("HTTP {status}"),
                retry_after: retry_after.and_then(parse_retry_after),
            },
            _ => Attempt::Rejected {
                reason: format!("HTTP {status}"),
            },
        }
    }
}

/// A `Retry-After` in seconds (the form collectors send; an HTTP date is
/// not taken, the backoff then decides).
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// One encoded request waiting to go.
#[derive(Debug)]
struct Pending {
    body: Vec<u8>,
    attempts: u32,
}

/// The counts a scrape shows of the push.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeliveryCounts {
    /// Requests the collector took.
    pub sent: u64,
    /// Attempts that failed and were retried or gave up.
    pub failed_attempts: u64,
    /// Requests dropped: superseded in a full queue, rejected, or out of
    /// attempts.
    pub dropped: u64,
    /// Requests waiting now, and their bytes.
    pub queued: usize,
    pub queued_bytes: usize,
}

/// The bounded queue of requests and the failures in a row.
#[derive(Debug)]
pub(crate) struct Delivery {
    queue: VecDeque<Pending>,
    capacity: usize,
    /// Failures in a row, for the backoff.
    failures: u32,
    counts: DeliveryCounts,
}

impl Delivery {
    pub(crate) fn new(capacity: usize) -> Delivery {
        Delivery {
            queue: VecDeque::new(),
            capacity: capacity.max(1),
            failures: 0,
            counts: DeliveryCounts::default(),
        }
    }

    /// Queues a new request, dropping the oldest if the queue is full.
    pub(crate) fn push(&mut self, body: Vec<u8>) {
        while self.queue.len() >= self.capacity {
            self.queue.pop_front();
            self.counts.dropped += 1;
        }
        self.queue.push_back(Pending { body, attempts: 0 });
    }

    /// The request to send next, oldest first.
    pub(crate) fn next(&self) -> Option<&[u8]> {
        self.queue.front().map(|p| p.body.as_slice())
    }

    /// What became of the request [`Delivery::next`] gave; returns how
    /// long to wait before the next attempt (None: go on at once).
    pub(crate) fn done(
        &mut self,
        outcome: &Attempt,
        backoff: &Backoff,
        jitter: f64,
    ) -> Option<Duration> {
        match outcome {
            Attempt::Sent => {
                self.queue.pop_front();
                self.counts.sent += 1;
                self.failures = 0;
                None
            }
            Attempt::Rejected { .. } => {
                self.queue.pop_front();
                self.counts.dropped += 1;
                self.counts.failed_attempts += 1;
                None
            }
            Attempt::Retry { retry_after, .. } => {
                self.counts.failed_attempts += 1;
                self.failures += 1;
                if let Some(front) = self.queue.front_mut() {
                    front.attempts += 1;
                    if front.attempts >= MAX_ATTEMPTS {
                        self.queue.pop_front();
                        self.counts.dropped += 1;
                    }
                }
                Some(backoff.delay(self.failures, *retry_after, jitter))
            }
        }
    }

    pub(crate) fn counts(&self) -> DeliveryCounts {
        DeliveryCounts {
            queued: self.queue.len(),
            queued_bytes: self.queue.iter().map(|p| p.body.len()).sum(),
            ..self.counts
        }
    }
}
