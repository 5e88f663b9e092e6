//! Loading eBPF programs written as raw instructions with the bpf system
//! call: the bench's reference programs (noop.rs), which must ship in no
//! schedlat binary and need no second eBPF object or compiler. A small
//! assembler with labels, array maps, and tp_btf load and attach.

use std::{
    collections::BTreeMap,
    ffi::CString,
    os::fd::{AsRawFd as _, FromRawFd, OwnedFd},
};

use anyhow::{Context, Result, bail};
use btf_rs::{Btf, Type};

// include/uapi/linux/bpf.h
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_RAW_TP: u32 = 23;
pub(super) const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub(super) const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// Helper function ids (enum bpf_func_id).
pub(super) const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
pub(super) const HELPER_KTIME_GET_NS: i32 = 5;

/// Registers by their BPF names.
pub(super) const R0: u8 = 0;
pub(super) const R1: u8 = 1;
pub(super) const R2: u8 = 2;
pub(super) const R3: u8 = 3;
pub(super) const R6: u8 = 6;
pub(super) const R7: u8 = 7;
pub(super) const R8: u8 = 8;
pub(super) const R9: u8 = 9;
pub(super) const R10: u8 = 10;

/// One `struct bpf_insn`, as the kernel reads it (little-endian).
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | u64::from(dst | (src << 4)) << 8
        | u64::from(off as u16) << 16
        | u64::from(imm as u32) << 32
}

/// Instructions with named jump targets. Each jump names a label; `finish`
/// turns the names into offsets (and fails on one never placed).
#[derive(Default)]
pub(super) struct Asm {
    insns: Vec<u64>,
    labels: BTreeMap<&'static str, usize>,
    jumps: Vec<(usize, &'static str)>,
}

impl Asm {
    fn push(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Self {
        self.insns.push(insn(code, dst, src, off, imm));
        self
    }

    /// `dst = *(u64 *)(src + off)`
    pub(super) fn load64(&mut self, dst: u8, src: u8, off: i16) -> &mut Self {
        self.push(0x79, dst, src, off, 0)
    }

    /// `dst = *(u32 *)(src + off)`
    pub(super) fn load32(&mut self, dst: u8, src: u8, off: i16) -> &mut Self {
        self.push(0x61, dst, src, off, 0)
    }

    /// `*(u64 *)(dst + off) = src`
    pub(super) fn store64(&mut self, dst: u8, off: i16, src: u8) -> &mut Self {
        self.push(0x7b, dst, src, off, 0)
    }

    /// `*(u32 *)(dst + off) = src`
    pub(super) fn store32(&mut self, dst: u8, off: i16, src: u8) -> &mut Self {
        self.push(0x63, dst, src, off, 0)
    }

    /// `*(u64 *)(dst + off) = imm`
    pub(super) fn store64_imm(&mut self, dst: u8, off: i16, imm: i32) -> &mut Self {
        self.push(0x7a, dst, 0, off, imm)
    }

    /// `*(u32 *)(dst + off) = imm`
    pub(super) fn store32_imm(&mut self, dst: u8, off: i16, imm: i32) -> &mut Self {
        self.push(0x62, dst, 0, off, imm)
    }

    /// `dst = src`
    pub(super) fn mov(&mut self, dst: u8, src: u8) -> &mut Self {
        self.push(0xbf, dst, src, 0, 0)
    }

    /// `dst = imm`
    pub(super) fn mov_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.push(0xb7, dst, 0, 0, imm)
    }

    /// `dst += imm`
    pub(super) fn add_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.push(0x07, dst, 0, 0, imm)
    }

    /// `dst += src`
    pub(super) fn add(&mut self, dst: u8, src: u8) -> &mut Self {
        self.push(0x0f, dst, src, 0, 0)
    }

    /// `dst -= src`
    pub(super) fn sub(&mut self, dst: u8, src: u8) -> &mut Self {
        self.push(0x1f, dst, src, 0, 0)
    }

