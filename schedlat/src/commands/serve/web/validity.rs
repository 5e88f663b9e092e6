//! The dates of the server's certificate: an expired or not yet valid one
//! is loaded all the same (clients then refuse every handshake, or accept
//! it with verification off), so serve says so with the date, and warns
//! within [`SOON`] of the expiry, when a renewal has failed and there is
//! still time to fix it.
//!
//! webpki (rustls' certificate parser) checks the certificate's structure
//! but does not expose its validity; the field follows the issuer, whose
//! place webpki gives, so only the two times are read here.

use rustls::pki_types::CertificateDer;

/// Within this of its expiry, a certificate is worth a warning: a week,
/// time for a failed renewal to be noticed and fixed.
pub(crate) const SOON: i64 = 7 * 24 * 3600;

/// notBefore and notAfter, seconds since the Unix epoch, with the dates as
/// written (UTC).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Validity {
    pub not_before: (i64, String),
    pub not_after: (i64, String),
}

/// What to say about `cert` at `now_unix`, if anything.
pub(crate) fn warning(cert: &CertificateDer<'_>, now_unix: i64) -> Option<String> {
    let v = validity(cert)?;
    if now_unix < v.not_before.0 {
        Some(format!(
            "the certificate is not valid before {} (the clock says it is earlier): clients refuse it",
            v.not_before.1
        ))
    } else if now_unix > v.not_after.0 {
        Some(format!(
            "the certificate expired on {}: clients refuse it; renew it (serve reads it again when it changes)",
            v.not_after.1
        ))
    } else if v.not_after.0 - now_unix <= SOON {
        Some(format!(
            "the certificate expires on {}, in {} h: renew it (serve reads it again when it changes)",
            v.not_after.1,
            (v.not_after.0 - now_unix) / 3600
        ))
    } else {
        None
    }
}

/// The validity of `cert`; None if webpki does not take it (rustls then
/// refuses it with its own error) or its times are not DER's.
pub(crate) fn validity(cert: &CertificateDer<'_>) -> Option<Validity> {
    let parsed = webpki::EndEntityCert::try_from(cert).ok()?;
    let der: &[u8] = cert.as_ref();
    let issuer = parsed.issuer();
    // The issuer's content is a slice of `der`; validity starts after it.
    let start = (issuer.as_ptr() as usize).checked_sub(der.as_ptr() as usize)? + issuer.len();
    let (content, _) = tlv(der.get(start..)?, 0x30)?;
    let (not_before, rest) = time(content)?;
    let (not_after, _) = time(rest)?;
    Some(Validity {
        not_before,
        not_after,
    })
}

/// A DER tag-length-value of `tag` at the start of `bytes`: its content and
/// what follows.
fn tlv(bytes: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = bytes.split_first()?;
    if first != tag {
        return None;
    }
    let (&len, mut rest) = rest.split_first()?;
    let len = if len < 0x80 {
        usize::from(len)
    } else {
        let n = usize::from(len & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A UTCTime (YYMMDDHHMMSSZ, years 1950-2049) or GeneralizedTime
/// (YYYYMMDDHHMMSSZ), RFC 5280's forms: seconds since the epoch and the
/// date written out.
fn time(bytes: &[u8]) -> Option<((i64, String), &[u8])> {
    let (text, rest, year) = if let Some((text, rest)) = tlv(bytes, 0x17) {
        let yy = digits(text.get(0..2)?)?;
        (
            text.get(2..)?,
            rest,
            if yy < 50 { 2000 + yy } else { 1900 + yy },
        )
    } else {
        let (text, rest) = tlv(bytes, 0x18)?;
        (text.get(4..)?, rest, digits(text.get(0..4)?)?)
    };
    if text.len() != 11 || text[10] != b'Z' {
        return None;
    }
    let field = |i: usize| digits(&text[i..i + 2]);
    let (month, day, hour, minute, second) =
        (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let unix = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let said = format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC");
    Some(((unix, said), rest))
}

fn digits(text: &[u8]) -> Option<i64> {
    text.iter().try_fold(0i64, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
    })
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;

    use super::*;

    /// A self-signed certificate valid from 2026-12-01 22:48:45 to
    /// 2026-12-02 22:48:45 UTC.
    const ONE_DAY: &str = "\
-----BEGIN CERTIFICATE-----
MIIBjzCCATWgAwIBAgIUQT8R0UnUXvhhM3n/n5hvLFfKzPswCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSc2NoZWRsYXQgdW5pdCB0ZXN0MB4XDTI2MTIwMTIyNDg0NVoX
DTI2MTIwMjIyNDg0NVowHTEbMBkGA1UEAwwSc2NoZWRsYXQgdW5pdCB0ZXN0MFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEr2A7lZI2clnlD0QYO53F95gMsFn+K6iF
VFfb1e6S17tScDXCGfbpL6w3/Bzax1+LaYRb5Hq2NB8ybFxrCXnTa6NTMFEwHQYD
VR0OBBYEFLdA340TrAQI2zAjas5sqnzXDn1hMB8GA1UdIwQYMBaAFLdA340TrAQI
2zAjas5sqnzXDn1hMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIh
APMLOzcvs3vxmahnPZUf1ce26az543pbg78IUKcHdCMbAiAuxT066SOcs+02G6jK
vV484UFhAh1r0hQPDzPPY7oWmQ==
-----END CERTIFICATE-----
";

    #[test]
    fn the_dates_are_read_and_warned_about() {
        let cert = CertificateDer::from_pem_slice(ONE_DAY.as_bytes()).unwrap();
        let v = validity(&cert).unwrap();
        // date -u -d '2026-12-01 22:48:45' +%s
        assert_eq!(
            v.not_before,
            (1_796_165_325, "2026-12-01 22:48:45 UTC".into())
        );
        assert_eq!(
            v.not_after,
            (1_796_251_725, "2026-12-02 22:48:45 UTC".into())
        );
        let before = warning(&cert, v.not_before.0 - 1).unwrap();
        assert!(
            before.contains("not valid before 2026-12-01 22:48:45 UTC"),
            "{before}"
        );
        let expired = warning(&cert, v.not_after.0 + 1).unwrap();
        assert!(
            expired.contains("expired on 2026-12-02 22:48:45 UTC"),
            "{expired}"
        );
        let soon = warning(&cert, v.not_after.0 - 5 * 3600).unwrap();
        assert!(
            soon.contains("expires on 2026-12-02 22:48:45 UTC, in 5 h"),
            "{soon}"
        );
    }

    #[test]
    fn civil_days_and_times_as_der_writes_them() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2049, 12, 31), 29_219);
        let utc = [
            0x17, 13, b'4', b'9', b'1', b'2', b'3', b'1', b'2', b'3', b'5', b'9', b'5', b'9', b'Z',
        ];
        assert_eq!(time(&utc).unwrap().0.0, 29_219 * 86_400 + 86_399);
        let generalized = b"\x18\x0f20500101000000Z";
        assert_eq!(time(generalized).unwrap().0.1, "2050-01-01 00:00:00 UTC");
        for bad in [
            &b"\x17\x0d491231235959X"[..],
            b"\x17\x0d4912312359",
            b"\x18\x0f2050130100000 Z",
            b"",
        ] {
            assert!(time(bad).is_none(), "{bad:?}");
        }
    }
}
