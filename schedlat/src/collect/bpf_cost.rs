//! What schedlat's own BPF programs cost the kernel: run time and run count
//! per program, as `bpf_prog_info` reports them.
//!
//! The kernel only counts while BPF statistics are on (the sysctl
//! `kernel.bpf_stats_enabled`, or any process holding a BPF_ENABLE_STATS fd,
//! as `cargo xtask bench` does): measuring costs two clock reads per program
//! run, so schedlat never turns it on by itself. The sysctl's value is
//! exported so that a counter standing still can be told from an idle one.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
};

use aya::programs::loaded_programs;

/// One program's cumulative cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramCost {
    /// The tracepoint the program is attached to (the same in both hook
    /// modes), from its link's fdinfo. Kernels whose links do not say get
    /// the kernel's program name instead, which is cut at 15 bytes: programs
    /// sharing those bytes are then one entry, their costs added.
    pub name: String,
    pub run_time_ns: u64,
    pub runs: u64,
}

/// The ids of the programs this process loaded, and where they hook.
#[derive(Debug)]
pub struct OwnPrograms {
    ids: BTreeSet<u32>,
    tracepoints: BTreeMap<u32, String>,
}

impl OwnPrograms {
    /// Finds the programs behind this process' file descriptors: program
    /// and link fds both show `prog_id:` in fdinfo, and links (raw
    /// tracepoint, and perf since 6.6) also `tp_name:`. Call it once, after
    /// attaching: schedlat holds no other BPF programs. (The loader keeps its
    /// program handles to itself; reading fdinfo keeps this module out of it.)
    pub fn find() -> std::io::Result<OwnPrograms> {
        let mut ids = BTreeSet::new();
        let mut tracepoints = BTreeMap::new();
        for entry in fs::read_dir("/proc/self/fdinfo")? {
            // The directory's own fd, closed by the time we read it.
            let Ok(text) = fs::read_to_string(entry?.path()) else {
                continue;
            };
            let field = |key: &str| {
                text.lines()
                    .find_map(|line| line.strip_prefix(key))
                    .map(str::trim)
            };
            let Some(id) = field("prog_id:").and_then(|id| id.parse::<u32>().ok()) else {
                continue;
            };
            ids.insert(id);
            if let Some(tp) = field("tp_name:") {
                tracepoints.insert(id, tp.to_string());
            }
        }
        Ok(OwnPrograms { ids, tracepoints })
    }

    /// Current cost of each program, by kernel name. aya lists every program
    /// on the host (three syscalls each) and we keep ours; programs unloaded
    /// by others while we list fail their lookup and are skipped.
    pub fn costs(&self) -> Vec<ProgramCost> {
        let mut by_name: BTreeMap<String, ProgramCost> = BTreeMap::new();
        for info in loaded_programs().flatten() {
            if !self.ids.contains(&info.id()) {
                continue;
            }
            let name = match self.tracepoints.get(&info.id()) {
                Some(tp) => tp.clone(),
                None => info.name_as_str().unwrap_or("unnamed").to_string(),
            };
            let cost = by_name.entry(name.clone()).or_insert(ProgramCost {
                name,
                run_time_ns: 0,
                runs: 0,
            });
            cost.run_time_ns += u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX);
            cost.runs += info.run_count();
        }
        by_name.into_values().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// `kernel.bpf_stats_enabled`, None if it cannot be read (kernels before 5.1).
pub fn stats_sysctl() -> Option<bool> {
    let text = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").ok()?;
    Some(text.trim() != "0")
}
