//! Attaching the loaded programs in one hook mode.

use aya::{
    Ebpf,
    programs::{BtfTracePoint, ProgramError, TracePoint},
};
use schedlat_common::names;

use crate::kernel::{error::LoadError, hook::HookMode};

pub(super) fn attach(
    ebpf: &mut Ebpf,
    mode: HookMode,
    btf: Option<&aya::Btf>,
    btf_programs: &[(&'static str, &'static str)],
) -> Result<(), LoadError> {
    let fail = |program, step, error, hint| LoadError::Program {
        mode,
        program,
        step,
        error: Box::new(error),
        hint,
    };
    match mode {
        HookMode::Btf => {
            let btf = btf.expect("BTF is parsed whenever tp_btf is a candidate");
            const HINT: &str = " (the kernel may lack tp_btf support, 5.5+; try --hook tp)";
            for &(program, tracepoint) in btf_programs {
                let prog: &mut BtfTracePoint = program_mut(ebpf, mode, program)?;
                prog.load(tracepoint, btf)
                    .map_err(|e| fail(program, "load", e, HINT))?;
                prog.attach()
                    .map_err(|e| fail(program, "attach", e, HINT))?;
            }
        }
        HookMode::Tracepoint => {
            const HINT: &str =
                " (is tracefs mounted? `mount -t tracefs nodev /sys/kernel/tracing`)";
            for (program, tracepoint) in names::TP_PROGRAMS {
                let prog: &mut TracePoint = program_mut(ebpf, mode, program)?;
                prog.load().map_err(|e| fail(program, "load", e, ""))?;
                prog.attach("sched", tracepoint)
                    .map_err(|e| fail(program, "attach", e, HINT))?;
            }
        }
    }
    Ok(())
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
        hint: " (the embedded object is stale: rebuild)",
    })?;
    program.try_into().map_err(|error| LoadError::Program {
        mode,
        program: name,
        step: "find",
        error: Box::new(error),
        hint: "",
    })
}