    /// `dst >>= imm` (logical)
    pub(super) fn rsh_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.push(0x77, dst, 0, 0, imm)
    }

    /// `dst &= imm`
    pub(super) fn and_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.push(0x57, dst, 0, 0, imm)
    }

    /// `dst |= src`
    pub(super) fn or(&mut self, dst: u8, src: u8) -> &mut Self {
        self.push(0x4f, dst, src, 0, 0)
    }

    /// `dst <<= imm`
    pub(super) fn lsh_imm(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.push(0x67, dst, 0, 0, imm)
    }

    /// `if dst == imm goto label` (64-bit compare)
    pub(super) fn jump_if_eq(&mut self, dst: u8, imm: i32, label: &'static str) -> &mut Self {
        self.jumps.push((self.insns.len(), label));
        self.push(0x15, dst, 0, 0, imm)
    }

    /// `if (u32)dst != imm goto label`
    pub(super) fn jump_if_ne32(&mut self, dst: u8, imm: i32, label: &'static str) -> &mut Self {
        self.jumps.push((self.insns.len(), label));
        self.push(0x56, dst, 0, 0, imm)
    }

    /// `call helper`
    pub(super) fn call(&mut self, helper: i32) -> &mut Self {
        self.push(0x85, 0, 0, 0, helper)
    }

    /// `r0 = 0; exit`
    pub(super) fn return_zero(&mut self) -> &mut Self {
        self.mov_imm(R0, 0).push(0x95, 0, 0, 0, 0)
    }

    /// `dst = map` (a 16-byte load of the map's fd, which the kernel
    /// replaces with the map's address).
    pub(super) fn load_map(&mut self, dst: u8, map: &OwnedFd) -> &mut Self {
        self.push(0x18, dst, BPF_PSEUDO_MAP_FD, 0, map.as_raw_fd())
            .push(0, 0, 0, 0, 0)
    }

    /// `r0 = &map[key]` or NULL, the key a u32 stored at `r10 - 4`: a
    /// bpf_map_lookup_elem, which the verifier inlines for arrays. Uses r1
    /// and r2.
    pub(super) fn lookup(&mut self, map: &OwnedFd) -> &mut Self {
        self.load_map(R1, map)
            .mov(R2, R10)
            .add_imm(R2, -4)
            .call(HELPER_MAP_LOOKUP_ELEM)
    }

    /// Places `label` at the next instruction.
    pub(super) fn label(&mut self, label: &'static str) -> &mut Self {
        self.labels.insert(label, self.insns.len());
        self
    }

    /// The instructions, every jump's offset filled in.
    pub(super) fn finish(&self) -> Result<Vec<u64>> {
        let mut insns = self.insns.clone();
        for &(at, label) in &self.jumps {
            let target = *self
                .labels
                .get(label)
                .with_context(|| format!("jump to label {label}, never placed"))?;
            let off = i16::try_from(target as i64 - at as i64 - 1)?;
            insns[at] |= u64::from(off as u16) << 16;
        }
        Ok(insns)
    }
}

/// The BPF_PROG_LOAD part of `union bpf_attr`, up to attach_prog_fd (the
/// kernel zero-fills what a shorter attr leaves out).
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    _pad: u32,
}

/// The BPF_MAP_CREATE part, up to map_name.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The BPF_RAW_TRACEPOINT_OPEN part: a tp_btf program needs no name.
#[repr(C)]
struct RawTracepointOpen {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &T) -> Result<OwnedFd> {
    // SAFETY: `attr` is a valid, initialised attr of the command's layout
    // and size; the kernel copies it in and returns a new fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_ref(attr),
            size_of::<T>() as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a new fd the kernel returned to us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let len = name.len().min(15);
    out[..len].copy_from_slice(&name.as_bytes()[..len]);
    out
}

/// A map with u32 keys.
pub(super) fn array_map(
    name: &str,
    map_type: u32,
    value_size: u32,
    max_entries: u32,
) -> Result<OwnedFd> {
    let attr = MapCreate {
        map_type,
        key_size: 4,
        value_size,
        max_entries,
        map_name: name16(name),
        ..MapCreate::default()
    };
    bpf(BPF_MAP_CREATE, &attr).with_context(|| format!("creating map {name}"))
}

