//! `schedlat compare BEFORE AFTER`: the diagnosis' last step (fix, then
//! measure again; docs/architecture.md). Two recordings (from `schedlat
//! record`, `schedlat --json` or a `record --ring` dump; every interval in a
//! file merged, output/recording.rs) side by side, what changed in the
//! percentiles and the verdict, and whether the change is beyond noise
//! (analysis/compare.rs), shown by output/compare.rs.

use std::path::Path;

use anyhow::Result;

use crate::{
    analysis::compare::Comparison,
    commands::stdout,
    output::{compare, escape::printable, recording::read::Recording},
    sys::slice::Slice,
};

pub(crate) fn run(before: &Path, after: &Path, json: bool) -> Result<()> {
    let before = Recording::load(before)?;
    let after = Recording::load(after)?;
    // The slice the recordings were judged against, so both sides use it.
    let slice = before
        .slice
        .clone()
        .or(after.slice.clone())
        .unwrap_or_else(Slice::detect);
    let comparison = Comparison::of(&before.waits, &after.waits, &slice);
    let mismatch = before.differences(&after);
    let text = if json {
        // The text report says it at its top; JSON readers get it on stderr.
        // The scopes come from the files: escaped for the terminal.
        for line in &mismatch {
            say!(
                "schedlat: warning: the recordings differ: {}",
                printable(line)
            );
        }
        compare::json(&before, &after, &comparison, &mismatch)
    } else {
        compare::text(&before, &after, &comparison, &mismatch)
    };
    // A closed stdout (`| head`) is no error; a failed write is.
    stdout::write(&text)?;
    Ok(())
}
