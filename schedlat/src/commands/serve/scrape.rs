//! What one scrape reads from the kernel: the per-CPU statistics (one map
//! lookup returns every CPU's value), with `--cgroups`/`--pids` every key's
//! summary (read in place, collect/summary_rows.rs) and the whole histogram
//! of each key that gets a series (export/keyed_series.rs), and the
//! programs' run-time counters; with `--pairs` the neighbour-pair table;
//! with `--exemplars` the latest slow wait of each bucket.
//! The kernel's counters are cumulative since load, which is what
//! Prometheus expects; only the per-key intervals (collect/key_intervals.rs)
//! and series (export/keyed_series.rs), the pair table's intervals
//! (collect/pairs.rs) and series (export/neighbour_series.rs) are kept
//! between scrapes, and what the previous scrape cost.

use std::{
    cell::{Cell, RefCell, RefMut},
    time::Instant,
};

use schedlat_common::{CpuStats, scope::Breakdown, victims::SlowEvent};

use super::unseen::{Reader, Unseen};
use crate::{
    analysis,
    collect::{
        bpf_cost,
        error::ReadError,
        exemplar_waits::ExemplarWaits,
        key_summaries::KeySummaries,
        keylabels::KeyLabels,
        pairs::{Holder, Pair, PairCounts, PairIntervals, PairsRead},
        tracer::Tracer,
    },
    export::{
        cgroup_splits::CgroupSplits,
        encode::Format,
        exemplars,
        families::{BpfCost, KeyedScrape, NeighbourScrape, Scrape, ScrapeCost, cpu},
        key_buckets::KeyBuckets,
        keyed_series::{KeyedSeries, Pins, SeriesState},
        keyed_words::Words,
        labels,
        model::Labels,
        neighbour_series::NeighbourSeries,
        otlp::delivery::DeliveryCounts,
        workload_labels::WorkloadLabels,
    },
    histogram::Waits,
    kernel::{cgroupfs, filter::Filter},
    sys::mounts::Mounts,
};

pub(super) struct Scraper {
    /// Mutable for deleting the kernel entries of gone keys.
    tracer: RefCell<Tracer>,
    /// Labels of the one series: `pid` when filtered with -p, and `scope`.
    labels: Labels,
    /// The filter's `scope` label, if any.
    scope: Option<(&'static str, String)>,
    /// With `--cgroups` or `--pids`.
    keyed: Option<RefCell<PerKeySeries>>,
    /// With `--pairs`.
    pairs: Option<RefCell<PairSeries>>,
    /// With -p/-t: whether the target still ran at the last look.
    target_alive: Option<Cell<bool>>,
    /// The previous scrape's cost.
    cost: Cell<Option<ScrapeCost>>,
    /// With `--exemplars`: the latest slow wait of each bucket.
    exemplars: Option<RefCell<ExemplarWaits>>,
    /// With `--otlp-endpoint`: the push's counts at its last step.
    otlp: Cell<Option<DeliveryCounts>>,
    /// With `--otlp-endpoint`: the series one reader's readings had that
    /// the other has not exported yet (unseen.rs).
    unseen: Option<RefCell<Unseen>>,
}

/// The per-key series' options.
pub(super) struct KeyedOptions {
    pub by: Breakdown,
    pub max_series: u32,
    pub layout: KeyBuckets,
    /// How much of the splits a cgroup's series carries (`--cgroup-splits`).
    pub splits: CgroupSplits,
    pub pins: Pins,
    /// The workload labels of a cgroup's series (`--cgroup-labels`).
    pub workload: WorkloadLabels,
}

/// The per-key series: the keys' summaries and which get a series.
struct PerKeySeries {
    keys: KeySummaries<SeriesState>,
    series: KeyedSeries,
    layout: KeyBuckets,
    splits: CgroupSplits,
}

/// The neighbour pairs: the pair table's intervals, the names of its
/// cgroups, and which pairs get a series.
struct PairSeries {
    intervals: PairIntervals,
    names: KeyLabels,
    workload: WorkloadLabels,
    series: NeighbourSeries,
    /// The second role's (who had used the share of the group a wakeup
    /// lost with).
    shares: NeighbourSeries,
    /// Where the waits were decided (at which group's level).
    levels: NeighbourSeries,
}

/// The neighbour pairs' options (`--pairs`).
pub(super) struct PairOptions {
    /// Pairs with a series per scrape (`--max-pair-series`).
    pub max_series: u32,
    /// The workload labels of either side (`--cgroup-labels`).
    pub workload: WorkloadLabels,
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

impl Scraper {
    /// `pairs`: with `--pairs` (the tracer loaded with the pair table);
    /// `exemplars`: with `--exemplars` (and the slow waits loaded).
    /// `pairs`: with `--pairs` (the tracer loaded with the pair table);
    /// `exemplars`: with `--exemplars` (and the slow waits loaded);
    /// `pushed`: with `--otlp-endpoint` (a second reader).
    pub(super) fn new(
        tracer: Tracer,
        filter: &Filter,
        keyed: Option<KeyedOptions>,
        pairs: Option<PairOptions>,
        exemplars: bool,
        pushed: bool,
    ) -> Scraper {
        let scope = labels::scope(filter);
        let labels = labels::total(filter);
        // The total's exemplars name a cgroup of the breakdown's
        // hierarchy, or of the default one.
        let exemplars = exemplars.then(|| {
            let hierarchy = (tracer.cgroup_hierarchy.clone())
                .or_else(|| cgroupfs::default_hierarchy(&Mounts::read()));
            let by = keyed.as_ref().map(|k| k.by);
            let layout = keyed.as_ref().map_or(KeyBuckets::Log2, |k| k.layout);
            RefCell::new(ExemplarWaits::new(by, layout.layout(), hierarchy))
        });
        let keyed = keyed.map(|k| {
            let layout = k.layout.layout();
            let by_cgroup = k.by == Breakdown::Cgroup;
            // The cause and decision splits per cgroup only: per process
            // they are unbounded.
            let mut keys = KeySummaries::new(k.by, &tracer, by_cgroup);
            if by_cgroup && k.workload.needs_runtime_files() {
                keys.name_containers();
            }
            let causes = tracer.measurable.filter(|_| by_cgroup);
            let words = Words::new(layout, causes, keys.decisions());
            RefCell::new(PerKeySeries {
                keys,
                series: KeyedSeries::new(k.max_series, k.pins, k.workload, words),
                layout: k.layout,
                splits: k.splits,
            })
        });
        let pairs = pairs.map(|p| {
            let mut names = tracer.key_labels(Breakdown::Cgroup);
            if p.workload.needs_runtime_files() {
                names.name_containers();
            }
            RefCell::new(PairSeries {
                intervals: PairIntervals::default(),
                names,
                series: NeighbourSeries::new(p.max_series),
                shares: NeighbourSeries::new(p.max_series),
                levels: NeighbourSeries::levels(p.max_series),
                workload: p.workload,
            })
        });
        let target = filter.tgid.is_some() || filter.tid.is_some();
        Scraper {
            pairs,
            tracer: RefCell::new(tracer),
            labels,
            scope,
            keyed,
            target_alive: target.then(|| Cell::new(true)),
            cost: Cell::new(None),
            exemplars,
            otlp: Cell::new(None),
            unseen: pushed.then(|| RefCell::new(Unseen::default())),
        }
    }

