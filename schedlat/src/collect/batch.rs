//! Reading a whole BPF hash map in a few syscalls: `BPF_MAP_LOOKUP_BATCH`
//! (Linux 5.6+) into buffers kept from one read to the next.
//!
//! aya 0.14's `HashMap::iter` costs two syscalls per key
//! (`BPF_MAP_GET_NEXT_KEY`, then `BPF_MAP_LOOKUP_ELEM`) and a fresh value
//! per key; at ten thousand per-process keys that was most of a scrape of
//! `serve --pids`. The batch command copies as many entries per call as the
//! buffers hold. A kernel without it (EINVAL: unknown command; ENOTSUPP/
//! EOPNOTSUPP: not for this map type) gets the per-key walk, into the same
//! buffers, and is not asked again.
//!
//! A batch read is not a snapshot: an entry inserted or deleted during the
//! read may be missed or seen, as with the per-key walk. Entries that exist
//! throughout are read exactly once (the kernel walks the table bucket by
//! bucket, and never splits a bucket across calls).

use std::{
    cell::Cell,
    mem::MaybeUninit,
    os::fd::{AsFd, AsRawFd, RawFd},
};

use aya::{
    Pod,
    maps::{Map, MapData, MapError},
};

use crate::sys::bpf::{self, bpf_cmd};
/// The kernel-internal "not supported" some map types answer with.
const ENOTSUPP: i32 = 524;
/// Entries a call may return at least: a hash bucket that holds more than
/// the room left makes the kernel answer ENOSPC.
const MIN_ROOM: usize = 256;

/// A hash map's entries, read by [`read`] or [`for_each`]; the buffers are
/// reused.
pub(crate) struct Entries<K, V> {
    keys: Vec<MaybeUninit<K>>,
    values: Vec<MaybeUninit<V>>,
    /// Entries the last read filled in.
    len: usize,
    /// None until a batch read was tried; false once the kernel refused.
    batch: Cell<Option<bool>>,
}

impl<K: Pod, V: Pod> Default for Entries<K, V> {
    fn default() -> Self {
        Entries {
            keys: Vec::new(),
            values: Vec::new(),
            len: 0,
            batch: Cell::new(None),
        }
    }
}

impl<K: Pod, V: Pod> Entries<K, V> {
    /// The last read's entries, in the map's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let keys = &self.keys[..self.len];
        let values = &self.values[..self.len];
        // SAFETY: the first `len` slots were written by the kernel (or by
        // the fallback walk), and K and V are Pod: any bytes are valid.
        keys.iter()
            .zip(values)
            .map(|(k, v)| unsafe { (k.assume_init_ref(), v.assume_init_ref()) })
    }

    /// Room for at least `room` more entries after the first `len`.
    fn reserve(&mut self, room: usize) {
        let want = self.len + room;
        if self.keys.len() < want {
            self.keys.resize_with(want, MaybeUninit::uninit);
            self.values.resize_with(want, MaybeUninit::uninit);
        }
    }

    fn push(&mut self, key: K, value: V) {
        self.reserve(1);
        self.keys[self.len] = MaybeUninit::new(key);
        self.values[self.len] = MaybeUninit::new(value);
        self.len += 1;
    }
}

/// Reads every entry of the hash map `map` into `out`, replacing what it
/// held: with the batch command, else one key at a time.
pub(crate) fn read<K: Pod, V: Pod>(map: &Map, out: &mut Entries<K, V>) -> Result<(), MapError> {
    walk_map(map, out, None, &mut |_, _| {})
}

/// Hands every entry of the hash map `map` to `each`, `chunk` entries per
/// syscall through `buf`: each chunk is used while the kernel's copy of it
/// is still in the CPU's cache (a whole 10,000-key map is 17 MB, far more
/// than a cache holds, and reading it back afterwards was most of the
/// userspace cost of a scrape).
pub(crate) fn for_each<K: Pod, V: Pod>(
    map: &Map,
    buf: &mut Entries<K, V>,
    chunk: usize,
    mut each: impl FnMut(&K, &V),
) -> Result<(), MapError> {
    walk_map(map, buf, Some(chunk.max(MIN_ROOM)), &mut each)
}

fn walk_map<K: Pod, V: Pod>(
    map: &Map,
    out: &mut Entries<K, V>,
    chunk: Option<usize>,
    each: &mut dyn FnMut(&K, &V),
) -> Result<(), MapError> {
    // aya checks that K and V have the map's key and value sizes (no
    // syscall): the kernel writes entries of those sizes into the buffers.
    aya::maps::HashMap::<&MapData, K, V>::try_from(map)?;
    let Map::HashMap(data) = map else {
        return walk(map, out, chunk.is_some(), each);
    };
    if out.batch.get() != Some(false) {
        match read_batched(data.fd().as_fd().as_raw_fd(), out, chunk, each) {
            Ok(()) => {
                out.batch.set(Some(true));
                return Ok(());
            }
            // Refused before any entry was read: nothing handed out twice.
            Err(e) if unsupported(&e) => out.batch.set(Some(false)),
            Err(io_error) => {
                return Err(MapError::SyscallError(aya::sys::SyscallError {
                    call: "bpf_map_lookup_batch",
                    io_error,
                }));
            }
        }
    }
    walk(map, out, chunk.is_some(), each)
}

fn unsupported(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP | libc::ENOSYS)
    )
}

/// aya's per-key walk, for kernels without the batch command: into `out`,
/// or (`streaming`) to `each` only.
fn walk<K: Pod, V: Pod>(
    map: &Map,
    out: &mut Entries<K, V>,
    streaming: bool,
    each: &mut dyn FnMut(&K, &V),
) -> Result<(), MapError> {
    out.len = 0;
    let map = aya::maps::HashMap::<&MapData, K, V>::try_from(map)?;
    for entry in &map {
        let (k, v) = entry?;
        if streaming {
            each(&k, &v);
        } else {
            out.push(k, v);
        }
    }
    Ok(())
}

