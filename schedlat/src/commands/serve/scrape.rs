//! What one scrape reads from the kernel: the per-CPU statistics (one map
//! lookup returns every CPU's value), with `--cgroups`/`--pids` every key's
//! histogram (batch reads of 256 keys, collect/batch.rs), and the
//! programs' run-time counters. The kernel's counters are cumulative since
//! load, which is what Prometheus expects; only the per-key series'
//! assignment is kept between scrapes (keyed.rs), and what the previous
//! scrape cost.

use std::{
    cell::{Cell, RefCell, RefMut},
    time::Instant,
};

use schedlat_common::scope::{Breakdown, KeyStats};

use super::{
    buckets::KeyBuckets,
    keyed::{self, KeyNames, KeyedSeries, Pins},
    metrics::{BpfCost, ScrapeCost, Snapshot},
    negotiate::Format,
};
use crate::{
    collect::{batch::Entries, bpf_cost, error::ReadError, keylabels::KeyLabels, tracer::Tracer},
    kernel::filter::{Filter, comm_str, cpu_list_str},
};

pub struct Source {
    /// Mutable for deleting the kernel entries of gone keys.
    tracer: RefCell<Tracer>,
    /// Labels of the one series: `pid` when filtered with -p, and `scope`.
    labels: Vec<(&'static str, String)>,
    /// The filter's `scope` label, if any.
    scope: Option<(&'static str, String)>,
    /// With `--cgroups` or `--pids`.
    keyed: Option<RefCell<Keyed>>,
    /// With -p/-t: whether the target still ran at the last look.
    target_alive: Option<Cell<bool>>,
    /// The previous scrape's cost.
    cost: Cell<Option<ScrapeCost>>,
}

/// Keys per batch read: their 1.7 KiB entries (430 KiB) are folded while
/// the kernel's copy is still in the CPU's cache.
const CHUNK: usize = 256;

/// The per-key series' options.
pub struct KeyedOptions {
    pub by: Breakdown,
    pub max_series: u32,
    pub layout: KeyBuckets,
    pub pins: Pins,
}

struct Keyed {
    labels: KeyLabels,
    series: KeyedSeries,
    layout: KeyBuckets,
    /// The kernel's entries, read into the same buffers every scrape.
    entries: Entries<u64, KeyStats>,
}

/// Names keys from the labeller, and deletes gone ones from the kernel map.
struct Names<'a> {
    labels: &'a mut KeyLabels,
    /// None while the map is being read (it is borrowed then): nothing is
    /// deleted before `finish`.
    tracer: Option<&'a mut Tracer>,
}

impl KeyNames for Names<'_> {
    fn saw(&mut self, key: u64, stats: &KeyStats) {
        self.labels.saw(key, stats);
    }

    fn labels(&mut self, key: u64) -> keyed::Labels {
        keyed::key_labels(self.labels, key)
    }

    fn exists(&mut self, key: u64) -> bool {
        self.labels.exists(key)
    }

    fn forget(&mut self, key: u64) -> bool {
        let Some(tracer) = self.tracer.as_mut() else {
            return false;
        };
        let deleted = tracer.forget_key(key).is_ok();
        if deleted {
            self.labels.forget(key);
        }
        deleted
    }
}

/// The filter as a label value, e.g. `pid=1234,cpu=0-3`; None for the
/// whole system.
fn scope_label(filter: &Filter) -> Option<(&'static str, String)> {
    let mut parts = Vec::new();
    if let Some(pid) = filter.tgid {
        parts.push(format!("pid={pid}"));
    }
    if let Some(tid) = filter.tid {
        parts.push(format!("tid={tid}"));
    }
    if let Some(comm) = &filter.comm {
        parts.push(format!("comm={}", comm_str(comm)));
    }
    if let Some(c) = &filter.cgroup {
        parts.push(format!("cgroup={}", c.dir.display()));
    }
    if let Some(cpus) = &filter.cpus {
        parts.push(format!("cpu={}", cpu_list_str(cpus)));
    }
    (!parts.is_empty()).then(|| ("scope", parts.join(",")))
}

