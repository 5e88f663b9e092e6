//! The kernels vm-test boots: Debian packages resolved to the current
//! versioned package at run time (versions drift between point releases),
//! fetched with `apt-get download` (from this machine's apt sources, or
//! Debian 11's or Debian unstable's through a private configuration, see
//! apt.rs), and cached as the extracted kernel image (plus its unpacked
//! ELF, see bzimage.rs), so the .deb is not kept.
//!
//! Debian packages a kernel in one of two layouts. Up to 6.x the versioned
//! `linux-image-VERSION` holds the image at `./boot/vmlinuz-VERSION`. From
//! 7.x it is split: `linux-image-VERSION` is an empty package that depends
//! on `linux-binary-VERSION` (the image, at
//! `./usr/lib/modules/VERSION/vmlinuz`), `linux-base-VERSION` (config,
//! System.map) and `linux-modules-VERSION`. The layout is read from the
//! versioned package's dependencies, so either is fetched by the same name.

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
pub(super) const MATRIX: [(&str, &str, Archive); 5] = [
    // Debian 11's kernel: the oldest the README claims that Debian still
    // ships (tp_btf, BTF, ring buffer; no BPF atomics with fetch, 5.12).
    ("5.10", "linux-image-amd64", Archive::Bullseye),
    // Debian 12's kernel.
    ("6.1", "linux-image-amd64", Archive::Machine),
    // The newer kernel Debian 12 ships through its security archive.
    ("6.12", "linux-image-6.12-amd64", Archive::Machine),
    // Debian unstable's current kernel (7.2 in late 2026; the version
    // drifts, the report prints the one booted): PREEMPT_LAZY by default,
    // sched_ext, delayed dequeue, the fair deadline server, and the split
    // package layout.
    ("7.x", "linux-image-amd64", Archive::Sid),
    // The same kernel built with PREEMPT_RT (mainline's since 6.12, and
    // PREEMPT_DYNAMIC too): the real-time flavour users run now. Debian
    // 12's 6.1 rt, built from the out-of-tree patch, is still one
    // `--kernel linux-image-rt-amd64` away.
    ("7.x-rt", "linux-image-rt-amd64", Archive::Sid),
];

/// A kernel ready to boot.
pub(super) struct Kernel {
    /// The versioned Debian package, e.g. `linux-image-6.1.0-57-amd64`.
    pub package: String,
    pub version: String,
    /// The ELF kernel if it could be unpacked, else the bzImage.
    pub image: PathBuf,
    /// The kernel's configuration, for the guest's
    /// /usr/lib/modules/RELEASE/config (HZ, the preemption model).
    pub config: PathBuf,
}

impl Kernel {
    /// `uname -r` of the booted kernel: Debian names the versioned
    /// package after it.
    pub(super) fn release(&self) -> &str {
        self.package
            .strip_prefix("linux-image-")
            .unwrap_or(&self.package)
    }
}

/// The package behind a `--kernel` name and its archive: a short name from
/// the matrix, or any `linux-image-*` package (a metapackage or a versioned
/// one) of this machine's sources, of Debian 11's when it names a 5.10
/// kernel (`linux-image-5.10.0-*`), or of Debian unstable's when it names a
/// kernel of 7.x or later (`linux-image-7.2.13+deb14-amd64`), which no
/// stable release has.
pub(super) fn package_for(name: &str) -> Result<(&str, Archive)> {
    if let Some((_, package, archive)) = MATRIX.iter().find(|(short, ..)| *short == name) {
        return Ok((package, *archive));
    }
    if let Some(version) = name.strip_prefix("linux-image-") {
        return Ok((name, archive_of(version)));
    }
    let known: Vec<&str> = MATRIX.iter().map(|(short, ..)| *short).collect();
    bail!(
        "unknown kernel `{name}`: use one of {} or a Debian linux-image-* package name",
        known.join(", ")
    )
}

/// The archive of a `linux-image-` name's rest (`5.10.0-35-amd64`,
/// `7.2.13+deb14-amd64`, `rt-amd64`): by its major version where it starts
/// with one, else the machine's.
fn archive_of(version: &str) -> Archive {
    let major: Option<u32> = version
        .split(['.', '-'])
        .next()
        .and_then(|m| m.parse().ok());
    match major {
        Some(7..) => Archive::Sid,
        _ if version.starts_with("5.10.") => Archive::Bullseye,
        _ => Archive::Machine,
    }
}

