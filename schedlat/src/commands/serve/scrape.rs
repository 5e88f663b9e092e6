//! What one scrape reads from the kernel: the per-CPU statistics (one map
//! lookup returns every CPU's value), with `--cgroups`/`--pids` every key's
//! histogram (one map walk), and the programs' run-time counters. The
//! kernel's counters are cumulative since load, which is what Prometheus
//! expects; only the per-key series' assignment is kept between scrapes
//! (keyed.rs).

use std::cell::RefCell;

use schedlat_common::scope::Breakdown;

use super::{
    keyed::{self, KeyedSeries},
    metrics::{BpfCost, Snapshot},
};
use crate::{
    collect::{
        bpf_cost,
        error::ReadError,
        histogram::Waits,
        keylabels::{KeyLabels, waits_of},
        tracer::Tracer,
    },
    kernel::filter::Filter,
};

pub struct Source {
    /// Mutable for deleting the kernel entries of gone keys.
    tracer: RefCell<Tracer>,
    /// Labels of the one series: `pid` when filtered with -p.
    labels: Vec<(&'static str, String)>,
    /// With `--cgroups` or `--pids`.
    keyed: Option<RefCell<Keyed>>,
}

struct Keyed {
    labels: KeyLabels,
    series: KeyedSeries,
}

impl Source {
    /// `keyed`: the breakdown loaded and the `--max-series` limit.
    pub fn new(tracer: Tracer, filter: &Filter, keyed: Option<(Breakdown, u32)>) -> Source {
        let labels = filter
            .tgid
            .map(|pid| vec![("pid", pid.to_string())])
            .unwrap_or_default();
        let keyed = keyed.map(|(by, max_series)| {
            RefCell::new(Keyed {
                labels: KeyLabels::new(by, tracer.cgroup_hierarchy.clone()),
                series: KeyedSeries::new(max_series),
            })
        });
        Source {
            tracer: RefCell::new(tracer),
            labels,
            keyed,
        }
    }

    pub fn snapshot(&self) -> Result<Snapshot, ReadError> {
        // Keys first, then the total: waits that end between the two reads
        // are then in the total only, and the keyed series (with unkeyed)
        // never add up to more than the total.
        let keyed = match &self.keyed {
            Some(keyed) => Some(self.read_keyed(&mut keyed.borrow_mut())?),
            None => None,
        };
        let tracer = self.tracer.borrow();
        let waits = Waits::from_cpus(&tracer.read_stats()?);
        let unkeyed = waits.unkeyed;
        let bpf = Some(BpfCost {
            stats_enabled: bpf_cost::stats_sysctl(),
            programs: tracer.program_costs(),
        });
        let snapshot = Snapshot::system(tracer.mode(), waits, self.labels.clone(), bpf);
        Ok(match (keyed, &self.keyed) {
            (Some(scrape), Some(k)) => snapshot.with_keyed(k.borrow().labels.by(), scrape, unkeyed),
            _ => snapshot,
        })
    }

    fn read_keyed(&self, keyed: &mut Keyed) -> Result<keyed::KeyedScrape, ReadError> {
        let read = self.tracer.borrow().read_keyed()?;
        let Keyed { labels, series } = keyed;
        let current = read
            .iter()
            .map(|(key, stats)| {
                labels.saw(*key, stats);
                (*key, waits_of(stats))
            })
            .collect();
        let overflow = keyed::overflow_labels(labels.by());
        // `label` and `exists` both need the labeller: one RefCell for two
        // closures that never run at the same time.
        let labels = RefCell::new(labels);
        let mut tracer = self.tracer.borrow_mut();
        Ok(series.scrape(
            current,
            |key| keyed::key_labels(&mut labels.borrow_mut(), key),
            |key| labels.borrow_mut().exists(key),
            |key| {
                let deleted = tracer.forget_key(key).is_ok();
                if deleted {
                    labels.borrow_mut().forget(key);
                }
                deleted
            },
            overflow,
        ))
    }
}