/// This thread's CPU time, user and system, in seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

impl Source {
    pub fn new(tracer: Tracer, filter: &Filter, keyed: Option<KeyedOptions>) -> Source {
        let scope = scope_label(filter);
        let mut labels: Vec<(&'static str, String)> = filter
            .tgid
            .map(|pid| vec![("pid", pid.to_string())])
            .unwrap_or_default();
        labels.extend(scope.clone());
        let keyed = keyed.map(|k| {
            RefCell::new(Keyed {
                labels: tracer.key_labels(k.by),
                // The cause split per cgroup only: per process it is
                // unbounded.
                series: KeyedSeries::new(
                    k.max_series,
                    k.pins,
                    k.layout.layout(),
                    tracer.measurable.filter(|_| k.by == Breakdown::Cgroup),
                ),
                layout: k.layout,
                entries: Entries::default(),
            })
        });
        let target = filter.tgid.is_some() || filter.tid.is_some();
        Source {
            tracer: RefCell::new(tracer),
            labels,
            scope,
            keyed,
            target_alive: target.then(|| Cell::new(true)),
            cost: Cell::new(None),
        }
    }

    /// The tracer, between scrapes (the flight recorder's seconds).
    pub fn tracer(&self) -> RefMut<'_, Tracer> {
        self.tracer.borrow_mut()
    }

    /// Records whether the -p/-t target still runs; true the first time it
    /// is found gone.
    pub fn target_exited(&self, alive: bool) -> bool {
        match &self.target_alive {
            Some(cell) => cell.replace(alive) && !alive,
            None => false,
        }
    }

    /// One scrape: read, encode, and note what it cost for the next one.
    pub fn serve(&self, format: Format) -> Result<Vec<u8>, ReadError> {
        let (start, cpu) = (Instant::now(), thread_cpu_seconds());
        let mut snapshot = self.snapshot()?;
        let previous = self.cost.get();
        let scrapes = previous.map_or(0, |c| c.scrapes) + 1;
        snapshot.cost = Some(ScrapeCost {
            scrapes,
            ..previous.unwrap_or_default()
        });
        let body = snapshot.encode(format);
        self.cost.set(Some(ScrapeCost {
            seconds: start.elapsed().as_secs_f64(),
            cpu_seconds: thread_cpu_seconds() - cpu,
            body_bytes: body.len(),
            scrapes,
        }));
        Ok(body)
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
        let waits = tracer.read_waits()?;
        let unkeyed = waits.unkeyed;
        let bpf = Some(BpfCost {
            stats_enabled: bpf_cost::stats_sysctl(),
            programs: tracer.program_costs(),
        });
        let mut snapshot = Snapshot::system(tracer.mode(), waits, self.labels.clone(), bpf);
        snapshot.target_alive = self.target_alive.as_ref().map(Cell::get);
        Ok(match (keyed, &self.keyed) {
            (Some(scrape), Some(k)) => {
                let k = k.borrow();
                snapshot.with_keyed(
                    k.labels.by(),
                    k.layout,
                    scrape,
                    unkeyed,
                    self.scope.as_ref(),
                )
            }
            _ => snapshot,
        })
    }

    fn read_keyed(&self, keyed: &mut Keyed) -> Result<keyed::KeyedScrape, ReadError> {
        let Keyed {
            labels,
            series,
            entries,
            ..
        } = keyed;
        let mut tracer = self.tracer.borrow_mut();
        series.begin();
        let mut reading = Names {
            labels,
            tracer: None,
        };
        tracer.for_each_keyed(entries, CHUNK, |&key, stats| {
            series.feed(key, stats, &mut reading)
        })?;
        let overflow = keyed::overflow_labels(reading.labels.by());
        let mut names = Names {
            labels: reading.labels,
            tracer: Some(&mut tracer),
        };
        Ok(series.finish(&mut names, overflow))
    }
}
