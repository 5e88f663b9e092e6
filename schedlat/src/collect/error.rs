//! Why reading the attached object's maps failed. (Loading and attaching
//! fail with kernel::error::LoadError; this is what can go wrong after.)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum ReadError {
    #[error("eBPF map {0} is missing from the object")]
    MissingMap(&'static str),
    #[error("eBPF map {name}: {error}")]
    Map {
        name: &'static str,
        error: aya::maps::MapError,
    },
    #[error("cannot read {path}: {error}")]
    Proc {
        path: &'static str,
        error: std::io::Error,
    },
}
