//! `serve`'s OTLP push options, named and defaulted as the OpenTelemetry
//! SDKs' exporter variables are (each flag's variable is its default):
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (as given) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/metrics`), `..._HEADERS`,
//! `..._TIMEOUT` and `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds), and the
//! resource's `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`.

use std::{path::PathBuf, time::Duration};

use crate::{
    commands::serve::otlp::{Endpoint, OtlpOptions},
    sys::clock::parse_duration_ns,
};

/// The OpenTelemetry SDKs' export timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OTLP push")]
pub(crate) struct OtlpArgs {
    /// Also push the metrics to an OpenTelemetry collector over OTLP/HTTP
    /// (protobuf), such as http://localhost:4318/v1/metrics: the histograms
    /// as exponential histograms (the native histograms' buckets), the
    /// counters as cumulative sums, every --otlp-interval. The URL is taken
    /// as given; without it, OTEL_EXPORTER_OTLP_ENDPOINT (a base: /v1/metrics
    /// is appended). https:// checks the collector's certificate against
    /// --otlp-certificate or the system's CA bundle
    // Read as text and parsed in `options`: clap repeats a refused value
    // whole in its error, and a URL may carry a password. The variable's
    // value stays out of --help for the same reason.
    #[arg(
        long,
        value_name = "URL",
        env = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        hide_env_values = true
    )]
    pub otlp_endpoint: Option<String>,

    /// A header of every push, such as an API key; repeat for more (also
    /// OTEL_EXPORTER_OTLP_METRICS_HEADERS or OTEL_EXPORTER_OTLP_HEADERS:
    /// KEY=VALUE,... with URL-encoded values)
    #[arg(long = "otlp-header", value_name = "KEY=VALUE", value_parser = header)]
    pub otlp_headers: Vec<(String, String)>,

    /// Time between pushes (a bare number is milliseconds, as
    /// OTEL_METRIC_EXPORT_INTERVAL gives it)
    #[arg(long, value_name = "DURATION", default_value = "60s",
          env = "OTEL_METRIC_EXPORT_INTERVAL", value_parser = duration)]
    pub otlp_interval: Duration,

    /// The most one push may take, connect to answer, 10s if not given
    /// (nor OTEL_EXPORTER_OTLP_TIMEOUT); a collector that does not answer
    /// in time gets the request again later, with backoff
    #[arg(long, value_name = "DURATION",
          env = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", value_parser = duration)]
    pub otlp_timeout: Option<Duration>,

    /// Pushes kept while the collector refuses or does not answer, oldest
    /// dropped first (each holds every count since start, so only the
    /// collector's time resolution is lost)
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub otlp_queue: u32,

    /// The CA certificates (PEM) an https:// collector's certificate must
    /// chain to, instead of the system's bundle (also
    /// OTEL_EXPORTER_OTLP_CERTIFICATE)
    #[arg(
        long,
        value_name = "FILE",
        env = "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"
    )]
    pub otlp_certificate: Option<PathBuf>,

    /// The client certificate (PEM, its chain after it) serve presents to
    /// an https:// collector that asks for one (mutual TLS), with
    /// --otlp-client-key (also OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE)
    #[arg(
        long,
        value_name = "FILE",
        env = "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
        requires = "otlp_client_key"
    )]
    pub otlp_client_certificate: Option<PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of
    /// --otlp-client-certificate (also OTEL_EXPORTER_OTLP_CLIENT_KEY)
    #[arg(
        long,
        value_name = "FILE",
        env = "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
        requires = "otlp_client_certificate"
    )]
    pub otlp_client_key: Option<PathBuf>,

    /// gzip: compress each push (Content-Encoding: gzip, which the
    /// collectors take); none if not given (nor
    /// OTEL_EXPORTER_OTLP_COMPRESSION)
    #[arg(long, value_name = "gzip|none", env = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
          value_parser = compression)]
    pub otlp_compression: Option<bool>,
}

