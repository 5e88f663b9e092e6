//! The bcrypt checks of basic auth: one at a time, a bounded number
//! waiting. A check costs tens to hundreds of milliseconds of CPU by
//! design, so without a bound a flood of wrong passwords would take every
//! core and thread.
//!
//! The permit that makes it one at a time belongs to the check itself,
//! on its blocking thread, not to the request: a client that hangs up
//! while its check runs drops its request, and the check would go on
//! hashing while the next one started (16-64 clients that reset after 5
//! ms drove serve to 250 threads). A client that hangs up while waiting
//! leaves the queue, which is first come first served, so a login that
//! stays connected is checked soon however many hang up around it.

use std::{cell::Cell, sync::Arc, time::Duration};

use tokio::sync::Semaphore;

/// Checks waiting for the one running, at most: beyond, a request is
/// answered 503 at once. As many as serve keeps connections (64): a
/// flood's clients each hold a place only while connected, so with fewer
/// places a login arriving among 32 such clients found them all taken
/// and was refused, where a place in the queue would have reached the
/// front after one check (those ahead hang up first).
pub(crate) const MAX_WAITING: usize = 64;

/// How long a check waits for its turn before it is answered 503.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);

/// What a request's credentials get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Admitted,
    /// 401: none, or not a user's right password.
    Refused,
    /// 503: too many checks waiting to check this one now.
    Busy,
}

pub(crate) struct Gate {
    /// One permit: the check that holds it runs.
    running: Arc<Semaphore>,
    /// Requests waiting for the permit.
    waiting: Cell<usize>,
    /// For tests: how many checks ran at once, at most (the permit's
    /// holders are counted on their blocking threads).
    #[cfg(test)]
    pub(crate) at_once: Arc<std::sync::atomic::AtomicUsize>,
    #[cfg(test)]
    pub(crate) peak: Arc<std::sync::atomic::AtomicUsize>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            running: Arc::new(Semaphore::new(1)),
            waiting: Cell::new(0),
            #[cfg(test)]
            at_once: Arc::default(),
            #[cfg(test)]
            peak: Arc::default(),
        }
    }
}

/// Counts a request as waiting while it lives.
struct Waiting<'a>(&'a Cell<usize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl Gate {
    /// Whether `password` matches `hash`; None when too many checks wait,
    /// or this one waited [`MAX_WAIT`] for its turn.
    pub(crate) async fn check(&self, password: &str, hash: &str) -> Option<bool> {
        if self.waiting.get() >= MAX_WAITING {
            return None;
        }
        self.waiting.set(self.waiting.get() + 1);
        let waiting = Waiting(&self.waiting);
        let permit = tokio::time::timeout(MAX_WAIT, self.running.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        drop(waiting);
        let (password, hash) = (password.to_string(), hash.to_string());
        #[cfg(test)]
        let (at_once, peak) = (self.at_once.clone(), self.peak.clone());
        let check = tokio::task::spawn_blocking(move || {
            // Held until the hash is computed, whatever the request does.
            let _permit = permit;
            #[cfg(test)]
            {
                use std::sync::atomic::Ordering::SeqCst;
                let now = at_once.fetch_add(1, SeqCst) + 1;
                peak.fetch_max(now, SeqCst);
            }
            let right = super::auth::verify(&password, &hash);
            #[cfg(test)]
            at_once.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            right
        });
        Some(check.await.unwrap_or(false))
    }
}
