//! The marks the eBPF programs leave where a tp_btf argument is to be read
//! as an untrusted pointer, and the loader's rewrite of each into the
//! kernel's `bpf_rdonly_cast`.
//!
//! Why: a tp_btf argument is a trusted pointer, and each load of a pointer
//! field from a trusted pointer makes the verifier look up four type names
//! (`<struct>__safe_trusted`, `..._or_null`, `__safe_rcu`, `..._or_null`)
//! in the kernel's BTF, each a scan over every type (kernel/bpf/verifier.c
//! check_ptr_to_btf_access()). On 6.18 that is about 0.3 ms a scan, over a
//! third of the verifier's time for schedlat's programs and most of a short
//! program's. A load from an untrusted pointer skips the lookups; at run
//! time it is the same load (BPF_PROBE_MEM, a fault reads as 0), and the
//! cast itself is replaced by a register move when the program is JITed
//! (fixup_kfunc_call()).
//!
//! The mark is two instructions that are a correct program as they stand:
//!
//! ```text
//! r0 = MARK      (BPF_ALU64 | BPF_MOV | BPF_K, dst r0, imm MARK)
//! r0 = r1        (BPF_ALU64 | BPF_MOV | BPF_X, dst r0, src r1)
//! ```
//!
//! so an object left as built loads on every kernel, the pointer trusted as
//! before. Where the kernel has `bpf_rdonly_cast` (6.2+) the loader writes
//! over them (`rewrite`):
//!
//! ```text
//! r2 = BTF id of the struct
//! call bpf_rdonly_cast   (BPF_JMP | BPF_CALL, src BPF_PSEUDO_KFUNC_CALL,
//!                         imm its BTF id in vmlinux)
//! ```
//!
//! r2's constant is the kfunc's second argument, which the verifier
//! requires to be known; r0 comes back `PTR_TO_BTF_ID | PTR_UNTRUSTED` of
//! that struct. The eBPF side declares r1-r5 clobbered either way.

/// Which struct a mark casts to: its `MARK`'s low byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Struct {
    Task = 1,
    Cgroup = 2,
}

impl Struct {
    /// Every struct a mark may name.
    pub const ALL: [Struct; 2] = [Struct::Task, Struct::Cgroup];

    /// Its name in the kernel's BTF.
    pub const fn btf_name(self) -> &'static str {
        match self {
            Struct::Task => "task_struct",
            Struct::Cgroup => "cgroup",
        }
    }

    /// The mark's immediate: a value no program loads into r0 by chance
    /// (a mark must be found only where one was put; `rewrite` also
    /// requires the move from r1 right after it).
    pub const fn mark(self) -> i32 {
        MARK_BASE | self as i32
    }
}

/// The marks' high bits.
const MARK_BASE: i32 = 0x5c4e_d100;

/// `r0 = imm`: BPF_ALU64 | BPF_MOV | BPF_K.
const MOV_IMM: u8 = 0xb7;
/// `r0 = r1`: BPF_ALU64 | BPF_MOV | BPF_X.
const MOV_REG: u8 = 0xbf;
/// BPF_JMP | BPF_CALL.
const CALL: u8 = 0x85;
/// The call's src_reg for a kernel function (include/uapi/linux/bpf.h).
const BPF_PSEUDO_KFUNC_CALL: u8 = 2;

/// The size of an instruction (a 16-byte load is two).
const INSN: usize = 8;

/// The BTF ids `rewrite` writes: the kfunc's, and each struct's (None:
/// that struct's marks are left as they are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ids {
    pub rdonly_cast: u32,
    pub task: Option<u32>,
    pub cgroup: Option<u32>,
}

impl Ids {
    fn of(&self, s: Struct) -> Option<u32> {
        match s {
            Struct::Task => self.task,
            Struct::Cgroup => self.cgroup,
        }
    }
}

/// The struct whose mark starts at `insns[0..16]`, if one does.
fn mark_at(insns: &[u8]) -> Option<Struct> {
    let (first, second) = (insns.get(..INSN)?, insns.get(INSN..2 * INSN)?);
    let is_mark = first[0] == MOV_IMM
        && first[1] == 0
        && first[2..4] == [0, 0]
        && second == [MOV_REG, 0x10, 0, 0, 0, 0, 0, 0];
    let imm = i32::from_le_bytes([first[4], first[5], first[6], first[7]]);
    Struct::ALL.into_iter().find(|s| is_mark && s.mark() == imm)
}

/// Rewrites every mark in `code` (a program section's instructions) whose
/// struct `ids` has an id into the cast; returns how many it rewrote.
pub fn rewrite(code: &mut [u8], ids: &Ids) -> usize {
    let mut done = 0;
    let mut at = 0;
    while at + 2 * INSN <= code.len() {
        let Some(id) = mark_at(&code[at..]).and_then(|s| ids.of(s)) else {
            at += INSN;
            continue;
        };
        // r2 = id (dst r2 in the low nibble of the register byte).
        code[at..at + INSN].copy_from_slice(&insn(MOV_IMM, 2, 0, id));
        code[at + INSN..at + 2 * INSN].copy_from_slice(&insn(
            CALL,
            0,
            BPF_PSEUDO_KFUNC_CALL,
            ids.rdonly_cast,
        ));
        done += 1;
        at += 2 * INSN;
    }
    done
}

/// One instruction's bytes (little-endian; off 0).
fn insn(code: u8, dst: u8, src: u8, imm: u32) -> [u8; INSN] {
    let imm = imm.to_le_bytes();
    [code, dst | (src << 4), 0, 0, imm[0], imm[1], imm[2], imm[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(s: Struct) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&insn(MOV_IMM, 0, 0, s.mark() as u32));
        out[8..].copy_from_slice(&[MOV_REG, 0x10, 0, 0, 0, 0, 0, 0]);
        out
    }

    #[test]
    fn a_mark_becomes_the_cast_of_its_struct() {
        let mut code = [0u8; 48];
        code[8..24].copy_from_slice(&mark(Struct::Task));
        code[32..48].copy_from_slice(&mark(Struct::Cgroup));
        let ids = Ids {
            rdonly_cast: 0x0102_0304,
            task: Some(77),
            cgroup: None,
        };
        assert_eq!(rewrite(&mut code, &ids), 1);
        assert_eq!(&code[8..16], &[0xb7, 0x02, 0, 0, 77, 0, 0, 0]);
        assert_eq!(&code[16..24], &[0x85, 0x20, 0, 0, 4, 3, 2, 1]);
        // No id for cgroup: its mark stays, a correct program as it is.
        assert_eq!(&code[32..48], &mark(Struct::Cgroup));
    }

    #[test]
    fn only_a_whole_mark_on_an_instruction_boundary_is_rewritten() {
        let ids = Ids {
            rdonly_cast: 9,
            task: Some(1),
            cgroup: Some(2),
        };
        // The immediate without the move after it.
        let mut half = mark(Struct::Task);
        half[8] = 0xb7;
        assert_eq!(rewrite(&mut half, &ids), 0);
        // The move into another register than r0.
        let mut other = mark(Struct::Task);
        other[1] = 0x03;
        assert_eq!(rewrite(&mut other, &ids), 0);
        // A mark across an instruction boundary.
        let mut shifted = [0u8; 32];
        shifted[4..20].copy_from_slice(&mark(Struct::Task));
        assert_eq!(rewrite(&mut shifted, &ids), 0);
        // A mark cut short by the end of the code.
        assert_eq!(rewrite(&mut mark(Struct::Task)[..12].to_vec(), &ids), 0);
    }
}
