//! The holders' folded stacks as an SVG flame graph, drawn by inferno
//! (the Rust port of Brendan Gregg's flamegraph.pl): each frame's width
//! is the time waiters spent behind it; and the files `--folded` and
//! `--flamegraph` name (`slow`, `replay`). Both files are created before
//! the work starts, so a path that cannot be written fails the command at
//! once rather than after it.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use inferno::flamegraph::{Options, from_lines};

use super::escape::printable;
use crate::analysis::stacks::Folded;

/// The folded stacks' file and the flame graph's, each if asked for.
pub(crate) struct FlameFiles {
    folded: Option<(PathBuf, File)>,
    svg: Option<(PathBuf, File)>,
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

fn written(path: &Path) -> String {
    format!("writing {}", path.display())
}

impl FlameFiles {
    pub(crate) fn create(folded: &Option<PathBuf>, svg: &Option<PathBuf>) -> Result<FlameFiles> {
        Ok(FlameFiles {
            folded: create(folded, "folded stacks")?,
            svg: create(svg, "flame graph")?,
        })
    }

    /// Whether any file was asked for: without one, nothing need be folded
    /// (a long run's folded stacks only grow).
    pub(crate) fn wanted(&self) -> bool {
        self.folded.is_some() || self.svg.is_some()
    }

    /// Writes the files asked for; says on stderr what each holds.
    pub(crate) fn write(self, folded: &Folded) -> Result<()> {
        let lines = folded.lines();
        if let Some(summary) = folded.summary() {
            say!("schedlat: {}", printable(&summary));
        }
        if let Some((path, file)) = self.folded {
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
        if let Some((path, file)) = self.svg {
            if lines.is_empty() {
                // inferno refuses an empty input; an empty file says it.
                say!(
                    "schedlat: no slow wait behind a task with its stacks: {} left empty",
                    path.display()
                );
                return Ok(());
            }
            let mut out = BufWriter::new(file);
            svg(&lines, "Waiting behind the task on the CPU", &mut out)
                .and_then(|()| out.flush())
                .with_context(|| written(&path))?;
            say!("schedlat: flame graph written to {}", path.display());
        }
        Ok(())
    }
}

/// Writes the flame graph of `lines` (folded, weights in microseconds).
pub(crate) fn svg(lines: &[String], title: &str, out: impl Write) -> std::io::Result<()> {
    let mut options = Options::default();
    options.title = title.to_string();
    options.count_name = "us waited".to_string();
    options.subtitle = Some("what the task on the CPU ran while others waited for it".to_string());
    from_lines(&mut options, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_names_its_frames() {
        let lines = [
            "hog;main;spin_here 4500".to_string(),
            "cat;read_[k] 10".to_string(),
        ];
        let mut out = Vec::new();
        svg(&lines, "Holders", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("spin_here"));
    }
}
