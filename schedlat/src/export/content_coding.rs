//! Whether a scrape's body goes out gzip-compressed, from the scraper's
//! `Accept-Encoding` (RFC 9110 12.5.3), as Prometheus' client libraries
//! answer: gzip when it is acceptable, the body as is otherwise.
//! Prometheus sends `Accept-Encoding: gzip` on every scrape (unless its
//! scrape config says `enable_compression: false`); curl without
//! `--compressed` sends none and gets the text as is.
//!
//! Level 1 (flate2's `fast`): the exposition repeats each series' labels
//! on every line, so the fastest level already compresses the text about
//! twentyfold; its CPU is measured in docs/prometheus.md's "The size of
//! a `--cgroups` scrape" (about 0.7 ms per MB of text on the project's VM).

use std::io::Write;

use flate2::{Compression, write::GzEncoder};

/// How the body is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    Identity,
    Gzip,
}

impl Coding {
    /// The coding for an `Accept-Encoding` value (None: no header, which
    /// asks for the body as is).
    pub(crate) fn negotiate(accept_encoding: Option<&str>) -> Coding {
        let Some(accept) = accept_encoding else {
            return Coding::Identity;
        };
        let mut gzip = None;
        let mut any = None;
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = (parts.filter_map(|p| p.split_once('=')))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok());
            let Some(q) = q else { continue };
            match coding.as_str() {
                "gzip" | "x-gzip" => gzip = Some(q),
                "*" => any = Some(q),
                _ => {}
            }
        }
        // gzip named wins over `*`; q=0 refuses it.
        match gzip.or(any) {
            Some(q) if q > 0.0 => Coding::Gzip,
            _ => Coding::Identity,
        }
    }

    /// The `Content-Encoding` value, None for the body as is.
    pub(crate) fn header(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => Some("gzip"),
        }
    }

    /// `body` in this coding.
    pub(crate) fn apply(self, body: Vec<u8>) -> Vec<u8> {
        match self {
            Coding::Identity => body,
            Coding::Gzip => {
                let mut gz =
                    GzEncoder::new(Vec::with_capacity(body.len() / 8), Compression::fast());
                gz.write_all(&body)
                    .and_then(|()| gz.finish())
                    .expect("compressing into a Vec cannot fail")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn prometheus_gets_gzip_and_curl_the_text() {
        // Prometheus' scrape request, verbatim (scrape/scrape.go).
        assert_eq!(Coding::negotiate(Some("gzip")), Coding::Gzip);
        assert_eq!(Coding::negotiate(None), Coding::Identity);
        assert_eq!(
            Coding::negotiate(Some("deflate, gzip;q=1.0, *;q=0.5")),
            Coding::Gzip
        );
        assert_eq!(Coding::negotiate(Some("br")), Coding::Identity);
        assert_eq!(Coding::negotiate(Some("gzip;q=0")), Coding::Identity);
        assert_eq!(Coding::negotiate(Some("*")), Coding::Gzip);
        assert_eq!(Coding::negotiate(Some("*, gzip;q=0")), Coding::Identity);
        assert_eq!(Coding::negotiate(Some("identity")), Coding::Identity);
    }

    #[test]
    fn a_gzip_body_decodes_to_the_text() {
        let text = "schedlat_x_total{cgroup=\"/a\"} 1\n"
            .repeat(1000)
            .into_bytes();
        let gz = Coding::Gzip.apply(text.clone());
        assert!(gz.len() * 10 < text.len(), "{} of {}", gz.len(), text.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(gz.as_slice())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        assert_eq!(Coding::Identity.apply(text.clone()), text);
    }
}
