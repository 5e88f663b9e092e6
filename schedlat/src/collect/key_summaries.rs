//! The keys of `serve --pids` and `serve --cgroups`, read by their
//! summaries: each key's waits and their sum (`KEY_SUMMARY`, 24 bytes a
//! key) rather than its whole histogram (`KEYED`, 1,704 bytes, and 712 more
//! of decision split per cgroup). A scrape needs every key's wait since
//! the previous scrape, to rank them for `--max-series`, but the whole
//! histogram only of the keys it exports (export/keyed_series.rs reads
//! those one by one, and derives the overflow series from the total).
//!
//! - A key is idle when its count did not change: one compare, on a row
//!   read in place from the memory-mapped summaries (summary_rows.rs; a
//!   batch read of a hash map of them cost the kernel about 0.4 us a key
//!   to copy out, and the histograms' batch read 1.7 KiB of every key).
//! - Existence: as the keyed intervals do (key_intervals.rs), a key idle
//!   for 2 readings is asked whether its task or cgroup still exists, and
//!   again as its idle readings double, at most [`ask_budget`](super::key_intervals::ask_budget) keys a
//!   reading; one found gone is deleted from the kernel's maps (summary,
//!   histogram, decision split) once the reading is handed out.

use schedlat_common::scope::{Breakdown, KeyStats, KeySummary};

use super::{
    error::ReadError,
    key_intervals::{Existence, KeyRef, PerKey, ask_due},
    key_slots::{Key, Slots},
    keylabels::KeyLabels,
    tracer::Tracer,
};

/// What is kept per key: its count at the previous reading (the sum is
/// the slot's `last_sum_ns`), and the user's state.
#[derive(Default)]
pub(crate) struct Summarised<S> {
    last_waits: u64,
    pub user_state: S,
}

/// A key that waited since the previous reading.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waited {
    pub key: u64,
    pub slot: usize,
    pub new_sum_ns: u64,
    /// Not seen waiting before this reading: every wait it has is new.
    pub new_key: bool,
}

/// A key's whole entry, read for a key that is exported: its histogram,
/// and its decision split where the kernel keeps one.
pub(crate) struct WholeKey {
    pub stats: KeyStats,
    pub decision: Option<schedlat_common::decision::KeyDecision>,
}

/// The per-key state across readings.
pub(crate) struct KeySummaries<S = (), N = KeyLabels> {
    by: Breakdown,
    /// Whether the kernel keeps each key's decision split (deleted with
    /// the key).
    decisions: bool,
    names: N,
    slots: Slots<Summarised<S>>,
    round: u64,
    active: Vec<Waited>,
    idle_shown: Vec<usize>,
    gone: Vec<u64>,
    /// Keys due to be asked whether they exist: slot, readings since due.
    due: Vec<(usize, u32)>,
    /// Keys there were when due keys were first left over (0: none left).
    backlog_of: usize,
}

impl<S: PerKey> KeySummaries<S, KeyLabels> {
    /// `with_splits`: the kernel keeps the cause and decision splits per
    /// key (`--cgroups`), when it measures them.
    pub(crate) fn new(by: Breakdown, tracer: &Tracer, with_splits: bool) -> Self {
        let mut keys = KeySummaries::with_names(by, tracer.key_labels(by));
        keys.decisions = with_splits && tracer.decision.is_some();
        keys
    }

    /// Whether the kernel keeps each key's decision split.
    pub(crate) fn decisions(&self) -> bool {
        self.decisions
    }

    /// Names containers' cgroups by their runtimes' files too.
    pub(crate) fn name_containers(&mut self) {
        self.names.name_containers();
    }

    /// Reads every key's summary and hands the reading to `take`, with
    /// the tracer for the whole entries of the keys it exports; then
    /// deletes the keys found gone.
    pub(crate) fn interval<R>(
        &mut self,
        tracer: &mut Tracer,
        take: impl FnOnce(&mut Reading<'_, S>, &Tracer) -> Result<R, ReadError>,
    ) -> Result<R, ReadError> {
        self.begin();
        tracer.for_each_key_summary(|summary| self.feed(summary.key, summary))?;
        let out = take(&mut Reading { keys: self }, tracer);
        let split = self.decisions;
        // The split first: a key whose histogram delete failed is asked
        // again, and its split's entry is then gone already (no error).
        self.finish(|key| {
            (!split || tracer.forget_key_decision(key).is_ok()) && tracer.forget_key(key).is_ok()
        });
        out
    }
}

impl<S: PerKey, N: Existence> KeySummaries<S, N> {
    pub(crate) fn with_names(by: Breakdown, names: N) -> Self {
        KeySummaries {
            by,
            decisions: false,
            names,
            slots: Slots::new(0),
            round: 0,
            active: Vec::new(),
            idle_shown: Vec::new(),
            gone: Vec::new(),
            due: Vec::new(),
            backlog_of: 0,
        }
    }

