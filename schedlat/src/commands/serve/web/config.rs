//! The web configuration file, in the format Prometheus and its exporters
//! read (prometheus/exporter-toolkit's `--web.config.file`):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt        # relative paths: from the file's folder
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
//!   client_ca_file: ca.crt
//!   min_version: TLS12           # TLS12 or TLS13; max_version too
//! basic_auth_users:
//!   prometheus: $2y$10$...       # bcrypt, as `htpasswd -nBC 10 prometheus` makes it
//! ```
//!
//! A key the format does not have, or one of it schedlat does not
//! implement (inline certificates, cipher suites, curves, allowed SANs,
//! HTTP/2 and headers, rate limits), is refused by name rather than
//! ignored: a setting that silently does nothing is worse than none.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;

/// The file as written; a key it does not list is refused by serde, with
/// the key's name and the keys it could have been.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<serde_norway::Value>,
    rate_limit: Option<serde_norway::Value>,
    #[serde(default, deserialize_with = "unique_users")]
    basic_auth_users: BTreeMap<String, String>,
}

/// The costs a hash may have: 4 is bcrypt's least; each step doubles the
/// time of a check, which runs one at a time for every client, so a cost
/// past 16 (5 s on a 2020s core, a cost of 31 days) would hold every
/// login behind it.
pub(crate) const COSTS: std::ops::RangeInclusive<u32> = 4..=16;

/// Above this cost a first login takes more than a few tenths of a second
/// of CPU, all logins waiting behind it: said at load.
const SLOW_COST: u32 = 12;

/// At most this much of a user name is repeated in a message.
const NAME_SHOWN: usize = 64;

/// A user name as messages show it: control characters replaced, cut to
/// [`NAME_SHOWN`] characters (a 1 MiB name is not repeated whole).
pub(crate) fn shown(user: &str) -> String {
    let printable = crate::output::escape::printable(user);
    match printable.char_indices().nth(NAME_SHOWN) {
        Some((cut, _)) => format!("{}…", &printable[..cut]),
        None => printable.into_owned(),
    }
}

/// `basic_auth_users` with each user once: YAML takes the last of two
/// equal keys, which would silently drop a password the operator wrote.
fn unique_users<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    struct Users;
    impl<'de> serde::de::Visitor<'de> for Users {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of user names to bcrypt hashes")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut users = BTreeMap::new();
            while let Some((user, hash)) = map.next_entry::<String, String>()? {
                if users.contains_key(&user) {
                    return Err(serde::de::Error::custom(format!(
                        "basic_auth_users: `{}` is listed twice: keep one",
                        shown(&user)
                    )));
                }
                users.insert(user, hash);
            }
            Ok(users)
        }
    }
    deserializer.deserialize_any(Users)
}

/// The cost of `hash` if it is a bcrypt hash that a password can match:
/// the `$2y$`/`$2b$`/`$2a$` form, a cost in [`COSTS`], and a salt and
/// digest that decode (a digest with a character out of bcrypt's base64
/// never compares equal to a computed one). The error says what to do.
pub(crate) fn hash_cost(user: &str, hash: &str) -> Result<u32, String> {
    use base64::Engine as _;
    let user = shown(user);
    let remake = format!("make one with `htpasswd -nBC 10 {user}`");
    let Ok(parts) = hash.parse::<bcrypt::HashParts>() else {
        return Err(format!(
            "basic_auth_users: the password of `{user}` is not a bcrypt hash ({remake})"
        ));
    };
    let cost = parts.get_cost();
    if !COSTS.contains(&cost) {
        return Err(format!(
            "basic_auth_users: the hash of `{user}` has cost {cost}, outside {}..{} ({remake})",
            COSTS.start(),
            COSTS.end()
        ));
    }
    // $2y$CC$ then 22 characters of salt and 31 of digest.
    let encoded = &hash[hash.len() - 53..];
    let (salt, digest) = encoded.split_at(22);
    let decodes = |part: &str, len: usize| {
        bcrypt::BASE_64
            .decode(part)
            .is_ok_and(|bytes| bytes.len() == len)
    };
    if !decodes(salt, 16) || !decodes(digest, 23) {
        return Err(format!(
            "basic_auth_users: the hash of `{user}` can never match a password (its salt or digest is not bcrypt's base64; {remake})"
        ));
    }
    Ok(cost)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    // The format's keys that schedlat refuses by name.
    cert: Option<serde_norway::Value>,
    key: Option<serde_norway::Value>,
    client_ca: Option<serde_norway::Value>,
    cipher_suites: Option<serde_norway::Value>,
    curve_preferences: Option<serde_norway::Value>,
    prefer_server_cipher_suites: Option<serde_norway::Value>,
    client_allowed_sans: Option<serde_norway::Value>,
}

