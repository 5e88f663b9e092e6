//! Where the OTLP push goes (`--otlp-endpoint`, the OpenTelemetry
//! variables): an `http://` or `https://` URL, read as the SDKs read it.
//! A URL with a user and password (`https://user:secret@collector/`) is
//! refused: the SDKs do not send them either, and the URL is printed in
//! serve's log lines; the header option carries credentials. Every URL
//! this module prints has its user information and query values replaced.

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
        let shown = redacted(url);
        let uri: Uri = url.parse().map_err(|e| {
            format!("{shown} is not a URL ({e}): give one such as http://localhost:4318/v1/metrics")
        })?;
        let url = shown.as_str();
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(format!(
                "{url} carries credentials in the URL, which are not sent (and would be logged): give them as a header, such as --otlp-header 'Authorization=Basic BASE64(user:password)'"
            ));
        }
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
            url: redacted(&format!(
                "{scheme}://{}{path}",
                uri.authority().expect("a host").as_str()
            )),
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

/// `url` as it may be logged: user information (`user:secret@`) and the
/// query's values (`?api_key=...`) replaced, whatever else the text is.
pub(crate) fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("REDACTED@{host}"),
        None => authority.to_string(),
    };
    let rest = match rest.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = query.split_once('#').unwrap_or((query, ""));
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) => format!("{key}=REDACTED"),
                    None => pair.to_string(),
                })
                .collect();
            let fragment = if fragment.is_empty() {
                String::new()
            } else {
                format!("#{fragment}")
            };
            format!("{path}?{}{fragment}", query.join("&"))
        }
        None => rest.to_string(),
    };
    crate::output::escape::printable(&format!("{scheme}{authority}{rest}")).into_owned()
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

    /// Issue 48, 14: credentials in the URL were not sent, and were
    /// printed in clear in every log line about the push.
    #[test]
    fn credentials_in_the_url_are_refused_and_never_shown() {
        for url in [
            "http://user:s3cret@collector:4318/v1/metrics",
            "https://s3cret@collector/v1/metrics",
            "http://user:s3cret@collector:bad/v1/metrics",
        ] {
            let e = Endpoint::parse(url, false).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("REDACTED@collector"), "{e}");
        }
        let e = Endpoint::parse("http://user:s3cret@collector:4318", false).unwrap_err();
        assert!(e.contains("--otlp-header 'Authorization=Basic"), "{e}");
        let e =
            Endpoint::parse("http://collector:4318/v1/metrics?api_key=s3cret&x", false).unwrap();
        assert_eq!(e.url, "http://collector:4318/v1/metrics?api_key=REDACTED&x");
        // The request still carries the query.
        assert_eq!(e.path, "/v1/metrics?api_key=s3cret&x");
        assert_eq!(
            redacted("no scheme@host?k=v#f"),
            "REDACTED@host?k=REDACTED#f"
        );
    }
}
