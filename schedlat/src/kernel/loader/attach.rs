//! Attaching the loaded programs in one hook mode.

use aya::{
    Ebpf,
    programs::{BtfTracePoint, ProgramError, TracePoint},
};
use schedlat_common::{cast::Ids, names};

use super::{cast, parallel};
use crate::kernel::{error::LoadError, hook::HookMode, tracefs};

/// `custom_btf`: the offsets came from a `--btf` file, the likeliest cause
/// of a verifier refusal then (offsets of another kernel's task_struct).
/// `casts`: the ids that turn the tp_btf programs' marks into casts. The
/// notes: what the user should know (a cast the kernel refused).
#[allow(
    clippy::too_many_arguments,
    reason = "one call site, each a fact of the plan"
)]
pub(super) fn attach(
    ebpf: &mut Ebpf,
    mode: HookMode,
    btf: Option<&aya::Btf>,
    custom_btf: bool,
    casts: Option<&Ids>,
    btf_programs: &[(&'static str, &'static str)],
    waking: bool,
) -> Result<Vec<String>, LoadError> {
    let mut notes = Vec::new();
    // Out of descriptors or memory, the hint (another hook mode, tracefs)
    // would mislead: the limit is the error.
    let fail = |program, step, error: ProgramError, hint: std::borrow::Cow<'static, str>| {
        LoadError::limit(&format!("{mode} program `{program}` ({step})"), &error, &[])
            .unwrap_or_else(|| LoadError::Program {
                mode,
                program,
                step,
                error: Box::new(error),
                hint,
            })
    };
    match mode {
        HookMode::Btf => {
            let btf = btf.expect("BTF is parsed whenever tp_btf is a candidate");
            const HINT: &str = " (the kernel may lack tp_btf support, 5.5+; try --hook tp)";
            const BTF_HINT: &str = " (the --btf file is the likely cause: offsets from another kernel's BTF make the verifier refuse the programs; drop --btf, or give this kernel's)";
            // The victims tables' sched_switch program allocates rows with
            // an atomic fetch-and-add (BPF_ATOMIC | BPF_FETCH), which
            // verifiers before 5.12 refuse ("BPF_STX uses reserved
            // fields"); classic tracepoints cannot help there.
            const VICTIMS_HINT: &str = " (the victims tables need kernel 5.12 or newer: their program uses a BPF atomic fetch-and-add; the histogram modes and `schedlat slow` work on older kernels)";
            // The stacks' helpers: bpf_get_task_stack (5.9) of
            // bpf_get_current_task_btf (5.11).
            const STACKS_HINT: &str = " (`--stacks` needs kernel 5.11 or newer: its program walks the holder's stacks with bpf_get_task_stack of bpf_get_current_task_btf; `schedlat slow` and `record --ring` without --stacks work on older kernels)";
            let hint = |program: &str| {
                let victims = [
                    names::BTF_SWITCH_VICTIMS,
                    names::BTF_DECISION_PROGRAMS[3].0,
                    names::BTF_PAIRS_PROGRAMS[2].0,
                    names::BTF_PAIRS_PROGRAMS[3].0,
                ];
                if (names::BTF_HOLDER_STACKS_PROGRAMS.iter())
                    .chain(&names::BTF_WAKER_STACKS_PROGRAMS)
                    .chain(&names::BTF_PAIRS_STACKS_PROGRAMS)
                    .any(|(p, _)| *p == program)
                {
                    STACKS_HINT
                } else if victims.contains(&program) {
                    VICTIMS_HINT
                } else {
                    HINT
                }
            };
            // Every program is found before any is loaded, so a stale
            // object says so before the verifier runs.
            let mut as_built = Vec::new();
            for &(program, _) in btf_programs {
                let prog = program_mut::<BtfTracePoint>(ebpf, mode, program)?;
                as_built.push(casts.and_then(|ids| cast::apply(prog, ids)));
            }
            let loads = parallel::load_all(btf_tracepoints(ebpf, btf_programs), btf);
            for ((&(program, tracepoint), loaded), built) in
                btf_programs.iter().zip(loads).zip(&as_built)
            {
                let loaded = match (loaded, built) {
                    (Err(refusal), Some(built)) if cast::is_refusal(&refusal) => {
                        let prog: &mut BtfTracePoint = program_mut(ebpf, mode, program)?;
                        let (loaded, note) = cast::retry_as_built(prog, built, &refusal, |prog| {
                            prog.load(tracepoint, btf)
                        });
                        notes.push(format!("{program}: {note}"));
                        loaded
                    }
                    (loaded, _) => loaded,
                };
                // A verifier refusal with --btf is most likely the file's.
                let load_hint = if custom_btf { BTF_HINT } else { hint(program) };
                loaded.map_err(|e| fail(program, "load", e, load_hint.into()))?;
            }
            for &(program, _) in btf_programs {
                let prog: &mut BtfTracePoint = program_mut(ebpf, mode, program)?;
                prog.attach()
                    .map_err(|e| fail(program, "attach", e, hint(program).into()))?;
            }
        }
        HookMode::Tracepoint => {
            const HINT: &str =
                " (is tracefs mounted? `mount -t tracefs nodev /sys/kernel/tracing`)";
            let waking = waking.then_some(names::TP_WAKING);
            for (program, tracepoint) in names::TP_PROGRAMS.into_iter().chain(waking) {
                let prog: &mut TracePoint = program_mut(ebpf, mode, program)?;
                prog.load()
                    .map_err(|e| fail(program, "load", e, "".into()))?;
                prog.attach("sched", tracepoint).map_err(|e| {
                    // aya says "tracefs not found" whatever kept it from
                    // opening the tracepoint's id: the errno says why.
                    let hint = tracefs::why_unusable(None, "sched", tracepoint)
                        .map_or(HINT.into(), |why| format!(" ({why})").into());
                    fail(program, "attach", e, hint)
                })?;
            }
        }
    }
    Ok(notes)
}

/// The tp_btf programs named in `btf_programs` (all present: the caller
/// found each), each with its tracepoint, in that order.
fn btf_tracepoints<'a>(
    ebpf: &'a mut Ebpf,
    btf_programs: &[(&'static str, &'static str)],
) -> Vec<(&'a mut BtfTracePoint, &'static str, &'static str)> {
    let mut found: Vec<(usize, &'a mut BtfTracePoint)> = ebpf
        .programs_mut()
        .filter_map(|(name, program)| {
            let i = btf_programs.iter().position(|&(p, _)| p == name)?;
            Some((i, program.try_into().ok()?))
        })
        .collect();
    found.sort_by_key(|&(i, _)| i);
    found
        .into_iter()
        .map(|(i, prog)| (prog, btf_programs[i].0, btf_programs[i].1))
        .collect()
}

fn program_mut<'a, T>(
    ebpf: &'a mut Ebpf,
    mode: HookMode,
    name: &'static str,
) -> Result<&'a mut T, LoadError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    let program = ebpf.program_mut(name).ok_or(LoadError::Program {
        mode,
        program: name,
        step: "find",
        error: Box::new(ProgramError::InvalidName {
            name: name.to_string(),
        }),
        hint: " (the embedded object is stale: rebuild)".into(),
    })?;
    program.try_into().map_err(|error| LoadError::Program {
        mode,
        program: name,
        step: "find",
        error: Box::new(error),
        hint: "".into(),
    })
}
