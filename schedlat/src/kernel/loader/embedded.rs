//! The eBPF object built from schedlat-ebpf, embedded in the binary (empty
//! in a host-only build, `AYA_BUILD_SKIP`).

pub(super) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/schedlat"));

/// The embedded object for a test that reads it; None in a host-only build
/// (`AYA_BUILD_SKIP`), the only build that embeds none.
#[cfg(test)]
pub(super) fn for_tests() -> Option<&'static [u8]> {
    if EBPF_OBJECT.is_empty() {
        assert!(
            std::env::var_os("AYA_BUILD_SKIP").is_some(),
            "no eBPF object is embedded, and AYA_BUILD_SKIP is not set"
        );
        return None;
    }
    Some(EBPF_OBJECT)
}

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSection as _};

    /// build.rs drops the DWARF, which aya would parse at every start, and
    /// keeps the BTF the programs load with.
    #[test]
    fn the_embedded_object_carries_its_btf_and_no_dwarf() {
        let Some(embedded) = super::for_tests() else {
            return;
        };
        let file = object::File::parse(embedded).expect("the embedded object is an ELF");
        let names: Vec<&str> = file.sections().filter_map(|s| s.name().ok()).collect();
        assert!(
            names.contains(&".BTF") && names.contains(&".BTF.ext"),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.contains(".debug")), "{names:?}");
    }
}
