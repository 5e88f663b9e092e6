//! The package's name, and the version every artifact carries.

pub(crate) const NAME: &str = "schedlat";
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