    /// Slow waits as they are read, for the exemplars.
    pub(super) fn slow_waits(&self, events: &[SlowEvent]) {
        if let Some(exemplars) = &self.exemplars {
            exemplars.borrow_mut().add(events);
        }
    }

    /// The OTLP push's counts, for the scrapes that follow.
    pub(super) fn otlp_counts(&self, counts: DeliveryCounts) {
        self.otlp.set(Some(counts));
    }

    /// The tracer, between scrapes (the flight recorder's seconds).
    pub(super) fn tracer(&self) -> RefMut<'_, Tracer> {
        self.tracer.borrow_mut()
    }

    /// Records whether the -p/-t target still runs; true the first time it
    /// is found gone.
    pub(super) fn target_exited(&self, alive: bool) -> bool {
        match &self.target_alive {
            Some(cell) => cell.replace(alive) && !alive,
            None => false,
        }
    }

    /// One scrape: read, encode, and note what it cost for the next one.
    pub(super) fn serve(&self, format: Format) -> Result<Vec<u8>, ReadError> {
        let (start, cpu) = (Instant::now(), thread_cpu_seconds());
        let mut scrape = self.scrape(Reader::Scrape)?;
        let previous = self.cost.get();
        let scrapes = previous.map_or(0, |c| c.scrapes) + 1;
        scrape.cost = Some(ScrapeCost {
            scrapes,
            ..previous.unwrap_or_default()
        });
        let body = scrape.encode(format);
        self.cost.set(Some(ScrapeCost {
            seconds: start.elapsed().as_secs_f64(),
            cpu_seconds: thread_cpu_seconds() - cpu,
            body_bytes: body.len(),
            scrapes,
        }));
        Ok(body)
    }

