//! `tls_server_config` made into a rustls server configuration: the
//! certificate chain and key read from their files, the protocol versions,
//! and the client certificate verifier. rustls on the ring provider: TLS
//! 1.2 and 1.3 with forward-secret AEAD suites only.

use std::{path::Path, sync::Arc};

use rustls::{
    RootCertStore, ServerConfig, SupportedProtocolVersion,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

use super::config::{ClientAuth, TlsSettings, TlsVersion};

/// The server configuration of `settings`; the error names the file and
/// what is wrong with it.
pub(crate) fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates("cert_file", &settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|e| format!("key_file {}: {e}", settings.key_file.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings.min_version, settings.max_version))
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match &settings.client_auth {
        ClientAuth::NoClientCert => builder.with_no_client_auth(),
        ClientAuth::VerifyIfGiven { ca_file } | ClientAuth::Require { ca_file } => {
            let roots = Arc::new(roots(ca_file)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let verifier = if matches!(settings.client_auth, ClientAuth::VerifyIfGiven { .. }) {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("client_ca_file {}: {e}", ca_file.display()))?,
            )
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        format!(
            "cert_file {} and key_file {}: {e}",
            settings.cert_file.display(),
            settings.key_file.display()
        )
    })?;
    // serve speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Every certificate of a PEM file, `key` naming it in the error; none is
/// an error. Also the OTLP push's client chain and CA bundle.
pub(crate) fn certificates(key: &str, file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<_> = CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{key} {}: {e}", file.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{key} {}: no PEM certificate in it",
            file.display()
        ));
    }
    Ok(chain)
}

fn roots(ca_file: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certificates("client_ca_file", ca_file)? {
        roots
            .add(cert)
            .map_err(|e| format!("client_ca_file {}: {e}", ca_file.display()))?;
    }
    Ok(roots)
}

fn versions(min: TlsVersion, max: TlsVersion) -> Vec<&'static SupportedProtocolVersion> {
    [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (min..=max).contains(v))
    .map(|(_, p)| p)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_between_min_and_max() {
        use TlsVersion::{Tls12, Tls13};
        assert_eq!(versions(Tls12, Tls13).len(), 2);
        assert_eq!(versions(Tls13, Tls13), vec![&rustls::version::TLS13]);
        assert_eq!(versions(Tls12, Tls12), vec![&rustls::version::TLS12]);
    }

    #[test]
    fn a_missing_or_empty_certificate_file_is_named() {
        let dir = std::env::temp_dir().join(format!("schedlat-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let settings = |cert: &Path| TlsSettings {
            cert_file: cert.to_path_buf(),
            key_file: dir.join("none.key"),
            client_auth: ClientAuth::NoClientCert,
            min_version: TlsVersion::Tls12,
            max_version: TlsVersion::Tls13,
        };
        let e = server_config(&settings(&dir.join("none.crt"))).unwrap_err();
        assert!(e.starts_with("cert_file ") && e.contains("none.crt"), "{e}");
        let e = server_config(&settings(&empty)).unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
