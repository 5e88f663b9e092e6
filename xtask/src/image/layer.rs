//! The image's one layer: a tar of the files the image holds, written the
//! same way on every build (sorted paths, owner 0:0, mtime 0), so the same
//! package gives the same layer digest.
//!
//! A file's capabilities travel as the PAX record
//! `SCHILY.xattr.security.capability`, which container runtimes apply when
//! they unpack the layer (GNU tar's `--xattrs` writes the same record).

use std::io::Write;

use anyhow::Result;
use tar::{Builder, EntryType, Header};

/// One entry of the layer.
pub(super) enum Entry {
    Dir {
        path: String,
    },
    File {
        path: String,
        mode: u32,
        bytes: Vec<u8>,
        /// The `security.capability` xattr, when the file carries one.
        capability: Option<Vec<u8>>,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Dir { path } | Entry::File { path, .. } => path,
        }
    }
}

/// The file capabilities of the image's schedlat, in the layout of the
/// kernel's `struct vfs_cap_data` revision 2 (include/uapi/linux/
/// capability.h: magic, then permitted and inheritable words for caps 0-31,
/// then for 32-63, little-endian): CAP_BPF and CAP_PERFMON (tracing),
/// CAP_SYS_RESOURCE (RLIMIT_MEMLOCK for the maps before Linux 5.11) and
/// CAP_DAC_READ_SEARCH (tracefs, for `--hook tp` on kernels without BTF).
///
/// Permitted only, without the effective flag (`setcap ...+p`): at exec the
/// kernel grants each one only if the runtime's bounding set has it (the
/// securityContext's `add` list decides), and never refuses the exec over
/// the others, where `+ep` would fail it with a bare EPERM. schedlat raises
/// what it was granted to effective itself, and names what it lacks.
pub(super) fn schedlat_capabilities() -> Vec<u8> {
    const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
    const CAP_DAC_READ_SEARCH: u32 = 2;
    const CAP_SYS_RESOURCE: u32 = 24;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let low = (1 << CAP_DAC_READ_SEARCH) | (1 << CAP_SYS_RESOURCE);
    let high = (1 << (CAP_PERFMON - 32)) | (1 << (CAP_BPF - 32));
    [VFS_CAP_REVISION_2, low, 0, high, 0]
        .iter()
        .flat_map(|word: &u32| word.to_le_bytes())
        .collect()
}

/// The layer as an uncompressed tar, parents before children.
pub(super) fn tar(mut entries: Vec<Entry>) -> Result<Vec<u8>> {
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    let mut builder = Builder::new(Vec::new());
    for entry in &entries {
        match entry {
            Entry::Dir { path } => {
                let mut header = header(EntryType::Directory, 0o755, 0);
                builder.append_data(&mut header, format!("{path}/"), std::io::empty())?;
            }
            Entry::File {
                path,
                mode,
                bytes,
                capability,
            } => {
                if let Some(capability) = capability {
                    let records = pax_record("SCHILY.xattr.security.capability", capability);
                    let mut pax = header(EntryType::XHeader, 0o644, records.len() as u64);
                    builder.append_data(&mut pax, "PaxHeaders/schedlat", records.as_slice())?;
                }
                let mut header = header(EntryType::Regular, *mode, bytes.len() as u64);
                builder.append_data(&mut header, path, bytes.as_slice())?;
            }
        }
    }
    Ok(builder.into_inner()?)
}

fn header(kind: EntryType, mode: u32, size: u64) -> Header {
    let mut header = Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// One PAX extended-header record, `"LEN KEY=VALUE\n"`, where LEN counts
/// the whole record, its own digits included (POSIX.1-2001 pax format).
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let rest = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = rest + 1;
    while len != rest + len.to_string().len() {
        len = rest + len.to_string().len();
    }
    let mut record = Vec::with_capacity(len);
    write!(record, "{len} {key}=").expect("writing to a Vec");
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_record_length_counts_itself() {
        // 8 bytes of key, value and separators, plus its own one digit.
        assert_eq!(pax_record("key", b"ab"), b"9 key=ab\n".to_vec());
        let long = pax_record("k", &[b'x'; 95]);
        assert_eq!(long.len(), 102);
        assert!(long.starts_with(b"102 k="));
    }

    #[test]
    fn capabilities_are_permitted_only() {
        let cap = schedlat_capabilities();
        assert_eq!(cap.len(), 20);
        // magic 0x02000000, no effective flag.
        assert_eq!(&cap[..4], &[0, 0, 0, 2]);
        // permitted caps 0-31: bits 2 (DAC_READ_SEARCH) and 24 (SYS_RESOURCE).
        assert_eq!(&cap[4..8], &[0x04, 0, 0, 0x01]);
        // permitted caps 32-63: bits 6 (PERFMON) and 7 (BPF).
        assert_eq!(&cap[12..16], &[0xc0, 0, 0, 0]);
        // nothing inheritable.
        assert_eq!(&cap[8..12], &[0; 4]);
        assert_eq!(&cap[16..20], &[0; 4]);
    }

    #[test]
    fn the_same_files_give_the_same_bytes() {
        let files = || {
            vec![
                Entry::File {
                    path: "usr/bin/b".into(),
                    mode: 0o755,
                    bytes: b"b".to_vec(),
                    capability: Some(schedlat_capabilities()),
                },
                Entry::Dir { path: "usr".into() },
            ]
        };
        let a = tar(files()).unwrap();
        let mut reversed = files();
        reversed.reverse();
        assert_eq!(a, tar(reversed).unwrap());
        let mut archive = tar::Archive::new(a.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let xattrs: Vec<String> = entry
                .pax_extensions()
                .unwrap()
                .into_iter()
                .flatten()
                .map(|e| e.unwrap().key().unwrap().to_string())
                .collect();
            seen.push((entry.path().unwrap().display().to_string(), xattrs));
        }
        assert_eq!(
            seen,
            [
                ("usr/".to_string(), vec![]),
                (
                    "usr/bin/b".to_string(),
                    vec!["SCHILY.xattr.security.capability".to_string()]
                )
            ]
        );
    }
}
