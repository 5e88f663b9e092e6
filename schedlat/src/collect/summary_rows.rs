//! The keys' summaries (`KEY_SUMMARY`: each key's waits and their sum),
//! read in place. The kernel keeps them in a memory-mapped array
//! (`BPF_F_MMAPABLE`), one 24-byte row per key, so a scrape walks the rows
//! in its own address space: an idle key costs one compare of its count,
//! where a batch read of a hash map of summaries cost the kernel about
//! 0.4 us a key to copy out, waited or not.
//!
//! The rows are handed out by the kernel from a queue of free rows
//! (`KEY_FREE`, schedlat-ebpf keying.rs) as keys are inserted; the loader
//! fills the queue (kernel/loader) and this gives a row back when its key
//! is deleted.
//! A program that looked the key up just before the delete may still add
//! to the row for the rest of its run, so a row is not freed at once: its
//! key is cleared (the walk skips it), and at the next reading it is
//! zeroed and pushed back to the queue.

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
    ptr::NonNull,
};

use aya::maps::{Map, MapData, MapError, Queue};
use schedlat_common::scope::KeySummary;

/// The mapped rows, and those waiting to be freed.
pub(crate) struct SummaryRows {
    rows: NonNull<KeySummary>,
    len: usize,
    /// KEY_FREE, the queue of free rows.
    free: Map,
    mapped_bytes: usize,
    /// Rows of keys deleted since the last reading began: key cleared,
    /// counts not yet zeroed, not yet in the queue.
    forgotten: Vec<u32>,
}

// SAFETY: the mapping is plain shared memory, valid until Drop; the kernel
// writes it from any CPU whichever thread holds this.
unsafe impl Send for SummaryRows {}

impl SummaryRows {
    /// Maps `map` (KEY_SUMMARY) read-write; `free` is KEY_FREE, which the
    /// loader filled with every row before the programs attached.
    pub(crate) fn map(map: &Map, free: Map) -> Result<SummaryRows, MapError> {
        let len = aya::maps::Array::<&MapData, KeySummary>::try_from(map)?.len() as usize;
        let Map::Array(data) = map else {
            return Err(MapError::InvalidMapType { map_type: 0 });
        };
        let page = page_size();
        let mapped_bytes = (len * size_of::<KeySummary>()).div_ceil(page) * page;
        // SAFETY: a shared mapping of the map's fd, which the kernel sizes
        // and keeps alive while mapped; nothing else is at the address.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                data.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(syscall_error("mmap KEY_SUMMARY"));
        }
        Ok(SummaryRows {
            rows: NonNull::new(addr.cast()).ok_or_else(|| syscall_error("mmap KEY_SUMMARY"))?,
            len,
            free,
            mapped_bytes,
            forgotten: Vec::new(),
        })
    }

    /// Hands every row that names a key to `each`, in row order (which
    /// stays the same from one reading to the next while the keys do).
    /// First frees the rows of keys deleted in the previous reading.
    pub(crate) fn for_each(&mut self, mut each: impl FnMut(&KeySummary)) -> Result<(), MapError> {
        self.recycle()?;
        for i in 0..self.len {
            // SAFETY: within the mapping; the kernel adds to the row with
            // atomic adds, so each u64 is read whole (volatile: it changes
            // under us). The three words are not read at one instant: a
            // count read before its wait's sum is corrected next reading.
            let row = unsafe {
                let p = self.rows.as_ptr().add(i);
                KeySummary {
                    key: (&raw const (*p).key).read_volatile(),
                    waits: (&raw const (*p).waits).read_volatile(),
                    sum_ns: (&raw const (*p).sum_ns).read_volatile(),
                }
            };
            if row.key != 0 {
                each(&row);
            }
        }
        Ok(())
    }

    /// The row of a key just deleted from KEYED: the walk skips it from
    /// now on; the next reading frees it.
    pub(crate) fn forget(&mut self, row: u32) {
        if (row as usize) < self.len {
            // SAFETY: within the mapping.
            unsafe { (&raw mut (*self.rows.as_ptr().add(row as usize)).key).write_volatile(0) };
            self.forgotten.push(row);
        }
    }

    /// Zeroes the rows forgotten since the last reading and gives them
    /// back to the kernel.
    pub(crate) fn recycle(&mut self) -> Result<(), MapError> {
        if self.forgotten.is_empty() {
            return Ok(());
        }
        let mut queue = Queue::<&mut MapData, u32>::try_from(&mut self.free)?;
        for row in self.forgotten.drain(..) {
            // SAFETY: within the mapping (checked in forget).
            unsafe {
                self.rows
                    .as_ptr()
                    .add(row as usize)
                    .write_volatile(KeySummary::default())
            };
            queue.push(row, 0)?;
        }
        Ok(())
    }
}

impl Drop for SummaryRows {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.rows.as_ptr().cast(), self.mapped_bytes) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

fn syscall_error(call: &'static str) -> MapError {
    MapError::SyscallError(aya::sys::SyscallError {
        call,
        io_error: io::Error::last_os_error(),
    })
}
