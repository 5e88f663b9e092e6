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

/// Time for the kernel to free the previous trial's maps (above).
const FREE_MAPS: std::time::Duration = std::time::Duration::from_millis(300);

pub(crate) fn run(required: &[trial::Mode], json: bool) -> Result<()> {
    let facts = preflight::facts();
    let trials: Vec<trial::Trial> = trial::Mode::ALL
        .into_iter()
        .enumerate()
        .map(|(i, mode)| {
            if i > 0 {
                // A dropped map's memory is freed after an RCU grace period,
                // from a workqueue, and stays charged to the memory cgroup
                // until then: six loads back to back in a 128 MiB pod (the
                // DaemonSet's limit) ran out of memory at the fifth
                // (victims: ENOMEM creating START) while the first ones'
                // maps were still being freed.
                std::thread::sleep(FREE_MAPS);
            }
            trial::run(mode)
        })
        .collect();
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
