//! The per-key state of the keyed intervals (key_intervals.rs), laid out
//! for ten thousand keys a reading (`serve --pids` reads them every
//! scrape).
//!
//! The states sit in one vector, and their folded cumulative buckets in one
//! flat array beside it, rather than in a hash map of boxed rows: looking
//! up a key in a 10,000-entry map costs a cache miss, and at one lookup per
//! key per scrape those misses were most of the scrape's userspace time.
//! The kernel's batch read returns the keys in the order of its hash table,
//! which stays the same from one read to the next while the keys do, so
//! each key first tries the slot that followed the previous key's slot in
//! the last read: the states are then walked in order, and the hash index
//! is only consulted for a key that is new or moved (a key inserted or
//! deleted costs one miss, not a miss for every key after it).

use std::collections::HashMap;

use crate::histogram::{CauseCounts, KeyDecisionCounts};

/// One key's state across readings.
pub(super) struct Key<S> {
    pub key: u64,
    /// The reading that last found the key in the kernel map.
    pub seen: u64,
    /// The kernel's cumulative sum and 0 ns bucket at the previous reading:
    /// a wait changes one of them (a wait of 1 ns or more adds to the sum),
    /// so equal means idle, without looking at the buckets.
    pub last_sum_ns: u64,
    pub last_zero: u32,
    /// Readings in a row without a new wait.
    pub idle: u32,
    /// The idle readings at which it is next asked whether it exists.
    pub ask_at: u32,
    /// The kernel's cumulative cause split at the previous reading, when
    /// kept per key. Boxed, as the decision split: inline, the two made a
    /// key's state about 0.9 KB, which the summary engine (key_summaries.rs,
    /// which never uses them) walked past for every key of every scrape,
    /// a cache miss or more each.
    pub last_causes: Option<Box<CauseCounts>>,
    /// Its decision split at the previous reading it waited in, when kept
    /// per key.
    pub last_decision: Option<Box<KeyDecisionCounts>>,
    /// The name the kernel last stored with the key (a task that exited
    /// has no /proc entry left to read it from).
    pub comm: [u8; 16],
    /// What the engine's user keeps per key.
    pub user: S,
}

/// Idle readings before a key is first asked whether it exists.
const FIRST_ASK: u32 = 2;

impl<S: Default> Key<S> {
    /// A key first found in reading `seen`, with the name the kernel
    /// stored for it.
    pub(super) fn new(key: u64, seen: u64, comm: [u8; 16]) -> Key<S> {
        Key {
            key,
            seen,
            last_sum_ns: 0,
            last_zero: 0,
            idle: 0,
            ask_at: FIRST_ASK,
            last_causes: None,
            last_decision: None,
            comm,
            user: S::default(),
        }
    }
}

impl<S> Key<S> {
    /// One more reading in a row without a new wait; when the key is due
    /// to be asked whether it exists, the readings since it came due.
    pub(super) fn idle_reading(&mut self) -> Option<u32> {
        self.idle = self.idle.saturating_add(1);
        (self.idle >= self.ask_at).then(|| self.idle - self.ask_at)
    }

    /// A reading in which it waited: idle and asking start again.
    pub(super) fn waited(&mut self) {
        self.idle = 0;
        self.ask_at = FIRST_ASK;
    }
}

/// A hasher for the u64 keys: std's SipHash guards against inputs chosen
/// to collide, which PIDs and cgroup ids are not, at several times the
/// cost.
#[derive(Clone, Copy, Default)]
pub(super) struct KeyHash(u64);

impl std::hash::Hasher for KeyHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

type KeyMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHash>>;

/// Every key's state, and its kept buckets (`width` per key).
pub(super) struct Slots<S> {
    width: usize,
    keys: Vec<Key<S>>,
    /// Row `i` belongs to `keys[i]`: the kernel's cumulative buckets at the
    /// previous reading, as kept.
    lasts: Vec<u64>,
    index: KeyMap<usize>,
    /// Per slot, the slot that followed it in the last read (NONE: none).
    next: Vec<usize>,
    /// The first slot of the last read, and the slot of the previous key in
    /// this one.
    first: usize,
    cursor: usize,
}

const NONE: usize = usize::MAX;

