//! Just enough ELF reading for vm-test: the program headers of a 64-bit
//! little-endian image, to tell whether a binary is static (no interpreter)
//! and whether a kernel has a PVH entry point.

const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
/// XEN_ELFNOTE_PHYS32_ENTRY: the PVH entry point QEMU boots an ELF kernel
/// through (include/xen/interface/elfnote.h).
const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;

/// A program header: (p_type, p_offset, p_filesz).
type Segment = (u32, usize, usize);

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// True for a 64-bit little-endian ELF file (ELFCLASS64, ELFDATA2LSB).
pub(super) fn is_elf64(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF\x02\x01")
}

/// The program headers, or None if `bytes` is not a well-formed ELF64.
fn segments(bytes: &[u8]) -> Option<Vec<Segment>> {
    if !is_elf64(bytes) {
        return None;
    }
    let (phoff, phentsize, phnum) = (
        u64_at(bytes, 0x20)?,
        usize::from(u16_at(bytes, 0x36)?),
        usize::from(u16_at(bytes, 0x38)?),
    );
    (0..phnum)
        .map(|i| {
            let ph = phoff + i * phentsize;
            Some((
                u32_at(bytes, ph)?,
                u64_at(bytes, ph + 8)?,
                u64_at(bytes, ph + 0x20)?,
            ))
        })
        .collect()
}

/// True when `bytes` is an ELF executable without a program interpreter,
/// i.e. one that runs in an initramfs that has no dynamic loader.
pub(super) fn is_static(bytes: &[u8]) -> bool {
    segments(bytes).is_some_and(|s| s.iter().all(|(kind, _, _)| *kind != PT_INTERP))
}

/// True when the kernel image has a PVH entry note (CONFIG_PVH), without
/// which QEMU cannot boot it as an ELF file.
pub(super) fn has_pvh_entry(bytes: &[u8]) -> bool {
    let Some(segments) = segments(bytes) else {
        return false;
    };
    let align4 = |n: usize| (n + 3) & !3;
    segments
        .iter()
        .filter(|(kind, _, _)| *kind == PT_NOTE)
        .any(|&(_, offset, size)| {
            // Notes: namesz, descsz, type, then name and desc, 4-aligned.
            let mut at = offset;
            while at + 12 <= offset + size {
                let (Some(namesz), Some(descsz), Some(kind)) = (
                    u32_at(bytes, at),
                    u32_at(bytes, at + 4),
                    u32_at(bytes, at + 8),
                ) else {
                    return false;
                };
                let name = bytes.get(at + 12..at + 12 + namesz as usize);
                if kind == XEN_ELFNOTE_PHYS32_ENTRY && name == Some(b"Xen\0".as_slice()) {
                    return true;
                }
                at += 12 + align4(namesz as usize) + align4(descsz as usize);
            }
            false
        })
}
