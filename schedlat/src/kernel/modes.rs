//! What the kernel side computes for each wait, chosen at load time: the
//! histogram (default), the victims and culprits tables (`schedlat victims`;
//! `schedlat top` keeps both), slow events (`schedlat slow`). The choice
//! reaches the programs as a read-only global (`kconfig::Compute`), so the
//! verifier removes the code of what is off and histogram mode keeps its
//! cost; the maps of what is off are shrunk to nothing.

use aya::EbpfLoader;
use schedlat_common::{kconfig::Compute, names, scope::Breakdown};

use crate::kernel::{error::LoadError, limits::pid_max};

/// Ring buffer for the names of new cgroups: 256 KiB holds about 1,500
/// Kubernetes container paths (~170 bytes with the record's header),
/// drained continuously by a thread of its own (collect/cgroup_names.rs).
const NAMES_RING_BYTES: u32 = 256 << 10;

/// Ring buffer for slow events: 1 MiB holds ~8,700 events (120 bytes with
/// the kernel's header), seconds of backlog at one slow wait per
/// millisecond per CPU.
const SLOW_RING_BYTES: u32 = 1 << 20;

/// With the holders' stacks (`slow --stacks`, 2,960 bytes an event with
/// the header: the stacks and the copy of the CPU's last runs): 4 MiB
/// holds ~1,400 events, the same seconds of backlog at a fifth of that
/// rate.
const SLOW_STACKS_RING_BYTES: u32 = 4 << 20;

/// Distinct waker stacks `slow --stacks` keeps (1,024 bytes each): a
/// system's wakeups come from a few hundred places.
const WAKER_STACKS: u32 = 8192;

/// Tasks each victims table holds per interval, unless `--max-tasks` says.
pub(crate) const DEFAULT_MAX_TASKS: u32 = 10_240;

/// Keys the breakdown histograms hold, unless `--max-keys` says: 4096
/// keys, 6.7 MiB (a `KeyStats` is 1,704 bytes), and 3.1 MiB more for their
/// decision split (712 bytes a key).
pub(crate) const DEFAULT_MAX_KEYS: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modes {
    pub histogram: bool,
    /// Keep the victims and culprits tables, with room for this many tasks
    /// each per interval.
    pub victims: Option<u32>,
    /// Send every wait of at least this many ns to userspace.
    pub slow_ns: Option<u64>,
    /// Keep one histogram per key as well (histogram mode only).
    pub keyed: Option<Keyed>,
    /// Split each wait by cause (docs/causes.md): with the histogram, on
    /// unless `--no-causes`.
    pub causes: bool,
    /// Count each wait in the neighbour-pair table (victim cgroup, holder
    /// cgroup), with room for this many pairs.
    pub pairs: Option<u32>,
    /// The stacks each slow event carries (`--stacks`), if any.
    pub stacks: Option<Stacks>,
}

/// Which stacks slow events carry (docs/stacks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stacks {
    /// The holder's kernel and user stacks, taken at the switch that ends
    /// a slow wait: only slow waits pay.
    Holder,
    /// And the waker's kernel stack, taken at every wakeup of a traced
    /// task (whether its wait will be slow is not known yet).
    HolderAndWaker,
}

impl Stacks {
    /// Whether the wakeups keep the waker's stack.
    pub(crate) fn wakers(self) -> bool {
        self == Stacks::HolderAndWaker
    }
}

/// The breakdown histograms: what they are keyed by, and how many keys fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Keyed {
    pub by: Breakdown,
    pub max_keys: u32,
}

impl Modes {
    pub(crate) const HISTOGRAM: Modes = Modes {
        histogram: true,
        victims: None,
        slow_ns: None,
        keyed: None,
        causes: true,
        pairs: None,
        stacks: None,
    };

    /// Histogram mode, plus one histogram per key when `keyed`.
    pub(crate) fn histogram(keyed: Option<Keyed>) -> Modes {
        Modes {
            keyed,
            ..Modes::HISTOGRAM
        }
    }

    pub(crate) fn victims(max_tasks: u32) -> Modes {
        Modes {
            histogram: false,
            victims: Some(max_tasks),
            slow_ns: None,
            keyed: None,
            // Only for the decision split of each row, as in `slow`.
            causes: true,
            pairs: None,
            stacks: None,
        }
    }

    /// The histogram and the victims tables from one load (`schedlat
    /// top`): the victims mode's sched_switch program, with HISTOGRAM on.
    pub(crate) fn histogram_and_victims(max_tasks: u32) -> Modes {
        Modes {
            histogram: true,
            causes: true,
            ..Modes::victims(max_tasks)
        }
    }

    pub(crate) fn slow(threshold_ns: u64) -> Modes {
        Modes {
            histogram: false,
            victims: None,
            // 0 would mean "off" to the kernel; 1 ns catches every wait.
            slow_ns: Some(threshold_ns.max(1)),
            keyed: None,
            // Only for the decision split of each event, which keeps its
            // state in the cause split's snapshot slots: without the
            // histogram nothing else of the cause split is counted.
            causes: true,
            pairs: None,
            stacks: None,
        }
    }

