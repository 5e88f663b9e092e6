//! Giving back, once the programs are attached, the memory that only
//! loading needed: a tracer left running (`schedlat 1`, `serve`) should keep
//! little more than its maps' readers and its output.

/// Returns the free heap to the kernel and drops the embedded object's
/// pages from this process's resident set. Neither can fail in a way that
/// matters: both are hints, and the tracer works the same without them.
pub(super) fn startup_memory(object: &'static [u8]) {
    trim_heap();
    drop_pages(object);
}

/// Loading parses the kernel's BTF (task_struct offsets, the attach ids)
/// and the object's ELF, a few MiB of small allocations freed by now. glibc
/// keeps freed heap for reuse and only returns the top of the heap on its
/// own; malloc_trim(0) also gives back the free pages in its middle.
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The eBPF object is embedded in the binary's read-only data; aya copied
/// what it needs when it parsed it. Its pages stay mapped (and counted in
/// RSS) after the load unless told otherwise. MADV_DONTNEED on a read-only
/// file mapping only unmaps: a later read would fault the same bytes back
/// in from the file.
fn drop_pages(bytes: &'static [u8]) {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => return,
    };
    let start = (bytes.as_ptr() as usize).next_multiple_of(page);
    let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside a 'static read-only slice: no
        // Rust reference sees different bytes after this, only a fault.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}
