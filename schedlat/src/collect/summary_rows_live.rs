//! The keys' summary rows as this kernel keeps them (root: loads the
//! programs): a key's row counts what its histogram counts, and the row of
//! a deleted key goes back to the kernel's queue of free rows, zeroed, so
//! that more keys than `--max-keys` can come and go without one unkeyed
//! wait, each new key's row starting from nothing.

use std::{thread, time::Duration};

use schedlat_common::scope::{Breakdown, KeySummary};

use super::{decision_live::load, tracer::Tracer};
use crate::kernel::{
    filter::FilterSpec,
    modes::{Keyed, Modes},
};

/// Room for this process' main thread, the test harness' and a few
/// short-lived ones: fewer than the threads the test starts.
const MAX_KEYS: u32 = 6;

/// A thread that sleeps and wakes `wakes` times, then exits: its TID.
fn short_lived(wakes: u32) -> u32 {
    thread::spawn(move || {
        for _ in 0..wakes {
            thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: no arguments.
        unsafe { libc::gettid() as u32 }
    })
    .join()
    .unwrap()
}

fn rows(tracer: &mut Tracer) -> Vec<KeySummary> {
    let mut rows = Vec::new();
    tracer.for_each_key_summary(|row| rows.push(*row)).unwrap();
    rows
}

#[test]
fn rows_of_deleted_keys_are_reused_from_zero_and_agree_with_the_histograms() {
    let spec = FilterSpec {
        pid: Some(std::process::id()),
        ..FilterSpec::default()
    };
    let keyed = Keyed {
        by: Breakdown::Thread,
        max_keys: MAX_KEYS,
    };
    let Some(mut tracer) = load(&spec, &Modes::histogram(Some(keyed))) else {
        return;
    };
    let threads = 4 * MAX_KEYS;
    for i in 0..threads {
        let wakes = 5 + i;
        let tid = short_lived(wakes);
        let key = u64::from(tid);
        let found = rows(&mut tracer);
        let row = found
            .iter()
            .find(|r| r.key == key)
            .unwrap_or_else(|| panic!("thread {i} (tid {tid}) has no summary row among {found:?}"));
        let stats = tracer.key_entry(key).unwrap().expect("a histogram");
        let counted: u64 = stats.buckets.iter().map(|&n| u64::from(n)).sum();
        assert_eq!(
            (row.waits, row.sum_ns),
            (counted, stats.sum_ns),
            "thread {i}: its row counts what its histogram does (a reused row starts from zero)"
        );
        assert!(
            row.waits >= u64::from(wakes),
            "thread {i} woke {wakes} times: {row:?}"
        );
        tracer.forget_key(key).unwrap();
        assert!(
            rows(&mut tracer).iter().all(|r| r.key != key),
            "a deleted key's row is no longer read"
        );
    }
    let unkeyed = tracer.read_waits().unwrap().unkeyed;
    assert_eq!(
        unkeyed, 0,
        "{threads} threads came and went through {MAX_KEYS} keys: every row was given back"
    );
}