    /// [`KeySummaries::interval`] on summaries given here (tests), `forget`
    /// deleting a key.
    #[cfg(test)]
    pub(crate) fn interval_of<R>(
        &mut self,
        current: impl IntoIterator<Item = (u64, KeySummary)>,
        forget: impl FnMut(u64) -> bool,
        take: impl FnOnce(&mut Reading<'_, S, N>) -> R,
    ) -> R {
        self.begin();
        for (key, summary) in current {
            self.feed(key, &KeySummary { key, ..summary });
        }
        let out = take(&mut Reading { keys: self });
        self.finish(forget);
        out
    }

    pub(crate) fn by(&self) -> Breakdown {
        self.by
    }

    /// Keys known (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The names it asks (tests change what exists).
    #[cfg(test)]
    pub(crate) fn names_mut(&mut self) -> &mut N {
        &mut self.names
    }

    fn begin(&mut self) {
        self.round += 1;
        self.active.clear();
        self.idle_shown.clear();
        self.gone.clear();
        self.due.clear();
        self.slots.begin();
    }

    /// One key's summary: its slot (usually the one that followed the
    /// previous key's, key_slots.rs) and one compare.
    fn feed(&mut self, key: u64, summary: &KeySummary) {
        let (round, names) = (self.round, &mut self.names);
        let slot = self.slots.find(key, || {
            // A cgroup's path while it is there to be read.
            names.saw(key);
            Key::new(key, round, [0; 16])
        });
        let state = self.slots.key(slot);
        state.seen = round;
        if summary.waits == state.user.last_waits {
            if let Some(late) = state.idle_reading() {
                self.due.push((slot, late));
            }
            if state.user.shown_idle() {
                self.idle_shown.push(slot);
            }
            return;
        }
        self.active.push(Waited {
            key,
            slot,
            new_sum_ns: summary.sum_ns.saturating_sub(state.last_sum_ns),
            new_key: state.user.last_waits == 0,
        });
        state.user.last_waits = summary.waits;
        state.last_sum_ns = summary.sum_ns;
        state.waited();
    }

    fn finish(&mut self, mut forget: impl FnMut(u64) -> bool) {
        ask_due(
            &mut self.slots,
            (&mut self.due, &mut self.backlog_of),
            &mut self.names,
            &mut self.gone,
        );
        let round = self.round;
        self.slots.retain(|k| k.seen == round);
        for &key in &self.gone {
            if forget(key) {
                self.slots.remove(key);
            }
        }
    }
}

impl<S: PerKey> PerKey for Summarised<S> {
    fn shown_idle(&self) -> bool {
        self.user_state.shown_idle()
    }
}

/// One reading, handed to the user between the read and the deletes.
pub(crate) struct Reading<'a, S, N = KeyLabels> {
    keys: &'a mut KeySummaries<S, N>,
}

impl<S, N> Reading<'_, S, N> {
    pub(crate) fn by(&self) -> Breakdown {
        self.keys.by
    }

    /// The keys that waited since the previous reading, in the kernel
    /// map's order.
    pub(crate) fn active(&self) -> &[Waited] {
        &self.keys.active
    }

    /// The idle keys whose [`PerKey::shown_idle`] holds.
    pub(crate) fn idle_shown(&self) -> &[usize] {
        &self.keys.idle_shown
    }

    /// The key in `slot`.
    pub(crate) fn key(&self, slot: usize) -> u64 {
        self.keys.slots.get(slot).key
    }

    /// The key in `slot`, what the user keeps for it, and its names.
    pub(crate) fn slot(&mut self, slot: usize) -> KeyRef<'_, S, N> {
        let k = self.keys.slots.key(slot);
        KeyRef {
            key: k.key,
            comm: k.comm,
            user: &mut k.user.user_state,
            names: &mut self.keys.names,
        }
    }

    /// Keeps the name the kernel stored with the key in `slot` (read
    /// with its whole entry).
    pub(crate) fn set_comm(&mut self, slot: usize, comm: [u8; 16]) {
        self.keys.slots.key(slot).comm = comm;
    }
}

impl Tracer {
    /// A key's whole entry (`with_decision`: and its decision split);
    /// None once the key is gone from the map.
    pub(crate) fn whole_key(
        &self,
        key: u64,
        with_decision: bool,
    ) -> Result<Option<WholeKey>, ReadError> {
        let Some(stats) = self.key_entry(key)? else {
            return Ok(None);
        };
        let decision = match with_decision {
            true => self.key_decision_entry(key)?,
            false => None,
        };
        Ok(Some(WholeKey { stats, decision }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Live {
        gone: Vec<u64>,
    }

    impl Existence for Live {
        fn saw(&mut self, _: u64) {}
        fn exists(&mut self, key: u64) -> bool {
            !self.gone.contains(&key)
        }
    }

    fn summary(waits: u64, sum_ns: u64) -> KeySummary {
        KeySummary {
            key: 0,
            waits,
            sum_ns,
        }
    }

    fn read(keys: &mut KeySummaries<(), Live>, current: &[(u64, KeySummary)]) -> Vec<Waited> {
        keys.interval_of(current.iter().copied(), |_| true, |r| r.active().to_vec())
    }

    #[test]
    fn only_keys_that_waited_are_handed_out_with_what_they_waited_since() {
        let mut keys = KeySummaries::with_names(Breakdown::Process, Live::default());
        let first = read(&mut keys, &[(1, summary(2, 30)), (2, summary(1, 5))]);
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|w| w.new_key));
        assert_eq!(first[0].new_sum_ns, 30);
        let second = read(&mut keys, &[(1, summary(5, 100)), (2, summary(1, 5))]);
        assert_eq!(second.len(), 1);
        let w = second[0];
        assert_eq!((w.key, w.new_sum_ns, w.new_key), (1, 70, false));
    }

    #[test]
    fn a_gone_key_is_deleted_after_two_idle_readings() {
        let mut keys = KeySummaries::with_names(Breakdown::Process, Live::default());
        read(&mut keys, &[(7, summary(1, 10))]);
        keys.names_mut().gone.push(7);
        let mut forgotten = Vec::new();
        for _ in 0..2 {
            keys.interval_of(
                [(7, summary(1, 10))],
                |k| {
                    forgotten.push(k);
                    true
                },
                |_| (),
            );
        }
        assert_eq!(forgotten, [7]);
        assert_eq!(keys.len(), 0);
    }
}
