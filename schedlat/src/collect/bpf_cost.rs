//! What schedlat's own BPF programs cost the kernel: run time and run count
//! per program, as `bpf_prog_info` reports them.
//!
//! The kernel only counts while BPF statistics are on (the sysctl
//! `kernel.bpf_stats_enabled`, or any process holding a BPF_ENABLE_STATS fd,
//! as `cargo xtask bench` does): measuring costs two clock reads per program
//! run, so schedlat never turns it on by itself. The sysctl's value is
//! exported so that a counter standing still can be told from an idle one.

use std::{collections::BTreeMap, fs};

use super::tracer::Tracer;

/// One program's cumulative cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgramCost {
    /// The tracepoint the program is attached to (the same in both hook
    /// modes); programs on one tracepoint are one entry, their costs added.
    pub name: String,
    pub run_time_ns: u64,
    pub runs: u64,
}

impl Tracer {
    /// The current cost of each attached program, by tracepoint, from the
    /// kernel's bpf_prog_info of each program (one syscall each). A program
    /// whose info cannot be read is left out.
    pub(crate) fn program_costs(&self) -> Vec<ProgramCost> {
        let mut by_name: BTreeMap<&str, ProgramCost> = BTreeMap::new();
        for &(program, tracepoint) in &self.programs {
            let Some(Ok(info)) = self.ebpf.program(program).map(|p| p.info()) else {
                continue;
            };
            let cost = by_name.entry(tracepoint).or_insert(ProgramCost {
                name: tracepoint.to_string(),
                run_time_ns: 0,
                runs: 0,
            });
            cost.run_time_ns += u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX);
            cost.runs += info.run_count();
        }
        by_name.into_values().collect()
    }
}

/// `kernel.bpf_stats_enabled`, None if it cannot be read (kernels before 5.1).
pub(crate) fn stats_sysctl() -> Option<bool> {
    let text = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").ok()?;
    Some(text.trim() != "0")
}