/// Resolves `package` in `archive`, downloads it unless cached, and returns
/// the image. A private archive's lists are fetched before their first use.
/// A failure (old apt lists, or a mirror that dropped the version they name)
/// is retried once after `apt-get update`, when we may run it (always for a
/// private archive, as root for the machine's).
pub(super) fn prepare(package: &str, archive: Archive, cache: &Path) -> Result<Kernel> {
    // DOWNLOADS/apt beside DOWNLOADS/kernels (mod.rs, downloads_dir).
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
    if !dir.join("vmlinuz").exists() || !dir.join("config").exists() {
        let parts = parts(&versioned, &depends_of(apt, &versioned)?, &version);
        download(apt, &parts, &version, cache, &dir)?;
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
            config: dir.join("config"),
        };
    }
    Kernel {
        package,
        version,
        image: elf,
        config: dir.join("config"),
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
    let show = show(apt, package)?;
    let version = field(&show, "Version").context("apt-cache show: no Version")?;
    // A metapackage depends on exactly its versioned kernel, `(= version)`.
    let depends = field(&show, "Depends").unwrap_or_default();
    match exact_dependency(&depends, &version, "linux-image-") {
        Some(versioned) => Ok((versioned.to_string(), version)),
        None => Ok((package.to_string(), version)),
    }
}

/// `apt-cache show` of the candidate version.
fn show(apt: &Apt, package: &str) -> Result<String> {
    output(
        apt.command("apt-cache")
            .args(["show", "--no-all-versions", package]),
    )
}

/// A field of an `apt-cache show` record.
fn field(show: &str, name: &str) -> Option<String> {
    show.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

fn depends_of(apt: &Apt, package: &str) -> Result<String> {
    Ok(field(&show(apt, package)?, "Depends").unwrap_or_default())
}

/// The package among `depends` named `prefix...` and pinned to exactly
/// `version` (`name (= version)`), as a kernel metapackage names its
/// versioned kernel and a split kernel names its parts.
fn exact_dependency<'a>(depends: &'a str, version: &str, prefix: &str) -> Option<&'a str> {
    depends
        .split([',', '|'])
        .filter(|dep| dep.contains(&format!("(= {version})")))
        .filter_map(|dep| dep.split_whitespace().next())
        .find(|name| name.starts_with(prefix))
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

/// Where the image and the configuration of the versioned kernel
/// `versioned`, whose dependencies are `depends`, are: from 7.x on in its
/// `linux-binary-` and `linux-base-` parts, else both in the package
/// itself.
fn parts(versioned: &str, depends: &str, version: &str) -> [Part; 2] {
    let binary = exact_dependency(depends, version, "linux-binary-");
    let base = exact_dependency(depends, version, "linux-base-");
    match (binary, base) {
        (Some(binary), Some(base)) => [
            Part {
                package: binary.to_string(),
                glob: "./usr/lib/modules/*/vmlinuz",
                keep_as: "vmlinuz",
            },
            Part {
                package: base.to_string(),
                glob: "./usr/lib/modules/*/config",
                keep_as: "config",
            },
        ],
        _ => [
            Part {
                package: versioned.to_string(),
                glob: "./boot/vmlinuz-*",
                keep_as: "vmlinuz",
            },
            Part {
                package: versioned.to_string(),
                glob: "./boot/config-*",
                keep_as: "config",
            },
        ],
    }
}

/// A file of a kernel to keep: the package that holds it, its path there
/// (a tar wildcard: `*` stands for one path component's rest), and its
/// name in the cache.
#[derive(Debug, PartialEq, Eq)]
struct Part {
    package: String,
    glob: &'static str,
    keep_as: &'static str,
}

