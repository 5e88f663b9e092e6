//! `schedlat check`'s report: one line per fact with the fix under each
//! that is not ok, one per mode with the hook it attached in or why it did
//! not, and the verdict on the modes asked for (text); or the same as one
//! JSON object (`schedlat.check.v1`, docs/json.md).

use std::fmt::Write as _;

use crate::kernel::preflight::{
    Check, Status,
    trial::{Mode, Trial},
};

/// The report: every fact, every mode tried, and the modes required.
pub(crate) struct Report<'a> {
    pub facts: &'a [Check],
    pub trials: &'a [Trial],
    pub required: &'a [Mode],
}

impl Report<'_> {
    /// The required modes that do not run.
    pub(crate) fn failing(&self) -> Vec<Mode> {
        self.required
            .iter()
            .copied()
            .filter(|m| !self.trials.iter().any(|t| t.mode == *m && t.runs))
            .collect()
    }

    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for c in self.facts {
            let mark = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            let _ = writeln!(out, "{mark:<5} {:<14} {}", c.name, c.found);
            if let Some(fix) = &c.fix {
                let _ = writeln!(out, "{:20}fix: {fix}", "");
            }
        }
        let _ = writeln!(out, "\nmodes (each loaded, attached and detached):");
        for (i, t) in self.trials.iter().enumerate() {
            let Some(error) = &t.error else {
                let hook = t.hook.map(|h| h.to_string()).unwrap_or_default();
                let _ = writeln!(out, "ok    {:<14} runs ({hook})", t.mode.name());
                continue;
            };
            let _ = writeln!(out, "FAIL  {:<14} needs {}", t.mode.name(), t.needs);
            // Without privileges every mode fails alike: said once.
            if let Some(same) = self.trials[..i]
                .iter()
                .find(|o| o.error.as_ref() == Some(error))
            {
                let _ = writeln!(out, "{:20}(as {})", "", same.mode.name());
                continue;
            }
            for line in error.lines() {
                let _ = writeln!(out, "{:20}{line}", "");
            }
        }
        let names = |modes: &[Mode]| modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(",");
        let failing = self.failing();
        let _ = if failing.is_empty() {
            writeln!(out, "\nready: {} can run here", names(self.required))
        } else {
            writeln!(
                out,
                "\nnot ready: {} cannot run here (exit 1)",
                names(&failing)
            )
        };
        out
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": "schedlat.check.v1",
            "ready": self.failing().is_empty(),
            "required": self.required,
            "checks": self.facts,
            "modes": self.trials,
        })
    }
}
