//! `schedlat check`: can this host and this process run schedlat, mode by
//! mode? The facts with their fixes and a trial load of every mode
//! (kernel/preflight), printed as text or JSON; exit 1 when a required
//! mode cannot run, so that it can gate a deployment (an init container,
//! a unit's ExecStartPre).

use anyhow::{Result, bail};

use crate::{
    commands::stdout,
    kernel::preflight::{self, trial},
    output::check::Report,
};

pub(crate) fn run(required: &[trial::Mode], json: bool) -> Result<()> {
    let facts = preflight::facts();
    let trials: Vec<trial::Trial> = trial::Mode::ALL.into_iter().map(trial::run).collect();
    let report = Report {
        facts: &facts,
        trials: &trials,
        required,
    };
    let text = if json {
        format!("{}\n", report.json())
    } else {
        report.text()
    };
    stdout::write(&text)?;
    let failing = report.failing();
    if !failing.is_empty() {
        let names: Vec<&str> = failing.iter().map(|m| m.name()).collect();
        bail!("{} cannot run here: the fixes are above", names.join(", "));
    }
    Ok(())
}