/// A checked configuration, its paths made absolute; the certificates are
/// read by tls.rs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct WebConfig {
    /// None: plain HTTP.
    pub tls: Option<TlsSettings>,
    /// User name to bcrypt hash; empty: no basic authentication.
    pub users: BTreeMap<String, String>,
}

/// `tls_server_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

/// `client_auth_type`, of the values exporter-toolkit takes the ones that
/// verify a certificate against `client_ca_file` (or ask for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    NoClientCert,
    /// `VerifyClientCertIfGiven`: a client without a certificate is let in
    /// (basic auth may still be asked).
    VerifyIfGiven {
        ca_file: PathBuf,
    },
    /// `RequireAndVerifyClientCert`: no handshake without a certificate
    /// the CA signed.
    Require {
        ca_file: PathBuf,
    },
}

/// `min_version` and `max_version`, by exporter-toolkit's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TlsVersion {
    Tls12,
    Tls13,
}

impl fmt::Debug for WebConfig {
    // The hashes stay out of logs and panics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls)
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebConfig {
    /// Parses `text`; relative paths are taken from `dir` (the file's
    /// folder, as exporter-toolkit does). The error says what to change.
    pub(crate) fn parse(text: &str, dir: &Path) -> Result<WebConfig, String> {
        // An empty file is a valid configuration: plain HTTP, no auth.
        let raw: Raw = if text.trim().is_empty() {
            Raw::default()
        } else {
            // The parser's message repeats keys and values: shown cut.
            serde_norway::from_str(text).map_err(|e| shown_error(&e.to_string()))?
        };
        for (key, set) in [
            ("http_server_config", raw.http_server_config.is_some()),
            ("rate_limit", raw.rate_limit.is_some()),
        ] {
            if set {
                return Err(format!(
                    "{key} is not implemented by schedlat (POST /snapshot has its own rate limit): remove it"
                ));
            }
        }
        for (user, hash) in &raw.basic_auth_users {
            hash_cost(user, hash)?;
        }
        let tls = raw.tls_server_config.map(|t| tls(t, dir)).transpose()?;
        Ok(WebConfig {
            tls,
            users: raw.basic_auth_users,
        })
    }

    /// What is worth a line at load: users whose first login is slow.
    pub(crate) fn warnings(&self) -> Vec<String> {
        (self.users.iter())
            .filter_map(|(user, hash)| Some((user, hash.parse::<bcrypt::HashParts>().ok()?.get_cost())))
            .filter(|(_, cost)| *cost > SLOW_COST)
            .map(|(user, cost)| {
                format!(
                    "the hash of `{}` has cost {cost}: each check takes {}x a cost-{SLOW_COST} one, and every login waits behind it (cost 10-{SLOW_COST} is usual)",
                    shown(user),
                    1u32 << (cost - SLOW_COST)
                )
            })
            .collect()
    }

    /// Whether every client must prove who it is: a user and password, or
    /// a client certificate the CA signed.
    pub(crate) fn authenticates(&self) -> bool {
        !self.users.is_empty()
            || self
                .tls
                .as_ref()
                .is_some_and(|t| matches!(t.client_auth, ClientAuth::Require { .. }))
    }

    /// What the endpoint asks of clients, for serve's first line.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(tls) = &self.tls {
            parts.push(match tls.client_auth {
                ClientAuth::NoClientCert => "TLS".to_string(),
                ClientAuth::VerifyIfGiven { .. } => {
                    "TLS, client certificates verified if given".to_string()
                }
                ClientAuth::Require { .. } => "TLS, client certificate required".to_string(),
            });
        }
        if !self.users.is_empty() {
            parts.push(format!(
                "basic auth ({} user{})",
                self.users.len(),
                if self.users.len() == 1 { "" } else { "s" }
            ));
        }
        if parts.is_empty() {
            "no TLS, no authentication".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// A parser's message, at most 300 characters, control characters
/// replaced: it may quote a key or value of any length.
fn shown_error(e: &str) -> String {
    let printable = crate::output::escape::printable(e);
    match printable.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &printable[..cut]),
        None => printable.into_owned(),
    }
}

