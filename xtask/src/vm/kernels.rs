//! The kernels vm-test boots: Debian packages resolved to the current
//! versioned package at run time (versions drift between point releases),
//! fetched with `apt-get download` (from this machine's apt sources, or
//! Debian 11's through a private configuration, see apt.rs), and cached as
//! the extracted kernel image (plus its unpacked ELF, see bzimage.rs), so
//! the .deb is not kept.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

use super::bzimage;
use crate::{
    apt::{Apt, Archive},
    util::{is_root, output, run_quiet},
};

/// The default matrix: a short name, the Debian package that tracks it, and
/// the archive that has it.
pub(super) const MATRIX: [(&str, &str, Archive); 4] = [
    // Debian 11's kernel: the oldest the README claims that Debian still
    // ships (tp_btf, BTF, ring buffer; no BPF atomics with fetch, 5.12).
    ("5.10", "linux-image-amd64", Archive::Bullseye),
    // Debian 12's kernel.
    ("6.1", "linux-image-amd64", Archive::Machine),
    // The same kernel built with PREEMPT_RT.
    ("6.1-rt", "linux-image-rt-amd64", Archive::Machine),
    // The newer kernel Debian 12 ships through its security archive.
    ("6.12", "linux-image-6.12-amd64", Archive::Machine),
];

/// A kernel ready to boot.
pub(super) struct Kernel {
    /// The versioned Debian package, e.g. `linux-image-6.1.0-57-amd64`.
    pub package: String,
    pub version: String,
    /// The ELF kernel if it could be unpacked, else the bzImage.
    pub image: PathBuf,
}

/// The package behind a `--kernel` name and its archive: a short name from
/// the matrix, or any `linux-image-*` package (a metapackage or a versioned
/// one) of this machine's sources, or of Debian 11's when it names a 5.10
/// kernel (`linux-image-5.10.0-*`).
pub(super) fn package_for(name: &str) -> Result<(&str, Archive)> {
    if let Some((_, package, archive)) = MATRIX.iter().find(|(short, ..)| *short == name) {
        return Ok((package, *archive));
    }
    if name.starts_with("linux-image-5.10.") {
        return Ok((name, Archive::Bullseye));
    }
    if name.starts_with("linux-image-") {
        return Ok((name, Archive::Machine));
    }
    let known: Vec<&str> = MATRIX.iter().map(|(short, ..)| *short).collect();
    bail!(
        "unknown kernel `{name}`: use one of {} or a Debian linux-image-* package name",
        known.join(", ")
    )
}

/// Resolves `package` in `archive`, downloads it unless cached, and returns
/// the image. A private archive's lists are fetched before their first use.
/// A failure (old apt lists, or a mirror that dropped the version they name)
/// is retried once after `apt-get update`, when we may run it (always for a
/// private archive, as root for the machine's).
pub(super) fn prepare(package: &str, archive: Archive, cache: &Path) -> Result<Kernel> {
    // target/vm/apt beside target/vm/cache.
    let apt = Apt::for_archive(archive, &cache.parent().unwrap_or(cache).join("apt"))?;
    if apt.needs_update() {
        eprintln!("vm-test: {package}: fetching the {archive:?} package lists (private, once)");
        update(&apt)?;
    }
    match fetch(&apt, package, cache) {
        Ok(kernel) => Ok(kernel),
        Err(_) if is_root() || apt.is_private() => {
            eprintln!(
                "vm-test: {package}: not resolved or not fetched; apt-get update, then again"
            );
            update(&apt)?;
            fetch(&apt, package, cache)
        }
        Err(e) => Err(e.context("`apt-get update` (as root) may help")),
    }
}

fn update(apt: &Apt) -> Result<()> {
    run_quiet(apt.command("apt-get").args(["update", "-qq"])).context("apt-get update")
}

fn fetch(apt: &Apt, package: &str, cache: &Path) -> Result<Kernel> {
    let (versioned, version) = resolve(apt, package)?;
    let dir = cache.join(format!("{versioned}_{version}"));
    if !dir.join("vmlinuz").exists() {
        download(apt, &versioned, &version, cache, &dir)?;
    }
    Ok(with_elf(versioned, version, &dir))
}

