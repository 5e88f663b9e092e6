//! Names the kernel gives as bytes (cgroup paths) as text, one to one:
//! valid UTF-8 stays as it is, each byte that is not is written `\xHH`
//! (lowercase hex, as systemd-escape writes the bytes it escapes). Replacing
//! them with U+FFFD, as a lossy conversion does, gave two cgroups whose
//! names differ only there one label set: duplicate series that a
//! Prometheus server drops but one of.
//!
//! An invalid byte is always 0x80 or above, so only a backslash that
//! starts text reading like such an escape (`\x` and a hex pair from 80 to
//! ff) or like an escaped backslash (`\x5c`) is itself written `\x5c`:
//! systemd's own escapes of ASCII (`\x2d` for `-`) keep their name, and
//! [`unescape`] gives back the bytes of every name.

/// `bytes` as text, invalid UTF-8 escaped (see the module doc).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        let mut rest = valid;
        while let Some(at) = rest.find('\\') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if reads_as_escape(after.as_bytes()) {
                out.push_str("\\x5c");
            } else {
                out.push('\\');
            }
            rest = after;
        }
        out.push_str(rest);
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The bytes [`escape`] was given.
pub fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(v) = hex_escape(&b[i + 1..])
            && (v >= 0x80 || v == b'\\')
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Whether the text after a backslash (`x` and a hex pair) would read as
/// an escaped byte: 80-ff or 5c.
fn reads_as_escape(after: &[u8]) -> bool {
    hex_escape(after).is_some_and(|v| v >= 0x80 || v == b'\\')
}

/// The value of `xHH` at the start of `after`, either case.
fn hex_escape(after: &[u8]) -> Option<u8> {
    match after {
        [b'x', hi, lo, ..] => {
            let digit = |c: u8| char::from(c).to_digit(16);
            Some((digit(*hi)? * 16 + digit(*lo)?) as u8)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_and_systemds_escapes_are_kept() {
        for name in [
            "/system.slice/systemd-fsck@dev-disk-by\\x2dlabel-root.service",
            "/user.slice/caf\u{e9}",
            "/a\\b\\x2",
            "",
        ] {
            assert_eq!(escape(name.as_bytes()), name);
            assert_eq!(unescape(name), name.as_bytes());
        }
    }

    /// Issue 48 item 8: `/g\xff` and `/g\xfe` were both `/g\u{fffd}`.
    #[test]
    fn names_that_differ_only_in_invalid_bytes_stay_apart() {
        let names: [&[u8]; 8] = [
            b"/g\xff",
            b"/g\xfe",
            b"/g\\xff",
            b"/g\\x5cxff",
            b"/g\\x5c",
            b"/g\\\xff",
            b"/g\xc3",
            b"/g\\xC3",
        ];
        let escaped: Vec<String> = names.iter().map(|n| escape(n)).collect();
        assert_eq!(escaped[0], "/g\\xff");
        assert_eq!(escaped[1], "/g\\xfe");
        for (name, text) in names.iter().zip(&escaped) {
            assert_eq!(&unescape(text), name, "{text}");
        }
        let mut distinct = escaped.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), names.len(), "{escaped:?}");
    }

    #[test]
    fn every_short_byte_string_comes_back() {
        let alphabet = [b'\\', b'x', b'5', b'c', b'f', 0xff, 0xc3, 0xa9];
        let mut seen = std::collections::HashSet::new();
        for len in 0..=5u32 {
            for mut n in 0..alphabet.len().pow(len) {
                let mut bytes = Vec::new();
                for _ in 0..len {
                    bytes.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                let text = escape(&bytes);
                assert_eq!(unescape(&text), bytes, "{text}");
                assert!(seen.insert(text));
            }
        }
    }
}
