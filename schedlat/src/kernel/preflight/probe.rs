//! The two questions only the bpf() syscall answers: may this process
//! create a map at all (a seccomp filter, a lockdown or an LSM can refuse
//! where the capabilities are held), and does the kernel have BPF ring
//! buffers (5.8+), which slow waits and the flight recorder ride on. Each
//! creates one tiny map and closes it at once.

use aya_obj::generated::{
    bpf_attr, bpf_cmd,
    bpf_map_type::{self, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_RINGBUF},
};

/// Creates a map of `map_type` (keys and values of those sizes, that many
/// entries) and closes it: Ok, or the errno the kernel (or a seccomp filter
/// in front of it) answered. `union bpf_attr` is aya-obj's binding, the one
/// aya loads with, zeroed past what is set: the kernel refuses non-zero
/// bytes past what it knows.
fn create(
    map_type: bpf_map_type,
    (key_size, value_size, max_entries): (u32, u32, u32),
) -> Result<(), std::io::Error> {
    // SAFETY: all-zero is every member's "unset".
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: writing the BPF_MAP_CREATE member of the union.
    let m = unsafe { &mut attr.__bindgen_anon_1 };
    m.map_type = map_type as u32;
    m.key_size = key_size;
    m.value_size = value_size;
    m.max_entries = max_entries;
    // SAFETY: bpf(BPF_MAP_CREATE) reads `size_of::<bpf_attr>()` bytes of
    // attr; the descriptor it returns is ours to close.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_MAP_CREATE as libc::c_long,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<bpf_attr>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor bpf() just opened for us.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

/// A one-entry array map.
pub(super) fn array_map() -> Result<(), std::io::Error> {
    create(BPF_MAP_TYPE_ARRAY, (4, 4, 1))
}

/// A one-page ring buffer (its size must be a power-of-2 multiple of the
/// page size: kernel/bpf/ringbuf.c, ringbuf_map_alloc).
pub(super) fn ring_buffer() -> Result<(), std::io::Error> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    create(
        BPF_MAP_TYPE_RINGBUF,
        (0, 0, u32::try_from(page).unwrap_or(4096)),
    )
}
