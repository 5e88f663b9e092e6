//! The values of the options whose types live below cli/: each a clap
//! `ValueEnum` mirror of its type, named and ordered as it, whose
//! variants' docs are the values' help (`--help`'s "Possible values"). The
//! conversions go both ways by exhaustive matches, so that a variant added
//! below does not build until its mirror here has it; clap stays in cli/.

use crate::{
    analysis::{breakdown::KeySort, victims::SortKey},
    export::{cgroup_splits::CgroupSplits, key_buckets::KeyBuckets},
    kernel::{hook::HookChoice, preflight::trial::Mode},
};

/// A `ValueEnum` named `$arg` with the variants of `$of`, and the
/// conversions both ways.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        $arg:ident = $of:ident {
            $($(#[$doc:meta])* $variant:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub(crate) enum $arg {
            $($(#[$doc])* $variant,)*
        }

        impl From<$arg> for $of {
            fn from(arg: $arg) -> Self {
                match arg {
                    $($arg::$variant => $of::$variant,)*
                }
            }
        }

        impl From<$of> for $arg {
            fn from(of: $of) -> Self {
                match of {
                    $($of::$variant => $arg::$variant,)*
                }
            }
        }
    };
}

mirror! {
    /// `--hook`: [`HookChoice`].
    HookArg = HookChoice {
        /// tp_btf when the kernel has BTF and supports it, classic tracepoints otherwise.
        Auto,
        /// BTF-typed tracepoints (tp_btf): cheapest; needs kernel BTF (5.5+).
        Btf,
        /// Classic tracepoints, offsets from tracefs format files: any kernel.
        Tp,
    }
}

mirror! {
    /// `check --require`: [`Mode`].
    ModeArg = Mode {
        /// The histogram (`schedlat`, `serve`), in the hook mode auto picks.
        Histogram,
        /// The histogram on classic tracepoints (`--hook tp`).
        Tracepoint,
        /// Per-process histograms (`-P`, `-L`, `--pidnss`, `serve --pids`).
        PerProcess,
        /// Per-cgroup histograms (`--cgroups`, `serve --cgroups`).
        Cgroups,
        /// The victims and culprits tables (`victims`, `top`).
        Victims,
        /// Slow waits as they happen (`slow`, `record --ring`, `serve --ring`).
        Slow,
    }
}

mirror! {
    /// `--sort` of `victims` and `top`: [`SortKey`].
    SortArg = SortKey {
        /// Longest single wait
        Max,
        /// Sum of the waits
        Total,
        /// Number of waits
        Count,
        /// Mean wait
        Avg,
    }
}

mirror! {
    /// `--sort` of the per-key histograms: [`KeySort`].
    KeySortArg = KeySort {
        /// Total wait (sum), the default: who lost the most time
        Total,
        /// 99th percentile wait
        P99,
        /// Median wait
        P50,
        /// Mean wait
        Mean,
        /// Number of waits
        Count,
        /// The key itself (PID, CPU...), ascending
        Key,
    }
}

/// The breakdown's own default (its arguments derive `Default`).
impl Default for KeySortArg {
    fn default() -> Self {
        KeySort::default().into()
    }
}

mirror! {
    /// `serve --cgroup-splits`: [`CgroupSplits`].
    CgroupSplitsArg = CgroupSplits {
        /// What the mixin reads per cgroup: the seconds of the cause split's
        /// held_by, of the overlaps, and of the decision split's outcome and
        /// decision; every split in full in the total
        Alerting,
        /// Every split, counts and seconds, per cgroup as in the total
        Full,
    }
}

mirror! {
    /// `serve --key-buckets`: [`KeyBuckets`].
    KeyBucketsArg = KeyBuckets {
        /// log2, and a bucket an eighth of a power of two wide at each of 0.5,
        /// 1, 2, 5, 10 and 50 ms (34): a percentile at those values off by
        /// less than 8%, elsewhere by less than a factor of two
        Slo,
        /// One boundary per power of two, 1.024 us to 17.2 s (25): a
        /// percentile off by less than a factor of two
        Log2,
        /// As the total: 4 per power of two, 1.024 us to 68.7 s (105): off by
        /// less than 25%
        Fine,
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    fn names<T: ValueEnum>() -> Vec<String> {
        T::value_variants()
            .iter()
            .filter_map(T::to_possible_value)
            .map(|p| p.get_name().to_string())
            .collect()
    }

    /// The names clap takes are the variants' own, kebab-cased, as the
    /// derives below cli/ made them.
    #[test]
    fn the_names_are_the_variants_kebab_cased() {
        assert_eq!(names::<HookArg>(), ["auto", "btf", "tp"]);
        assert_eq!(names::<ModeArg>(), Mode::ALL.map(Mode::name));
        assert_eq!(names::<SortArg>(), ["max", "total", "count", "avg"]);
        assert_eq!(
            names::<KeySortArg>(),
            ["total", "p99", "p50", "mean", "count", "key"]
        );
        assert_eq!(names::<CgroupSplitsArg>(), ["alerting", "full"]);
        assert_eq!(names::<KeyBucketsArg>(), ["slo", "log2", "fine"]);
    }
}