    /// The mode's name when it needs the tp_btf hook: its data (comm,
    /// process, policy of the task that waited) is read from task_struct
    /// pointers, which classic tracepoints do not pass.
    pub(crate) fn needs_btf(&self) -> Option<&'static str> {
        if self.victims.is_some() {
            Some("`schedlat victims`")
        } else if self.slow_ns.is_some() {
            Some("`schedlat slow`")
        } else if self.keyed.is_some() {
            Some("a breakdown (-P, -L, --pidnss, --cgroups, --cpus)")
        } else if self.pairs.is_some() {
            Some("the neighbour-pair table")
        } else {
            None
        }
    }

    /// The tp_btf programs to load and attach, (program, tracepoint): the
    /// victims mode has a sched_switch program of its own (its atomic
    /// instruction needs 5.12+, so the other modes never load it).
    pub(crate) fn btf_programs(&self) -> [(&'static str, &'static str); 4] {
        let mut programs = names::BTF_PROGRAMS;
        if self.victims.is_some() {
            for (program, tracepoint) in &mut programs {
                if *tracepoint == "sched_switch" {
                    *program = names::BTF_SWITCH_VICTIMS;
                }
            }
        }
        programs
    }

    /// Whether the run-queue chain is wanted: the slow events' run-queue
    /// length, the split's queue depth (a few more BTF lookups at load).
    pub(crate) fn wants_rq_len(&self) -> bool {
        self.slow_ns.is_some() || self.causes
    }

    /// With the neighbour-pair table of `max_pairs` pairs.
    pub(crate) fn with_pairs(self, max_pairs: u32) -> Modes {
        Modes {
            pairs: Some(max_pairs),
            ..self
        }
    }

    /// Whether new cgroups are named as they are made (the cgroup_mkdir
    /// program): cgroup keys and pairs name cgroups that may be gone by
    /// the time they are shown.
    pub(crate) fn names_cgroups(&self) -> bool {
        self.pairs.is_some() || self.keyed.is_some_and(|k| k.by == Breakdown::Cgroup)
    }

    /// Whether the decision split's programs can be loaded (unless
    /// `--no-decision`): with the cause split, whose slots keep its state,
    /// in every mode (each program has its twin with the split,
    /// names::BTF_DECISION_PROGRAMS: the victims mode's own sched_switch
    /// is replaced by the victims switch with the split).
    pub(crate) fn decides(&self) -> bool {
        self.causes && (self.histogram || self.slow_ns.is_some() || self.victims.is_some())
    }

    /// With these stacks in each slow event.
    pub(crate) fn with_stacks(self, stacks: Option<Stacks>) -> Modes {
        Modes { stacks, ..self }
    }

    /// Without the cause split (`--no-causes`).
    pub(crate) fn without_causes(self) -> Modes {
        Modes {
            causes: false,
            ..self
        }
    }

    /// Sizes the maps, and returns what the programs compute, with
    /// `unit_ns` nanoseconds per histogram unit.
    pub(crate) fn configure(
        &self,
        loader: &mut EbpfLoader<'_>,
        unit_ns: u64,
    ) -> Result<Compute, LoadError> {
        let tables = Tables::new(self.victims)?;
        loader.map_max_entries(names::MAP_VICTIM_SLOTS, tables.slots);
        loader.map_max_entries(names::MAP_CULPRIT_SLOTS, tables.slots);
        loader.map_max_entries(names::MAP_VICTIM_ROWS, 2 * tables.max_tasks.max(1));
        let culprit_rows = 2 * (tables.idle_rows + tables.max_tasks).max(1);
        loader.map_max_entries(names::MAP_CULPRIT_ROWS, culprit_rows);
        let ring = if self.slow_ns.is_some() && self.stacks.is_some() {
            SLOW_STACKS_RING_BYTES.max(page_size())
        } else if self.slow_ns.is_some() {
            SLOW_RING_BYTES.max(page_size())
        } else {
            page_size()
        };
        loader.map_max_entries(names::MAP_SLOW_EVENTS, ring);
        // `--stacks all`: a waker per possible TID (8 bytes each, as the
        // start words), and room for WAKER_STACKS distinct waker stacks.
        let stacks = self.stacks.is_some_and(Stacks::wakers) && self.slow_ns.is_some();
        loader.map_max_entries(names::MAP_WAKERS, if stacks { pid_max()? } else { 1 });
        loader.map_max_entries(
            names::MAP_WAKER_STACKS,
            if stacks { WAKER_STACKS } else { 1 },
        );
        let max_keys = self.keyed.map_or(1, |k| k.max_keys.max(1));
        loader.map_max_entries(names::MAP_KEYED, max_keys);
        loader.map_max_entries(names::MAP_KEY_SUMMARY, max_keys);
        loader.map_max_entries(names::MAP_KEY_FREE, max_keys);
        let pairs = self.pairs.map_or(1, |n| n.max(1));
        loader.map_max_entries(names::MAP_PAIRS, pairs);
        loader.map_max_entries(names::MAP_SHARES, pairs);
        let names = match self.names_cgroups() {
            true => NAMES_RING_BYTES.max(page_size()),
            false => page_size(),
        };
        loader.map_max_entries(names::MAP_CGROUP_NAMES, names);
        Ok(Compute {
            unit_ns,
            histogram: u64::from(self.histogram),
            breakdown: self.keyed.map_or(Breakdown::None, |k| k.by) as u64,
            max_tasks: u64::from(tables.max_tasks),
            idle_rows: u64::from(tables.idle_rows),
            slow_ns: self.slow_ns.unwrap_or(0),
            // Set by kernel::causes::Setup, which knows the kernel.
            causes: 0,
            topology: 0,
            overlaps: 0,
            waking: 0,
            // Set by kernel::decision::Setup.
            decision: 0,
            pairs: u64::from(self.pairs.is_some()),
        })
    }
}

