//! The keyed intervals: the one place the kernel's per-key histograms
//! (`-P`, `-L`, `--pidnss`, `--cgroups`, `--cpus`, `serve --pids`...) are
//! turned into intervals. The kernel keeps one cumulative histogram per key
//! since load; each reading hands out what every key waited since the
//! previous one, carries what names the key, and deletes the kernel
//! entries of keys whose task or cgroup is gone. Its users (the breakdown
//! tables, the flight recorder's per-cgroup series, serve's per-key series
//! and their `--max-series`) only rank and show.
//!
//! - A key is idle in a reading when its sum and its 0 ns bucket did not
//!   change (a wait of 1 ns or more adds to the sum): two compares, the
//!   buckets are not looked at. Only a key that waited has its buckets
//!   differenced, while its entry is still in the CPU's cache.
//! - Its buckets are kept between readings whole ([`ROW_WIDTH`]): every
//!   fine bucket and log2 slot (the tables and their percentiles). serve
//!   reads its keys otherwise (key_summaries.rs: a summary of every key,
//!   the whole entry of the keys it exports).
//! - Names: a key's comm as the kernel last stored it (a task that exited
//!   has no /proc entry left), a cgroup's path from its first sight
//!   (keylabels.rs).
//! - A key idle for 2 readings is due to be asked whether its task or
//!   cgroup still exists, and again each time its idle readings double
//!   (one syscall per key asked, about 0.9 us: at ten thousand keys many
//!   sleep through an interval). No reading asks more than
//!   [`ask_budget`] keys (the larger of 256 and an eighth of the keys),
//!   those due longest first: keys that went idle together (a fork storm
//!   ending) are asked over a few readings instead of all in one, and a
//!   due key is asked at most 8 readings late. A key found gone is deleted
//!   from the kernel map once the reading is handed out, and forgotten:
//!   all its waits were in earlier intervals, and a reused TID or id
//!   starts again from zero.

use schedlat_common::scope::{Breakdown, KeyStats};

use super::{
    batch::Entries,
    decision::KeyDecisions,
    error::ReadError,
    key_slots::{Key, Slots},
    keylabels::KeyLabels,
    tracer::Tracer,
};
use crate::{
    histogram::{CauseCounts, CauseFacts, KeyDecisionCounts, NR_BUCKETS, NR_LOG2_SLOTS, Waits},
    sys::workload::level::Workload,
};

/// Keys per batch read: their 1.7 KiB entries (430 KiB) are differenced
/// while the kernel's copy is still in the CPU's cache.
const CHUNK: usize = 256;

/// The most keys one reading asks whether they exist, of `keys`: an
/// eighth of them (at 0.9 us a syscall, 1.1 ms at ten thousand keys where
/// asking all costs 9 ms), and never fewer than 256 (0.23 ms), so a small
/// map asks every due key at once.
pub(super) fn ask_budget(keys: usize) -> usize {
    (keys / 8).max(256)
}

/// Asks up to [`ask_budget`] of the keys due whether they still exist,
/// those due longest first; each is due again when its idle readings
/// have doubled (a key still there, or one whose delete failed). While some are left over, the budget
/// stays that of the keys there were (it does not shrink as the gone
/// are deleted), and a key due later never passes one due earlier: each
/// is asked within 8 readings of due.
///
/// `due` is the reading's due keys (slot, readings since due) and
/// `backlog_of` the keys there were when some were first left over (0:
/// none); the gone go to `gone`. Both engines (this one and
/// key_summaries.rs) ask through it.
pub(super) fn ask_due<S>(
    slots: &mut Slots<S>,
    (due, backlog_of): (&mut Vec<(usize, u32)>, &mut usize),
    names: &mut impl Existence,
    gone: &mut Vec<u64>,
) {
    let keys = slots.len().max(*backlog_of);
    let budget = ask_budget(keys);
    if due.len() > budget {
        due.select_nth_unstable_by_key(budget, |&(_, late)| std::cmp::Reverse(late));
        due.truncate(budget);
        *backlog_of = keys;
    } else {
        *backlog_of = 0;
    }
    for &(slot, _) in due.iter() {
        let state = slots.key(slot);
        // Asked again then, also a gone key whose delete fails.
        state.ask_at = state.idle.saturating_mul(2);
        if !names.exists(state.key) {
            gone.push(state.key);
        }
    }
}