/// Picks the unpacked ELF kernel (extracting it once), else the bzImage.
fn with_elf(package: String, version: String, dir: &Path) -> Kernel {
    let (bzimage, elf) = (dir.join("vmlinuz"), dir.join("vmlinux"));
    if !elf.exists()
        && let Err(e) = bzimage::extract_elf(&bzimage, &elf)
    {
        eprintln!("vm-test: {package}: booting the bzImage ({e:#})");
        return Kernel {
            package,
            version,
            image: bzimage,
        };
    }
    Kernel {
        package,
        version,
        image: elf,
    }
}

/// (versioned package, version) for `package`: a metapackage is replaced by
/// the linux-image package its candidate depends on.
fn resolve(apt: &Apt, package: &str) -> Result<(String, String)> {
    let policy = output(apt.command("apt-cache").args(["policy", package]))?;
    let candidate = policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(str::trim);
    if candidate.is_none_or(|c| c == "(none)") {
        bail!(
            "{package} is not available from this machine's apt sources (`apt-cache policy {package}` has no candidate; `apt-get update` if the lists are old). Kernel metapackages available here: {}",
            available_metapackages(apt).join(", ")
        );
    }
    let show = output(
        apt.command("apt-cache")
            .args(["show", "--no-all-versions", package]),
    )?;
    let field = |name: &str| {
        show.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let version = field("Version").context("apt-cache show: no Version")?;
    // A metapackage depends on exactly its versioned kernel, `(= version)`.
    let depends = field("Depends").unwrap_or_default();
    let target = depends
        .split([',', '|'])
        .filter(|dep| dep.contains(&format!("(= {version})")))
        .filter_map(|dep| dep.split_whitespace().next())
        .find(|name| name.starts_with("linux-image-"));
    match target {
        Some(versioned) => Ok((versioned.to_string(), version)),
        None => Ok((package.to_string(), version)),
    }
}

/// Names like linux-image-amd64, linux-image-rt-amd64, linux-image-6.12-amd64
/// (not the versioned packages they point to), for error messages.
fn available_metapackages(apt: &Apt) -> Vec<String> {
    let names =
        output(apt.command("apt-cache").args(["pkgnames", "linux-image-"])).unwrap_or_default();
    let mut metas: Vec<String> = names
        .lines()
        .filter(|name| {
            let Some(middle) = name
                .strip_prefix("linux-image-")
                .and_then(|n| n.strip_suffix("amd64"))
            else {
                return false;
            };
            // Versioned names carry an ABI number (6.1.0-57) or a +debNN.
            !middle.contains('+')
                && !middle
                    .split('-')
                    .any(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
        .collect();
    metas.sort();
    if metas.is_empty() {
        metas.push("none (is this a Debian machine with apt lists?)".into());
    }
    metas
}

/// Downloads `package=version` and keeps only `./boot/vmlinuz-*`, as `dir/vmlinuz`.
fn download(apt: &Apt, package: &str, version: &str, cache: &Path, dir: &Path) -> Result<()> {
    eprintln!("vm-test: downloading {package} {version}");
    let scratch = cache.join(".download");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)?;
    run_quiet(
        apt.command("apt-get")
            .args(["download", "-q", &format!("{package}={version}")])
            .current_dir(&scratch),
    )
    .with_context(|| format!("apt-get download {package}={version}"))?;
    let deb = fs::read_dir(&scratch)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download left no .deb")?;
    // dpkg-deb --fsys-tarfile DEB | tar -x ./boot/vmlinuz-*
    let mut deb_tar = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run dpkg-deb")?;
    let tar = Command::new("tar")
        .args(["-x", "--wildcards", "./boot/vmlinuz-*"])
        .current_dir(&scratch)
        .stdin(deb_tar.stdout.take().expect("piped"))
        .status()
        .context("cannot run tar")?;
    let unpacked = deb_tar.wait()?;
    if !unpacked.success() || !tar.success() {
        bail!("extracting ./boot/vmlinuz-* from {} failed", deb.display());
    }
    let vmlinuz = fs::read_dir(scratch.join("boot"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .next()
        .context("the package holds no ./boot/vmlinuz-*")?;
    fs::create_dir_all(dir)?;
    fs::rename(&vmlinuz, dir.join("vmlinuz"))?;
    fs::remove_dir_all(&scratch)?;
    Ok(())
}
