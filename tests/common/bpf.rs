//! What is loaded in the kernel: the ids of every BPF program, map and
//! link, to tell that a run left nothing behind.

/// The ids of every BPF object of one kind in the kernel (`BPF_*_GET_NEXT_ID`).
fn ids(command: libc::c_long) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut attr = [0u32; 4];
    loop {
        // SAFETY: the attr union's first two u32 are start_id and next_id;
        // 16 bytes are passed and readable.
        let ret = unsafe { libc::syscall(libc::SYS_bpf, command, attr.as_mut_ptr(), 16) };
        if ret != 0 {
            return ids;
        }
        ids.push(attr[1]);
        attr[0] = attr[1];
    }
}

/// Programs, maps and links.
pub(crate) fn objects() -> [Vec<u32>; 3] {
    const PROG_GET_NEXT_ID: libc::c_long = 11;
    const MAP_GET_NEXT_ID: libc::c_long = 12;
    const LINK_GET_NEXT_ID: libc::c_long = 31;
    [PROG_GET_NEXT_ID, MAP_GET_NEXT_ID, LINK_GET_NEXT_ID].map(ids)
}
