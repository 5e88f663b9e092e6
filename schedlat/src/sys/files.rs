//! Reading files a user names (`--btf`, a tracefs format, `compare`'s and
//! `replay`'s inputs): only regular files, and never more than a cap. A
//! FIFO, a socket or a character device would block the read forever, or
//! return endless data (a dump whose dump.jsonl links to /dev/zero), instead
//! of failing; a regular file of one endless line would be read whole into
//! memory.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, BufRead, BufReader, Read},
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::Path,
};

/// What a file is, in words, when it is not a regular file.
fn not_regular(kind: fs::FileType) -> Option<&'static str> {
    Some(if kind.is_file() {
        return None;
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
    })
}

fn refused(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    )
}

/// Ok when `path` is (or links to) a regular file; else an error of kind
/// InvalidInput that says what it is instead.
pub fn check_regular(path: &Path) -> io::Result<()> {
    // stat, not open: opening a FIFO blocks until a writer comes.
    match not_regular(fs::metadata(path)?.file_type()) {
        None => Ok(()),
        Some(what) => Err(refused(what)),
    }
}

/// Opens `path` for reading if it is (or links to) a regular file of at
/// most `max_bytes`. The type is checked on the open descriptor (fstat), so
/// a file swapped for a FIFO between a check and the open cannot block us:
/// O_NONBLOCK makes opening a FIFO return at once, and it is then refused.
pub fn open_regular(path: &Path, max_bytes: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(what) = not_regular(meta.file_type()) {
        return Err(refused(what));
    }
    if meta.len() > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {} bytes, more than the {max_bytes} read at most",
                meta.len()
            ),
        ));
    }
    Ok(file)
}

/// `fs::read_to_string` for regular files only.
pub fn read_regular(path: &Path) -> io::Result<String> {
    check_regular(path)?;
    fs::read_to_string(path)
}

/// A file read a line at a time, each line at most `max_line` bytes and the
/// whole at most the cap it was opened with (it may grow while read).
pub struct Lines<R> {
    reader: BufReader<io::Take<R>>,
    max_line: usize,
    line: Vec<u8>,
    number: usize,
}

impl Lines<File> {
    /// The lines of the regular file `path` (see [`open_regular`]).
    pub fn open(path: &Path, max_bytes: u64, max_line: usize) -> io::Result<Lines<File>> {
        Ok(Lines::new(
            open_regular(path, max_bytes)?,
            max_bytes,
            max_line,
        ))
    }
}

impl<R: Read> Lines<R> {
    pub fn new(reader: R, max_bytes: u64, max_line: usize) -> Lines<R> {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, reader.take(max_bytes)),
            max_line,
            line: Vec::new(),
            number: 0,
        }
    }

    /// Lowers (or raises) the longest line read from here on: a reader
    /// that learns what the file is holds it to that kind's cap.
    pub fn set_max_line(&mut self, max_line: usize) {
        self.max_line = max_line;
    }

    /// The next line (1-based number, bytes without the newline), or None at
    /// the end. A line past `max_line` is an error that names it.
    pub fn next_line(&mut self) -> io::Result<Option<(usize, &[u8])>> {
        self.line.clear();
        let limit = self.max_line as u64 + 1;
        let n = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.line)?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        } else if self.line.len() > self.max_line {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "line {} is longer than {} bytes, the longest read",
                    self.number, self.max_line
                ),
            ));
        }
        Ok(Some((self.number, &self.line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("schedlat-{name}-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        path
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let path = fifo("fifo");
        // Before: reading it blocked forever (no writer ever comes).
        let e = read_regular(&path).unwrap_err();
        let opened = open_regular(&path, 1 << 20).unwrap_err();
        fs::remove_file(&path).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a FIFO"), "{e}");
        assert!(opened.to_string().contains("a FIFO"), "{opened}");
        let e = read_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        let e = open_regular(Path::new("/dev/zero"), u64::MAX).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        assert!(read_regular(Path::new("/proc/self/status")).is_ok());
    }

    #[test]
    fn lines_are_capped_one_by_one_and_in_all() {
        let text = b"short\n\nexactly8\n123456789\n";
        let mut lines = Lines::new(&text[..], u64::MAX, 8);
        assert_eq!(lines.next_line().unwrap(), Some((1, &b"short"[..])));
        assert_eq!(lines.next_line().unwrap(), Some((2, &b""[..])));
        assert_eq!(lines.next_line().unwrap(), Some((3, &b"exactly8"[..])));
        let e = lines.next_line().unwrap_err();
        assert!(e.to_string().contains("line 4 is longer than 8"), "{e}");
        // A last line without a newline is a line.
        let mut lines = Lines::new(&b"a\nb"[..], u64::MAX, 8);
        assert_eq!(lines.next_line().unwrap(), Some((1, &b"a"[..])));
        assert_eq!(lines.next_line().unwrap(), Some((2, &b"b"[..])));
        assert_eq!(lines.next_line().unwrap(), None);
        // Endless zeros (a link to /dev/zero, read through a descriptor
        // opened before the check existed): one line, refused at the cap
        // after reading at most the cap.
        let zero = File::open("/dev/zero").unwrap();
        let mut lines = Lines::new(zero, u64::MAX, 1 << 16);
        let e = lines.next_line().unwrap_err();
        assert!(e.to_string().contains("line 1 is longer"), "{e}");
        // The whole is capped too: what lies past it is not read.
        let mut lines = Lines::new(&b"a\nb\nc\n"[..], 4, 8);
        assert_eq!(lines.next_line().unwrap(), Some((1, &b"a"[..])));
        assert_eq!(lines.next_line().unwrap(), Some((2, &b"b"[..])));
        assert_eq!(lines.next_line().unwrap(), None);
    }

    #[test]
    fn a_file_past_the_cap_is_refused_at_open() {
        let path = std::env::temp_dir().join(format!("schedlat-cap-{}", std::process::id()));
        fs::write(&path, b"0123456789").unwrap();
        let e = open_regular(&path, 9).unwrap_err();
        assert!(open_regular(&path, 10).is_ok());
        fs::remove_file(&path).unwrap();
        assert!(e.to_string().contains("10 bytes, more than the 9"), "{e}");
    }
}
