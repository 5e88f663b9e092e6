//! The binary's only runtime dependency is the C library (and libgcc_s,
//! which Rust's standard library links for unwinding): checked here from
//! its dynamic section (`objdump -p`, NEEDED) and its versioned symbols
//! (`objdump -T`, e.g. `GLIBC_2.34`). The newest symbol version is the
//! oldest glibc that can run it.

use std::{fmt, path::Path, process::Command};

use anyhow::{Context, Result, bail, ensure};

/// The oldest glibc the package promises (docs/deploy.md, "Install
/// from a package"): Debian 12, Ubuntu 22.04, RHEL 9. A build that needs a newer
/// one fails here instead of on a user's host.
pub(super) const OLDEST_SUPPORTED: Version = Version(2, 34);

/// Shared libraries the binary may load: glibc's, and libgcc_s.
const ALLOWED: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "libgcc_s.so.1",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Version(pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

pub(super) struct Linkage {
    /// The newest GLIBC_x.y symbol version the binary references.
    pub glibc: Version,
    /// Its NEEDED shared libraries.
    pub needed: Vec<String>,
}

pub(super) fn check(binary: &Path) -> Result<Linkage> {
    let needed: Vec<String> = objdump(binary, "-p")?
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|l| l.trim().to_string())
        .collect();
    ensure!(
        !needed.is_empty(),
        "{} has no NEEDED entries: not a dynamic glibc binary",
        binary.display()
    );
    if let Some(other) = needed.iter().find(|n| !ALLOWED.contains(&n.as_str())) {
        bail!(
            "{} needs {other}: the package promises no runtime dependency beyond glibc",
            binary.display()
        );
    }
    let glibc = newest_glibc(&objdump(binary, "-T")?)
        .with_context(|| format!("{} references no GLIBC_ symbol version", binary.display()))?;
    ensure!(
        glibc <= OLDEST_SUPPORTED,
        "{} needs glibc {glibc}, newer than the {OLDEST_SUPPORTED} the package promises",
        binary.display()
    );
    Ok(Linkage { glibc, needed })
}

fn objdump(binary: &Path, flag: &str) -> Result<String> {
    let out = Command::new("objdump")
        .arg(flag)
        .arg(binary)
        .output()
        .context("running objdump (package binutils)")?;
    ensure!(
        out.status.success(),
        "objdump {flag} {} failed: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The newest `GLIBC_x.y[.z]` in `objdump -T` output (`GLIBC_PRIVATE` and
/// `.z` patch levels do not change which release is needed).
pub(super) fn newest_glibc(dynamic_symbols: &str) -> Option<Version> {
    dynamic_symbols
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(str::parse::<u32>);
            Some(Version(parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_symbol_version_wins() {
        let out = "\
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) free
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.34) __libc_start_main
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.3.2) pthread_cond_wait
0000000000000000      DF *UND*	0000000000000000  GLIBC_PRIVATE __tls_get_addr
0000000000000000  w   D  *UND*	0000000000000000  Base        __gmon_start__
";
        assert_eq!(newest_glibc(out), Some(Version(2, 34)));
        assert_eq!(newest_glibc("nothing here"), None);
        assert!(Version(2, 9) < Version(2, 17));
    }
}
