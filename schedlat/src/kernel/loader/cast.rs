//! The casts (schedlat_common::cast says what they are and why): each
//! tp_btf program's marks rewritten in place before it loads, when this
//! kernel can cast.

use aya::programs::BtfTracePoint;
use schedlat_common::cast::{Ids, rewrite};

/// The JIT's switch: a kernel function call needs the JIT (the verifier
/// refuses one without it).
const BPF_JIT_ENABLE: &str = "/proc/sys/net/core/bpf_jit_enable";

/// `ids` when the kernel's JIT is on, else None: the marks then load as
/// they are, plain register moves, the arguments trusted as before casts
/// existed.
pub(super) fn usable(ids: Option<Ids>) -> Option<Ids> {
    ids.filter(|_| jit_enabled())
}

/// Rewrites `prog`'s marks (before its load); how many it rewrote.
pub(super) fn apply(prog: &mut BtfTracePoint, ids: &Ids) -> usize {
    prog.code_mut().map_or(0, |code| rewrite(code, ids))
}

/// Whether the kernel JITs BPF programs: 1 or 2 (2 also dumps the image).
/// Unreadable: taken as on, as on every kernel schedlat runs on; a load
/// that fails for it says so in the verifier's words.
fn jit_enabled() -> bool {
    std::fs::read_to_string(BPF_JIT_ENABLE).map_or(true, |v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    use schedlat_common::names;

    use super::*;

    /// The code of `program` in the ELF `file` (its symbol's bytes).
    fn code_of(file: &object::File, program: &str) -> Vec<u8> {
        let symbol = file
            .symbols()
            .find(|s| s.name() == Ok(program))
            .unwrap_or_else(|| panic!("no symbol {program} in the object"));
        let section = symbol
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .expect("its section");
        let bytes = section.data().expect("its section's bytes");
        let (start, len) = (symbol.address() as usize, symbol.size() as usize);
        bytes[start..start + len].to_vec()
    }

    /// The embedded object as built: every tp_btf program holds one mark
    /// per argument it reads (a rewrite that found none would leave the
    /// verifier's scans in place without a word), and a rewrite changes
    /// only the marks' bytes.
    #[test]
    fn every_tp_btf_program_of_the_embedded_object_marks_its_arguments() {
        let embedded = super::super::embedded::EBPF_OBJECT;
        if embedded.is_empty() {
            // Only a host-only build (AYA_BUILD_SKIP) embeds no object.
            assert!(
                std::env::var_os("AYA_BUILD_SKIP").is_some(),
                "no eBPF object is embedded, and AYA_BUILD_SKIP is not set"
            );
            return;
        }
        let file = object::File::parse(embedded).expect("the embedded object is an ELF");
        let ids = Ids {
            rdonly_cast: 0x00ab_cdef,
            task: Some(11),
            cgroup: Some(12),
        };
        let programs = names::BTF_PROGRAMS
            .iter()
            .chain(&names::BTF_DECISION_PROGRAMS)
            .map(|&(program, _)| program)
            .chain([names::BTF_WAKING.0, names::BTF_SWITCH_VICTIMS]);
        for program in programs {
            let code = code_of(&file, program);
            let mut copy = code.clone();
            // The switches read prev and next; the others one task.
            let expected = if program.contains("switch") { 2 } else { 1 };
            assert_eq!(rewrite(&mut copy, &ids), expected, "{program}'s marks");
            // Per mark: r2's register byte and immediate, the call's
            // code, register byte and immediate: at most 13 bytes.
            let changed = code.iter().zip(&copy).filter(|(a, b)| a != b).count();
            assert!(
                changed <= expected * 13,
                "{program}: {changed} bytes changed"
            );
        }
        // cgroup_mkdir casts a cgroup, not a task.
        let mkdir = code_of(&file, names::BTF_CGROUP_MKDIR.0);
        let tasks_only = Ids {
            cgroup: None,
            ..ids
        };
        assert_eq!(rewrite(&mut mkdir.clone(), &tasks_only), 0);
        assert_eq!(rewrite(&mut mkdir.clone(), &ids), 1);
    }
}
