//! What became of the OTLP pushes (`serve --otlp-endpoint`), so that a
//! collector that refuses or hangs shows on the scrape too: requests
//! sent, attempts failed, requests dropped, and the queue now.

use crate::export::{
    model::{Family, Metric, Value, single},
    otlp::delivery::DeliveryCounts,
};

pub(super) fn families(c: &DeliveryCounts) -> [Family; 5] {
    [
        single(
            "schedlat_otlp_requests_sent",
            "OTLP export requests the collector took (2xx) since schedlat started",
            Metric::Counter,
            Value::Count(c.sent),
        ),
        single(
            "schedlat_otlp_attempts_failed",
            "OTLP export attempts that failed (no connection, no answer within --otlp-timeout, or an error status) since schedlat started",
            Metric::Counter,
            Value::Count(c.failed_attempts),
        ),
        single(
            "schedlat_otlp_requests_dropped",
            "OTLP export requests given up: superseded by a newer one in a full queue (every request is cumulative: nothing counted is lost), rejected with a 4xx, or out of attempts",
            Metric::Counter,
            Value::Count(c.dropped),
        ),
        single(
            "schedlat_otlp_queue_requests",
            "OTLP export requests waiting to be sent (at most --otlp-queue)",
            Metric::Gauge,
            Value::Int(c.queued as i64),
        ),
        single(
            "schedlat_otlp_queue_bytes",
            "Bytes of the OTLP export requests waiting to be sent",
            Metric::Gauge,
            Value::Int(c.queued_bytes as i64),
        ),
    ]
}
