//! What `schedlat top` shows, independent of drawing: the last interval, the
//! run so far, the p99 history, the victims and culprits, and the view
//! toggles the keys change.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::Duration,
};

use schedlat_common::victims::WaitStats;

use crate::{
    analysis::{
        percentiles::quantile_ns,
        victims::{SortKey, Tables, Totals, rank},
    },
    collect::{victims::VictimsInterval, workloads::TaskWorkload},
    histogram::Waits,
    kernel::hook::HookMode,
    output::top::pairs::PairsShown,
};

/// p99 samples kept for the sparkline: a minute at the default interval.
pub(crate) const HISTORY: usize = 60;
/// Rows per table the victims panel shows at most, however tall the
/// terminal.
pub(crate) const MAX_ROWS: usize = 10;
/// Refresh intervals `+` and `-` step through.
pub(crate) const INTERVALS_MS: [u64; 7] = [250, 500, 1000, 2000, 5000, 10_000, 30_000];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Continue,
    Quit,
}

pub(crate) struct State {
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
    /// The victims panel's tables, or why there are none (no tp_btf, a
    /// kernel before 5.12): the rest of the view works without them.
    pub victims: Result<VictimTables, String>,
    /// What the victims panel is ranked by (`s` cycles).
    pub sort: SortKey,
    /// Processes whose cgroup was throttled: in the last interval, and in
    /// any so far. Their waits that ended on an idle CPU were throttling.
    pub throttled: (HashSet<u32>, HashSet<u32>),
    /// The workloads of the tasks the panel shows, by TID (read at the
    /// last refresh).
    pub workloads: HashMap<u32, TaskWorkload>,
    /// Who waited behind whom (`--pairs`); None when not asked for.
    pub pairs: Option<PairsShown>,
}

/// The victims and culprits of the last interval, and of the run so far.
#[derive(Debug, Default)]
pub(crate) struct VictimTables {
    last_victims: Vec<WaitStats>,
    last_culprits: Vec<WaitStats>,
    /// Waits the kernel's tables had no room for (victims, culprits): the
    /// last interval's, and the run's.
    last_overflow: (u64, u64),
    total_overflow: (u64, u64),
    totals: Totals,
    intervals: u64,
}

/// One view of the victims panel: the ranked tables and the waits missing
/// from them (victims, culprits).
pub(crate) struct Ranked {
    pub tables: Tables,
    pub overflow: (u64, u64),
}

impl VictimTables {
    fn push(&mut self, interval: &VictimsInterval) {
        let c = &interval.counters;
        self.last_overflow = (c.victims_overflow, c.culprits_overflow);
        self.total_overflow.0 += c.victims_overflow;
        self.total_overflow.1 += c.culprits_overflow;
        self.totals.add(&interval.victims, &interval.culprits);
        self.last_victims.clone_from(&interval.victims);
        self.last_culprits.clone_from(&interval.culprits);
        self.intervals += 1;
    }

    /// The last interval's tables, or the run's (`cumulative`), ranked by
    /// `by`, `top` rows each; None before the first interval has ended.
    pub(crate) fn ranked(&self, cumulative: bool, by: SortKey, top: usize) -> Option<Ranked> {
        if self.intervals == 0 {
            return None;
        }
        Some(if cumulative {
            let (v, c) = self.totals.overflow;
            Ranked {
                tables: self.totals.rank(by, top),
                overflow: (self.total_overflow.0 + v, self.total_overflow.1 + c),
            }
        } else {
            Ranked {
                tables: rank(&self.last_victims, &self.last_culprits, by, top),
                overflow: self.last_overflow,
            }
        })
    }
}

