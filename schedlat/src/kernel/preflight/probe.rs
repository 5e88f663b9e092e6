//! The two questions only the bpf() syscall answers: may this process
//! create a map at all (a seccomp filter, a lockdown or an LSM can refuse
//! where the capabilities are held), and does the kernel have BPF ring
//! buffers (5.8+), which slow waits and the flight recorder ride on. Each
//! creates one tiny map and closes it at once.

/// BPF_MAP_CREATE's part of `union bpf_attr` (include/uapi/linux/bpf.h),
/// zero-padded: the kernel refuses non-zero bytes past what it knows.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    rest: [u32; 14],
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_RINGBUF: u32 = 27;

/// Creates a map and closes it: Ok, or the errno the kernel (or a seccomp
/// filter in front of it) answered.
fn create(attr: &MapCreate) -> Result<(), std::io::Error> {
    // SAFETY: bpf(BPF_MAP_CREATE) reads `size_of::<MapCreate>()` bytes of
    // attr; the descriptor it returns is ours to close.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_CREATE,
            std::ptr::from_ref(attr),
            std::mem::size_of::<MapCreate>(),
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
    create(&MapCreate {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        ..MapCreate::default()
    })
}

/// A one-page ring buffer (its size must be a power-of-2 multiple of the
/// page size: kernel/bpf/ringbuf.c, ringbuf_map_alloc).
pub(super) fn ring_buffer() -> Result<(), std::io::Error> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    create(&MapCreate {
        map_type: BPF_MAP_TYPE_RINGBUF,
        max_entries: u32::try_from(page).unwrap_or(4096),
        ..MapCreate::default()
    })
}
