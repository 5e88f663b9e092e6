//! `https://` OTLP endpoints: the client side of TLS for the push, on the
//! same rustls (ring provider) as serve's own listener. The collector's
//! certificate is checked against `--otlp-certificate` (a PEM bundle, as
//! OTEL_EXPORTER_OTLP_CERTIFICATE names it) or else the system's CA bundle;
//! with `--otlp-client-certificate` and `--otlp-client-key` serve presents
//! a certificate of its own to a collector that asks (mutual TLS).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer},
};

use super::web::tls::{certificates, private_key};

/// Where distributions keep the system's CA bundle: Debian and Ubuntu,
/// Fedora and RHEL, Alpine and others, openSUSE.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The client configuration that trusts `ca_file`, or the system's
/// bundle, and presents `identity` (certificate chain, key) if given; the
/// error says which option, which file and what is wrong.
pub(super) fn client_config(
    ca_file: Option<&Path>,
    identity: Option<&(PathBuf, PathBuf)>,
) -> Result<Arc<ClientConfig>, String> {
    let identity = identity.map(client_identity).transpose()?;
    let roots = roots(ca_file).map_err(|e| format!("--otlp-certificate: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
            format!("--otlp-client-certificate and --otlp-client-key do not match: {e}")
        })?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificate chain and private key of `--otlp-client-certificate`
/// and `--otlp-client-key`.
fn client_identity(
    (cert_file, key_file): &(PathBuf, PathBuf),
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain = certificates("--otlp-client-certificate", cert_file)?;
    let (key, _) = private_key("--otlp-client-key", key_file)?;
    Ok((chain, key))
}

/// The CAs of `ca_file`, or of the system's bundle.
fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let file = match ca_file {
        Some(file) => file,
        None => SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
            .ok_or_else(|| {
                format!(
                    "no system CA bundle ({}): give the collector's CA with --otlp-certificate",
                    SYSTEM_BUNDLES.join(", ")
                )
            })?,
    };
    let mut roots = RootCertStore::empty();
    // A system bundle may hold a certificate rustls cannot parse: skip it,
    // as long as one CA is left.
    let (added, _) = roots.add_parsable_certificates(certificates("CA file", file)?);
    if added == 0 {
        return Err(format!("{}: no CA certificate in it", file.display()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate (only parsed here, never verified).
    const TEST_CERTIFICATE: &str = "\
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
    fn a_file_without_certificates_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("schedlat-otlp-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(Some(&empty), None).unwrap_err();
        assert!(
            e.starts_with("--otlp-certificate") && e.contains("empty.pem"),
            "{e}"
        );
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = client_config(Some(&dir.join("missing.pem")), None).unwrap_err();
        assert!(e.contains("missing.pem"), "{e}");
        // The client's files are read first, each error naming its option.
        let no_cert = (empty.clone(), empty.clone());
        let e = client_config(Some(&empty), Some(&no_cert)).unwrap_err();
        assert!(
            e.starts_with("--otlp-client-certificate") && e.contains("empty.pem"),
            "{e}"
        );
        let certificate = dir.join("client.crt");
        std::fs::write(&certificate, TEST_CERTIFICATE).unwrap();
        let no_key = (certificate, empty.clone());
        let e = client_config(Some(&empty), Some(&no_key)).unwrap_err();
        assert!(
            e.starts_with("--otlp-client-key") && e.contains("empty.pem"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
