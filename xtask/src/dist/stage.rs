//! The tree the package installs, rooted at `root`:
//!
//! ```text
//! usr/bin/schedlat
//! usr/lib/systemd/system/schedlat.service
//! usr/share/man/man1/schedlat.1.gz, schedlat-COMMAND.1.gz
//! usr/share/bash-completion/completions/schedlat
//! usr/share/zsh/vendor-completions/_schedlat
//! usr/share/fish/vendor_completions.d/schedlat.fish
//! usr/share/doc/schedlat/README.md, copyright, docs/*.md
//! ```
//!
//! Man pages and completions come from the binary itself (its hidden
//! `__generate` command), so they describe exactly the options it parses.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail, ensure};

use super::package::NAME;
use crate::util::workspace_root;

pub(super) fn tree(binary: &Path, root: &Path) -> Result<()> {
    let put = |rel: &str, bytes: &[u8], mode: u32| -> Result<()> {
        let dest = root.join(rel);
        fs::create_dir_all(dest.parent().expect("a file has a parent"))?;
        fs::write(&dest, bytes).with_context(|| format!("writing {}", dest.display()))?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put("usr/bin/schedlat", &fs::read(binary)?, 0o755)?;
    let repo = workspace_root();
    put(
        "usr/lib/systemd/system/schedlat.service",
        &fs::read(repo.join("packaging/schedlat.service"))?,
        0o644,
    )?;

    let generated = root.parent().expect("root has a parent").join("generated");
    let _ = fs::remove_dir_all(&generated);
    for page in generate(binary, "man", &generated.join("man"))? {
        let name = page.file_name().expect("a file").to_string_lossy();
        put(
            &format!("usr/share/man/man1/{name}.gz"),
            &gzip(&page)?,
            0o644,
        )?;
    }
    let completions = generate(binary, "completions", &generated.join("completions"))?;
    let find = |name: &str| -> Result<Vec<u8>> {
        let path = completions
            .iter()
            .find(|p| p.file_name().is_some_and(|f| f == name))
            .with_context(|| format!("schedlat __generate wrote no {name}"))?;
        Ok(fs::read(path)?)
    };
    // bash-completion loads completions/NAME on demand: no extension.
    put(
        "usr/share/bash-completion/completions/schedlat",
        &find("schedlat.bash")?,
        0o644,
    )?;
    put(
        "usr/share/zsh/vendor-completions/_schedlat",
        &find("_schedlat")?,
        0o644,
    )?;
    put(
        "usr/share/fish/vendor_completions.d/schedlat.fish",
        &find("schedlat.fish")?,
        0o644,
    )?;

    let doc = format!("usr/share/doc/{NAME}");
    put(
        &format!("{doc}/README.md"),
        &fs::read(repo.join("README.md"))?,
        0o644,
    )?;
    put(&format!("{doc}/copyright"), COPYRIGHT.as_bytes(), 0o644)?;
    let mut docs: Vec<PathBuf> = fs::read_dir(repo.join("docs"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    docs.sort();
    for path in docs
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let name = path.file_name().expect("a file").to_string_lossy();
        put(&format!("{doc}/docs/{name}"), &fs::read(path)?, 0o644)?;
    }
    Ok(())
}

/// Debian's machine-readable copyright format, short form.
const COPYRIGHT: &str = "\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: schedlat

Files: *
Copyright: the schedlat authors
License: MIT or Apache-2.0
 The eBPF programs embedded in /usr/bin/schedlat declare the license
 \"Dual MIT/GPL\" to the kernel, which its GPL-only helpers require.
";

/// Runs `binary __generate what dir`; the files it wrote, sorted.
fn generate(binary: &Path, what: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new(binary)
        .args(["__generate", what])
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !out.status.success() {
        bail!(
            "`schedlat __generate {what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    ensure!(
        !files.is_empty(),
        "`schedlat __generate {what}` wrote nothing"
    );
    Ok(files)
}

/// `gzip -9n`: Debian policy's compression for man pages, no timestamp so
/// that the same page gives the same bytes.
fn gzip(path: &Path) -> Result<Vec<u8>> {
    let out = Command::new("gzip")
        .args(["-9n", "--stdout"])
        .arg(path)
        .output()
        .context("running gzip")?;
    ensure!(out.status.success(), "gzip {} failed", path.display());
    Ok(out.stdout)
}
