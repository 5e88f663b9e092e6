//! Certificates made by openssl for a test run (tests/web.rs,
//! tests/otlp.rs): a CA, a server's for 127.0.0.1 and localhost, a
//! client's, and a stranger CA's client.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

/// A folder of certificates and configurations, removed when dropped.
pub(crate) struct Pki(pub(crate) PathBuf);

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pki {
    /// `ca` signs `server` (for 127.0.0.1 and localhost) and `client`;
    /// `stranger-ca` signs `stranger`.
    pub(crate) fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("schedlat-pki-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let pki = Pki(dir);
        for ca in ["ca", "stranger-ca"] {
            openssl(
                &pki.0,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN=schedlat test {ca}"),
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.crt"),
                ],
            );
        }
        for (leaf, ca, usage) in [
            (
                "server",
                "ca",
                "serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost",
            ),
            ("client", "ca", "clientAuth"),
            ("stranger", "stranger-ca", "clientAuth"),
        ] {
            fs::write(
                pki.0.join(format!("{leaf}.ext")),
                format!("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n"),
            )
            .unwrap();
            openssl(
                &pki.0,
                &[
                    "req",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-subj",
                    &format!("/CN={leaf}"),
                    "-keyout",
                    &format!("{leaf}.key"),
                    "-out",
                    &format!("{leaf}.csr"),
                ],
            );
            openssl(
                &pki.0,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{leaf}.csr"),
                    "-CA",
                    &format!("{ca}.crt"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    &format!("{leaf}.ext"),
                    "-out",
                    &format!("{leaf}.crt"),
                ],
            );
        }
        pki
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}
