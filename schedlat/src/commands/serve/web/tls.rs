//! `tls_server_config` made into a rustls server configuration: the
//! certificate chain and key read from their files, the protocol versions,
//! and the client certificate verifier. rustls on the ring provider: TLS
//! 1.2 and 1.3 with forward-secret AEAD suites only.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rustls::{
    RootCertStore, ServerConfig, SupportedProtocolVersion,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

use super::{
    config::{ClientAuth, TlsSettings, TlsVersion},
    validity,
};
use crate::sys::whole_file::{self, Stamp};

/// The most of a PEM file read: a long chain or a distribution's whole
/// CA bundle is a few hundred kilobytes.
pub(crate) const MAX_PEM_BYTES: u64 = 4 << 20;

/// A server configuration made, with what went into it.
pub(crate) struct Made {
    pub config: Arc<ServerConfig>,
    /// The files read, each with its stamp when read.
    pub read: Vec<(PathBuf, Stamp)>,
    /// What the operator should hear: a certificate expired, not yet
    /// valid, or about to expire.
    pub warnings: Vec<String>,
}

/// The content of the PEM file `file` (`key` names it in the error): a
/// regular file under [`MAX_PEM_BYTES`], read whole while it stood still
/// (sys/whole_file.rs), with its stamp.
pub(crate) fn read_pem(key: &str, file: &Path) -> Result<(Vec<u8>, Stamp), String> {
    whole_file::read_steady(file, MAX_PEM_BYTES)
        .map_err(|e| format!("{key} {}: cannot read it: {e}", file.display()))
}

/// The private key of the PEM file `file`, `key` naming it in the error.
pub(crate) fn private_key(
    key: &str,
    file: &Path,
) -> Result<(PrivateKeyDer<'static>, Stamp), String> {
    let (pem, stamp) = read_pem(key, file)?;
    let der = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| format!("{key} {}: {e}", file.display()))?;
    Ok((der, stamp))
}

/// The server configuration of `settings`; the error names the file and
/// what is wrong with it. `now_unix`: the time the certificate's dates
/// are held against.
pub(crate) fn server_config(settings: &TlsSettings, now_unix: i64) -> Result<Made, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut read = Vec::new();
    let (chain, stamp) = certificates_stamped("cert_file", &settings.cert_file)?;
    read.push((settings.cert_file.clone(), stamp));
    let (key, stamp) = private_key("key_file", &settings.key_file)?;
    read.push((settings.key_file.clone(), stamp));
    let warnings = validity::warning(&chain[0], now_unix)
        .map(|w| format!("cert_file {}: {w}", settings.cert_file.display()))
        .into_iter()
        .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings.min_version, settings.max_version))
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match &settings.client_auth {
        ClientAuth::NoClientCert => builder.with_no_client_auth(),
        ClientAuth::VerifyIfGiven { ca_file } | ClientAuth::Require { ca_file } => {
            let (roots, stamp) = roots(ca_file)?;
            read.push((ca_file.clone(), stamp));
            let roots = Arc::new(roots);
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
    Ok(Made {
        config: Arc::new(config),
        read,
        warnings,
    })
}

/// Every certificate of a PEM file, `key` naming it in the error; none is
/// an error. Also the OTLP push's client chain and CA bundle.
pub(crate) fn certificates(key: &str, file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    certificates_stamped(key, file).map(|(chain, _)| chain)
}

fn certificates_stamped(
    key: &str,
    file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, Stamp), String> {
    let (pem, stamp) = read_pem(key, file)?;
    let chain: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{key} {}: {e}", file.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{key} {}: no PEM certificate in it",
            file.display()
        ));
    }
    Ok((chain, stamp))
}

fn roots(ca_file: &Path) -> Result<(RootCertStore, Stamp), String> {
    let mut roots = RootCertStore::empty();
    let (chain, stamp) = certificates_stamped("client_ca_file", ca_file)?;
    for cert in chain {
        roots
            .add(cert)
            .map_err(|e| format!("client_ca_file {}: {e}", ca_file.display()))?;
    }
    Ok((roots, stamp))
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
        let e = server_config(&settings(&dir.join("none.crt")), 0)
            .err()
            .unwrap();
        assert!(e.starts_with("cert_file ") && e.contains("none.crt"), "{e}");
        let e = server_config(&settings(&empty), 0).err().unwrap();
        assert!(e.contains("no PEM certificate"), "{e}");
        // Regression: a link to /dev/zero aborted serve ("memory
        // allocation of 4294967296 bytes failed").
        let e = server_config(&settings(Path::new("/dev/zero")), 0)
            .err()
            .unwrap();
        assert!(
            e.contains("/dev/zero: cannot read it: it is a device"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
