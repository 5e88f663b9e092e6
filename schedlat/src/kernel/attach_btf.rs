//! The aya `Btf` that tp_btf programs are attached with.
//!
//! Attaching a tp_btf program needs one thing from the kernel's BTF: the
//! type id of the tracepoint's `btf_trace_<name>` typedef, which the kernel
//! takes as the program's attach_btf_id and checks against its own BTF (a
//! typedef of that name prefix, or the load is refused). aya's
//! `BtfTracePoint::load` looks the id up by name in the `Btf` it is given.
//! schedlat has found these ids already, in its one parse of the kernel's
//! BTF (btf.rs). Handing aya the kernel's BTF to parse again, even only its
//! types up to the last of these ids (~10,000 on 6.18) with all its 2.3 MB
//! of strings, cost about a fifth of start-up CPU and 5 MiB of peak RSS.
//! Instead aya gets a stand-in: BTF type ids are positions in the type
//! section, so a blob whose ids 1..=max are placeholders (`void *`) except
//! the typedefs, which sit at the kernel's ids under their names, resolves
//! each name to the kernel's id. The blob (12 bytes a type, ~120 KiB) never
//! reaches the kernel; only the ids do.

/// A BTF blob with `typedefs` (name, id) at their ids and `void *`
/// everywhere else, then parsed by aya.
pub(crate) fn stand_in(typedefs: &[(String, u32)]) -> Result<aya::Btf, aya::BtfError> {
    aya::Btf::parse(&blob(typedefs), aya::Endianness::default())
}

const BTF_MAGIC: u16 = 0xeb9f;
const HEADER_LEN: u32 = 24;
/// include/uapi/linux/btf.h: BTF_KIND_PTR, BTF_KIND_TYPEDEF.
const KIND_PTR: u32 = 2;
const KIND_TYPEDEF: u32 = 8;

fn blob(typedefs: &[(String, u32)]) -> Vec<u8> {
    // The string section: "" first (offset 0, the anonymous name), then
    // each typedef's name.
    let mut strings = vec![0u8];
    let mut named = Vec::with_capacity(typedefs.len());
    for (name, id) in typedefs {
        named.push((*id, strings.len() as u32));
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    let max_id = typedefs.iter().map(|&(_, id)| id).max().unwrap_or(0);
    // struct btf_type: name_off, info (kind << 24), type; 12 bytes each,
    // with nothing after for these two kinds. Both refer to type 0, void.
    let mut types = Vec::with_capacity(max_id as usize * 12);
    for id in 1..=max_id {
        let (name_off, kind) = match named.iter().find(|&&(at, _)| at == id) {
            Some(&(_, name_off)) => (name_off, KIND_TYPEDEF),
            None => (0, KIND_PTR),
        };
        for v in [name_off, kind << 24, 0] {
            types.extend_from_slice(&v.to_le_bytes());
        }
    }
    let mut blob = Vec::with_capacity(HEADER_LEN as usize + types.len() + strings.len());
    blob.extend_from_slice(&BTF_MAGIC.to_le_bytes());
    blob.extend_from_slice(&[1, 0]); // version, flags
    let type_len = types.len() as u32;
    // hdr_len, type_off, type_len, str_off, str_len
    for v in [HEADER_LEN, 0, type_len, type_len, strings.len() as u32] {
        blob.extend_from_slice(&v.to_le_bytes());
    }
    blob.extend_from_slice(&types);
    blob.extend_from_slice(&strings);
    blob
}

#[cfg(test)]
mod tests {
    use aya_obj::btf::BtfKind;

    use super::*;
    use crate::kernel::btf;

    fn typedefs(list: &[(&str, u32)]) -> Vec<(String, u32)> {
        list.iter().map(|&(n, id)| (n.to_string(), id)).collect()
    }

    #[test]
    fn names_resolve_to_their_ids() {
        let btf = stand_in(&typedefs(&[("btf_trace_b", 7), ("btf_trace_a", 2)])).unwrap();
        let id = |name| btf.id_by_type_name_kind(name, BtfKind::Typedef);
        assert_eq!(id("btf_trace_a").unwrap(), 2);
        assert_eq!(id("btf_trace_b").unwrap(), 7);
        assert!(id("btf_trace_c").is_err());
        // The placeholders are anonymous pointers, not typedefs.
        assert!(id("").is_err());
    }

    #[test]
    fn gives_aya_the_ids_of_the_kernels_own_btf() {
        // The running kernel's BTF is world-readable; every supported kernel has it.
        let path = std::path::Path::new(btf::VMLINUX_BTF);
        let parsed = btf::open(path).unwrap();
        let tracepoints = schedlat_common::names::BTF_PROGRAMS.map(|(_, tp)| tp);
        let ids = btf::tracepoint_ids(&btf::Layouts::new(&parsed, path), &tracepoints).unwrap();
        let small = stand_in(&ids).unwrap();
        // What aya's own lookup in the whole of the kernel's BTF finds.
        let full = aya::Btf::from_sys_fs().expect("kernel BTF");
        for (name, id) in &ids {
            let kind = BtfKind::Typedef;
            assert_eq!(
                full.id_by_type_name_kind(name, kind).unwrap(),
                *id,
                "{name}"
            );
            assert_eq!(
                small.id_by_type_name_kind(name, kind).unwrap(),
                *id,
                "{name}"
            );
        }
    }
}
