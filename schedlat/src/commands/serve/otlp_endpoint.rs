//! Where the OTLP push goes (`--otlp-endpoint`, the OpenTelemetry
//! variables): an `http://` or `https://` URL, read as the SDKs read it.

use hyper::Uri;

use crate::export::otlp;

/// Where requests go: `http://` or `https://host:port/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub url: String,
    pub(super) host: String,
    pub(super) port: u16,
    /// Path and query, as sent in the request line.
    pub(super) path: String,
    pub(super) tls: bool,
}

impl Endpoint {
    /// `url` as given (`base`: false, a signal-specific endpoint) or with
    /// `/v1/metrics` appended to its path (`base`: true, the
    /// OpenTelemetry SDKs' rule for OTEL_EXPORTER_OTLP_ENDPOINT).
    pub(crate) fn parse(url: &str, base: bool) -> Result<Endpoint, String> {
        let uri: Uri = url.parse().map_err(|e| {
            format!("{url} is not a URL ({e}): give one such as http://localhost:4318/v1/metrics")
        })?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "{url} has no http:// or https:// scheme: give one such as http://localhost:4318/v1/metrics"
                ));
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("{url} names no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let path = if base {
            format!("{}{}", path.trim_end_matches('/'), otlp::METRICS_PATH)
        } else {
            path.to_string()
        };
        let scheme = if tls { "https" } else { "http" };
        Ok(Endpoint {
            url: format!(
                "{scheme}://{}{path}",
                uri.authority().expect("a host").as_str()
            ),
            host,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            path,
            tls,
        })
    }

    pub(super) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_as_the_sdks_read_them() {
        let e = Endpoint::parse("http://collector:4318", true).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("collector", 4318, "/v1/metrics")
        );
        assert_eq!(e.url, "http://collector:4318/v1/metrics");
        let e = Endpoint::parse("http://collector:4318/otlp/", true).unwrap();
        assert_eq!(e.path, "/otlp/v1/metrics");
        // A metrics endpoint is taken as it is.
        let e = Endpoint::parse("http://[::1]:9000/custom?x=1", false).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("::1", 9000, "/custom?x=1")
        );
        assert_eq!(e.authority(), "[::1]:9000");
        assert_eq!(Endpoint::parse("http://c", false).unwrap().port, 80);
        let e = Endpoint::parse("https://collector/v1/metrics", false).unwrap();
        assert_eq!(
            (e.port, e.tls, e.url.as_str()),
            (443, true, "https://collector/v1/metrics")
        );
        for bad in ["collector:4318", "ftp://c", "http://"] {
            assert!(Endpoint::parse(bad, false).is_err(), "{bad}");
        }
    }
}
