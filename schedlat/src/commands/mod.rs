//! The commands: each one drives collect, analysis and output for one
//! subcommand (or the default histogram), plus the skeleton they share.

pub mod breakdown;
pub mod compare;
pub mod diagnose;
pub mod recorder;
pub mod replay;
pub mod run;
pub mod serve;
pub mod session;
pub mod slow;
pub mod stdout;
pub mod top;
pub mod victims;
