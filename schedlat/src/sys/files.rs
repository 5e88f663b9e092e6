//! Reading files a user names (`--btf`, a tracefs format, `compare`'s
//! inputs): only regular files. A FIFO, a socket or a character device would
//! block the read forever, or return endless data, instead of failing.

use std::{fs, io, os::unix::fs::FileTypeExt, path::Path};

/// Ok when `path` is (or links to) a regular file; else an error of kind
/// InvalidInput that says what it is instead.
pub fn check_regular(path: &Path) -> io::Result<()> {
    // stat, not open: opening a FIFO blocks until a writer comes.
    let kind = fs::metadata(path)?.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    ))
}

/// `fs::read_to_string` for regular files only.
pub fn read_regular(path: &Path) -> io::Result<String> {
    check_regular(path)?;
    fs::read_to_string(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("schedlat-fifo-{}", std::process::id()));
        let _ = fs::remove_file(&dir);
        let c = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Before: reading it blocked forever (no writer ever comes).
        let e = read_regular(&dir).unwrap_err();
        fs::remove_file(&dir).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        assert!(read_regular(Path::new("/proc/self/status")).is_ok());
    }
}
