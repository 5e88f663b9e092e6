//! Which apt configuration a package is resolved and fetched with.
//!
//! Most packages come from this machine's own apt sources. Some do not:
//! vm-test's oldest kernel, Debian 11 (bullseye)'s 5.10, and what only
//! Debian unstable (sid) has: vm-test's 7.x kernels and the tests'
//! Prometheus 3.x. For each, a
//! private apt configuration under `target/`: its own sources list
//! (deb.debian.org, the same archive as the machine's, signed by the Debian
//! archive keyring), package lists and cache. The machine's apt
//! configuration is never modified, and setting a private one up again
//! changes nothing (idempotent).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

/// The sources of Debian 11: the point release and its security updates
/// (where the newest 5.10 kernel is).
const BULLSEYE_SOURCES: &str = "\
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main
";

/// Debian unstable, for vm-test's 7.x kernels and the Prometheus 3.x
/// binaries (statically linked Go but for glibc, which runs on Debian 12).
const SID_SOURCES: &str = "\
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
";

/// Where a package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Archive {
    /// This machine's apt sources.
    Machine,
    /// Debian 11 (bullseye), through the private configuration.
    Bullseye,
    /// Debian unstable, through a private configuration of its own.
    Sid,
}

/// apt-get and apt-cache, with the options that select an archive.
pub(crate) struct Apt {
    /// `-o` options; empty for the machine's own configuration.
    options: Vec<String>,
    /// The private package lists, when there are any.
    lists: Option<PathBuf>,
}

impl Apt {
    /// The configuration for `archive`; a private one is created (or left
    /// as it is) under `root`.
    pub(crate) fn for_archive(archive: Archive, root: &Path) -> Result<Apt> {
        match archive {
            Archive::Machine => Ok(Apt {
                options: Vec::new(),
                lists: None,
            }),
            Archive::Bullseye => private(&root.join("bullseye"), BULLSEYE_SOURCES),
            Archive::Sid => private(&root.join("sid"), SID_SOURCES),
        }
    }

    /// `program` (apt-get or apt-cache) with this configuration's options.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        for option in &self.options {
            cmd.args(["-o", option]);
        }
        cmd
    }

    /// True for a private configuration: its lists are ours to update
    /// (no root needed), and are fetched once before first use.
    pub(crate) fn is_private(&self) -> bool {
        self.lists.is_some()
    }

    /// A private configuration whose lists were never fetched.
    pub(crate) fn needs_update(&self) -> bool {
        self.lists.as_ref().is_some_and(|lists| {
            !fs::read_dir(lists).is_ok_and(|mut entries| {
                entries
                    .any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().contains("_Packages")))
            })
        })
    }
}

/// A private apt configuration in `dir` with `sources` as its only list.
fn private(dir: &Path, sources: &str) -> Result<Apt> {
    let parts = dir.join("sources.list.d");
    let preferences = dir.join("preferences.d");
    let lists = dir.join("lists");
    let cache = dir.join("cache");
    for d in [&parts, &preferences, &lists.join("partial"), &cache] {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let list = dir.join("sources.list");
    if fs::read_to_string(&list).ok().as_deref() != Some(sources) {
        fs::write(&list, sources).with_context(|| format!("writing {}", list.display()))?;
    }
    let path = |p: &Path| p.display().to_string();
    let options = vec![
        format!("Dir::Etc::SourceList={}", path(&list)),
        format!("Dir::Etc::SourceParts={}", path(&parts)),
        // No pinning from the machine applies to another release.
        format!("Dir::Etc::Preferences={}", path(&dir.join("preferences"))),
        format!("Dir::Etc::PreferencesParts={}", path(&preferences)),
        format!("Dir::State::Lists={}", path(&lists)),
        format!("Dir::Cache={}", path(&cache)),
        // The lists live in the build tree, which apt's sandbox user may
        // not be able to write; only package lists and a .deb go there.
        "APT::Sandbox::User=root".to_string(),
    ];
    Ok(Apt {
        options,
        lists: Some(lists),
    })
}