impl<S> Slots<S> {
    pub(super) fn new(width: usize) -> Slots<S> {
        Slots {
            width,
            keys: Vec::new(),
            lasts: Vec::new(),
            index: KeyMap::default(),
            next: Vec::new(),
            first: NONE,
            cursor: NONE,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Starts a read of the kernel map.
    pub(super) fn begin(&mut self) {
        self.cursor = NONE;
    }

    /// The slot of `key`, the next entry of this read; `new` makes the
    /// state of a key not seen before.
    pub(super) fn find(&mut self, key: u64, new: impl FnOnce() -> Key<S>) -> usize {
        let guess = match self.cursor {
            NONE => self.first,
            c => self.next.get(c).copied().unwrap_or(NONE),
        };
        let slot = match self.keys.get(guess) {
            Some(k) if k.key == key => guess,
            _ => match self.index.get(&key) {
                Some(&s) => s,
                None => {
                    let s = self.keys.len();
                    self.keys.push(new());
                    self.lasts.resize(self.lasts.len() + self.width, 0);
                    self.next.push(NONE);
                    self.index.insert(key, s);
                    s
                }
            },
        };
        match self.cursor {
            NONE => self.first = slot,
            c => self.next[c] = slot,
        }
        self.cursor = slot;
        slot
    }

    pub(super) fn key(&mut self, slot: usize) -> &mut Key<S> {
        &mut self.keys[slot]
    }

    pub(super) fn get(&self, slot: usize) -> &Key<S> {
        &self.keys[slot]
    }

    /// The state and the folded buckets of a slot.
    pub(super) fn with_last(&mut self, slot: usize) -> (&mut Key<S>, &mut [u64]) {
        let row = &mut self.lasts[slot * self.width..(slot + 1) * self.width];
        (&mut self.keys[slot], row)
    }

    /// Drops the keys for which `keep` is false (slots move: any slot
    /// number held across this call is stale).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Key<S>) -> bool) {
        let mut s = self.keys.len();
        while s > 0 {
            s -= 1;
            if !keep(&self.keys[s]) {
                self.remove_slot(s);
            }
        }
    }

    /// Drops one key.
    pub(super) fn remove(&mut self, key: u64) {
        if let Some(&s) = self.index.get(&key) {
            self.remove_slot(s);
        }
    }

    /// The last slot moves into the hole.
    fn remove_slot(&mut self, s: usize) {
        let w = self.width;
        let last = self.keys.len() - 1;
        self.index.remove(&self.keys[s].key);
        self.keys.swap_remove(s);
        self.next.swap_remove(s);
        if s != last {
            self.lasts.copy_within(last * w..(last + 1) * w, s * w);
            self.index.insert(self.keys[s].key, s);
        }
        self.lasts.truncate(last * w);
        // Links to the moved or removed slot now miss once (find checks
        // the key), then relink.
        self.cursor = NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: u64) -> Key<()> {
        Key {
            key: k,
            seen: 0,
            last_sum_ns: k,
            last_zero: 0,
            idle: 0,
            ask_at: 2,
            last_causes: None,
            last_decision: None,
            comm: [0; 16],
            user: (),
        }
    }

    #[test]
    fn slots_follow_keys_through_moves_and_removals() {
        let mut s = Slots::<()>::new(2);
        s.begin();
        for k in [10, 20, 30, 40] {
            let slot = s.find(k, || key(k));
            s.with_last(slot).1.fill(k);
        }
        // Another order, one key gone: every key finds its own state.
        s.remove(20);
        s.begin();
        for k in [40, 10, 30] {
            let slot = s.find(k, || panic!("{k} is known"));
            let (state, last) = s.with_last(slot);
            assert_eq!((state.key, state.last_sum_ns), (k, k));
            assert_eq!(last, [k, k]);
        }
        s.retain(|k| k.key != 10);
        assert_eq!(s.len(), 2);
        s.begin();
        let slot = s.find(50, || key(50));
        assert_eq!(s.with_last(slot).1, [0, 0], "a new key starts from zero");
        for k in [30, 40] {
            let slot = s.find(k, || panic!("{k} is known"));
            assert_eq!(s.with_last(slot).1, [k, k]);
        }
    }
}