/// Downloads each package of `parts` once, at `version`, and keeps only
/// their files, in `dir`.
fn download(apt: &Apt, parts: &[Part], version: &str, cache: &Path, dir: &Path) -> Result<()> {
    let scratch = cache.join(".download");
    let mut packages: Vec<&str> = parts.iter().map(|p| p.package.as_str()).collect();
    packages.dedup();
    for package in packages {
        let _ = fs::remove_dir_all(&scratch);
        fs::create_dir_all(&scratch)?;
        eprintln!("vm-test: downloading {package} {version}");
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
        let mine: Vec<&Part> = parts.iter().filter(|p| p.package == package).collect();
        let globs: Vec<&str> = mine.iter().map(|p| p.glob).collect();
        // dpkg-deb --fsys-tarfile DEB | tar -x GLOB...
        let mut deb_tar = Command::new("dpkg-deb")
            .arg("--fsys-tarfile")
            .arg(&deb)
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot run dpkg-deb")?;
        let tar = Command::new("tar")
            .args(["-x", "--wildcards"])
            .args(&globs)
            .current_dir(&scratch)
            .stdin(deb_tar.stdout.take().expect("piped"))
            .status()
            .context("cannot run tar")?;
        let unpacked = deb_tar.wait()?;
        if !unpacked.success() || !tar.success() {
            bail!(
                "extracting {} from {} failed",
                globs.join(" "),
                deb.display()
            );
        }
        fs::create_dir_all(dir)?;
        for part in mine {
            let file = extracted(&scratch, part.glob)
                .with_context(|| format!("{package} holds no {}", part.glob))?;
            fs::rename(&file, dir.join(part.keep_as))?;
        }
    }
    fs::remove_dir_all(&scratch)?;
    Ok(())
}

/// The first file under `root` that `glob` (components, `*` ending one)
/// names.
fn extracted(root: &Path, glob: &str) -> Option<PathBuf> {
    let mut paths = vec![root.to_path_buf()];
    for part in glob.trim_start_matches("./").split('/') {
        paths = match part.strip_suffix('*') {
            None => paths.into_iter().map(|p| p.join(part)).collect(),
            Some(prefix) => paths
                .iter()
                .filter_map(|p| fs::read_dir(p).ok())
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .collect(),
        };
    }
    paths.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_kernel_is_fetched_from_its_binary_and_base_parts() {
        // Debian unstable's linux-image-7.2.13+deb14-amd64, 7.2.13-1.
        let depends = "dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
            linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), \
            linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)";
        let [image, config] = parts("linux-image-7.2.13+deb14-amd64", depends, "7.2.13-1");
        assert_eq!(
            (image.package.as_str(), image.glob),
            (
                "linux-binary-7.2.13+deb14-amd64",
                "./usr/lib/modules/*/vmlinuz"
            )
        );
        assert_eq!(
            (config.package.as_str(), config.glob),
            (
                "linux-base-7.2.13+deb14-amd64",
                "./usr/lib/modules/*/config"
            )
        );
    }

    #[test]
    fn a_whole_kernel_is_fetched_as_it_is() {
        // Debian 12's linux-image-6.1.0-41-amd64.
        let depends =
            "kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool";
        let [image, config] = parts("linux-image-6.1.0-41-amd64", depends, "6.1.158-1");
        assert_eq!(
            (image.package.as_str(), image.glob),
            ("linux-image-6.1.0-41-amd64", "./boot/vmlinuz-*")
        );
        assert_eq!(
            (config.package.as_str(), config.glob),
            ("linux-image-6.1.0-41-amd64", "./boot/config-*")
        );
    }

    #[test]
    fn kernel_names_go_to_the_archive_that_has_them() {
        assert_eq!(package_for("7.x").unwrap().1, Archive::Sid);
        assert_eq!(archive_of("7.2.13+deb14-amd64"), Archive::Sid);
        assert_eq!(archive_of("7.3.0-rc7-amd64"), Archive::Sid);
        assert_eq!(archive_of("5.10.0-35-amd64"), Archive::Bullseye);
        assert_eq!(archive_of("6.12.48+deb12-amd64"), Archive::Machine);
        assert_eq!(archive_of("rt-amd64"), Archive::Machine);
    }

    #[test]
    fn an_image_is_found_under_either_layout() {
        let root = std::env::temp_dir().join(format!("xtask-extracted-{}", std::process::id()));
        let split = root.join("usr/lib/modules/7.2.13+deb14-amd64");
        fs::create_dir_all(&split).unwrap();
        fs::write(split.join("vmlinuz"), b"x").unwrap();
        assert_eq!(
            extracted(&root, "./usr/lib/modules/*/vmlinuz"),
            Some(split.join("vmlinuz"))
        );
        assert_eq!(extracted(&root, "./boot/vmlinuz-*"), None);
        fs::create_dir_all(root.join("boot")).unwrap();
        fs::write(root.join("boot/vmlinuz-6.1.0-41-amd64"), b"x").unwrap();
        assert_eq!(
            extracted(&root, "./boot/vmlinuz-*"),
            Some(root.join("boot/vmlinuz-6.1.0-41-amd64"))
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
