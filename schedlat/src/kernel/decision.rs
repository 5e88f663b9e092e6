//! The decision split's load-time side (docs/decision.md): what this
//! kernel lets the programs read of the scheduler's decision, the
//! need-resched bit numbers and the tick.

use aya::EbpfLoader;
use schedlat_common::{
    kconfig::{Compute, DecisionOffsets},
    names,
};

use crate::{
    histogram::{DecisionFacts, TifSource},
    sys::kernel_facts::{self, Release},
};

/// The split as this load sets it up: None when off or not possible.
#[derive(Debug, Clone, Default)]
pub(crate) struct Setup {
    offsets: Option<DecisionOffsets>,
    facts: Option<DecisionFacts>,
}

impl Setup {
    /// `offsets` as BTF resolved them (None: the kernel lacks the
    /// request's fields, or the split is off). Notes say what is missing.
    pub(crate) fn new(offsets: Option<&DecisionOffsets>, notes: &mut Vec<String>) -> Setup {
        let Some(&offsets) = offsets else {
            return Setup::default();
        };
        let release = kernel_facts::release();
        let Some((need_resched_bit, lazy_bit)) = tif_bits(std::env::consts::ARCH, release) else {
            notes.push(format!(
                "decision split off: the need-resched bit numbers of {} are not known",
                std::env::consts::ARCH
            ));
            return Setup::default();
        };
        let tick_ns = kernel_facts::hz().map(|hz| 1_000_000_000 / hz);
        let facts = DecisionFacts {
            need_resched_bit,
            lazy_bit,
            tif_source: TifSource::Table,
            fair: offsets.fair,
            vprot: offsets.has_vprot != 0,
            tick_ns,
            ext: offsets.ext_state_mask != 0,
        };
        let offsets = DecisionOffsets {
            need_resched_mask: 1 << need_resched_bit,
            lazy_mask: lazy_bit.map_or(0, |b| 1 << b),
            tick_ns: tick_ns.unwrap_or(0),
            ..offsets
        };
        Setup {
            offsets: Some(offsets),
            facts: Some(facts),
        }
    }

    /// The offsets global, as the programs read it.
    pub(crate) fn offsets(&self) -> DecisionOffsets {
        self.offsets.unwrap_or(DecisionOffsets::ZERO)
    }

    /// Sets the split's switch in `compute` and sizes its maps: it needs the
    /// cause split's snapshot slots (`slots`); REQUESTS has an entry per
    /// CPU (`cpus`, as the kernel numbers them), the keys' split one per
    /// breakdown key (`max_keys`, None without a breakdown).
    pub(crate) fn configure(
        &self,
        loader: &mut EbpfLoader<'_>,
        compute: &mut Compute,
        (slots, cpus, max_keys): (bool, u32, Option<u32>),
    ) {
        let on = self.offsets.is_some() && compute.causes != 0 && slots;
        compute.decision = u64::from(on);
        loader.map_max_entries(names::MAP_REQUESTS, if on { cpus.max(1) } else { 1 });
        let keys = max_keys.filter(|_| on).map_or(1, |n| n.max(1));
        loader.map_max_entries(names::MAP_KEY_DECISIONS, keys);
    }

    pub(crate) fn facts(&self) -> Option<DecisionFacts> {
        self.facts
    }
}

/// TIF_NEED_RESCHED and TIF_NEED_RESCHED_LAZY of `arch` on kernel
/// `release`: arch/x86/include/asm/thread_info.h (3, lazy 4 since 6.13:
/// "sched, x86: Enable Lazy preemption"), then the generic TIF bits x86
/// uses since 6.18 (include/asm-generic/thread_info_tif.h: 4 and 5).
/// arm64: arch/arm64/include/asm/thread_info.h (1; lazy 13? not checked:
/// none). Checked on each kernel of the VM matrix by a granted wakeup.
fn tif_bits(arch: &str, release: Release) -> Option<(u32, Option<u32>)> {
    match arch {
        "x86_64" if release >= Release(6, 18) => Some((4, Some(5))),
        "x86_64" if release >= Release(6, 13) => Some((3, Some(4))),
        "x86_64" => Some((3, None)),
        "aarch64" => Some((1, None)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tif_bits_follow_the_kernel_versions() {
        assert_eq!(tif_bits("x86_64", Release(5, 10)), Some((3, None)));
        assert_eq!(tif_bits("x86_64", Release(6, 12)), Some((3, None)));
        assert_eq!(tif_bits("x86_64", Release(6, 13)), Some((3, Some(4))));
        assert_eq!(tif_bits("x86_64", Release(6, 17)), Some((3, Some(4))));
        assert_eq!(tif_bits("x86_64", Release(6, 18)), Some((4, Some(5))));
        assert_eq!(tif_bits("riscv64", Release(6, 18)), None);
    }
}