impl State {
    pub(crate) fn new(hook: HookMode, scope: String, interval: Duration) -> State {
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
            victims: Ok(VictimTables::default()),
            sort: SortKey::Total,
            throttled: (HashSet::new(), HashSet::new()),
            workloads: HashMap::new(),
            pairs: None,
        }
    }

    /// The tasks (TID, PID) of the rows the victims panel shows now (the
    /// ones whose workloads are worth reading).
    pub(crate) fn shown_tasks(&self) -> Vec<(u32, u32)> {
        let Ok(tables) = &self.victims else {
            return Vec::new();
        };
        let Some(ranked) = tables.ranked(self.cumulative, self.sort, MAX_ROWS) else {
            return Vec::new();
        };
        let rows = ranked.tables.victims.iter().chain(&ranked.tables.culprits);
        rows.map(|r| (r.task.tid, r.task.tgid)).collect()
    }

    /// The throttled processes of the view shown (last interval or run).
    pub(crate) fn throttled_shown(&self) -> &HashSet<u32> {
        if self.cumulative {
            &self.throttled.1
        } else {
            &self.throttled.0
        }
    }

    /// Takes one interval's throttled processes.
    pub(crate) fn push_throttled(&mut self, pids: HashSet<u32>) {
        self.throttled.1.extend(&pids);
        self.throttled.0 = pids;
    }

    /// Takes one interval's victims and culprits.
    pub(crate) fn push_victims(&mut self, interval: &VictimsInterval) {
        if let Ok(tables) = &mut self.victims {
            tables.push(interval);
        }
    }

    /// Takes one interval's waits.
    pub(crate) fn push(&mut self, waits: Waits, elapsed: Duration) {
        if self.p99_history.len() == HISTORY {
            self.p99_history.pop_front();
        }
        self.p99_history.push_back(quantile_ns(&waits, 0.99));
        // The first interval is the total so far: merging it into the
        // empty default would drop its cause split (a span merged with
        // one that has none has none).
        if self.total_elapsed.is_zero() {
            self.total = waits.clone();
        } else {
            self.total.merge(&waits);
        }
        self.total_elapsed += elapsed;
        self.last = waits;
        self.last_elapsed = elapsed;
    }

    /// The waits the view shows: the last interval, or everything (`c`).
    pub(crate) fn shown(&self) -> (&Waits, Duration) {
        if self.cumulative {
            (&self.total, self.total_elapsed)
        } else {
            (&self.last, self.last_elapsed)
        }
    }

    pub(crate) fn on_key(&mut self, key: char, ctrl: bool) -> Action {
        match (key, ctrl) {
            ('c', true) | ('q', false) => return Action::Quit,
            (' ', _) => self.paused = !self.paused,
            ('c', false) => self.cumulative = !self.cumulative,
            ('s', false) => self.sort = self.sort.next(),
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
        s.on_key('s', false);
        assert_eq!(s.sort, SortKey::Max);
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

    #[test]
    fn the_cumulative_view_keeps_the_cause_split() {
        let mut s = state();
        let split = crate::output::causes::line::tests::counts();
        let waits = Waits {
            causes: Some(split.clone()),
            ..Waits::default()
        };
        s.push(waits.clone(), Duration::from_secs(1));
        s.push(waits, Duration::from_secs(1));
        let total = s.total.causes.as_ref().expect("the run's split");
        assert_eq!(total.waits(), 2 * split.waits());
    }

    #[test]
    fn victims_show_the_last_interval_or_the_run() {
        use crate::analysis::task::tests::task;
        let mut s = state();
        let tables = s.victims.as_ref().unwrap();
        assert!(tables.ranked(false, SortKey::Total, 5).is_none());
        let interval = |count| VictimsInterval {
            victims: vec![WaitStats {
                task: task(7, 7, "stress-ng-cpu", 0, 0, 0),
                count,
                total_ns: count * 1_000,
                max_ns: 1_000,
                ..Default::default()
            }],
            counters: schedlat_common::victims::ModeCounters {
                victims_overflow: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        s.push_victims(&interval(3));
        s.push_victims(&interval(4));
        let tables = s.victims.as_ref().unwrap();
        let last = tables.ranked(false, SortKey::Total, 5).unwrap();
        assert_eq!((last.tables.victims[0].count, last.overflow.0), (4, 1));
        let run = tables.ranked(true, SortKey::Total, 5).unwrap();
        assert_eq!((run.tables.victims[0].count, run.overflow.0), (7, 2));

        // Unavailable victims stay so; the histogram is unaffected.
        s.victims = Err("no tp_btf".into());
        s.push_victims(&interval(1));
        assert!(s.victims.is_err());
    }
}
