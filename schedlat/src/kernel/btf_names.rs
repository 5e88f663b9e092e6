//! The type ids of a few names, found in one pass over a BTF file's types.
//!
//! btf-rs finds a name by scanning every type (~150,000 in 6.18's BTF,
//! about 0.8 ms a scan), and loading looks up ten names or more: the
//! structs the offsets come from and the tracepoints' typedefs. One pass
//! that checks each type's name against all of them costs one scan.
//! The file is mapped where it can be (sysfs allows it since 6.16) and
//! read into memory where it cannot (before 6.16 every kernel's
//! /sys/kernel/btf/vmlinux: a read of its 5-6 MB costs less than two of
//! the ~25 scans by name btf-rs would make instead); None only when the
//! file cannot be read or is not a BTF this walk understands, and btf.rs
//! then looks each name up with btf-rs.

use std::{collections::HashMap, fs::File, os::fd::AsRawFd, path::Path};

/// For each of `names`, the ids of the types so named, ascending (as btf-rs
/// returns them); None when the file cannot be read or is not a BTF this
/// walk understands.
pub(super) fn ids_of(path: &Path, names: &[&str]) -> Option<HashMap<String, Vec<u32>>> {
    let file = File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return None;
    }
    mapped_ids(&file, len, names).or_else(|| read_ids(file, names))
}

/// `ids_of` over a mapping of `file`; None when it cannot be mapped.
fn mapped_ids(file: &File, len: usize, names: &[&str]) -> Option<HashMap<String, Vec<u32>>> {
    // SAFETY: a read-only private mapping of a file we hold open, unmapped
    // below before the slice's lifetime ends.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `len` readable bytes at `addr`, mapped above.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
    let ids = walk(bytes, names);
    // SAFETY: the mapping made above; `bytes` is not used past here.
    unsafe { libc::munmap(addr, len) };
    ids
}

/// `ids_of` over a copy of `file` in memory (sysfs before 6.16 refuses
/// mmap of the kernel's BTF with ENODEV).
fn read_ids(mut file: File, names: &[&str]) -> Option<HashMap<String, Vec<u32>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    walk(&bytes, names)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// include/uapi/linux/btf.h: the bytes after each kind's struct btf_type.
fn trailing(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        2 | 7..=12 | 16 | 18 => 0, // ptr, fwd, typedef, qualifiers, func, float, type tag
        1 | 14 | 17 => 4,          // int, var, decl tag
        3 => 12,                   // array
        4 | 5 | 15 | 19 => 12 * vlen, // struct, union, datasec, enum64
        6 | 13 => 8 * vlen,        // enum, func proto
        _ => return None,
    })
}

fn walk(b: &[u8], names: &[&str]) -> Option<HashMap<String, Vec<u32>>> {
    // Little-endian BTF only (the magic reads as 0xeb9f): else btf-rs.
    if b.get(..2)? != [0x9f, 0xeb] || b.get(2) != Some(&1) {
        return None;
    }
    let hdr_len = u32_at(b, 4)? as usize;
    let (type_off, type_len) = (u32_at(b, 8)? as usize, u32_at(b, 12)? as usize);
    let (str_off, str_len) = (u32_at(b, 16)? as usize, u32_at(b, 20)? as usize);
    let types = b.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
    let strings = b.get(hdr_len + str_off..hdr_len + str_off + str_len)?;
    // Most names fail on their first two bytes: a bit per byte pair.
    let mut pairs = vec![0u64; 1024];
    let pair = |s: &[u8]| usize::from(s[0]) << 8 | usize::from(*s.get(1).unwrap_or(&0));
    for name in names.iter().filter(|n| !n.is_empty()) {
        let p = pair(name.as_bytes());
        pairs[p / 64] |= 1 << (p % 64);
    }
    let mut ids: HashMap<String, Vec<u32>> =
        names.iter().map(|n| (n.to_string(), Vec::new())).collect();
    let (mut at, mut id) = (0usize, 1u32);
    while at < types.len() {
        let name_off = u32_at(types, at)? as usize;
        let info = u32_at(types, at + 4)?;
        let extra = trailing((info >> 24) & 0x1f, (info & 0xffff) as usize)?;
        if name_off != 0 && name_off < strings.len() {
            let name = &strings[name_off..];
            let p = pair(name);
            if pairs[p / 64] & (1 << (p % 64)) != 0 {
                let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
                if let Some(v) = std::str::from_utf8(&name[..end])
                    .ok()
                    .and_then(|n| ids.get_mut(n))
                {
                    v.push(id);
                }
            }
        }
        at += 12 + extra;
        id += 1;
    }
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_in_memory_finds_what_the_mapping_finds() {
        // Kernels before 6.16 refuse the mapping: only the copy is there.
        let path = Path::new("/sys/kernel/btf/vmlinux");
        let names = [
            "task_struct",
            "rq",
            "btf_trace_sched_switch",
            "no_such_type",
        ];
        let file = File::open(path).expect("the running kernel's BTF");
        let read = read_ids(file, &names).expect("a BTF the walk understands");
        assert!(!read["task_struct"].is_empty() && read["no_such_type"].is_empty());
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        if let Some(mapped) = mapped_ids(&file, len, &names) {
            assert_eq!(mapped, read);
        }
    }

    #[test]
    fn not_a_btf_is_none() {
        assert_eq!(
            walk(b"\x7fELF and so on, long enough for a header", &["x"]),
            None
        );
        assert_eq!(walk(b"", &["x"]), None);
    }
}
