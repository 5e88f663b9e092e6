//! Whole copies of the per-CPU statistics. The kernel copies a CPU's
//! value for userspace while that CPU's program may be adding a wait to
//! it, and the program adds a wait in steps: its fine bucket first, its
//! log2 slot after (schedlat-ebpf wait.rs record()). A copy taken between
//! the two has one more wait in one table than in the other: the report's
//! log2 table would then not add up to its count (a guest test saw 528
//! against 527). Such a copy is recognised by that mismatch, and the CPU
//! is read again; a later copy is only ever more recent, and every field is
//! a running total, so taking each CPU from the read in which it was whole
//! loses nothing.
//!
//! The reads are spaced out, the gap doubling each time: back to back, all
//! of them can fall inside one update. Under emulation (the VM matrix runs
//! QEMU's TCG) an update lasts tens of microseconds, longer than eight reads
//! (a 5.10 guest saw a torn final interval that way).

use std::time::Duration;

use schedlat_common::CpuStats;

/// Reads tried before a torn copy is kept. A CPU is mid-update for a few
/// dozen instructions of each switch, so one more read almost always finds
/// it whole; a CPU torn in every read, over more than 2.5 ms of gaps, keeps
/// its last copy, whose odd wait moves to the next interval.
pub(super) const TRIES: usize = 8;

/// The gap before the first re-read; the n-th waits `FIRST_GAP << n`
/// (20 us to 1.3 ms, 2.5 ms in all), paid only when a copy was torn.
const FIRST_GAP: Duration = Duration::from_micros(20);

/// Whether `cpu` holds every wait whole: as many in the fine buckets as in
/// the log2 slots.
pub(super) fn is_whole(cpu: &CpuStats) -> bool {
    cpu.buckets.iter().sum::<u64>() == cpu.log2.iter().sum::<u64>()
}

/// Reads the per-CPU values with `read` until every CPU has been seen
/// whole, at most TRIES times, keeping for each CPU its first whole copy
/// (or the last copy, if none was).
pub(super) fn read<E>(
    mut read: impl FnMut() -> Result<Vec<CpuStats>, E>,
) -> Result<Vec<CpuStats>, E> {
    let mut kept = read()?;
    let mut whole: Vec<bool> = kept.iter().map(is_whole).collect();
    for retry in 0..TRIES - 1 {
        if whole.iter().all(|&w| w) {
            break;
        }
        std::thread::sleep(FIRST_GAP * (1 << retry));
        for (cpu, copy) in read()?.into_iter().enumerate() {
            if let (Some(k), Some(w)) = (kept.get_mut(cpu), whole.get_mut(cpu))
                && !*w
            {
                *w = is_whole(&copy);
                *k = copy;
            }
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU with `waits` whole waits, and `torn` more in the buckets only.
    fn cpu(waits: u64, torn: u64) -> CpuStats {
        let mut s = CpuStats::ZERO;
        s.buckets[3] = waits + torn;
        s.log2[1] = waits;
        s
    }

    #[test]
    fn a_torn_cpu_is_read_again_and_the_whole_ones_are_kept() {
        let copies = [vec![cpu(10, 0), cpu(20, 1)], vec![cpu(12, 1), cpu(21, 0)]];
        let mut reads = copies.iter();
        let got = read(|| Ok::<_, ()>(reads.next().unwrap().clone())).unwrap();
        // CPU 0 from the first read (whole there), CPU 1 from the second.
        assert_eq!(got, vec![cpu(10, 0), cpu(21, 0)]);
        assert!(reads.next().is_none());
    }

    #[test]
    fn a_cpu_torn_in_every_read_keeps_its_last_copy() {
        let mut n = 0;
        let got = read(|| {
            n += 1;
            Ok::<_, ()>(vec![cpu(n, 1)])
        })
        .unwrap();
        assert_eq!(n, TRIES as u64);
        assert_eq!(got, vec![cpu(TRIES as u64, 1)]);
    }

    #[test]
    fn whole_copies_are_read_once_and_errors_pass_through() {
        let mut n = 0;
        read(|| {
            n += 1;
            Ok::<_, ()>(vec![cpu(5, 0), cpu(0, 0)])
        })
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(read(|| Err::<Vec<CpuStats>, _>("gone")), Err("gone"));
    }
}
