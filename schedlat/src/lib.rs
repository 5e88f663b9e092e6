//! schedlat: run-queue latency, measured in the kernel with eBPF.
//!
//! The modules are layers, and imports only point down (docs/architecture.md;
//! checked by the `layers` unit test): `histogram` (the value model) ->
//! `sys` and `kernel` (what the kernel publishes and the eBPF object) ->
//! `collect` (reading the maps) -> `analysis` (what the numbers mean) ->
//! `output` (text and JSON) -> `recorder` (the flight recorder) -> `export`
//! (the Prometheus exposition) -> `commands` -> `cli` and [`main`].

/// A line on stderr that never panics: when stderr cannot be written (closed,
/// `2>/dev/full`) the line is dropped and the run goes on; the exit status
/// still tells the outcome. Every message of schedlat goes through it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod analysis;
mod cli;
mod collect;
mod commands;
mod export;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
mod histogram;
mod kernel;
mod output;
mod recorder;
pub mod sys;

#[cfg(test)]
mod layers;

use std::process::ExitCode;

use clap::Parser;

use crate::commands::{
    check, compare, diagnose, replay, run, serve, session::Ended, slow, top, victims,
};

/// The binary's entry point: parse the command line, run the command, and
/// turn its outcome into the exit status (2 for a bad command line, from clap).
pub fn main() -> ExitCode {
    if let Some(status) = cli::generate::from_args() {
        return status;
    }
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say!("schedlat: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Each command owns the options it takes (cli/): a global option would
    // be listed, and then ignored or refused, by commands that do not.
    let measured = |k: &cli::KernelArgs, f: &cli::FilterArgs| (k.access(), f.spec());
    let result = match &cli.command {
        None => {
            let (kernel, filter) = measured(&cli.kernel, &cli.filter);
            runtime.block_on(run::histogram(
                &cli.histogram.options(),
                &cli.breakdown.options(),
                &kernel,
                &filter,
            ))
        }
        Some(cli::Command::Record(args)) => {
            let (kernel, filter) = measured(&args.kernel, &args.filter);
            match args.ring_options() {
                Err(usage) => Err(usage.into()),
                Ok(Some(ring)) => runtime.block_on(run::ring(&ring, &kernel, &filter)),
                // clap requires both without --ring.
                Ok(None) => runtime.block_on(run::record(
                    args.output.as_deref().unwrap_or(std::path::Path::new("-")),
                    args.force,
                    args.duration.unwrap_or(1),
                    cli::unit(args.milliseconds),
                    &kernel,
                    &filter,
                )),
            }
        }
        Some(cli::Command::Replay(args)) => {
            replay::run(&args.dump, &args.options()).map(|()| Ended::Done)
        }
        Some(cli::Command::Diagnose(args)) => runtime
            .block_on(diagnose::run(
                &args.options(),
                &args.kernel.access(),
                &args.scope.spec(),
            ))
            .map(|()| Ended::Done),
        Some(cli::Command::Top(args)) => {
            let (kernel, filter) = measured(&args.kernel, &args.filter);
            runtime
                .block_on(top::run(&args.options(), &kernel, &filter))
                .map(|()| Ended::Done)
        }
        Some(cli::Command::Compare(args)) => {
            compare::run(&args.before, &args.after, args.json).map(|()| Ended::Done)
        }
        Some(cli::Command::Serve(args)) => {
            let (kernel, filter) = measured(&args.kernel, &args.filter);
            match args.options() {
                Ok(options) => runtime.block_on(serve::run(&options, &kernel, &filter)),
                Err(e) => Err(e.into()),
            }
        }
        Some(cli::Command::Victims(args)) => {
            let (kernel, filter) = measured(&args.kernel, &args.filter);
            runtime.block_on(victims::run(&args.options(), &kernel, &filter))
        }
        Some(cli::Command::Check(args)) => {
            check::run(&args.modes(), args.json).map(|()| Ended::Done)
        }
        Some(cli::Command::Slow(args)) => {
            let (kernel, filter) = measured(&args.kernel, &args.filter);
            runtime.block_on(slow::run(&args.options(), &kernel, &filter))
        }
    };
    match result {
        Ok(Ended::Done | Ended::StdoutClosed) => ExitCode::SUCCESS,
        Err(e) => {
            say!("schedlat: error: {e:#}");
            let usage = e.downcast_ref::<commands::UsageError>().is_some()
                || e.downcast_ref::<kernel::error::LoadError>()
                    .is_some_and(kernel::error::LoadError::is_usage);
            if usage {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
