//! A small aya `Btf` for attaching tp_btf programs.
//!
//! Attaching a tp_btf program needs one thing from the kernel's BTF: the type
//! id of the tracepoint's `btf_trace_<name>` typedef. aya finds it by parsing
//! the whole of /sys/kernel/btf/vmlinux (~18 ms and ~15 MiB here), and its
//! `EbpfLoader` has already parsed its own copy that it cannot share. BTF
//! type ids are positions in the type section, so a blob made of the first
//! K type records (and all the strings) keeps the id of every type up to K.
//! The sched tracepoint typedefs sit early (ids ~10,300 of ~140,000 on 6.18,
//! found with btf-rs), so aya parses a few percent of the types instead.

use std::{fs::File, io, os::unix::fs::FileExt, path::Path};

use thiserror::Error;

const BTF_MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
/// struct btf_type: name_off, info, size/type.
const TYPE_LEN: usize = 12;

#[derive(Debug, Error)]
pub enum PrefixError {
    #[error("{0}: not a BTF blob this tool understands ({1})")]
    Malformed(String, &'static str),
    #[error("{0}: BTF kind {1} is unknown to schedlat")]
    UnknownKind(String, u32),
    #[error("cannot read {0}: {1}")]
    Read(String, std::io::Error),
}

/// Builds a BTF blob holding the types with ids 1..=`last_id` of the BTF at
/// `path`, and every string. Reads only those parts of the file.
pub fn prefix_blob(path: &Path, last_id: u32) -> Result<Vec<u8>, PrefixError> {
    let name = path.display().to_string();
    crate::sys::files::check_regular(path).map_err(|e| PrefixError::Read(name.clone(), e))?;
    let file = File::open(path).map_err(|e| PrefixError::Read(name.clone(), e))?;
    prefix_of(&file, last_id).map_err(|e| match e {
        PrefixError::Malformed(_, why) => PrefixError::Malformed(name, why),
        PrefixError::UnknownKind(_, k) => PrefixError::UnknownKind(name, k),
        PrefixError::Read(_, e) => PrefixError::Read(name, e),
    })
}

/// Positioned reads, from a file or (in tests) from memory.
pub(crate) trait ReadAt {
    /// Reads `len` bytes at `offset`; fewer only at the end of the data.
    fn read_at(&self, offset: usize, len: usize) -> io::Result<Vec<u8>>;
}

impl ReadAt for File {
    fn read_at(&self, offset: usize, len: usize) -> io::Result<Vec<u8>> {
        // A corrupt header can claim sections of gigabytes: allocate no
        // more than the file holds.
        let available = usize::try_from(self.metadata()?.len())
            .unwrap_or(usize::MAX)
            .saturating_sub(offset);
        let mut buf = vec![0; len.min(available)];
        let len = buf.len();
        let mut filled = 0;
        while filled < len {
            match FileExt::read_at(self, &mut buf[filled..], (offset + filled) as u64)? {
                0 => break,
                n => filled += n,
            }
        }
        buf.truncate(filled);
        Ok(buf)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, offset: usize, len: usize) -> io::Result<Vec<u8>> {
        let start = offset.min(self.len());
        Ok(self[start..(offset + len).min(self.len())].to_vec())
    }
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// How much of the type section to read at a time while walking it.
const CHUNK: usize = 256 * 1024;

pub(crate) fn prefix_of(
    src: &(impl ReadAt + ?Sized),
    last_id: u32,
) -> Result<Vec<u8>, PrefixError> {
    let bad = |why| PrefixError::Malformed(String::new(), why);
    let read = |offset, len| {
        src.read_at(offset, len)
            .map_err(|e| PrefixError::Read(String::new(), e))
    };
    let header = read(0, HEADER_LEN)?;
    if header.get(0..2) != Some(&BTF_MAGIC.to_le_bytes()[..]) {
        return Err(bad("bad magic or not little-endian"));
    }
    let field = |at| {
        u32_at(&header, at)
            .map(|v| v as usize)
            .ok_or(bad("short header"))
    };
    let (hdr_len, type_off, type_len, str_off, str_len) =
        (field(4)?, field(8)?, field(12)?, field(16)?, field(20)?);
    if hdr_len < HEADER_LEN {
        return Err(bad("short header"));
    }

    // Walk the type records, reading the section a chunk at a time.
    let types_at = hdr_len + type_off;
    let mut types = Vec::new();
    let mut end = 0;
    for _ in 0..last_id {
        let info = loop {
            if let Some(info) = u32_at(&types, end + 4) {
                break info;
            }
            let want = CHUNK.min(type_len.saturating_sub(types.len()));
            if want == 0 {
                return Err(bad("type id beyond the type section"));
            }
            let chunk = read(types_at + types.len(), want)?;
            // Found by fuzzing: a header claiming a type section longer
            // than the file made this loop read nothing forever.
            if chunk.is_empty() {
                return Err(bad("type section past the end of the file"));
            }
            types.extend(chunk);
        };
        end += TYPE_LEN + trailing_len(info)?;
    }
    if end > type_len {
        return Err(bad("truncated type record"));
    }
    if types.len() < end {
        types.extend(read(types_at + types.len(), end - types.len())?);
    }
    let strings = read(hdr_len + str_off, str_len)?;
    if strings.len() != str_len {
        return Err(bad("string section out of bounds"));
    }

    let mut blob = Vec::with_capacity(HEADER_LEN + end + str_len);
    blob.extend_from_slice(&header[..4]); // magic, version, flags
    for v in [HEADER_LEN, 0, end, end, str_len] {
        blob.extend_from_slice(&(v as u32).to_le_bytes());
    }
    blob.extend_from_slice(&types[..end]);
    blob.extend_from_slice(&strings);
    Ok(blob)
}

/// Bytes that follow a type's 12-byte header, by kind (include/uapi/linux/btf.h).
fn trailing_len(info: u32) -> Result<usize, PrefixError> {
    let vlen = (info & 0xffff) as usize;
    let kind = (info >> 24) & 0x1f;
    Ok(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
        // INT (encoding), VAR (linkage), DECL_TAG (component index)
        1 | 14 | 17 => 4,
        // ARRAY: type, index type, nelems
        3 => 12,
        // STRUCT, UNION (members), DATASEC (vars), ENUM64 (name, lo, hi)
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM (name, val), FUNC_PROTO (name, type)
        6 | 13 => 8 * vlen,
        other => return Err(PrefixError::UnknownKind(String::new(), other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_keeps_ids_of_the_kernels_tracepoint_typedefs() {
        // The running kernel's BTF is world-readable; every supported kernel has it.
        let path = Path::new(crate::kernel::btf::VMLINUX_BTF);
        let full = aya::Btf::from_sys_fs().expect("kernel BTF");
        let kind = aya_obj::btf::BtfKind::Typedef;
        let name = "btf_trace_sched_switch";
        let id = full.id_by_type_name_kind(name, kind).unwrap();
        let blob = prefix_blob(path, id).unwrap();
        let small = aya::Btf::parse(&blob, aya::Endianness::default()).unwrap();
        assert_eq!(small.id_by_type_name_kind(name, kind).unwrap(), id);
        // Much smaller than the whole type section.
        let whole = std::fs::metadata(path).unwrap().len() as usize;
        assert!(blob.len() < whole, "{} >= {whole}", blob.len());
    }

    fn blob_with_one_type(info: u32) -> Vec<u8> {
        let mut blob = vec![0x9f, 0xeb, 1, 0];
        // hdr_len, type_off, type_len, str_off, str_len
        for v in [24u32, 0, 12, 12, 1] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0u32, info, 0] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        blob.push(0); // the empty string
        blob
    }

    #[test]
    fn rejects_what_it_does_not_understand() {
        assert!(matches!(
            prefix_of(&b"nope"[..], 1),
            Err(PrefixError::Malformed(..))
        ));
        let unknown_kind = blob_with_one_type(31 << 24);
        assert!(matches!(
            prefix_of(&unknown_kind[..], 1),
            Err(PrefixError::UnknownKind(_, 31))
        ));
        let one_ptr = blob_with_one_type(2 << 24);
        assert_eq!(prefix_of(&one_ptr[..], 1).unwrap(), one_ptr);
        assert!(matches!(
            prefix_of(&one_ptr[..], 2),
            Err(PrefixError::Malformed(..))
        ));
    }
}
