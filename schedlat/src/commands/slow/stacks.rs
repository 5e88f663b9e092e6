//! `slow --stacks`: each event's holder stacks named as it is read (a
//! process's addresses mean something only while it lives), added to the
//! run's folded stacks, and `--folded` / `--flamegraph` written at the end.
//! Both files are created before tracing starts, so a path that cannot be
//! written fails the run at once rather than after it.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{
    analysis::stacks::{Folded, HolderStacks},
    collect::slow::SlowRecord,
    output::{self, escape},
    sys::symbolize::Symbolizer,
};

pub(super) struct Stacks {
    symbolizer: Symbolizer,
    folded: Folded,
    folded_file: Option<(PathBuf, File)>,
    svg_file: Option<(PathBuf, File)>,
}

fn create(path: &Option<PathBuf>, what: &str) -> Result<Option<(PathBuf, File)>> {
    path.as_ref()
        .map(|p| {
            File::create(p)
                .map(|f| (p.clone(), f))
                .with_context(|| format!("creating the {what} file {}", p.display()))
        })
        .transpose()
}

impl Stacks {
    pub(super) fn new(folded: &Option<PathBuf>, flamegraph: &Option<PathBuf>) -> Result<Stacks> {
        Ok(Stacks {
            symbolizer: Symbolizer::new(),
            folded: Folded::default(),
            folded_file: create(folded, "folded stacks")?,
            svg_file: create(flamegraph, "flame graph")?,
        })
    }

    /// The holder's stacks of `record`, named; None without stacks or for
    /// an idle CPU (the idle task's stack says nothing of a holder: the
    /// wait was the wakeup's or a throttled group's, slow's line says
    /// which), which the folded stacks leave out too.
    pub(super) fn name(&mut self, record: &SlowRecord) -> Option<HolderStacks> {
        let raw = record.stacks.as_ref()?;
        let culprit = &record.event.culprit;
        if culprit.tid == 0 {
            return None;
        }
        let stacks = HolderStacks {
            kernel: self.symbolizer.kernel(&raw.kernel),
            user: self.symbolizer.user(culprit.tgid, &raw.user),
        };
        self.folded
            .add(&escape::comm(culprit), &stacks, record.event.wait_ns);
        Some(stacks)
    }

    /// Writes the files asked for; says on stderr what each holds.
    pub(super) fn finish(self) -> Result<()> {
        let lines = self.folded.lines();
        if let Some((path, file)) = self.folded_file {
            let mut out = BufWriter::new(file);
            for line in &lines {
                writeln!(out, "{line}").with_context(|| written(&path))?;
            }
            out.flush().with_context(|| written(&path))?;
            say!(
                "schedlat: {} folded stacks written to {}",
                lines.len(),
                path.display()
            );
        }
        if let Some((path, file)) = self.svg_file {
            if lines.is_empty() {
                // inferno refuses an empty input; an empty file says it.
                say!(
                    "schedlat: no slow wait behind a task: {} left empty",
                    path.display()
                );
                return Ok(());
            }
            let mut out = BufWriter::new(file);
            output::flame::svg(&lines, "Waiting behind the task on the CPU", &mut out)
                .and_then(|()| out.flush())
                .with_context(|| written(&path))?;
            say!("schedlat: flame graph written to {}", path.display());
        }
        Ok(())
    }
}

fn written(path: &Path) -> String {
    format!("writing {}", path.display())
}
