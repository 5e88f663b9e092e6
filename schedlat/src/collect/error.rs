//! Why reading the attached object's maps failed. (Loading and attaching
//! fail with kernel::error::LoadError; this is what can go wrong after.)
//!
//! A map read names its map once: `.in_map(name)` ([`InMap`]) turns a
//! lookup that found no map, or an aya operation that failed, into the
//! [`ReadError`] of that map. The message is aya's error after the map's
//! name (`eBPF map EPOCH: `bpf_map_lookup_elem` failed`), and the chain
//! goes on below it: a failed system call's errno is the error's
//! [`source`](std::error::Error::source), which anyhow's `{:#}` and `{:?}`
//! print (`...: Operation not permitted (os error 1)`).

use std::{error::Error, fmt};

use aya::maps::MapError;

#[derive(Debug)]
pub(crate) enum ReadError {
    /// The object has no map of this name.
    MissingMap(&'static str),
    /// An operation on the map failed.
    Map { name: &'static str, error: MapError },
    /// Something besides the maps the reading needs (a /proc file, an
    /// eventfd, a thread).
    Proc {
        path: &'static str,
        error: std::io::Error,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::MissingMap(name) => write!(f, "eBPF map {name} is missing from the object"),
            ReadError::Map { name, error } => write!(f, "eBPF map {name}: {error}"),
            ReadError::Proc { path, error } => write!(f, "cannot read {path}: {error}"),
        }
    }
}

/// The causes below what the message says: the message shows aya's error
/// (or the I/O error) itself, as every `{}` of it always has (serve's
/// answer to a failed scrape, the notes, the logs), so the chain goes on
/// with that error's own source, the errno of a failed system call
/// (aya's `SyscallError` keeps it there), never repeating a line.
impl Error for ReadError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ReadError::MissingMap(_) => None,
            ReadError::Map { error, .. } => error.source(),
            ReadError::Proc { error, .. } => error.source(),
        }
    }
}

/// A map lookup's or operation's outcome as the read of map `name`.
pub(crate) trait InMap<T> {
    fn in_map(self, name: &'static str) -> Result<T, ReadError>;
}

/// A lookup of the map in the object: None is a missing map.
impl<T> InMap<T> for Option<T> {
    fn in_map(self, name: &'static str) -> Result<T, ReadError> {
        self.ok_or(ReadError::MissingMap(name))
    }
}

/// An aya operation on the map.
impl<T> InMap<T> for Result<T, MapError> {
    fn in_map(self, name: &'static str) -> Result<T, ReadError> {
        self.map_err(|error| ReadError::Map { name, error })
    }
}

#[cfg(test)]
mod tests {
    use aya::sys::SyscallError;

    use super::*;

    /// The message is as it always was; anyhow's chain adds the errno,
    /// once.
    #[test]
    fn the_errno_is_chained_below_the_message() {
        let failed: Result<(), MapError> = Err(MapError::SyscallError(SyscallError {
            call: "bpf_map_lookup_elem",
            io_error: std::io::Error::from_raw_os_error(libc::EPERM),
        }));
        let e = failed.in_map("EPOCH").unwrap_err();
        assert_eq!(
            e.to_string(),
            "eBPF map EPOCH: `bpf_map_lookup_elem` failed"
        );
        let e = anyhow::Error::new(e);
        assert_eq!(
            format!("{e:#}"),
            "eBPF map EPOCH: `bpf_map_lookup_elem` failed: Operation not permitted (os error 1)"
        );
        assert!(
            format!("{e:?}").contains("Caused by:\n    Operation not permitted (os error 1)"),
            "{e:?}"
        );
        let missing = None::<()>.in_map("EPOCH").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "eBPF map EPOCH is missing from the object"
        );
        assert!(missing.source().is_none());
        // An error with no cause below it adds nothing.
        let e = Err::<(), _>(MapError::KeyNotFound)
            .in_map("KEYED")
            .unwrap_err();
        assert_eq!(
            format!("{:#}", anyhow::Error::new(e)),
            "eBPF map KEYED: key not found"
        );
    }
}