fn tls(t: RawTls, dir: &Path) -> Result<TlsSettings, String> {
    for (key, set, instead) in [
        ("cert", t.cert.is_some(), "name the file with cert_file"),
        ("key", t.key.is_some(), "name the file with key_file"),
        (
            "client_ca",
            t.client_ca.is_some(),
            "name the file with client_ca_file",
        ),
        (
            "cipher_suites",
            t.cipher_suites.is_some(),
            "rustls offers only suites with forward secrecy and AEAD",
        ),
        (
            "curve_preferences",
            t.curve_preferences.is_some(),
            "rustls picks among X25519 and the NIST curves",
        ),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
            "rustls always prefers the server's order",
        ),
        (
            "client_allowed_sans",
            t.client_allowed_sans.is_some(),
            "give these clients a CA of their own in client_ca_file",
        ),
    ] {
        if set {
            return Err(format!(
                "tls_server_config.{key} is not implemented by schedlat ({instead}): remove it"
            ));
        }
    }
    let resolve = |p: PathBuf| if p.is_absolute() { p } else { dir.join(p) };
    let (Some(cert_file), Some(key_file)) = (t.cert_file, t.key_file) else {
        return Err("tls_server_config needs both cert_file and key_file".to_string());
    };
    let ca_file = t.client_ca_file.map(resolve);
    let client_auth = match (t.client_auth_type.as_deref(), ca_file) {
        (None | Some("NoClientCert"), None) => ClientAuth::NoClientCert,
        // exporter-toolkit: a CA without a type verifies given certificates.
        (None, Some(ca_file)) => ClientAuth::VerifyIfGiven { ca_file },
        (Some("NoClientCert"), Some(_)) => {
            return Err(
                "tls_server_config: client_ca_file is set but client_auth_type is NoClientCert: remove one".to_string(),
            );
        }
        (Some("VerifyClientCertIfGiven"), Some(ca_file)) => ClientAuth::VerifyIfGiven { ca_file },
        (Some("RequireAndVerifyClientCert"), Some(ca_file)) => ClientAuth::Require { ca_file },
        (Some(kind @ ("VerifyClientCertIfGiven" | "RequireAndVerifyClientCert")), None) => {
            return Err(format!(
                "tls_server_config: client_auth_type {kind} needs client_ca_file (the CA that signs the clients' certificates)"
            ));
        }
        (Some(kind @ ("RequestClientCert" | "RequireAnyClientCert")), _) => {
            return Err(format!(
                "tls_server_config: client_auth_type {kind} accepts certificates nobody verified, and is not implemented by schedlat: use RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file"
            ));
        }
        (Some(other), _) => {
            return Err(format!(
                "tls_server_config: client_auth_type `{other}`: use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ));
        }
    };
    let min_version = version("min_version", t.min_version.as_deref(), TlsVersion::Tls12)?;
    let max_version = version("max_version", t.max_version.as_deref(), TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err("tls_server_config: min_version is above max_version".to_string());
    }
    Ok(TlsSettings {
        cert_file: resolve(cert_file),
        key_file: resolve(key_file),
        client_auth,
        min_version,
        max_version,
    })
}

fn version(key: &str, value: Option<&str>, default: TlsVersion) -> Result<TlsVersion, String> {
    match value {
        None => Ok(default),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(old @ ("TLS10" | "TLS11")) => Err(format!(
            "tls_server_config.{key}: {old} is not offered (TLS 1.2 is the oldest schedlat speaks): use TLS12 or TLS13"
        )),
        Some(other) => Err(format!(
            "tls_server_config.{key}: `{other}`: use TLS12 or TLS13"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig, String> {
        WebConfig::parse(text, Path::new("/etc/schedlat"))
    }

    /// A bcrypt hash of "s3cret" at cost 4, as `htpasswd -nbBC 4` makes it.
    const HASH: &str = "$2y$04$IDHNiQaJchaSn8USE71NZOMfpE3N7VXNqqSrddijza4js9hjFSzBu";

    #[test]
    fn an_empty_file_is_plain_http_without_auth() {
        for text in ["", "\n", "# nothing\n"] {
            let config = parse(text).unwrap();
            assert!(config.tls.is_none() && config.users.is_empty(), "{text:?}");
            assert!(!config.authenticates());
        }
    }

    #[test]
    fn tls_and_users_are_read_with_paths_from_the_files_folder() {
        let config = parse(&format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /abs/server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\nbasic_auth_users:\n  prometheus: {HASH}\n"
        ))
        .unwrap();
        let tls = config.tls.as_ref().unwrap();
        assert_eq!(tls.cert_file, Path::new("/etc/schedlat/server.crt"));
        assert_eq!(tls.key_file, Path::new("/abs/server.key"));
        assert_eq!(
            tls.client_auth,
            ClientAuth::Require {
                ca_file: "/etc/schedlat/ca.crt".into()
            }
        );
        assert_eq!(
            (tls.min_version, tls.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        assert!(config.authenticates());
        assert_eq!(
            config.describe(),
            "TLS, client certificate required, basic auth (1 user)"
        );
        // The hash never shows in Debug.
        assert!(!format!("{config:?}").contains(HASH));
    }

    #[test]
    fn only_verified_client_certificates_or_users_authenticate() {
        let tls = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        assert!(!parse(tls).unwrap().authenticates());
        let given = parse(&format!("{tls}  client_ca_file: ca\n")).unwrap();
        assert!(matches!(
            given.tls.as_ref().unwrap().client_auth,
            ClientAuth::VerifyIfGiven { .. }
        ));
        assert!(!given.authenticates());
        assert!(
            parse(&format!("basic_auth_users:\n  a: {HASH}\n"))
                .unwrap()
                .authenticates()
        );
    }

    #[test]
    fn unknown_and_unimplemented_keys_are_refused_by_name() {
        let tls = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        for (text, named) in [
            ("basic_auth_user: {}\n", "basic_auth_user"),
            ("tls_server_config:\n  certfile: c\n", "certfile"),
            (
                "http_server_config:\n  http2: false\n",
                "http_server_config",
            ),
            ("rate_limit:\n  interval: 1s\n", "rate_limit"),
            (
                &format!("{tls}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
                "cipher_suites",
            ),
            (
                &format!("{tls}  curve_preferences: [X25519]\n"),
                "curve_preferences",
            ),
            (
                &format!("{tls}  client_allowed_sans: [a]\n"),
                "client_allowed_sans",
            ),
            (
                &format!("{tls}  prefer_server_cipher_suites: true\n"),
                "prefer_server_cipher_suites",
            ),
            (
                "tls_server_config:\n  cert: x\n  key: y\n",
                "tls_server_config.cert",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAnyClientCert\n"),
                "RequireAnyClientCert",
            ),
            (&format!("{tls}  client_auth_type: Bogus\n"), "`Bogus`"),
            (&format!("{tls}  min_version: TLS10\n"), "TLS10"),
            (&format!("{tls}  max_version: SSL3\n"), "`SSL3`"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(named), "{text:?}: {e}");
        }
    }

    #[test]
    fn inconsistent_settings_say_what_to_change() {
        let tls = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        for (text, says) in [
            (
                "tls_server_config:\n  cert_file: c\n",
                "both cert_file and key_file",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
                "needs client_ca_file",
            ),
            (
                &format!("{tls}  client_auth_type: NoClientCert\n  client_ca_file: ca\n"),
                "remove one",
            ),
            (
                &format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"),
                "above max_version",
            ),
            (
                "basic_auth_users:\n  alice: plaintext\n",
                "htpasswd -nBC 10 alice",
            ),
            ("basic_auth_users: [a, b]\n", "basic_auth_users"),
            ("- a\n", "expected"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    /// Issue 48, 7: hashes that can never match were taken silently, and a
    /// cost-31 one held the only check for days. Now refused at load, with
    /// what to do; costs above 12 are said.
    #[test]
    fn hashes_that_cannot_match_and_extreme_costs_are_refused() {
        let good = HASH;
        let with_cost = |cost: &str| good.replacen("$04$", &format!("${cost}$"), 1);
        for (hash, says) in [
            (with_cost("03"), "cost 3, outside 4..16"),
            (with_cost("17"), "cost 17, outside 4..16"),
            (with_cost("31"), "cost 31, outside 4..16"),
            (with_cost("99"), "cost 99, outside 4..16"),
            // A character outside bcrypt's base64 in the digest.
            (format!("{}!", &good[..good.len() - 1]), "can never match"),
            // Bits past the digest's end: never equal to a computed one.
            (format!("{}z", &good[..good.len() - 1]), "can never match"),
            ("$2y$10$short".to_string(), "not a bcrypt hash"),
        ] {
            let e = parse(&format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap_err();
            assert!(
                e.contains(says) && e.contains("htpasswd -nBC 10 alice"),
                "{hash}: {e}"
            );
        }
        let slow = parse(&format!(
            "basic_auth_users:\n  alice: '{}'\n",
            with_cost("14")
        ))
        .unwrap();
        let warnings = slow.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("`alice` has cost 14: each check takes 4x"),
            "{warnings:?}"
        );
        assert!(
            parse(&format!("basic_auth_users:\n  a: {HASH}\n"))
                .unwrap()
                .warnings()
                .is_empty()
        );
    }

    /// Issue 48, 7: YAML keeps the last of two equal keys, so a user
    /// listed twice silently lost one password.
    #[test]
    fn a_user_listed_twice_is_refused() {
        let e = parse(&format!(
            "basic_auth_users:\n  alice: {HASH}\n  bob: {HASH}\n  alice: {HASH}\n"
        ))
        .unwrap_err();
        assert!(e.contains("`alice` is listed twice"), "{e}");
        assert!(parse("basic_auth_users:\n").unwrap().users.is_empty());
    }

    /// Issue 48, 15: a 1 MiB user name was repeated whole in the error.
    #[test]
    fn a_long_user_name_is_not_echoed_whole() {
        let name = "n".repeat(1 << 20);
        // YAML's explicit key: an implicit one is at most 1,024 characters.
        let e = parse(&format!("basic_auth_users:\n  ? {name}\n  : plaintext\n")).unwrap_err();
        assert!(e.len() < 500, "{} bytes", e.len());
        assert!(
            e.contains(&format!("`{}…`", "n".repeat(NAME_SHOWN))),
            "{}",
            &e[..200.min(e.len())]
        );
        let e = parse(&format!("{name}: 1\n")).unwrap_err();
        assert!(e.len() < 1000, "{} bytes", e.len());
        let e = parse("basic_auth_users:\n  \"a\\e[2Jb\": plaintext\n").unwrap_err();
        assert!(!e.contains('\x1b'), "{e:?}");
    }
}
