//! What `schedlat top` shows, independent of drawing: the last interval, the
//! run so far, the p99 history, and the view toggles the keys change.

use std::{collections::VecDeque, time::Duration};

use crate::{analysis::percentiles::quantile_ns, histogram::Waits, loader::HookMode};

/// p99 samples kept for the sparkline: a minute at the default interval.
pub const HISTORY: usize = 60;
/// Refresh intervals `+` and `-` step through.
pub const INTERVALS_MS: [u64; 7] = [250, 500, 1000, 2000, 5000, 10_000, 30_000];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Quit,
}

pub struct State {
    pub hook: HookMode,
    /// "all tasks", or the filter's target.
    pub scope: String,
    pub interval: Duration,
    pub paused: bool,
    pub cumulative: bool,
    pub show_help: bool,
    /// The last interval's waits and its measured length.
    pub last: Waits,
    pub last_elapsed: Duration,
    /// Everything since start.
    pub total: Waits,
    pub total_elapsed: Duration,
    /// p99 of each interval, oldest first (None: no waits that interval).
    pub p99_history: VecDeque<Option<u64>>,
    /// schedlat's own BPF ns per program run over the last interval, when
    /// the kernel's BPF statistics are on.
    pub bpf_ns_per_run: Option<f64>,
}

impl State {
    pub fn new(hook: HookMode, scope: String, interval: Duration) -> State {
        State {
            hook,
            scope,
            interval,
            paused: false,
            cumulative: false,
            show_help: false,
            last: Waits::default(),
            last_elapsed: Duration::ZERO,
            total: Waits::default(),
            total_elapsed: Duration::ZERO,
            p99_history: VecDeque::with_capacity(HISTORY),
            bpf_ns_per_run: None,
        }
    }

    /// Takes one interval's waits.
    pub fn push(&mut self, waits: Waits, elapsed: Duration) {
        if self.p99_history.len() == HISTORY {
            self.p99_history.pop_front();
        }
        self.p99_history.push_back(quantile_ns(&waits, 0.99));
        self.total.merge(&waits);
        self.total_elapsed += elapsed;
        self.last = waits;
        self.last_elapsed = elapsed;
    }

    /// The waits the view shows: the last interval, or everything (`c`).
    pub fn shown(&self) -> (&Waits, Duration) {
        if self.cumulative {
            (&self.total, self.total_elapsed)
        } else {
            (&self.last, self.last_elapsed)
        }
    }

    pub fn on_key(&mut self, key: char, ctrl: bool) -> Action {
        match (key, ctrl) {
            ('c', true) | ('q', false) => return Action::Quit,
            (' ', _) => self.paused = !self.paused,
            ('c', false) => self.cumulative = !self.cumulative,
            ('+', _) => self.interval = step(self.interval, 1),
            ('-', _) => self.interval = step(self.interval, -1),
            ('?' | 'h', _) => self.show_help = !self.show_help,
            _ => {}
        }
        Action::Continue
    }
}

/// The next refresh interval up or down the ladder.
fn step(current: Duration, direction: i32) -> Duration {
    let ms = current.as_millis() as u64;
    let i = INTERVALS_MS
        .iter()
        .position(|&v| v >= ms)
        .unwrap_or(INTERVALS_MS.len() - 1);
    let next = (i as i32 + direction).clamp(0, INTERVALS_MS.len() as i32 - 1) as usize;
    Duration::from_millis(INTERVALS_MS[next])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(HookMode::Btf, "all tasks".into(), Duration::from_secs(1))
    }

    #[test]
    fn keys_toggle_and_quit() {
        let mut s = state();
        assert_eq!(s.on_key('c', false), Action::Continue);
        assert!(s.cumulative);
        s.on_key(' ', false);
        assert!(s.paused);
        s.on_key('+', false);
        assert_eq!(s.interval, Duration::from_secs(2));
        s.on_key('-', false);
        s.on_key('-', false);
        assert_eq!(s.interval, Duration::from_millis(500));
        assert_eq!(s.on_key('q', false), Action::Quit);
        assert_eq!(s.on_key('c', true), Action::Quit);
    }

    #[test]
    fn interval_steps_stop_at_the_ends() {
        assert_eq!(
            step(Duration::from_millis(250), -1),
            Duration::from_millis(250)
        );
        assert_eq!(step(Duration::from_secs(30), 1), Duration::from_secs(30));
    }

    #[test]
    fn history_keeps_the_last_minute() {
        let mut s = state();
        for _ in 0..HISTORY + 5 {
            s.push(Waits::default(), Duration::from_secs(1));
        }
        assert_eq!(s.p99_history.len(), HISTORY);
        assert_eq!(s.total_elapsed, Duration::from_secs(HISTORY as u64 + 5));
    }
}
