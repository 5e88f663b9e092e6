//! Whether each mode runs here, found the only sure way: load and attach
//! its programs as that mode would, then detach them at once (dropping the
//! object closes every program, map and link). What the kernel refuses is
//! the loader's own error, with its fix.

use schedlat_common::scope::Breakdown;

use crate::kernel::{
    error::SEE_CHECK,
    filter::{Filter, FilterSpec},
    hook::{HookChoice, HookMode},
    loader::{self, KernelSources},
    modes::{DEFAULT_MAX_KEYS, DEFAULT_MAX_TASKS, Keyed, Modes},
};

/// The ways of running schedlat that need different things of the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Mode {
    /// The histogram (`schedlat`, `serve`), in the hook mode auto picks.
    Histogram,
    /// The histogram on classic tracepoints (`--hook tp`).
    Tracepoint,
    /// Per-process histograms (`-P`, `-L`, `--pidnss`, `serve --pids`).
    PerProcess,
    /// Per-cgroup histograms (`--cgroups`, `serve --cgroups`).
    Cgroups,
    /// The victims and culprits tables (`victims`, `top`).
    Victims,
    /// Slow waits as they happen (`slow`, `record --ring`, `serve --ring`).
    Slow,
}

impl Mode {
    pub(crate) const ALL: [Mode; 6] = [
        Mode::Histogram,
        Mode::Tracepoint,
        Mode::PerProcess,
        Mode::Cgroups,
        Mode::Victims,
        Mode::Slow,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Histogram => "histogram",
            Mode::Tracepoint => "tracepoint",
            Mode::PerProcess => "per-process",
            Mode::Cgroups => "cgroups",
            Mode::Victims => "victims",
            Mode::Slow => "slow",
        }
    }

    /// What the mode needs, beyond CAP_BPF and CAP_PERFMON (or root).
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Mode::Histogram => "kernel BTF for tp_btf (5.5+), else tracefs",
            Mode::Tracepoint => {
                "tracefs readable (CAP_DAC_READ_SEARCH where it is mode 0700, as by default)"
            }
            Mode::PerProcess => "tp_btf; the host's PID namespace for process names",
            Mode::Cgroups => "tp_btf; a cgroup hierarchy mounted (the host's, to name every group)",
            Mode::Victims => "tp_btf on 5.12+ (64-bit atomics)",
            Mode::Slow => "tp_btf; BPF ring buffers (5.8+)",
        }
    }

    fn load(self) -> (HookChoice, Modes) {
        let keyed = |by| {
            Modes::histogram(Some(Keyed {
                by,
                max_keys: DEFAULT_MAX_KEYS,
            }))
        };
        match self {
            Mode::Histogram => (HookChoice::Auto, Modes::HISTOGRAM),
            Mode::Tracepoint => (HookChoice::Tp, Modes::HISTOGRAM),
            Mode::PerProcess => (HookChoice::Auto, keyed(Breakdown::Process)),
            Mode::Cgroups => (HookChoice::Auto, keyed(Breakdown::Cgroup)),
            Mode::Victims => (HookChoice::Auto, Modes::victims(DEFAULT_MAX_TASKS)),
            Mode::Slow => (HookChoice::Auto, Modes::slow(10_000_000)),
        }
    }
}

/// What loading a mode's programs gave.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Trial {
    pub mode: Mode,
    pub runs: bool,
    /// The hook mode it attached in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookMode>,
    pub needs: &'static str,
    /// Why it does not run, with the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Loads and attaches `mode`'s programs, and detaches them.
pub(crate) fn run(mode: Mode) -> Trial {
    let (choice, modes) = mode.load();
    let result = Filter::resolve(&FilterSpec::default())
        .map_err(|e| e.to_string())
        .and_then(|filter| {
            loader::load(choice, &KernelSources::default(), 1_000, &filter, &modes)
                // This is that check: no pointer to itself.
                .map_err(|e| e.to_string().replace(SEE_CHECK, ""))
        });
    let (hook, error) = match result {
        // Dropped here: nothing stays in the kernel.
        Ok(loaded) => (Some(loaded.mode), None),
        Err(e) => (None, Some(e)),
    };
    Trial {
        mode,
        runs: error.is_none(),
        hook,
        needs: mode.needs(),
        error,
    }
}
