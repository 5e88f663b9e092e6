//! schedlat: run-queue latency, measured in the kernel with eBPF.
//! See README.md; the modules follow the data: loader -> histogram -> output.

mod analysis;
mod bpf_cost;
mod breakdown;
mod btf;
mod btf_prefix;
mod cgroupfs;
mod cli;
mod clock;
mod compare;
mod diagnose;
mod filter;
mod generate;
mod histogram;
mod keylabels;
mod loader;
mod modes;
mod output;
mod privileges;
mod run;
mod serve;
mod session;
mod slow;
mod stdout;
mod task;
mod top;
mod tracefs;
mod victims;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    if let Some(status) = generate::from_args() {
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
            eprintln!("schedlat: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &cli.command {
        None => runtime.block_on(run::histogram(
            &cli.histogram,
            &cli.breakdown,
            &cli.kernel,
            &cli.filter,
        )),
        Some(cli::Command::Record(args)) => {
            runtime.block_on(run::record(args, &cli.kernel, &cli.filter))
        }
        Some(cli::Command::Diagnose(args)) => {
            diagnose::run(args, &cli.kernel, &cli.filter).map(|()| run::Ended::Done)
        }
        Some(cli::Command::Top(args)) => {
            top::run(args, &cli.kernel, &cli.filter).map(|()| run::Ended::Done)
        }
        Some(cli::Command::Compare(args)) => compare::run(args).map(|()| run::Ended::Done),
        Some(cli::Command::Serve(args)) => {
            runtime.block_on(serve::run(args, &cli.kernel, &cli.filter))
        }
        Some(cli::Command::Victims(args)) => {
            runtime.block_on(victims::run(args, &cli.kernel, &cli.filter))
        }
        Some(cli::Command::Slow(args)) => {
            runtime.block_on(slow::run(args, &cli.kernel, &cli.filter))
        }
    };
    match result {
        Ok(run::Ended::Done | run::Ended::StdoutClosed) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("schedlat: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