/// A key's buckets as kept between readings: every fine bucket, then
/// every log2 slot (an interval is a whole [`Waits`]).
const ROW_WIDTH: usize = NR_BUCKETS + NR_LOG2_SLOTS;

/// A key's cumulative kernel buckets into `out` ([`ROW_WIDTH`] long).
fn row_of(stats: &KeyStats, out: &mut [u64]) {
    let (buckets, log2) = out.split_at_mut(NR_BUCKETS);
    for (sum, &n) in buckets.iter_mut().zip(&stats.buckets) {
        *sum = u64::from(n);
    }
    for (sum, &n) in log2.iter_mut().zip(&stats.log2) {
        *sum = u64::from(n);
    }
}

/// What a user keeps per key beside the engine's own state.
pub(crate) trait PerKey: Default {
    /// Whether the key is handed out in a reading in which it did not wait
    /// (serve's pinned keys).
    fn shown_idle(&self) -> bool {
        false
    }
}

impl PerKey for () {}

/// Whether a key's task or cgroup is still there: the live system
/// (keylabels.rs), or the tests' own.
pub(crate) trait Existence {
    fn saw(&mut self, key: u64);
    fn exists(&mut self, key: u64) -> bool;
}

impl Existence for KeyLabels {
    fn saw(&mut self, key: u64) {
        KeyLabels::saw(self, key);
    }

    fn exists(&mut self, key: u64) -> bool {
        KeyLabels::exists(self, key)
    }
}

/// The per-key state across readings.
pub(crate) struct KeyIntervals<S = (), N = KeyLabels> {
    by: Breakdown,
    names: N,
    /// Per key, the cause split too (when the kernel keeps it).
    causes: Option<CauseFacts>,
    /// Per key, the decision split too (when the kernel keeps it): its
    /// map's entries, read after the histograms'.
    decisions: Option<KeyDecisions>,
    slots: Slots<S>,
    /// The kernel's entries, read into the same buffers every time.
    entries: Entries<u64, KeyStats>,
    /// Readings so far.
    round: u64,
    /// One key's kept buckets, reused.
    scratch: Vec<u64>,
    /// This reading's keys that waited, and their new waits per bucket
    /// (one row each); keys found gone.
    active: Vec<Active>,
    news: Vec<u64>,
    gone: Vec<u64>,
    /// This reading's keys due to be asked whether they exist: slot, and
    /// readings since due.
    due: Vec<(usize, u32)>,
    /// Keys there were when due keys were first left over (0: none left).
    backlog_of: usize,
}

/// A key that waited since the previous reading; its new waits per bucket
/// are its row of the interval.
#[derive(Debug)]
pub(crate) struct Active {
    pub key: u64,
    pub slot: usize,
    /// What it waited since the previous reading.
    pub new_sum_ns: u64,
    /// Its cause split since the previous reading, when kept per key.
    pub new_causes: Option<CauseCounts>,
    /// Its decision split since the previous reading it waited in, when
    /// kept per key.
    pub new_decision: Option<KeyDecisionCounts>,
}

impl Active {
    /// Its waits in this reading, from its row of [`Reading::active`] (no
    /// extremes: they are not kept per key).
    pub(crate) fn waits(&self, new: &[u64]) -> Waits {
        let (buckets, log2) = new.split_at(NR_BUCKETS);
        Waits {
            buckets: buckets.to_vec(),
            log2: log2.to_vec(),
            sum_ns: self.new_sum_ns,
            causes: self.new_causes.clone(),
            key_decision: self.new_decision.clone(),
            ..Waits::default()
        }
    }
}

impl<S: PerKey> KeyIntervals<S, KeyLabels> {
    /// The keys of breakdown `by` on `tracer`'s kernel; with the cause and decision splits per key when `with_splits` and
    /// the kernel measures them.
    pub(crate) fn new(by: Breakdown, tracer: &Tracer, with_splits: bool) -> Self {
        let names = tracer.key_labels(by);
        let causes = tracer.measurable.filter(|_| with_splits);
        let mut keys = KeyIntervals::with_names(by, names, causes);
        if with_splits && tracer.decision.is_some() {
            keys.decisions = Some(KeyDecisions::default());
        }
        keys
    }

