//! The kernel's limits that size the maps before the object loads.

use std::fs;

use crate::kernel::error::LoadError;

/// The kernel's TID limit, to size the start array (one u64 per TID).
pub(crate) fn pid_max() -> Result<u32, LoadError> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    let text = fs::read_to_string(PATH).map_err(|error| LoadError::Proc { path: PATH, error })?;
    text.trim().parse().map_err(|_| LoadError::Proc {
        path: PATH,
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, text.trim().to_string()),
    })
}
