//! OTLP: the scrape's families pushed to an OpenTelemetry collector as an
//! `ExportMetricsServiceRequest` over OTLP/HTTP in protobuf
//! (`serve --otlp-endpoint`).
//!
//! - proto: the opentelemetry-proto messages, as prost structs;
//! - metrics: the families as OTLP metrics (names, exponential
//!   histograms, the offset convention, resources per workload);
//! - delivery: the bounded queue, retries and backoff;
//! - answer: a collector's partial success, made safe to log.
//!
//! The push itself (a timer, the HTTP client) is serve's
//! (commands/serve/otlp.rs).

pub(crate) mod answer;
pub(crate) mod delivery;
pub(crate) mod metrics;
pub(crate) mod proto;

#[cfg(test)]
mod tests;

use prost::Message;

use self::{metrics::Times, proto::ExportMetricsServiceRequest};
use super::model::Family;

/// The media type of OTLP/HTTP in protobuf.
pub(crate) const CONTENT_TYPE: &str = "application/x-protobuf";
/// The path a collector takes metrics on, after an endpoint given as a
/// base (`OTEL_EXPORTER_OTLP_ENDPOINT`).
pub(crate) const METRICS_PATH: &str = "/v1/metrics";

/// The resource attributes of every request: the service and the host,
/// then `configured` (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`),
/// which win over the defaults of the same key.
pub(crate) fn resource(hostname: &str, configured: &[(String, String)]) -> Vec<(String, String)> {
    // service.instance.id: what a collector's Prometheus exporter makes the
    // `instance` label of; the host, since one schedlat runs per host.
    let defaults = [
        ("service.name", "schedlat"),
        ("service.version", env!("CARGO_PKG_VERSION")),
        ("host.name", hostname),
        ("service.instance.id", hostname),
    ];
    let mut out: Vec<(String, String)> = (defaults.iter())
        .filter(|(k, v)| !v.is_empty() && !configured.iter().any(|(c, _)| c == k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    out.extend(configured.iter().cloned());
    out
}

/// The body of one push: `families` as read at `times.now_unix_ns`.
pub(crate) fn encode(families: &[Family], resource: &[(String, String)], times: Times) -> Vec<u8> {
    ExportMetricsServiceRequest {
        resource_metrics: metrics::resource_metrics(families, resource, times),
    }
    .encode_to_vec()
}