    /// Names containers' cgroups by their runtimes' files too
    /// ([`KeyLabels::name_containers`]).
    pub(crate) fn name_containers(&mut self) {
        self.names.name_containers();
    }

    /// Reads every key's cumulative entry from the kernel and hands the
    /// interval to `take`; then deletes the keys found gone.
    pub(crate) fn interval<R>(
        &mut self,
        tracer: &mut Tracer,
        take: impl FnOnce(&mut Reading<'_, S>) -> R,
    ) -> Result<R, ReadError> {
        self.begin();
        let mut entries = std::mem::take(&mut self.entries);
        let read = tracer.for_each_keyed(&mut entries, CHUNK, |&key, stats| self.feed(key, stats));
        self.entries = entries;
        read?;
        // After the histograms: every key they hold that was split is in
        // this read (the waits that ended between the two reads later than its histogram).
        if let Some(mut decisions) = self.decisions.take() {
            let read = tracer.read_key_decisions(&mut decisions);
            self.decide(&decisions);
            self.decisions = Some(decisions);
            read?;
        }
        let out = take(&mut Reading { keys: self });
        let split = self.decisions.is_some();
        // The split first: a key whose histogram delete failed is asked
        // again, and its split's entry is then gone already (no error).
        self.finish(|key| {
            (!split || tracer.forget_key_decision(key).is_ok()) && tracer.forget_key(key).is_ok()
        });
        Ok(out)
    }
}

impl<S: PerKey, N: Existence> KeyIntervals<S, N> {
    pub(crate) fn with_names(by: Breakdown, names: N, causes: Option<CauseFacts>) -> Self {
        KeyIntervals {
            by,
            names,
            causes,
            decisions: None,
            slots: Slots::new(ROW_WIDTH),
            entries: Entries::default(),
            round: 0,
            scratch: vec![0; ROW_WIDTH],
            active: Vec::new(),
            news: Vec::new(),
            gone: Vec::new(),
            due: Vec::new(),
            backlog_of: 0,
        }
    }

