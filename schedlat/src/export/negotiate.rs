//! Which exposition format a scraper gets, from its `Accept` header, the way
//! Prometheus' own client libraries decide (Go's
//! `expfmt.NegotiateIncludingOpenMetrics`): the most preferred acceptable
//! type wins; OpenMetrics 1.0.0 or 0.0.1 when asked for, the classic text
//! format (0.0.4) otherwise, including for `curl` and browsers that send no
//! preference. Prometheus sends
//! `application/openmetrics-text;version=1.0.0,...;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`
//! and so gets OpenMetrics. Prometheus with native histograms on
//! (`--enable-feature=native-histograms`) puts
//! `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`
//! first, and gets protobuf (encode/protobuf.rs), the format with native
//! histograms; a protobuf of another message or encoding is not offered.

use super::encode::Format;

/// The format for an `Accept` header value (None: no header).
pub(crate) fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let mut offers: Vec<(f32, usize, Option<Format>)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(order, item)| {
            let (format, q) = parse_item(item)?;
            // q=0 means "not acceptable".
            (q > 0.0).then_some((q, order, format))
        })
        .collect();
    // Highest q first; equal q keep the client's order.
    offers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    offers
        .into_iter()
        .find_map(|(_, _, format)| format)
        .unwrap_or(Format::Text)
}

/// One media range: the format it names (None if not one we serve, e.g.
/// `*/*`, which falls through to the default) and its q.
fn parse_item(item: &str) -> Option<(Option<Format>, f32)> {
    let mut parts = item.split(';').map(str::trim);
    let media = parts.next()?.to_ascii_lowercase();
    let mut q = 1.0f32;
    let mut version = None;
    let (mut proto, mut encoding) = (None, None);
    for param in parts {
        let (key, value) = param.split_once('=')?;
        let value = value.trim().trim_matches('"');
        match key.trim().to_ascii_lowercase().as_str() {
            "q" => q = value.parse().ok()?,
            "version" => version = Some(value.to_string()),
            "proto" => proto = Some(value.to_string()),
            "encoding" => encoding = Some(value.to_ascii_lowercase()),
            _ => {}
        }
    }
    if media == "application/vnd.google.protobuf" {
        let ours = proto.as_deref() == Some("io.prometheus.client.MetricFamily")
            && encoding.as_deref() == Some("delimited");
        return Some((ours.then_some(Format::Protobuf), q));
    }
    let format = match (media.as_str(), version.as_deref()) {
        ("application/openmetrics-text", None | Some("1.0.0")) => {
            Some(Format::OpenMetrics { version: "1.0.0" })
        }
        ("application/openmetrics-text", Some("0.0.1")) => {
            Some(Format::OpenMetrics { version: "0.0.1" })
        }
        ("text/plain", None | Some("0.0.4")) => Some(Format::Text),
        _ => None,
    };
    Some((format, q))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: Format = Format::OpenMetrics { version: "1.0.0" };

    #[test]
    fn prometheus_gets_openmetrics() {
        // Prometheus 2.x's scrape Accept header, verbatim.
        let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(accept)), OM);
    }

    #[test]
    fn prometheus_with_native_histograms_gets_protobuf() {
        // Prometheus 2.42 with --enable-feature=native-histograms
        // (scrape.go, `scrapeAcceptHeaderWithProtobuf`), verbatim.
        let accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(accept)), Format::Protobuf);
        assert_eq!(
            Format::Protobuf.content_type(),
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
        );
    }

    #[test]
    fn plain_clients_get_the_text_format() {
        assert_eq!(negotiate(None), Format::Text);
        assert_eq!(negotiate(Some("*/*")), Format::Text);
        assert_eq!(
            negotiate(Some("text/html,application/xhtml+xml")),
            Format::Text
        );
        assert_eq!(negotiate(Some("text/plain;version=0.0.4")), Format::Text);
    }

    #[test]
    fn preference_and_versions_decide() {
        assert_eq!(
            negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")),
            Format::Text
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=0.0.1")),
            Format::OpenMetrics { version: "0.0.1" }
        );
        // An OpenMetrics version we do not speak is skipped, not guessed.
        assert_eq!(
            negotiate(Some(
                "application/openmetrics-text;version=2.0.0,text/plain;q=0.1"
            )),
            Format::Text
        );
        // q=0 refuses; a protobuf other than the delimited MetricFamily
        // stream is not offered, so the next choice wins.
        assert_eq!(
            negotiate(Some(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text,application/openmetrics-text;q=0.5"
            )),
            OM
        );
        assert_eq!(
            negotiate(Some(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain"
            )),
            Format::Text
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(
            Format::Text.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(
            OM.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
    }
}
