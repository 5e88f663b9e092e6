//! The OTLP messages schedlat writes: the subset of opentelemetry-proto's
//! `collector/metrics/v1/metrics_service.proto`, `metrics/v1/metrics.proto`,
//! `common/v1/common.proto` and `resource/v1/resource.proto` (proto3) that
//! a metrics push needs, declared with their field numbers as prost
//! structs. The opentelemetry-proto crate holds the same messages, but its
//! metrics feature pulls in the whole OpenTelemetry SDK; the tests decode
//! what these write with the collector's own classes (PyPI's
//! opentelemetry-proto, tests/otlp.rs).

use prost::{Message, Oneof};

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// The answer to a push; `partial_success` set when the collector kept
/// only part of it.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExportMetricsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportMetricsPartialSuccess>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExportMetricsPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_data_points: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(oneof = "Data", tags = "5, 7, 10")]
    pub data: Option<Data>,
}

#[derive(Clone, PartialEq, Oneof)]
pub(crate) enum Data {
    #[prost(message, tag = "5")]
    Gauge(Gauge),
    #[prost(message, tag = "7")]
    Sum(Sum),
    #[prost(message, tag = "10")]
    ExponentialHistogram(ExponentialHistogram),
}

/// AggregationTemporality: every value schedlat pushes is cumulative since
/// it attached, as the kernel's counters are.
pub(crate) const CUMULATIVE: i32 = 2;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(enumeration = "i32", tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<ExponentialHistogramDataPoint>,
    #[prost(enumeration = "i32", tag = "2")]
    pub aggregation_temporality: i32,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Number", tags = "4, 6")]
    pub value: Option<Number>,
}

#[derive(Clone, PartialEq, Oneof)]
pub(crate) enum Number {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExponentialHistogramDataPoint {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    pub sum: Option<f64>,
    #[prost(sint32, tag = "6")]
    pub scale: i32,
    #[prost(fixed64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, optional, tag = "8")]
    pub positive: Option<Buckets>,
    #[prost(message, repeated, tag = "11")]
    pub exemplars: Vec<Exemplar>,
    #[prost(double, tag = "14")]
    pub zero_threshold: f64,
}

/// Dense buckets from `offset`: `bucket_counts[k]` counts the values in
/// `(base^(offset+k), base^(offset+k+1)]`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Buckets {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint64, repeated, tag = "2")]
    pub bucket_counts: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Exemplar {
    #[prost(message, repeated, tag = "7")]
    pub filtered_attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub time_unix_nano: u64,
    #[prost(double, tag = "3")]
    pub as_double: f64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AnyValue {
    #[prost(oneof = "Any", tags = "1")]
    pub value: Option<Any>,
}

/// Only strings: every attribute schedlat sets is one (a oneof, so that an
/// empty string is still a string).
#[derive(Clone, PartialEq, Oneof)]
pub(crate) enum Any {
    #[prost(string, tag = "1")]
    StringValue(String),
}

impl KeyValue {
    pub(crate) fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Some(AnyValue {
                value: Some(Any::StringValue(value.to_string())),
            }),
        }
    }
}
