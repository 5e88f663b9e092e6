//! The commands: each one drives collect, analysis and output for one
//! subcommand (or the default histogram), plus the skeleton they share.

pub(crate) mod check;
pub(crate) mod compare;
pub(crate) mod diagnose;
pub(crate) mod replay;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod session;
pub(crate) mod slow;
pub(crate) mod stdout;
pub(crate) mod top;
pub(crate) mod victims;

/// A bad command line found after parsing (a combination of options clap
/// cannot express): the binary exits 2 for it, as for clap's own errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);
