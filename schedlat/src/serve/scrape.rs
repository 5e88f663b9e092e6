//! What one scrape reads from the kernel: the per-CPU statistics (one map
//! lookup returns every CPU's value) and the programs' run-time counters.
//! Nothing is cached between scrapes and nothing is reset: the kernel's
//! counters are cumulative since load, which is what Prometheus expects.

use super::metrics::{BpfCost, Snapshot};
use crate::{
    bpf_cost::{self, OwnPrograms},
    filter::Filter,
    histogram::Waits,
    loader::{LoadError, Tracer},
};

pub struct Source {
    tracer: Tracer,
    /// Labels of the one series: `pid` when filtered with -p.
    labels: Vec<(&'static str, String)>,
    /// None when this process' programs could not be listed (no /proc).
    programs: Option<OwnPrograms>,
}

impl Source {
    /// Call once the tracer is attached: its programs are looked up now.
    pub fn new(tracer: Tracer, filter: &Filter) -> Source {
        let programs = match OwnPrograms::find() {
            Ok(p) if !p.is_empty() => Some(p),
            Ok(_) => {
                eprintln!("schedlat: note: no BPF program fds found: BPF cost not exported");
                None
            }
            Err(e) => {
                eprintln!(
                    "schedlat: note: cannot list /proc/self/fdinfo ({e}): BPF cost not exported"
                );
                None
            }
        };
        let labels = filter
            .tgid
            .map(|pid| vec![("pid", pid.to_string())])
            .unwrap_or_default();
        Source {
            tracer,
            labels,
            programs,
        }
    }

    pub fn snapshot(&self) -> Result<Snapshot, LoadError> {
        let waits = Waits::from_cpus(&self.tracer.read_stats()?);
        let bpf = self.programs.as_ref().map(|p| BpfCost {
            stats_enabled: bpf_cost::stats_sysctl(),
            programs: p.costs(),
        });
        Ok(Snapshot::system(
            self.tracer.mode(),
            waits,
            self.labels.clone(),
            bpf,
        ))
    }
}
