//! The hook modes: how the programs attach to the scheduler's tracepoints,
//! as asked for with `--hook` and as in use after loading.

use std::fmt;

/// What the user asked for with `--hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookChoice {
    /// tp_btf when the kernel has BTF and supports it, classic tracepoints otherwise.
    Auto,
    /// BTF-typed tracepoints (tp_btf): cheapest; needs kernel BTF (5.5+).
    Btf,
    /// Classic tracepoints, offsets from tracefs format files: any kernel.
    Tp,
}

/// The hook mode in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) enum HookMode {
    #[serde(rename = "tp_btf")]
    Btf,
    #[serde(rename = "tracepoint")]
    Tracepoint,
}

impl fmt::Display for HookMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HookMode::Btf => "tp_btf",
            HookMode::Tracepoint => "tracepoint",
        })
    }
}
