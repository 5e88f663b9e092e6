//! `slow --stacks`: each event's holder stacks named as it is read (a
//! process's addresses mean something only while it lives), added to the
//! run's folded stacks, and `--folded` / `--flamegraph` written at the end
//! (output/flame.rs creates both files before tracing starts).

use std::path::PathBuf;

use anyhow::Result;
use schedlat_common::victims::TaskInfo;

use crate::{
    analysis::stacks::{Folded, HolderStacks, StackNamer},
    collect::slow::SlowRecord,
    output::{escape, flame::FlameFiles},
    sys::workload::level::Level,
};

pub(super) struct Stacks {
    namer: StackNamer,
    folded: Folded,
    files: FlameFiles,
    /// With `--by`, the level of the holders' workloads the stacks are
    /// folded under (above their comms).
    by: Option<Level>,
}

impl Stacks {
    pub(super) fn new(
        folded: &Option<PathBuf>,
        flamegraph: &Option<PathBuf>,
        by: Option<Level>,
    ) -> Result<Stacks> {
        Ok(Stacks {
            namer: StackNamer::new(),
            folded: Folded::default(),
            files: FlameFiles::create(folded, flamegraph)?,
            by,
        })
    }

    /// The holder's stacks of each record, named (analysis/stacks.rs),
    /// and added to the folded stacks when a file wants them; with `--by`
    /// under the culprit's workload at that level, as `workload` names it.
    pub(super) fn name(
        &mut self,
        records: &[SlowRecord],
        workload: impl Fn(&TaskInfo, Level) -> String,
    ) -> Vec<Option<HolderStacks>> {
        let named = self.namer.name(records);
        if !self.files.wanted() {
            return named;
        }
        for (r, stacks) in records.iter().zip(&named) {
            if let Some(stacks) = stacks {
                let culprit = &r.event.culprit;
                let comm = escape::comm(culprit);
                let roots = match self.by {
                    Some(level) => vec![workload(culprit, level), comm],
                    None => vec![comm],
                };
                let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
                self.folded.add(&roots, stacks, r.event.wait_ns);
            }
        }
        named
    }

    /// Writes the files asked for; says on stderr what each holds.
    pub(super) fn finish(self) -> Result<()> {
        self.files.write(&self.folded)
    }
}