    /// One reading for `reader`: the families, before encoding.
    pub(super) fn scrape(&self, reader: Reader) -> Result<Scrape, ReadError> {
        // Pairs and keys first, then the total: waits that end between the
        // reads are then in the total only, and neither the pairs nor the
        // keyed series add up to more than the total (the overflow series
        // is the rest of the total: keyed_series.rs). The pairs' series are
        // made of their reading after the other reads: naming a pair's
        // cgroups can walk the hierarchy while waits go on ending.
        let pairs_read = match &self.pairs {
            Some(pairs) => Some(pairs.borrow_mut().intervals.read(&self.tracer.borrow())?),
            None => None,
        };
        let (mut keyed, (waits, cpus)) = match &self.keyed {
            Some(keyed) => {
                let (series, total) = self.read_keyed(&mut keyed.borrow_mut())?;
                (Some(series), total)
            }
            None => (None, self.tracer.borrow().read_waits_and_cpus()?),
        };
        let mut neighbours = match (&self.pairs, pairs_read) {
            (Some(pairs), Some(read)) => Some(self.pairs_scrape(&mut pairs.borrow_mut(), read)?),
            _ => None,
        };
        if let Some(unseen) = &self.unseen {
            let mut unseen = unseen.borrow_mut();
            keyed = keyed.map(|k| unseen.keyed(reader, k));
            neighbours = neighbours.map(|n| unseen.pairs(reader, n));
        }
        let tracer = self.tracer.borrow();
        let unkeyed = waits.unkeyed;
        let bpf = Some(BpfCost {
            stats_enabled: bpf_cost::stats_sysctl(),
            programs: tracer.program_costs(),
        });
        let mut scrape = Scrape::system(tracer.mode(), waits, self.labels.clone(), bpf);
        scrape.target_alive = self.target_alive.as_ref().map(Cell::get);
        scrape.cpus = cpu::per_cpu(&cpus);
        scrape.neighbours = neighbours;
        scrape.otlp = self.otlp.get();
        let scrape = match (keyed, &self.keyed) {
            (Some(series), Some(k)) => {
                let k = k.borrow();
                let export = (k.layout, k.splits);
                scrape.with_keyed(k.keys.by(), export, series, unkeyed, self.scope.as_ref())
            }
            _ => scrape,
        };
        Ok(match &self.exemplars {
            Some(waits) => {
                let mut waits = waits.borrow_mut();
                waits.refresh();
                scrape.with_exemplars(exemplars::total(&waits), |key| exemplars::key(&waits, key))
            }
            None => scrape,
        })
    }

    /// The pairs' series of `read`, the tables as read for this scrape.
    fn pairs_scrape(
        &self,
        pairs: &mut PairSeries,
        read: PairsRead,
    ) -> Result<NeighbourScrape, ReadError> {
        let PairSeries {
            intervals,
            names,
            workload,
            series,
            shares,
            levels,
        } = pairs;
        let mut gone = Vec::new();
        let interval = intervals.settle(&mut self.tracer.borrow_mut(), read, |id| {
            let exists = names.exists(id);
            if !exists {
                gone.push(id);
            }
            exists
        })?;
        let name_pair = |victim, holder| labels::pair(names, victim, holder, workload);
        let mut scrape = series.scrape(&interval, name_pair, &gone);
        // The second role: the holders inside the group that lost, not the
        // victim itself (analysis/pairs.rs tells the same for the tables).
        let kept: Vec<(Pair, PairCounts)> = (interval.shares.iter())
            .filter(|(pair, _)| {
                let (Holder::Cgroup(user), Some(group)) = (pair.holder, pair.parent) else {
                    return false;
                };
                let (Some(group), Some(user_path)) =
                    (names.cgroup_name(group), names.cgroup_name(user))
                else {
                    return false;
                };
                user != pair.victim && analysis::pairs::inside(&group, &user_path)
            })
            .copied()
            .collect();
        let name_share =
            |pair: &Pair, user| labels::share(names, (pair.victim, user), pair.parent, workload);
        scrape.shares = shares.scrape_shares(&kept, name_share, &gone);
        let name_level = |pair: &Pair, group| labels::level(names, pair.victim, group, workload);
        scrape.levels = levels.scrape_levels(&interval.levels, name_level, &gone);
        // The filter's scope, once per series (not as holder_scope).
        let all = (scrape.series.iter_mut())
            .chain(&mut scrape.shares)
            .chain(&mut scrape.levels);
        for (labels, _) in all {
            labels.extend(self.scope.clone());
        }
        Ok(scrape)
    }

    /// The keyed series, and the total read after the keys.
    fn read_keyed(
        &self,
        keyed: &mut PerKeySeries,
    ) -> Result<(KeyedScrape, (Waits, Vec<CpuStats>)), ReadError> {
        let PerKeySeries { keys, series, .. } = keyed;
        let decisions = keys.decisions();
        keys.interval(&mut self.tracer.borrow_mut(), |reading, tracer| {
            let left = series.read(reading, |key| tracer.whole_key(key, decisions))?;
            let total = tracer.read_waits_and_cpus()?;
            let overflow = labels::overflow(reading.by());
            Ok((series.finish(reading, &total.0, overflow, left), total))
        })
    }
}
