//! The encoders: each writes the families (model.rs) in one format. A new
//! encoding is a file here and a variant of [`Format`].

pub(crate) mod protobuf;
#[cfg(test)]
mod random;
pub(crate) mod text;

use super::model::Family;

/// An exposition format and the version to announce in `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics text; the body is 1.0.0, announced as the version asked for.
    OpenMetrics { version: &'static str },
    /// Prometheus' delimited protobuf `MetricFamily` stream.
    Protobuf,
}

impl Format {
    pub(crate) fn content_type(self) -> String {
        match self {
            Format::Text => text::CONTENT_TYPE.to_string(),
            Format::OpenMetrics { version } => {
                format!("application/openmetrics-text; version={version}; charset=utf-8")
            }
            Format::Protobuf => protobuf::CONTENT_TYPE.to_string(),
        }
    }
}

/// `families` in `format`.
pub(crate) fn encode(families: Vec<Family>, format: Format) -> Vec<u8> {
    match format {
        Format::Protobuf => protobuf::encode(families),
        Format::OpenMetrics { .. } => text::encode(families, true),
        Format::Text => text::encode(families, false),
    }
}
