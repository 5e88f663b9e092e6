//! `slow --stacks`: each event's holder stacks named as it is read (a
//! process's addresses mean something only while it lives), added to the
//! run's folded stacks, and `--folded` / `--flamegraph` written at the end.
//! Both files are created before tracing starts, so a path that cannot be
//! written fails the run at once rather than after it.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{
    analysis::stacks::{Folded, HolderStacks, WakerStack},
    collect::slow::{RawStacks, SlowRecord},
    output::{self, escape},
    sys::symbolize::{Frame, Symbolizer},
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

    /// The holder's stacks of each record, named, and added to the folded
    /// stacks; None without stacks or for an idle CPU (the idle task's
    /// stack says nothing of a holder: the wait was the wakeup's or a
    /// throttled group's, slow's line says which). One pass over the
    /// kernel's symbols and one per process for a whole batch: named one
    /// event at a time, the reader fell behind a thousand slow waits a
    /// second and lost most of them.
    pub(super) fn name(&mut self, records: &[SlowRecord]) -> Vec<Option<HolderStacks>> {
        let held: Vec<Option<&RawStacks>> = records
            .iter()
            .map(|r| r.stacks.as_ref().filter(|_| r.event.culprit.tid != 0))
            .collect();
        // The holders' kernel stacks, then the wakers', in one pass.
        let holders = held.iter().flatten().map(|s| &s.kernel[..]);
        let wakers = held
            .iter()
            .flatten()
            .filter_map(|s| s.waker.as_ref()?.kernel.as_deref());
        let kernel_stacks: Vec<&[u64]> = holders.chain(wakers).collect();
        let mut named = self.symbolizer.kernel(&kernel_stacks).into_iter();
        let holder_kernel: Vec<Vec<Frame>> =
            named.by_ref().take(held.iter().flatten().count()).collect();
        let mut holder_kernel = holder_kernel.into_iter();
        let mut waker_kernel = named;
        let mut by_process: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, (r, s)) in records.iter().zip(&held).enumerate() {
            if s.is_some() {
                by_process.entry(r.event.culprit.tgid).or_default().push(i);
            }
        }
        let mut user: Vec<Vec<Frame>> = vec![Vec::new(); records.len()];
        for (tgid, at) in by_process {
            let stacks: Vec<&[u64]> = at
                .iter()
                .filter_map(|&i| held[i].map(|s| &s.user[..]))
                .collect();
            for (i, frames) in at.into_iter().zip(self.symbolizer.user(tgid, &stacks)) {
                user[i] = frames;
            }
        }
        records
            .iter()
            .zip(held)
            .zip(user)
            .map(|((r, s), user)| {
                let s = s?;
                let waker = s.waker.as_ref().map(|w| WakerStack {
                    tid: w.tid,
                    kernel: w
                        .kernel
                        .as_ref()
                        .map(|_| waker_kernel.next().unwrap_or_default()),
                });
                let stacks = HolderStacks {
                    kernel: holder_kernel.next().unwrap_or_default(),
                    user,
                    waker,
                };
                let culprit = &r.event.culprit;
                self.folded
                    .add(&escape::comm(culprit), &stacks, r.event.wait_ns);
                Some(stacks)
            })
            .collect()
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
