//! The options of the per-key histograms the kernel keeps, shared by the
//! histogram mode's breakdowns, serve's per-key series and `record
//! --ring`'s per-cgroup series, and of the neighbour-pair table (the
//! histogram mode's and serve's `--pairs`): each defined once here,
//! flattened where it is used (a command adjusts only what must differ:
//! its spelling, its default, what it requires), and resolved once into
//! `kernel::modes::Keyed`.

use schedlat_common::scope::Breakdown;

use crate::kernel::modes::{DEFAULT_MAX_KEYS, Keyed};

/// `--max-keys`' range.
pub(super) fn max_keys_parser() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=1_000_000)
}

/// `--cgroups` and the size of the kernel's key map.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct CgroupKeyArgs {
    /// One histogram per cgroup (`cgroup = PATH`), in -c's or the cpu hierarchy
    #[arg(long, group = "keyed")]
    pub cgroups: bool,
    /// Keys the kernel keeps (2.4 KiB each, 1.7 without the decision split); waits beyond are
    /// counted as unkeyed
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_KEYS, value_parser = max_keys_parser())]
    pub max_keys: u32,
}

impl CgroupKeyArgs {
    /// The per-key histograms asked for: per cgroup, else `other` (the
    /// command's other keys: -P, -L...), in a map of `--max-keys` keys.
    pub(crate) fn keyed(&self, other: Option<Breakdown>) -> Option<Keyed> {
        let by = if self.cgroups {
            Breakdown::Cgroup
        } else {
            other?
        };
        Some(Keyed {
            by,
            max_keys: self.max_keys,
        })
    }
}

/// `--max-series`: how many keys get a series of their own.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct MaxSeriesArgs {
    /// At most N per-key series per interval, the keys that waited most
    /// first (serve: per scrape, besides pinned ones, the others' waits
    /// summed into one series labelled "__overflow__"; record --ring: per
    /// second)
    #[arg(long, value_name = "N", default_value_t = 250, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_series: u32,
}

/// `record --ring`'s per-cgroup series: the options above, spelled
/// `--ring-cgroups`, requiring `--ring`, and at most 16 series a second
/// unless told (a second's series are in the ring's memory bound).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Flight recorder (record --ring)")]
#[command(mut_arg("cgroups", |a| a.long("ring-cgroups").requires("ring")))]
#[command(mut_arg("max_keys", |a| a.requires("ring")))]
#[command(mut_arg("max_series", |a| a
    .requires("ring")
    .default_value("16")
    .value_parser(clap::value_parser!(u32).range(1..=1024))))]
pub(crate) struct RingCgroupArgs {
    #[command(flatten)]
    pub keys: CgroupKeyArgs,
    #[command(flatten)]
    pub max_series: MaxSeriesArgs,
}

/// Pairs of cgroups the neighbour table holds by default: a node's
/// containers two by two behind the few that hold its CPUs.
pub(super) const DEFAULT_MAX_PAIRS: u32 = 4096;

/// `--pairs` and the size of the kernel's pair table.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PairTableArgs {
    /// Also count who waited behind whom: per pair of cgroups, the time the
    /// first's tasks waited while a task of the second held their CPU (each
    /// wait charged to every holder by its time on the CPU inside it)
    #[arg(long)]
    pub pairs: bool,
    /// Pairs the kernel keeps in each of its two tables (who held the CPU,
    /// who used the share of the group a wakeup lost with; about 200
    /// bytes a pair in all); waits beyond are counted as in no pair
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PAIRS, value_parser = max_keys_parser(), requires = "pairs")]
    pub max_pairs: u32,
}

impl PairTableArgs {
    /// The table's size, when `--pairs` asks for it.
    pub(crate) fn max_pairs(&self) -> Option<u32> {
        self.pairs.then_some(self.max_pairs)
    }
}