    /// [`KeyIntervals::interval`] on entries given here, `forget` deleting
    /// a key (false: the delete failed, the key is kept and asked again).
    #[cfg(test)]
    pub(crate) fn interval_of<'e, R>(
        &mut self,
        current: impl IntoIterator<Item = (u64, &'e KeyStats)>,
        forget: impl FnMut(u64) -> bool,
        take: impl FnOnce(&mut Reading<'_, S, N>) -> R,
    ) -> R {
        self.begin();
        for (key, stats) in current {
            self.feed(key, stats);
        }
        let out = take(&mut Reading { keys: self });
        self.finish(forget);
        out
    }

    /// [`KeyIntervals::interval_of`] with the keys' decision splits
    /// `decisions` read after the histograms (tests).
    #[cfg(test)]
    pub(super) fn interval_decided_of<'e, R>(
        &mut self,
        current: impl IntoIterator<Item = (u64, &'e KeyStats)>,
        decisions: &KeyDecisions,
        take: impl FnOnce(&mut Reading<'_, S, N>) -> R,
    ) -> R {
        self.begin();
        for (key, stats) in current {
            self.feed(key, stats);
        }
        self.decide(decisions);
        let out = take(&mut Reading { keys: self });
        self.finish(|_| true);
        out
    }

    /// Keys known (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The names it asks (tests).
    #[cfg(test)]
    pub(crate) fn names(&self) -> &N {
        &self.names
    }

    /// The names it asks (tests change what exists).
    #[cfg(test)]
    pub(crate) fn names_mut(&mut self) -> &mut N {
        &mut self.names
    }

    fn begin(&mut self) {
        self.round += 1;
        self.active.clear();
        self.news.clear();
        self.gone.clear();
        self.due.clear();
        self.slots.begin();
    }

    /// One key's cumulative entry. The work is finding its slot
    /// (key_slots.rs: usually the one that followed the previous key's last
    /// time) and two compares, unless it waited: then one pass over its
    /// buckets.
    fn feed(&mut self, key: u64, stats: &KeyStats) {
        let (round, names) = (self.round, &mut self.names);
        let slot = self.slots.find(key, || {
            // A cgroup's path while it is there to be read: a key shown
            // later is named from it.
            names.saw(key);
            Key::new(key, round, stats.comm)
        });
        let (state, last) = self.slots.with_last(slot);
        state.seen = round;
        let zero = stats.buckets[0];
        if stats.sum_ns == state.last_sum_ns && zero == state.last_zero {
            // Gone? Due after two idle readings, then each time they
            // double: a task that merely slept through one interval is not
            // asked at all, one idle for long is asked rarely (finish asks).
            if let Some(late) = state.idle_reading() {
                self.due.push((slot, late));
            }
            return;
        }
        row_of(stats, &mut self.scratch);
        for (last, &now) in last.iter_mut().zip(&self.scratch) {
            self.news.push(now.saturating_sub(*last));
            *last = now;
        }
        let new_causes = self.causes.map(|m| {
            let now = CauseCounts::from_key(m, &stats.causes);
            let new = match &state.last_causes {
                Some(then) => now.since(then),
                None => now.clone(),
            };
            state.last_causes = Some(Box::new(now));
            new
        });
        self.active.push(Active {
            key,
            slot,
            new_sum_ns: stats.sum_ns.saturating_sub(state.last_sum_ns),
            new_causes,
            new_decision: None,
        });
        // The kernel keeps the latest name a thread gave itself.
        state.comm = stats.comm;
        state.last_sum_ns = stats.sum_ns;
        state.last_zero = zero;
        state.waited();
    }

    /// Asks the keys due whether they still exist (the shared [`ask_due`]).
    fn ask_due(&mut self) {
        ask_due(
            &mut self.slots,
            (&mut self.due, &mut self.backlog_of),
            &mut self.names,
            &mut self.gone,
        );
    }

    /// Gives each key that waited in this reading its decision split since
    /// the previous reading it waited in, from `current` (the kernel's
    /// cumulative entries; a key without one split none of its waits).
    fn decide(&mut self, current: &KeyDecisions) {
        for a in &mut self.active {
            let state = self.slots.key(a.slot);
            let now = current
                .get(a.key)
                .map_or_else(KeyDecisionCounts::zero, KeyDecisionCounts::from_key);
            a.new_decision = Some(match &state.last_decision {
                Some(then) => now.since(then),
                None => now.clone(),
            });
            state.last_decision = Some(Box::new(now));
        }
    }

    /// Ends a reading: drops the keys that left the map without a delete
    /// from here (none should), and deletes the keys found gone.
    fn finish(&mut self, mut forget: impl FnMut(u64) -> bool) {
        self.ask_due();
        let round = self.round;
        self.slots.retain(|k| k.seen == round);
        for &key in &self.gone {
            if forget(key) {
                self.slots.remove(key);
            }
        }
    }
}

/// One reading, handed to the user between the read and the deletes.
pub(crate) struct Reading<'a, S, N = KeyLabels> {
    keys: &'a mut KeyIntervals<S, N>,
}

impl<S: PerKey, N> Reading<'_, S, N> {
    pub(crate) fn by(&self) -> Breakdown {
        self.keys.by
    }

    /// The keys that waited since the previous reading, in the kernel
    /// map's order, each with its new waits per kept bucket.
    pub(crate) fn active(&self) -> impl Iterator<Item = (&Active, &[u64])> {
        (self.keys.active.iter()).zip(self.keys.news.chunks_exact(ROW_WIDTH))
    }

    /// The key in `slot`, what the user keeps for it, and its names.
    pub(crate) fn slot(&mut self, slot: usize) -> KeyRef<'_, S, N> {
        let k = self.keys.slots.key(slot);
        KeyRef {
            key: k.key,
            comm: k.comm,
            user: &mut k.user,
            names: &mut self.keys.names,
        }
    }
}

impl<S: PerKey> Reading<'_, S, KeyLabels> {
    /// runqlat's label line of the key in `slot` (`pid = 1234 comm`).
    pub(crate) fn text(&mut self, slot: usize) -> String {
        let k = self.slot(slot);
        k.names.text(k.key, &k.comm)
    }

    /// The cgroup key in `slot` as a workload; None for other keys and
    /// a cgroup gone before it was named.
    pub(crate) fn workload(&mut self, slot: usize) -> Option<Workload> {
        if self.by() != Breakdown::Cgroup {
            return None;
        }
        let k = self.slot(slot);
        k.names.workload(k.key)
    }
}

