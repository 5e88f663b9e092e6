//! The bpf() system call for the few commands schedlat issues itself (aya
//! issues the rest: loading, attaching, reading maps), and `union
//! bpf_attr` once for all of them: aya-obj's binding, bindgen's of
//! include/uapi/linux/bpf.h, the one aya loads with. Bindgen names most
//! members by number (`__bindgen_anon_1`); each command's member is named
//! here, once, with its layout checked against the header's (tests below).
//!
//! Its users: kernel/preflight/probe.rs (`BPF_MAP_CREATE`),
//! collect/batch.rs (`BPF_MAP_LOOKUP_BATCH`; its tests create and fill a
//! map), and the root tests' sched_ext scheduler (tests/common/sched_ext.rs:
//! `BPF_BTF_LOAD`, `BPF_MAP_CREATE`, `BPF_MAP_UPDATE_ELEM`,
//! `BPF_LINK_CREATE`).

use std::{io, mem::size_of};

pub use aya_obj::generated::{bpf_attr, bpf_cmd};
use aya_obj::generated::{
    bpf_attr__bindgen_ty_1, bpf_attr__bindgen_ty_2, bpf_attr__bindgen_ty_3,
    bpf_attr__bindgen_ty_12, bpf_attr__bindgen_ty_14,
};

/// `BPF_MAP_CREATE`'s member: the map's type, sizes, flags, BTF.
pub type MapCreate = bpf_attr__bindgen_ty_1;
/// The map element commands' member (`BPF_MAP_UPDATE_ELEM`...): the map,
/// pointers to the key and the value.
pub type MapElem = bpf_attr__bindgen_ty_2;
/// The batch commands' member (`BPF_MAP_LOOKUP_BATCH`...), `batch`.
pub type Batch = bpf_attr__bindgen_ty_3;
/// `BPF_BTF_LOAD`'s member: the BTF blob.
pub type BtfLoad = bpf_attr__bindgen_ty_12;
/// `BPF_LINK_CREATE`'s member, `link_create`.
pub type LinkCreate = bpf_attr__bindgen_ty_14;

/// The whole union, the size aya passes and what the commands that
/// create or attach are given.
pub const WHOLE: usize = size_of::<bpf_attr>();
/// The batch member alone (it starts the union): a shorter attr the
/// kernel accepts, the rest counting as zero.
pub const BATCH: usize = size_of::<Batch>();

/// An all-zero attr: every member's "unset". The kernel refuses non-zero
/// bytes past what it knows, so a member is set on a zeroed union.
pub fn zeroed() -> bpf_attr {
    // SAFETY: the union's members are integers, arrays and unions of
    // integers: all-zero is a valid value of each.
    unsafe { std::mem::zeroed() }
}

// The accessors below are safe: every member of the union is integers
// (and unions of integers) only, so any bytes are a valid value of each.

/// `attr`'s `BPF_MAP_CREATE` member.
pub fn map_create(attr: &mut bpf_attr) -> &mut MapCreate {
    // SAFETY: any bytes are a valid MapCreate (above).
    unsafe { &mut attr.__bindgen_anon_1 }
}

/// `attr`'s map element member.
pub fn map_elem(attr: &mut bpf_attr) -> &mut MapElem {
    // SAFETY: any bytes are a valid MapElem (above).
    unsafe { &mut attr.__bindgen_anon_2 }
}

/// `attr`'s batch member.
pub fn batch(attr: &mut bpf_attr) -> &mut Batch {
    // SAFETY: any bytes are a valid Batch (above).
    unsafe { &mut attr.batch }
}

/// `attr`'s `BPF_BTF_LOAD` member.
pub fn btf_load(attr: &mut bpf_attr) -> &mut BtfLoad {
    // SAFETY: any bytes are a valid BtfLoad (above).
    unsafe { &mut attr.__bindgen_anon_7 }
}

/// `attr`'s `BPF_LINK_CREATE` member.
pub fn link_create(attr: &mut bpf_attr) -> &mut LinkCreate {
    // SAFETY: any bytes are a valid LinkCreate (above).
    unsafe { &mut attr.link_create }
}

