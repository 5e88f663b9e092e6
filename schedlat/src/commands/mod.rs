//! The commands: each one drives collect, analysis and output for one
//! subcommand (or the default histogram), plus the skeleton they share.

pub mod check;
pub mod compare;
pub mod diagnose;
pub mod replay;
pub mod run;
pub mod serve;
pub mod session;
pub mod slow;
pub mod stdout;
pub mod top;
pub mod victims;

/// A bad command line found after parsing (a combination of options clap
/// cannot express): the binary exits 2 for it, as for clap's own errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