impl OtlpArgs {
    /// The push, if an endpoint is given (by flag or environment); `env`
    /// reads a variable.
    pub(crate) fn options(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpOptions>, String> {
        let endpoint = match &self.otlp_endpoint {
            Some(url) => {
                Endpoint::parse(url, false).map_err(|e| format!("--otlp-endpoint: {e}"))?
            }
            None => match env("OTEL_EXPORTER_OTLP_ENDPOINT").filter(|s| !s.is_empty()) {
                Some(base) => Endpoint::parse(&base, true)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}"))?,
                None => return Ok(None),
            },
        };
        let mut headers = Vec::new();
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        ] {
            if let Some(list) = env(var) {
                headers.extend(key_values(&list).map_err(|e| format!("{var}: {e}"))?);
            }
        }
        headers.extend(self.otlp_headers.iter().cloned());
        // The flag's (or the metrics variable's), the general variable's,
        // the SDKs' default.
        let timeout = match (self.otlp_timeout, env("OTEL_EXPORTER_OTLP_TIMEOUT")) {
            (Some(t), _) => t,
            (None, Some(general)) => {
                duration(&general).map_err(|e| format!("OTEL_EXPORTER_OTLP_TIMEOUT: {e}"))?
            }
            (None, None) => DEFAULT_TIMEOUT,
        };
        let mut resource = match env("OTEL_RESOURCE_ATTRIBUTES") {
            Some(list) => {
                key_values(&list).map_err(|e| format!("OTEL_RESOURCE_ATTRIBUTES: {e}"))?
            }
            None => Vec::new(),
        };
        if let Some(name) = env("OTEL_SERVICE_NAME").filter(|s| !s.is_empty()) {
            resource.retain(|(k, _)| k != "service.name");
            resource.push(("service.name".into(), name));
        }
        let ca_file = (self.otlp_certificate.clone())
            .or_else(|| env("OTEL_EXPORTER_OTLP_CERTIFICATE").map(PathBuf::from));
        // Both files from one place: flags (or the metrics variables,
        // which clap pairs), else the general variables.
        let client_identity = match (&self.otlp_client_certificate, &self.otlp_client_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            _ => match (
                env("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE").filter(|s| !s.is_empty()),
                env("OTEL_EXPORTER_OTLP_CLIENT_KEY").filter(|s| !s.is_empty()),
            ) {
                (Some(cert), Some(key)) => Some((cert.into(), key.into())),
                (None, None) => None,
                _ => {
                    return Err("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and \
                         OTEL_EXPORTER_OTLP_CLIENT_KEY go together: set both or neither"
                        .into());
                }
            },
        };
        let gzip = match (self.otlp_compression, env("OTEL_EXPORTER_OTLP_COMPRESSION")) {
            (Some(gzip), _) => gzip,
            (None, Some(general)) => {
                compression(&general).map_err(|e| format!("OTEL_EXPORTER_OTLP_COMPRESSION: {e}"))?
            }
            (None, None) => false,
        };
        Ok(Some(OtlpOptions {
            gzip,
            ca_file,
            client_identity,
            endpoint,
            headers,
            interval: self.otlp_interval,
            timeout,
            queue: self.otlp_queue as usize,
            resource,
        }))
    }
}

/// `gzip` (true) or `none`, as OTEL_EXPORTER_OTLP_COMPRESSION spells them.
fn compression(s: &str) -> Result<bool, String> {
    match s.trim() {
        "gzip" => Ok(true),
        "none" => Ok(false),
        other => Err(format!("`{other}` is not gzip or none")),
    }
}

/// A duration such as 10s or 500ms; a bare number is milliseconds.
fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let ns = match s.parse::<u64>() {
        Ok(ms) => ms.saturating_mul(1_000_000),
        Err(_) => parse_duration_ns(s)?,
    };
    if ns == 0 {
        return Err("must be more than 0".into());
    }
    Ok(Duration::from_nanos(ns))
}

/// `KEY=VALUE` of `--otlp-header`.
fn header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not KEY=VALUE"))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        return Err(format!("`{k}` is not a header name"));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// The OpenTelemetry variables' `key1=value1,key2=value2` lists, values
/// percent-decoded (the W3C Baggage form they follow).
fn key_values(list: &str) -> Result<Vec<(String, String)>, String> {
    (list.split(',').map(str::trim).filter(|p| !p.is_empty()))
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not key=value"))?;
            Ok((k.trim().to_string(), percent_decoded(v.trim())?))
        })
        .collect()
}

