//! The two questions only the bpf() syscall answers: may this process
//! create a map at all (a seccomp filter, a lockdown or an LSM can refuse
//! where the capabilities are held), and does the kernel have BPF ring
//! buffers (5.8+), which slow waits and the flight recorder ride on. Each
//! creates one tiny map and closes it at once.

use aya_obj::generated::bpf_map_type::{self, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_RINGBUF};

use crate::sys::bpf::{self, bpf_cmd};

/// Creates a map of `map_type` (keys and values of those sizes, that many
/// entries) and closes it: Ok, or the errno the kernel (or a seccomp filter
/// in front of it) answered. The attr is the whole union (sys/bpf.rs),
/// zeroed past what is set.
fn create(
    map_type: bpf_map_type,
    (key_size, value_size, max_entries): (u32, u32, u32),
) -> Result<(), std::io::Error> {
    let mut attr = bpf::zeroed();
    let m = bpf::map_create(&mut attr);
    m.map_type = map_type as u32;
    m.key_size = key_size;
    m.value_size = value_size;
    m.max_entries = max_entries;
    // SAFETY: BPF_MAP_CREATE's member holds no pointer.
    let fd = unsafe { bpf::call(bpf_cmd::BPF_MAP_CREATE, &mut attr, bpf::WHOLE) }?;
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

#[cfg(test)]
mod tests {
    /// As root, the probes' maps are made (and closed) through the one
    /// binding; a kernel before 5.8 has no ring buffer (EINVAL).
    #[test]
    fn the_probes_create_their_maps() {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: creating a BPF map needs root");
            return;
        }
        super::array_map().unwrap();
        if let Err(e) = super::ring_buffer() {
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        }
    }
}