/// The kernel's BTF id of tracepoint `tp`'s `btf_trace_<tp>` typedef,
/// which a tp_btf program names as its attach point.
pub(super) fn attach_id(btf: &Btf, tp: &str) -> Result<u32> {
    let name = format!("btf_trace_{tp}");
    let ids = btf
        .resolve_ids_by_name(&name)
        .with_context(|| format!("{name} is not in the kernel's BTF"))?;
    ids.into_iter()
        .find(|&id| matches!(btf.resolve_type_by_id(id), Ok(Type::Typedef(_))))
        .with_context(|| format!("{name} is not a typedef in the kernel's BTF"))
}

/// The byte offset of `member` in `struct strukt`, found among its
/// members and those of its anonymous structs and unions (`rq->curr` is in
/// one from 6.13).
pub(super) fn member_offset(btf: &Btf, strukt: &str, member: &str) -> Result<u32> {
    for id in btf.resolve_ids_by_name(strukt)? {
        if let Ok(Type::Struct(s)) = btf.resolve_type_by_id(id)
            && let Some(offset) = find_member(btf, &s, member, 0)
        {
            return Ok(offset / 8);
        }
    }
    bail!("struct {strukt} has no member {member} in the kernel's BTF")
}

/// `member`'s bit offset in `s`, descending into anonymous members.
fn find_member(btf: &Btf, s: &btf_rs::Struct, member: &str, depth: u32) -> Option<u32> {
    for m in &s.members {
        match btf.resolve_name(m) {
            Ok(name) if name == member => return Some(m.bit_offset()),
            Ok(name) if !name.is_empty() => continue,
            _ => {}
        }
        if depth < 4
            && let Ok(Type::Struct(inner) | Type::Union(inner)) = btf.resolve_chained_type(m)
            && let Some(offset) = find_member(btf, &inner, member, depth + 1)
        {
            return Some(m.bit_offset() + offset);
        }
    }
    None
}

/// Loads `insns` as a tp_btf program on the tracepoint whose attach id is
/// `attach_btf_id`, and attaches it; its fds (program, link). The
/// verifier's log is in the error when it refuses the program.
pub(super) fn attach(name: &str, insns: &[u64], attach_btf_id: u32) -> Result<(OwnedFd, OwnedFd)> {
    let license = CString::new("GPL").expect("no NUL");
    let mut log = vec![0u8; 1 << 16];
    let mut load = ProgLoad {
        prog_type: BPF_PROG_TYPE_TRACING,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: BPF_TRACE_RAW_TP,
        attach_btf_id,
        ..ProgLoad::default()
    };
    let prog = match bpf(BPF_PROG_LOAD, &load) {
        Ok(prog) => prog,
        Err(_) => {
            // Again with the log, to say why.
            load.log_level = 1;
            load.log_size = log.len() as u32;
            load.log_buf = log.as_mut_ptr() as u64;
            let err = bpf(BPF_PROG_LOAD, &load).err();
            let text = String::from_utf8_lossy(&log);
            let text = text.trim_end_matches('\0');
            return Err(anyhow::anyhow!("{err:?}\n{text}")).context(format!("loading {name}"));
        }
    };
    let open = RawTracepointOpen {
        name: 0,
        prog_fd: prog.as_raw_fd() as u32,
        _pad: 0,
    };
    let link = bpf(BPF_RAW_TRACEPOINT_OPEN, &open).with_context(|| format!("attaching {name}"))?;
    Ok((prog, link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels() {
        let mut asm = Asm::default();
        asm.jump_if_eq(R1, 0, "out")
            .mov_imm(R2, 1)
            .mov_imm(R2, 2)
            .label("out")
            .return_zero();
        let insns = asm.finish().unwrap();
        // The jump skips the two moves: offset 2, in bits 16..32.
        assert_eq!((insns[0] >> 16) as u16, 2);
        assert_eq!(insns[0] & 0xff, 0x15);
        assert!(Asm::default().jump_if_eq(R1, 0, "x").finish().is_err());
    }

    #[test]
    fn an_instruction_is_laid_out_as_the_kernel_reads_it() {
        // r1 = *(u32 *)(r6 + 0x10): code 0x61, dst 1, src 6, off 16.
        assert_eq!(insn(0x61, 1, 6, 16, 0), 0x0010_6161);
    }
}