fn percent_decoded(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("`{s}`: a % not followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        otlp: OtlpArgs,
    }

    fn options(args: &[&str], vars: &[(&str, &str)]) -> Result<Option<OtlpOptions>, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.otlp.options(|k| vars.get(k).cloned())
    }

    #[test]
    fn a_client_certificate_comes_with_its_key() {
        let endpoint = ["--otlp-endpoint", "https://c/v1/metrics"];
        let identity = |o: Option<OtlpOptions>| o.unwrap().client_identity;
        let both = [
            "--otlp-client-certificate",
            "c.crt",
            "--otlp-client-key",
            "c.key",
        ];
        let flags = options(&[&endpoint[..], &both[..]].concat(), &[]).unwrap();
        assert_eq!(identity(flags), Some(("c.crt".into(), "c.key".into())));
        let general = [
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "g.crt"),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "g.key"),
        ];
        let vars = options(&endpoint, &general).unwrap();
        assert_eq!(identity(vars), Some(("g.crt".into(), "g.key".into())));
        // The flags win over the general variables, as a pair.
        let both_ways = options(&[&endpoint[..], &both[..]].concat(), &general).unwrap();
        assert_eq!(identity(both_ways), Some(("c.crt".into(), "c.key".into())));
        assert_eq!(identity(options(&endpoint, &[]).unwrap()), None);
        // One without the other is refused, by flag or by variable.
        let e = options(&[&endpoint[..], &both[..2]].concat(), &[]).unwrap_err();
        assert!(e.contains("--otlp-client-key"), "{e}");
        let e = options(&endpoint, &general[..1]).unwrap_err();
        assert!(e.contains("set both or neither"), "{e}");
    }

    #[test]
    fn no_endpoint_no_push() {
        assert_eq!(options(&[], &[]), Ok(None));
    }

    #[test]
    fn the_flag_the_base_variable_and_the_defaults() {
        let o = options(&["--otlp-endpoint", "http://c:4318/v1/metrics"], &[])
            .unwrap()
            .unwrap();
        assert_eq!(o.endpoint.url, "http://c:4318/v1/metrics");
        assert_eq!(
            (o.interval, o.timeout, o.queue),
            (Duration::from_secs(60), Duration::from_secs(10), 10)
        );
        let o = options(
            &["--otlp-header", "x-api-key=k1"],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=b%20c, d=e"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=x,k8s.cluster.name=eu-1",
                ),
                ("OTEL_SERVICE_NAME", "runq"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(o.endpoint.url, "http://c:4318/v1/metrics");
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            o.headers,
            pairs(&[("a", "b c"), ("d", "e"), ("x-api-key", "k1")])
        );
        assert_eq!(o.timeout, Duration::from_millis(2_500));
        assert!(o.gzip);
        assert_eq!(
            o.resource,
            pairs(&[("k8s.cluster.name", "eu-1"), ("service.name", "runq")])
        );
        let o = options(
            &[
                "--otlp-endpoint",
                "http://c/v1/metrics",
                "--otlp-timeout",
                "3s",
                "--otlp-interval",
                "1500",
            ],
            &[("OTEL_EXPORTER_OTLP_TIMEOUT", "1")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (o.timeout, o.interval),
            (Duration::from_secs(3), Duration::from_millis(1_500))
        );
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let e = options(&["--otlp-endpoint", "localhost:4318"], &[]).unwrap_err();
        assert!(e.contains("http://"), "{e}");
        let e = options(&[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")]).unwrap_err();
        assert!(
            e.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && e.contains("http://"),
            "{e}"
        );
        let e = options(
            &["--otlp-endpoint", "http://c", "--otlp-header", "novalue"],
            &[],
        )
        .unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = options(
            &[],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=%zz"),
            ],
        )
        .unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{e}");
        assert!(
            options(
                &["--otlp-endpoint", "http://c", "--otlp-interval", "0"],
                &[]
            )
            .is_err()
        );
    }
}
