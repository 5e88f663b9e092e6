//! Unpacking the ELF kernel from a bzImage, so that QEMU boots it directly.
//!
//! Under TCG the kernel's own decompressor runs emulated: Debian 6.1's xz
//! payload takes about 3 of a 5-second boot here, 6.12's zstd about 1. The
//! host decompresses each once, in under a second, into the cache. QEMU
//! boots the ELF through its PVH entry point (CONFIG_PVH, set in Debian's
//! kernels); without one, or without the decompressor, the bzImage is used.

use std::{
    fs,
    io::Write,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail, ensure};

use super::elf;

/// Decompressors by payload magic (arch/x86/boot/compressed/Makefile).
const DECOMPRESSORS: [(&[u8], &str); 3] = [
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x1f\x8b", "gzip"),
];

/// Writes the ELF kernel inside `bzimage` to `out`.
pub(super) fn extract_elf(bzimage: &Path, out: &Path) -> Result<()> {
    let image = fs::read(bzimage).with_context(|| format!("reading {}", bzimage.display()))?;
    let payload = payload(&image).context("not a bzImage with a payload (boot protocol 2.08+)")?;
    // The build appends the uncompressed size as 4 little-endian bytes
    // (scripts/Makefile.lib size_append); the stream is what precedes it.
    let (stream, size) = payload.split_at(payload.len() - 4);
    let size = u32::from_le_bytes(size.try_into().expect("4 bytes")) as usize;
    let tool = DECOMPRESSORS
        .iter()
        .find(|(magic, _)| stream.starts_with(magic))
        .map(|(_, tool)| *tool)
        .context("payload compressed in a format vm-test does not unpack")?;
    let elf = decompress(tool, stream)?;
    ensure!(
        elf.len() == size && elf::is_elf64(&elf),
        "{tool} output is not the {size}-byte ELF kernel the header announces"
    );
    ensure!(
        elf::has_pvh_entry(&elf),
        "the kernel has no PVH entry point (CONFIG_PVH): QEMU cannot boot it as ELF"
    );
    fs::write(out, elf).with_context(|| format!("writing {}", out.display()))
}

/// The compressed payload, located by the setup header
/// (Documentation/arch/x86/boot.rst: setup_sects, payload_offset/length).
fn payload(image: &[u8]) -> Option<&[u8]> {
    let u32_at = |at: usize| Some(u32::from_le_bytes(image.get(at..at + 4)?.try_into().ok()?));
    let version = u16::from_le_bytes(image.get(0x206..0x208)?.try_into().ok()?);
    if image.get(0x202..0x206)? != b"HdrS" || version < 0x208 {
        return None;
    }
    // setup_sects 0 means 4; the protected-mode code follows the setup.
    let setup_sects = match *image.get(0x1f1)? {
        0 => 4,
        n => usize::from(n),
    };
    let start = (setup_sects + 1) * 512 + u32_at(0x248)? as usize;
    let len = u32_at(0x24c)? as usize;
    image.get(start..start + len).filter(|p| p.len() > 4)
}

fn decompress(tool: &str, stream: &[u8]) -> Result<Vec<u8>> {
    let mut child = Command::new(tool)
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {tool}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    // Feed stdin from a second thread while this one drains stdout.
    let output = std::thread::scope(|scope| {
        scope.spawn(move || stdin.write_all(stream));
        child.wait_with_output()
    })?;
    if !output.status.success() {
        bail!(
            "{tool} -dc failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}
