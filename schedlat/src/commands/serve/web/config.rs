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
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
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
            serde_norway::from_str(text).map_err(|e| e.to_string())?
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
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(format!(
                    "basic_auth_users: the password of `{user}` is not a bcrypt hash (make one with `htpasswd -nBC 10 {user}`)"
                ));
            }
        }
        let tls = raw.tls_server_config.map(|t| tls(t, dir)).transpose()?;
        Ok(WebConfig {
            tls,
            users: raw.basic_auth_users,
        })
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

    /// The files this configuration reads besides itself: a change to one
    /// of them (a renewed certificate) is a change to the configuration.
    pub(crate) fn files(&self) -> Vec<&Path> {
        let Some(tls) = &self.tls else {
            return Vec::new();
        };
        let mut files = vec![tls.cert_file.as_path(), tls.key_file.as_path()];
        if let ClientAuth::VerifyIfGiven { ca_file } | ClientAuth::Require { ca_file } =
            &tls.client_auth
        {
            files.push(ca_file);
        }
        files
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
        assert_eq!(config.files().len(), 3);
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
}