/// bpf(`cmd`, `attr`, `len`): the kernel reads the first `len` bytes of
/// `attr` ([`WHOLE`], or a member alone such as [`BATCH`]) and may write
/// back into them. The call's return (a new descriptor for a command that
/// makes one, else 0), or the errno.
///
/// # Safety
///
/// Every pointer `attr` holds must be valid, for the call, for what the
/// command reads or writes through it (keys, values, buffers of `count`
/// entries, a BTF blob); `len` is at most [`WHOLE`].
pub unsafe fn call(cmd: bpf_cmd, attr: &mut bpf_attr, len: usize) -> io::Result<libc::c_long> {
    debug_assert!(len <= WHOLE);
    // SAFETY: attr is valid for `len` bytes and its pointers for the
    // command (the caller's promise).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            std::ptr::from_mut(attr),
            len as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    /// The members' fields where include/uapi/linux/bpf.h puts them (the
    /// offsets its 64-bit layout gives, `__aligned_u64` on 8 bytes), and
    /// the commands' numbers of its `enum bpf_cmd`.
    #[test]
    fn the_layouts_are_the_kernels() {
        assert_eq!(
            [
                offset_of!(MapCreate, map_type),
                offset_of!(MapCreate, key_size),
                offset_of!(MapCreate, value_size),
                offset_of!(MapCreate, max_entries),
                offset_of!(MapCreate, map_flags),
                offset_of!(MapCreate, map_name),
                offset_of!(MapCreate, btf_fd),
                offset_of!(MapCreate, btf_vmlinux_value_type_id),
                offset_of!(MapCreate, map_extra),
            ],
            [0, 4, 8, 12, 16, 28, 48, 60, 64]
        );
        assert_eq!(
            [
                offset_of!(MapElem, map_fd),
                offset_of!(MapElem, key),
                offset_of!(MapElem, __bindgen_anon_1),
                offset_of!(MapElem, flags),
            ],
            [0, 8, 16, 24]
        );
        assert_eq!(
            [
                offset_of!(Batch, in_batch),
                offset_of!(Batch, out_batch),
                offset_of!(Batch, keys),
                offset_of!(Batch, values),
                offset_of!(Batch, count),
                offset_of!(Batch, map_fd),
                offset_of!(Batch, elem_flags),
                offset_of!(Batch, flags),
            ],
            [0, 8, 16, 24, 32, 36, 40, 48]
        );
        assert_eq!(BATCH, 56);
        assert_eq!(
            [
                offset_of!(BtfLoad, btf),
                offset_of!(BtfLoad, btf_log_buf),
                offset_of!(BtfLoad, btf_size),
            ],
            [0, 8, 16]
        );
        assert_eq!(
            [
                offset_of!(LinkCreate, __bindgen_anon_1),
                offset_of!(LinkCreate, attach_type),
                offset_of!(LinkCreate, flags),
            ],
            [0, 8, 12]
        );
        // Every member starts the union.
        let mut attr = zeroed();
        let base = std::ptr::from_ref(&attr) as usize;
        for at in [
            std::ptr::from_mut(map_create(&mut attr)) as usize,
            std::ptr::from_mut(map_elem(&mut attr)) as usize,
            std::ptr::from_mut(batch(&mut attr)) as usize,
            std::ptr::from_mut(btf_load(&mut attr)) as usize,
            std::ptr::from_mut(link_create(&mut attr)) as usize,
        ] {
            assert_eq!(at, base);
        }
        assert_eq!(
            [
                bpf_cmd::BPF_MAP_CREATE as u32,
                bpf_cmd::BPF_MAP_UPDATE_ELEM as u32,
                bpf_cmd::BPF_BTF_LOAD as u32,
                bpf_cmd::BPF_MAP_LOOKUP_BATCH as u32,
                bpf_cmd::BPF_LINK_CREATE as u32,
            ],
            [0, 2, 18, 24, 28]
        );
    }
}