/// Sizes of the victims mode's maps (schedlat-ebpf/src/victims.rs); all 0
/// or 1 when the mode is off, so the other modes allocate nothing for it.
struct Tables {
    /// Per-TID row slots: one per possible TID, as the start array.
    slots: u32,
    /// Rows per half of each table.
    max_tasks: u32,
    /// Culprit rows per half reserved for the idle tasks: one per CPU.
    idle_rows: u32,
}

impl Tables {
    fn new(victims: Option<u32>) -> Result<Tables, LoadError> {
        let Some(max_tasks) = victims else {
            return Ok(Tables {
                slots: 1,
                max_tasks: 0,
                idle_rows: 0,
            });
        };
        let cpus = aya::util::nr_cpus().map_err(|(path, error)| LoadError::Proc { path, error })?;
        Ok(Tables {
            slots: pid_max()?,
            max_tasks,
            idle_rows: u32::try_from(cpus).unwrap_or(u32::MAX),
        })
    }
}

/// Ring buffers are sized in pages (a power-of-two number of them).
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_new_modes_need_btf() {
        assert_eq!(Modes::HISTOGRAM.needs_btf(), None);
        assert_eq!(Modes::victims(10).needs_btf(), Some("`schedlat victims`"));
        assert_eq!(Modes::slow(1_000_000).needs_btf(), Some("`schedlat slow`"));
        let keyed = Keyed {
            by: Breakdown::Cpu,
            max_keys: 4,
        };
        assert!(Modes::histogram(Some(keyed)).needs_btf().is_some());
        assert!(!Modes::victims(10).histogram && !Modes::slow(1).histogram);
        // A zero threshold would switch the mode off in the kernel.
        assert_eq!(Modes::slow(0).slow_ns, Some(1));
    }

    #[test]
    fn every_mode_decides_and_its_switch_has_a_twin_with_the_split() {
        assert!(Modes::HISTOGRAM.decides());
        assert!(Modes::slow(1).decides());
        assert!(Modes::victims(1).decides());
        assert!(Modes::histogram_and_victims(1).decides(), "top");
        assert!(!Modes::HISTOGRAM.without_causes().decides());
        assert!(!Modes::victims(1).without_causes().decides());
        // The loader swaps each program for its twin by name: the victims
        // switch must become the victims switch with the split (a swap by
        // tracepoint once left `top`'s tables empty).
        for m in [
            Modes::HISTOGRAM,
            Modes::victims(1),
            Modes::histogram_and_victims(1),
        ] {
            for (program, _) in m.btf_programs() {
                if program == "sched_process_exit" {
                    continue;
                }
                let twin = names::BTF_DECISION_PROGRAMS
                    .iter()
                    .find(|(_, plain)| *plain == program)
                    .map(|(split, _)| *split);
                let twin = twin.unwrap_or_else(|| panic!("{program} has no twin"));
                assert!(twin.starts_with(program) && twin.ends_with("_decision"));
            }
        }
    }

    #[test]
    fn only_the_victims_mode_swaps_its_switch_program() {
        let switch = |m: Modes| {
            m.btf_programs()
                .into_iter()
                .find(|(_, tp)| *tp == "sched_switch")
                .unwrap()
                .0
        };
        assert_eq!(switch(Modes::HISTOGRAM), "sched_switch");
        assert_eq!(switch(Modes::slow(1)), "sched_switch");
        assert_eq!(switch(Modes::victims(1)), names::BTF_SWITCH_VICTIMS);
        let top = Modes::histogram_and_victims(1);
        assert_eq!(switch(top), names::BTF_SWITCH_VICTIMS);
        assert!(top.histogram && top.victims == Some(1));
        assert!(top.needs_btf().is_some());
        assert_eq!(Modes::victims(1).btf_programs()[0], names::BTF_PROGRAMS[0]);
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }
}
