//! The casts (schedlat_common::cast says what they are and why): each
//! tp_btf program's marks rewritten in place before it loads, when this
//! kernel can cast.

use aya::programs::{BtfTracePoint, ProgramError};
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

/// A program's code as built, kept while its casts are tried.
pub(super) struct AsBuilt(Vec<u8>);

/// Rewrites `prog`'s marks (before its load); its code as built when it
/// rewrote any, to load it again without them (`retry_as_built`).
pub(super) fn apply(prog: &mut BtfTracePoint, ids: &Ids) -> Option<AsBuilt> {
    let code = prog.code_mut()?;
    let built = code.to_vec();
    (rewrite(code, ids) > 0).then_some(AsBuilt(built))
}

/// Whether a failed load is the verifier's refusal (EINVAL, EACCES), which
/// the casts may have caused, rather than a limit (memory, descriptors,
/// privileges), which loading again as built would not change.
pub(super) fn is_refusal(error: &ProgramError) -> bool {
    matches!(error, ProgramError::LoadError { io_error, .. }
        if matches!(io_error.raw_os_error(), Some(libc::EINVAL | libc::EACCES)))
}

/// What `retry_as_built` needs of a program: its code to restore.
pub(super) trait Code {
    fn code_mut(&mut self) -> Option<&mut [u8]>;
}

impl Code for BtfTracePoint {
    fn code_mut(&mut self) -> Option<&mut [u8]> {
        BtfTracePoint::code_mut(self)
    }
}

/// A program whose load with casts was refused (`refusal`), loaded again
/// as built: the casts are the newest thing schedlat asks of a verifier,
/// and kernels between the ones it is tested on (6.2-6.11) might refuse
/// them where they take the rest. The note says so; the load's result is
/// the second one.
pub(super) fn retry_as_built<P: Code, E: std::fmt::Display>(
    prog: &mut P,
    as_built: &AsBuilt,
    refusal: &E,
    load: impl FnOnce(&mut P) -> Result<(), E>,
) -> (Result<(), E>, String) {
    if let Some(code) = prog.code_mut() {
        code.copy_from_slice(&as_built.0);
    }
    let result = load(prog);
    let outcome = match &result {
        Ok(()) => {
            "loaded without them (the verifier then scans the kernel's BTF by name, a slower load)"
        }
        Err(_) => "refused without them too",
    };
    let refusal = refusal.to_string();
    let why = refusal_line(&refusal);
    let note = format!("the kernel refused its casts to an untrusted pointer ({why}); {outcome}");
    (result, note)
}

/// The line of a refusal that says why: the verifier's first, where aya
/// quotes the verifier's log after the system call's error.
fn refusal_line(refusal: &str) -> &str {
    let log = refusal
        .split_once("Verifier output:")
        .map_or(refusal, |(_, log)| log);
    log.trim().lines().next().unwrap_or(refusal).trim()
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

    /// A program's code, and how many times it was loaded.
    struct Fake(Vec<u8>, u32);

    impl Code for Fake {
        fn code_mut(&mut self) -> Option<&mut [u8]> {
            Some(&mut self.0)
        }
    }

    #[test]
    fn only_a_verifier_refusal_is_tried_again() {
        let failed = |errno| ProgramError::LoadError {
            io_error: std::io::Error::from_raw_os_error(errno),
            verifier_log: aya_obj::VerifierLog::new(String::new()),
        };
        assert!(is_refusal(&failed(libc::EINVAL)));
        assert!(is_refusal(&failed(libc::EACCES)));
        assert!(!is_refusal(&failed(libc::ENOMEM)));
        assert!(!is_refusal(&failed(libc::EPERM)));
    }

    #[test]
    fn a_refused_cast_is_loaded_again_as_built_and_said() {
        let built = AsBuilt(vec![1, 2, 3, 4]);
        let mut prog = Fake(vec![9, 9, 9, 9], 0);
        let (result, note) = retry_as_built(&mut prog, &built, &"invalid kfunc", |p| {
            // The load sees the code as built.
            assert_eq!(p.0, [1, 2, 3, 4]);
            p.1 += 1;
            Ok::<(), &str>(())
        });
        assert_eq!((result, prog.1), (Ok(()), 1));
        assert!(
            note.contains("invalid kfunc") && note.contains("loaded without them"),
            "{note}"
        );
        let (result, note) = retry_as_built(
            &mut prog,
            &built,
            &"returned Invalid argument. Verifier output: kernel btf_id 114 is not a function\nverification time 41 usec",
            |_| Err("again"),
        );
        assert!(
            note.contains("(kernel btf_id 114 is not a function)"),
            "{note}"
        );
        assert_eq!(result, Err("again"));
        assert!(note.contains("refused without them too"), "{note}");
    }

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
        let Some(embedded) = super::super::embedded::for_tests() else {
            return;
        };
        let file = object::File::parse(embedded).expect("the embedded object is an ELF");
        let ids = Ids {
            rdonly_cast: 0x00ab_cdef,
            task: Some(11),
            cgroup: Some(12),
        };
        let programs = names::BTF_PROGRAMS
            .iter()
            .chain(&names::BTF_DECISION_PROGRAMS)
            .chain(&names::BTF_HOLDER_STACKS_PROGRAMS)
            .chain(&names::BTF_WAKER_STACKS_PROGRAMS)
            .chain(&names::BTF_PAIRS_PROGRAMS)
            .chain(&names::BTF_PAIRS_STACKS_PROGRAMS)
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
