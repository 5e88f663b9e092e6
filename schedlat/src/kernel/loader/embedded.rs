//! The eBPF object built from schedlat-ebpf, embedded in the binary (empty
//! in a host-only build, `AYA_BUILD_SKIP`).

pub(super) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/schedlat"));