/// The batch reads of the hash map `fd`, whose keys are K and values V:
/// all into `out`, or (`chunk`) `chunk` at a time handed to `each`.
fn read_batched<K: Pod, V: Pod>(
    fd: RawFd,
    out: &mut Entries<K, V>,
    chunk: Option<usize>,
    each: &mut dyn FnMut(&K, &V),
) -> std::io::Result<()> {
    out.len = 0;
    // The kernel's resume point: opaque, at most a key's size for hash maps
    // (u64 holds the u32 it uses).
    let (mut token_in, mut token_out) = (0u64, 0u64);
    let mut first = true;
    // Enough for the previous read's entries and some more, at once; or
    // one chunk.
    let headroom = chunk.unwrap_or((out.keys.len() / 4).max(MIN_ROOM));
    out.reserve(headroom);
    let hand_out = |out: &mut Entries<K, V>, each: &mut dyn FnMut(&K, &V)| {
        if chunk.is_some() {
            for (k, v) in out.iter() {
                each(k, v);
            }
            out.len = 0;
        }
    };
    loop {
        if out.keys.len() - out.len < MIN_ROOM {
            out.reserve(out.keys.len().max(MIN_ROOM));
        }
        let room = out.keys.len() - out.len;
        // The batch member alone (the part of the union the command reads).
        let mut attr = bpf::zeroed();
        *bpf::batch(&mut attr) = bpf::Batch {
            in_batch: if first { 0 } else { &raw const token_in as u64 },
            out_batch: &raw mut token_out as u64,
            keys: out.keys[out.len..].as_mut_ptr() as u64,
            values: out.values[out.len..].as_mut_ptr() as u64,
            count: u32::try_from(room).unwrap_or(u32::MAX),
            map_fd: fd as u32,
            elem_flags: 0,
            flags: 0,
        };
        // SAFETY: the attr points at buffers with room for `count` keys and
        // values of the map's sizes (checked in `walk_map`), and at two
        // tokens that outlive the call.
        let ret = unsafe { bpf::call(bpf_cmd::BPF_MAP_LOOKUP_BATCH, &mut attr, bpf::BATCH) };
        // The kernel writes `count` on success and at the end (ENOENT).
        let got = (bpf::batch(&mut attr).count as usize).min(room);
        let error = match ret {
            Ok(_) => {
                out.len += got;
                hand_out(out, each);
                token_in = token_out;
                first = false;
                continue;
            }
            Err(error) => error,
        };
        match error.raw_os_error() {
            Some(libc::ENOENT) => {
                out.len += got;
                hand_out(out, each);
                return Ok(());
            }
            // One bucket holds more than the room left: more room, again.
            Some(libc::ENOSPC) if room < 1 << 20 => {
                out.reserve(room * 2);
            }
            // Refused after entries were handed out: an error, not a
            // reason to walk (and hand them out) again.
            _ if !first => return Err(std::io::Error::other(error)),
            _ => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value the size of a key's histogram, not a multiple of 8 bytes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Value([u32; 357]);
    // SAFETY: an array of integers.
    unsafe impl Pod for Value {}

    /// Every entry of a hash map of 5,000 (more than one call's room, and
    /// buckets of several entries) is read exactly once, with its value.
    #[test]
    fn batch_reads_every_entry_once() {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: creating a BPF map needs root");
            return;
        }
        const N: u64 = 5_000;
        let mut create = bpf::zeroed();
        let m = bpf::map_create(&mut create);
        m.map_type = 1; // BPF_MAP_TYPE_HASH
        m.key_size = 8;
        m.value_size = size_of::<Value>() as u32;
        m.max_entries = N as u32;
        // SAFETY: BPF_MAP_CREATE's member holds no pointer.
        let fd = unsafe { bpf::call(bpf_cmd::BPF_MAP_CREATE, &mut create, bpf::WHOLE) }
            .unwrap_or_else(|e| panic!("BPF_MAP_CREATE: {e}"));
        let value_of = |k: u64| Value(std::array::from_fn(|i| (k as u32) ^ i as u32));
        for k in 0..N {
            let key = k * 7_919;
            let value = value_of(key);
            let mut update = bpf::zeroed();
            let e = bpf::map_elem(&mut update);
            e.map_fd = fd as u32;
            e.key = &raw const key as u64;
            e.__bindgen_anon_1.value = &raw const value as u64;
            // SAFETY: key and value outlive the call, of the map's sizes.
            unsafe { bpf::call(bpf_cmd::BPF_MAP_UPDATE_ELEM, &mut update, bpf::WHOLE) }.unwrap();
        }
        let mut out = Entries::<u64, Value>::default();
        // In chunks of 256, handed out as they come.
        let mut keys = Vec::new();
        read_batched(fd as RawFd, &mut out, Some(256), &mut |k, v| {
            assert_eq!(*v, value_of(*k));
            keys.push(*k);
        })
        .unwrap();
        keys.sort_unstable();
        assert_eq!(keys, (0..N).map(|k| k * 7_919).collect::<Vec<_>>());
        for _ in 0..2 {
            read_batched(fd as RawFd, &mut out, None, &mut |_, _| {}).unwrap();
            let mut keys: Vec<u64> = out.iter().map(|(k, _)| *k).collect();
            assert!(out.iter().all(|(k, v)| *v == value_of(*k)));
            keys.sort_unstable();
            assert_eq!(keys, (0..N).map(|k| k * 7_919).collect::<Vec<_>>());
        }
        // SAFETY: our own fd.
        unsafe { libc::close(fd as RawFd) };
    }
}
