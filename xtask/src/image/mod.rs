//! `cargo xtask image`: an OCI image of the package, built offline into
//! `target/dist/schedlat-VERSION-ARCH-oci.tar` (load it with `podman load
//! -i FILE`).
//!
//! It holds the packaged `/usr/bin/schedlat` (the .deb's file, byte for
//! byte, plus its file capabilities), the package's copyright file, the C
//! library files the binary loads (from `ldd`, each Debian package's
//! copyright beside them) and an `/etc/passwd` naming the one user it runs
//! as: no shell, no package manager, nothing else to patch. It runs as
//! uid 65532 (`nonroot`, as distroless images name it); the binary's file
//! capabilities give that user CAP_BPF and CAP_PERFMON when the runtime
//! allows them (`--cap-add`, a securityContext), and no more.
//!
//! - layer.rs: the layer tar (reproducible, with the capability xattr)
//! - oci.rs: config, manifest and index, into one archive

mod layer;
mod oci;

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail, ensure};

use crate::dist::{Artifacts, NAME, VERSION};

/// The user the image runs as.
pub(crate) const USER: &str = "65532:65532";
/// Where `schedlat serve` listens inside the container (the README's port).
pub(crate) const PORT: u16 = 9415;

/// Builds the image from `dist`'s staged tree; returns the archive's path.
pub(crate) fn build(dist: &Artifacts) -> Result<PathBuf> {
    let root = dist
        .binary
        .ancestors()
        .nth(3)
        .context("the staged binary is ROOT/usr/bin/schedlat")?;
    let mut files = vec![
        layer::Entry::File {
            path: "usr/bin/schedlat".into(),
            mode: 0o755,
            bytes: fs::read(&dist.binary)?,
            capability: Some(layer::schedlat_capabilities()),
        },
        file_from(root, &format!("usr/share/doc/{NAME}/copyright"))?,
        text(
            "etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n",
        ),
        text("etc/group", "root:x:0:\nnonroot:x:65532:\n"),
    ];
    let mut labels = vec![
        ("org.opencontainers.image.title".to_string(), NAME.to_string()),
        ("org.opencontainers.image.version".into(), VERSION.into()),
        (
            "org.opencontainers.image.description".into(),
            "schedlat: run-queue latency for Prometheus, measured with eBPF. Needs CAP_BPF and CAP_PERFMON (file capabilities of /usr/bin/schedlat, granted by the runtime's --cap-add or securityContext), the host's cgroupfs for per-cgroup series, and a seccomp profile that allows bpf() with CAP_BPF".into(),
        ),
        (
            "org.opencontainers.image.licenses".into(),
            env!("CARGO_PKG_LICENSE").into(),
        ),
    ];
    let mut packages = BTreeSet::new();
    for library in crate::util::shared_libraries(&dist.binary)? {
        let path = relative(&library)?;
        files.push(layer::Entry::File {
            path: path.clone(),
            mode: 0o755,
            bytes: fs::read(&library).with_context(|| format!("reading {}", library.display()))?,
            capability: None,
        });
        packages.insert(debian_package(&library)?);
    }
    for package in &packages {
        files.push(file_from(
            Path::new("/"),
            &format!("usr/share/doc/{package}/copyright"),
        )?);
        labels.push((
            format!("org.schedlat.debian.{package}"),
            debian_version(package)?,
        ));
    }
    files.extend(directories(&files));

    let layer_tar = layer::tar(files)?;
    let config = oci::Config {
        user: USER.into(),
        entrypoint: vec!["/usr/bin/schedlat".into()],
        cmd: [
            "serve",
            "--listen",
            "0.0.0.0:9415",
            "--web.allow-unauthenticated",
            "--cgroups",
            "--pairs",
        ]
        .map(String::from)
        .to_vec(),
        exposed_port: PORT,
        labels,
        reference: format!("localhost/{NAME}:{VERSION}"),
    };
    let (archive, layer_bytes) = oci::archive(&layer_tar, &config)?;
    let out = dist.deb.with_file_name(format!(
        "{NAME}-{VERSION}-{}-oci.tar",
        std::env::consts::ARCH
    ));
    fs::write(&out, &archive).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "image: {} ({:.1} MiB; layer {:.1} MiB compressed, {:.1} MiB unpacked; libraries from {})",
        out.display(),
        archive.len() as f64 / (1 << 20) as f64,
        layer_bytes as f64 / (1 << 20) as f64,
        layer_tar.len() as f64 / (1 << 20) as f64,
        packages.into_iter().collect::<Vec<_>>().join(", ")
    );
    Ok(out)
}

fn text(path: &str, content: &str) -> layer::Entry {
    layer::Entry::File {
        path: path.into(),
        mode: 0o644,
        bytes: content.as_bytes().to_vec(),
        capability: None,
    }
}

fn file_from(root: &Path, path: &str) -> Result<layer::Entry> {
    let source = root.join(path);
    Ok(layer::Entry::File {
        path: path.into(),
        mode: 0o644,
        bytes: fs::read(&source).with_context(|| format!("reading {}", source.display()))?,
        capability: None,
    })
}

/// `/lib/x86_64-linux-gnu/libc.so.6` -> `lib/x86_64-linux-gnu/libc.so.6`:
/// each library at the path the binary's loader looks for it.
fn relative(path: &Path) -> Result<String> {
    let rel = path
        .strip_prefix("/")
        .with_context(|| format!("{} is not absolute", path.display()))?;
    Ok(rel.to_string_lossy().into_owned())
}

/// Every parent directory of the files, once.
fn directories(files: &[layer::Entry]) -> Vec<layer::Entry> {
    let mut dirs = BTreeSet::new();
    for entry in files {
        if let layer::Entry::File { path, .. } = entry {
            for parent in Path::new(path).ancestors().skip(1) {
                if !parent.as_os_str().is_empty() {
                    dirs.insert(parent.to_string_lossy().into_owned());
                }
            }
        }
    }
    dirs.into_iter()
        .map(|path| layer::Entry::Dir { path })
        .collect()
}

/// The Debian package that installed `path` (`dpkg -S`), trying the
/// resolved path too (merged /usr: /lib is a link to /usr/lib).
fn debian_package(path: &Path) -> Result<String> {
    let resolved = fs::canonicalize(path)?;
    for candidate in [path, resolved.as_path()] {
        let out = Command::new("dpkg")
            .arg("-S")
            .arg(candidate)
            .output()
            .context("running dpkg -S")?;
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            let package = text
                .split(':')
                .next()
                .map(str::trim)
                .unwrap_or_default()
                .to_string();
            ensure!(
                !package.is_empty(),
                "dpkg -S {}: {text}",
                candidate.display()
            );
            return Ok(package);
        }
    }
    bail!(
        "no Debian package owns {}: the image takes its libraries from the packages the .deb depends on",
        path.display()
    )
}

fn debian_version(package: &str) -> Result<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", package])
        .output()
        .context("running dpkg-query")?;
    ensure!(out.status.success(), "dpkg-query -W {package} failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
