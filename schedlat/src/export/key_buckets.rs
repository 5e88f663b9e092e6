//! Which layout the per-key families use (`--key-buckets`), and what their
//! HELP says of it. The layouts themselves are histogram/layout.rs.

use crate::histogram::{
    layout::{LAYOUT, LOG2, Layout, SLO, percent_up},
    native::{FINE_MAP, LOG2_MAP, NativeMap, SLO_MAP},
};

/// The per-key families' layout (`--key-buckets`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyBuckets {
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

impl KeyBuckets {
    pub(crate) fn layout(self) -> &'static Layout {
        match self {
            KeyBuckets::Slo => &SLO,
            KeyBuckets::Log2 => &LOG2,
            KeyBuckets::Fine => &LAYOUT,
        }
    }

    /// How its buckets go into a native histogram (protobuf).
    pub(crate) fn native(self) -> &'static NativeMap {
        match self {
            KeyBuckets::Slo => &SLO_MAP,
            KeyBuckets::Log2 => &LOG2_MAP,
            KeyBuckets::Fine => &FINE_MAP,
        }
    }

    /// For HELP texts: the layout and the error of a percentile from it.
    pub(crate) fn help(self) -> String {
        let error = self.native().stated();
        match self {
            KeyBuckets::Slo => format!(
                "buckets: one per power of two and a narrow one at each of 0.5, 1, 2, 5, 10 and 50 ms (--key-buckets slo), a histogram_quantile is within {} of the true percentile at those values, within a factor of two elsewhere; as a native histogram (protobuf, schema 3) within {error}",
                percent_up(SLO.error_at_thresholds())
            ),
            KeyBuckets::Log2 => format!(
                "buckets: one per power of two (--key-buckets log2), a histogram_quantile is within a factor of two of the true percentile; as a native histogram (protobuf, schema 3) within {error}"
            ),
            KeyBuckets::Fine => format!(
                "buckets: four per power of two (--key-buckets fine), a histogram_quantile is within 25% of the true percentile; as a native histogram (protobuf, schema 3) within {error}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_help_states_the_error_at_the_thresholds() {
        let help = KeyBuckets::Slo.help();
        assert!(
            help.contains("within 7.8% of the true percentile at those values"),
            "{help}"
        );
        assert!(
            help.contains("native histogram (protobuf, schema 3) within 39.7%"),
            "{help}"
        );
    }
}