/// One key of a reading: which, the name the kernel last stored with it,
/// what the user keeps for it, and the names of the live system.
pub(crate) struct KeyRef<'a, S, N> {
    pub key: u64,
    pub comm: [u8; 16],
    pub user: &'a mut S,
    pub names: &'a mut N,
}

/// A key's cumulative kernel histogram as `Waits` (no extremes: they are
/// not kept per key), with its cause split when the split is on
/// (`measurable`): what an interval of a new key holds (tests).
#[cfg(test)]
pub(crate) fn waits_of(stats: &KeyStats, measurable: Option<CauseFacts>) -> Waits {
    let mut row = vec![0; ROW_WIDTH];
    row_of(stats, &mut row);
    let (buckets, log2) = row.split_at(NR_BUCKETS);
    Waits {
        buckets: buckets.to_vec(),
        log2: log2.to_vec(),
        sum_ns: stats.sum_ns,
        causes: measurable.map(|m| CauseCounts::from_key(m, &stats.causes)),
        ..Waits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key exists unless listed in `gone`.
    #[derive(Default)]
    struct Live {
        gone: Vec<u64>,
        seen: Vec<u64>,
        /// Existence asks so far.
        asked: usize,
    }

    impl Existence for Live {
        fn saw(&mut self, key: u64) {
            self.seen.push(key);
        }
        fn exists(&mut self, key: u64) -> bool {
            self.asked += 1;
            !self.gone.contains(&key)
        }
    }

    /// `waits_us` microseconds added to a key's cumulative entry.
    fn add(stats: &mut KeyStats, waits_us: &[u64]) {
        for &us in waits_us {
            stats.buckets[schedlat_common::bucket_index(us * 1000)] += 1;
            stats.log2[schedlat_common::log2_slot(us)] += 1;
            stats.sum_ns += us * 1000;
        }
    }

    /// (key, waits) of each key that waited in a reading.
    fn read(keys: &mut KeyIntervals<(), Live>, current: &[(u64, KeyStats)]) -> Vec<(u64, Waits)> {
        let entries = current.iter().map(|(k, v)| (*k, v));
        keys.interval_of(
            entries,
            |_| true,
            |reading| {
                (reading.active())
                    .map(|(a, new)| (a.key, a.waits(new)))
                    .collect()
            },
        )
    }

    #[test]
    fn each_reading_hands_out_what_each_key_waited_since_the_last() {
        let mut keys = KeyIntervals::with_names(Breakdown::Process, Live::default(), None);
        let (mut a, mut b) = (KeyStats::ZERO, KeyStats::ZERO);
        add(&mut a, &[10, 20]);
        b.comm[..4].copy_from_slice(b"bash");
        add(&mut b, &[3000]);
        // A new key's first interval is all it waited.
        let first = read(&mut keys, &[(1, a), (2, b)]);
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].1, waits_of(&a, None));
        assert_eq!(keys.names_mut().seen, [1, 2], "named at first sight only");
        // Then the difference; an idle key is left out.
        add(&mut a, &[40]);
        let second = read(&mut keys, &[(1, a), (2, b)]);
        assert_eq!(second.len(), 1);
        let (key, w) = &second[0];
        assert_eq!((*key, w.count(), w.sum_ns), (1, 1, 40_000));
        assert_eq!(
            w.log2_slots(),
            waits_of(
                &{
                    let mut only = KeyStats::ZERO;
                    add(&mut only, &[40]);
                    only
                },
                None
            )
            .log2_slots()
        );
        assert_eq!(keys.names_mut().seen, [1, 2]);
    }

    #[test]
    fn each_key_that_waited_gets_its_decision_split_since_it_last_waited() {
        use schedlat_common::decision::{Decision, KeyDecision};
        let mut keys = KeyIntervals::with_names(Breakdown::Thread, Live::default(), None);
        let (mut a, mut b) = (KeyStats::ZERO, KeyStats::ZERO);
        add(&mut a, &[10]);
        add(&mut b, &[2000]);
        let mut da = KeyDecision::ZERO;
        da.decision_count[Decision::Requested as usize] = 1;
        let mut db = KeyDecision::ZERO;
        db.decision_count[Decision::Protected as usize] = 1;
        let split = |keys: &mut KeyIntervals<(), Live>, stats: &[(u64, KeyStats)], d| {
            let entries = stats.iter().map(|(k, v)| (*k, v));
            keys.interval_decided_of(entries, &KeyDecisions::of(d), |reading| {
                (reading.active())
                    .map(|(a, new)| (a.key, a.waits(new).key_decision.unwrap()))
                    .collect::<Vec<_>>()
            })
        };
        let first = split(&mut keys, &[(1, a), (2, b)], vec![(1, da), (2, db)]);
        assert_eq!(first[0].1.decided(Decision::Requested), 1);
        assert_eq!(first[1].1.decided(Decision::Protected), 1);
        // b idle; a waited twice more, both declined; a key the split has
        // no entry for (its waits not split) reads as none.
        add(&mut a, &[20, 30]);
        da.decision_count[Decision::Protected as usize] += 2;
        let mut c = KeyStats::ZERO;
        add(&mut c, &[5]);
        let second = split(&mut keys, &[(1, a), (2, b), (3, c)], vec![(1, da), (2, db)]);
        assert_eq!(second.len(), 2);
        let (key, d) = &second[0];
        assert_eq!((*key, d.waits(), d.decided(Decision::Protected)), (1, 2, 2));
        assert_eq!((second[1].0, second[1].1.waits()), (3, 0));
    }

    #[test]
    fn a_gone_key_is_deleted_after_two_idle_readings_and_starts_again_from_zero() {
        let mut keys = KeyIntervals::with_names(Breakdown::Thread, Live::default(), None);
        let mut a = KeyStats::ZERO;
        add(&mut a, &[10]);
        read(&mut keys, &[(7, a)]);
        keys.names_mut().gone.push(7);
        let mut forgotten = Vec::new();
        for _ in 0..2 {
            let entries = [(7, &a)];
            keys.interval_of(
                entries,
                |k| {
                    forgotten.push(k);
                    true
                },
                |_| (),
            );
        }
        assert_eq!(forgotten, [7]);
        assert_eq!(keys.len(), 0);
        // A reused TID: its entry was deleted, and counts from zero.
        let mut again = KeyStats::ZERO;
        add(&mut again, &[5]);
        keys.names_mut().gone.clear();
        let w = read(&mut keys, &[(7, again)]);
        assert_eq!(w[0].1.count(), 1);
    }

    #[test]
    fn keys_idle_together_are_asked_a_bounded_share_a_reading_and_the_gone_go_in_time() {
        const KEYS: u64 = 4096;
        let budget = ask_budget(KEYS as usize);
        assert_eq!(budget, 512);
        let mut keys = KeyIntervals::with_names(Breakdown::Process, Live::default(), None);
        let mut stats = KeyStats::ZERO;
        add(&mut stats, &[10]);
        // Every key waits once, then all go idle together; every other
        // key's process exits.
        let mut current: Vec<(u64, KeyStats)> = (1..=KEYS).map(|k| (k, stats)).collect();
        read(&mut keys, &current);
        keys.names_mut().gone = (1..=KEYS).step_by(2).collect();
        let (mut asks, mut left) = (Vec::new(), Vec::new());
        for _ in 0..12 {
            let before = keys.names().asked;
            let mut forgotten = Vec::new();
            keys.interval_of(
                current.iter().map(|(k, s)| (*k, s)),
                |k| {
                    forgotten.push(k);
                    true
                },
                |_| (),
            );
            current.retain(|(k, _)| !forgotten.contains(k));
            asks.push(keys.names().asked - before);
            left.push(keys.len());
        }
        // Due at the 2nd idle reading (the 2nd here), all 4096 at once:
        // asked an eighth a reading, so the gone are all deleted within 8
        // readings of due (the 9th); the live are due again as their idle
        // readings double, and never more than the budget a reading.
        assert_eq!(asks[0], 0, "asks per reading {asks:?}");
        assert!(
            asks.iter().all(|&n| n <= budget),
            "asks per reading {asks:?}, over {budget}"
        );
        assert_eq!(asks[1..9], [budget; 8], "asks per reading {asks:?}");
        assert_eq!(
            left[8],
            KEYS as usize / 2,
            "keys left {left:?}, asks {asks:?}"
        );
    }
}
