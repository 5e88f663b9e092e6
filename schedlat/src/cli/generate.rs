//! `schedlat __generate man|completions DIR`: the man pages and shell
//! completions of the package, generated from the same clap definitions
//! that parse the command line, so they cannot drift from it. `cargo xtask
//! dist` runs it on the binary it packages.
//!
//! Recognized before clap parses anything and unknown to clap, so that it
//! appears in no help, man page or completion.

use std::{fs, path::Path, process::ExitCode};

use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

const NAME: &str = "__generate";

/// `Some(status)` when this process was started as `schedlat __generate`.
pub(crate) fn from_args() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some(NAME) {
        return None;
    }
    Some(match run(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("schedlat: error: {e:#}");
            ExitCode::from(2)
        }
    })
}

fn run(args: &[String]) -> Result<()> {
    let [what, dir] = args else {
        bail!("usage: schedlat {NAME} man|completions DIR");
    };
    let dir = Path::new(dir);
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = Cli::command();
    match what.as_str() {
        // schedlat.1, and schedlat-COMMAND.1 for each command, named as
        // git's are.
        "man" => clap_mangen::generate_to(cmd, dir)
            .with_context(|| format!("writing man pages to {}", dir.display())),
        // schedlat.bash, _schedlat (zsh), schedlat.fish.
        "completions" => {
            for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
                clap_complete::generate_to(shell, &mut cmd, "schedlat", dir)
                    .with_context(|| format!("writing {shell} completions to {}", dir.display()))?;
            }
            Ok(())
        }
        other => bail!("{NAME}: unknown artifact `{other}` (man or completions)"),
    }
}
