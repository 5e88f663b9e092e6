//! The tracer's BPF programs and their kernel run-time stats (run_time_ns,
//! run_cnt of `bpf_prog_info`, counted while BPF_ENABLE_STATS is held).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
};

use anyhow::{Context, Result, bail};
use aya::programs::{ProgramInfo, loaded_programs};

/// A program's counters at one moment.
#[derive(Debug, Clone)]
pub(super) struct Counters {
    pub name: String,
    pub run_ns: u64,
    pub runs: u64,
}

/// What the programs of one name did between two snapshots.
#[derive(Debug, Clone)]
pub(crate) struct ProgramDelta {
    pub name: String,
    pub runs: u64,
    pub run_ns: u64,
}

impl ProgramDelta {
    pub(crate) fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_ns as f64 / self.runs as f64)
    }
}

/// Every loaded program on the host. Programs unloaded while we iterate
/// (other tests, libbpf's feature probes) fail their lookup: skip those, but
/// fail when nothing can be read at all (no privileges).
fn all_programs() -> Result<Vec<ProgramInfo>> {
    let mut programs = Vec::new();
    let mut first_error = None;
    for program in loaded_programs() {
        match program {
            Ok(info) => programs.push(info),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if programs.is_empty() => Err(e).context("listing loaded BPF programs"),
        _ => Ok(programs),
    }
}

pub(super) fn loaded_ids() -> Result<BTreeSet<u32>> {
    Ok(all_programs()?.iter().map(ProgramInfo::id).collect())
}

/// The tracer's programs: loaded since `before` and held open by `pid`.
/// "New" alone is not enough: others load programs meanwhile (the kernel
/// tests on the other CPU, libbpf's short-lived feature probes).
pub(super) fn tracer_programs(before: &BTreeSet<u32>, pid: u32) -> Result<BTreeSet<u32>> {
    let held = ids_held_by(pid)?;
    let ids: BTreeSet<u32> = loaded_ids()?
        .difference(before)
        .copied()
        .filter(|id| held.contains(id))
        .collect();
    if ids.is_empty() {
        bail!("pid {pid} holds no BPF program loaded after it started (held: {held:?})");
    }
    Ok(ids)
}

/// Program ids behind `pid`'s fds: both program fds and link fds show a
/// `prog_id:` line in /proc/PID/fdinfo.
fn ids_held_by(pid: u32) -> Result<BTreeSet<u32>> {
    let dir = format!("/proc/{pid}/fdinfo");
    let mut ids = BTreeSet::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        // An fd closed since read_dir listed it: nothing to see.
        let Ok(text) = fs::read_to_string(entry?.path()) else {
            continue;
        };
        ids.extend(text.lines().filter_map(|line| {
            line.strip_prefix("prog_id:")
                .and_then(|id| id.trim().parse::<u32>().ok())
        }));
    }
    Ok(ids)
}

/// Current counters of the programs `ids`; all must still be loaded.
pub(super) fn counters(ids: &BTreeSet<u32>) -> Result<BTreeMap<u32, Counters>> {
    let found: BTreeMap<u32, Counters> = all_programs()?
        .into_iter()
        .filter(|info| ids.contains(&info.id()))
        .map(|info| {
            let counters = Counters {
                name: info.name_as_str().unwrap_or("?").to_string(),
                run_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                runs: info.run_count(),
            };
            (info.id(), counters)
        })
        .collect();
    if let Some(gone) = ids.iter().find(|id| !found.contains_key(id)) {
        bail!("BPF program {gone} of the tracer was unloaded during the benchmark");
    }
    Ok(found)
}

/// Per program name, the counters' growth from `start` to `end`. Programs
/// of the same name (names are cut at 15 bytes) are added up.
pub(super) fn deltas(
    start: &BTreeMap<u32, Counters>,
    end: &BTreeMap<u32, Counters>,
) -> Vec<ProgramDelta> {
    let mut by_name: BTreeMap<&str, ProgramDelta> = BTreeMap::new();
    for (id, after) in end {
        let Some(before) = start.get(id) else {
            continue;
        };
        let delta = by_name.entry(&after.name).or_insert_with(|| ProgramDelta {
            name: after.name.clone(),
            runs: 0,
            run_ns: 0,
        });
        delta.runs += after.runs.saturating_sub(before.runs);
        delta.run_ns += after.run_ns.saturating_sub(before.run_ns);
    }
    by_name.into_values().collect()
}

/// BPF ns per context switch: all the tracer's programs' run time (the
/// wakeup hooks are part of the per-switch cost) divided by the runs of its
/// sched_switch hook. None when no switch hook ran.
pub(super) fn ns_per_switch(programs: &[ProgramDelta]) -> Option<f64> {
    let switches: u64 = programs
        .iter()
        .filter(|p| p.name.contains("switch"))
        .map(|p| p.runs)
        .sum();
    let total_ns: u64 = programs.iter().map(|p| p.run_ns).sum();
    (switches > 0).then(|| total_ns as f64 / switches as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(name: &str, run_ns: u64, runs: u64) -> Counters {
        Counters {
            name: name.into(),
            run_ns,
            runs,
        }
    }

    #[test]
    fn deltas_and_ns_per_switch() {
        let start = BTreeMap::from([
            (1, counters("sched_switch", 1_000, 10)),
            (2, counters("sched_wakeup", 500, 5)),
        ]);
        let end = BTreeMap::from([
            (1, counters("sched_switch", 31_000, 110)),
            (2, counters("sched_wakeup", 10_500, 55)),
        ]);
        let d = deltas(&start, &end);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].name.as_str(), d[0].runs, d[0].run_ns),
            ("sched_switch", 100, 30_000)
        );
        assert_eq!(d[0].ns_per_run(), Some(300.0));
        assert_eq!(d[1].ns_per_run(), Some(200.0));
        // (30_000 + 10_000) ns over 100 switches.
        assert_eq!(ns_per_switch(&d), Some(400.0));
        assert_eq!(ns_per_switch(&d[1..]), None);
    }
}
