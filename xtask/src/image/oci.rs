//! The OCI image layout (image-spec v1.1), written by hand into one tar
//! archive (`oci-archive`, what `podman load`, `skopeo copy oci-archive:`
//! and `ctr image import` read): `oci-layout`, `index.json`, and the
//! layer, config and manifest blobs under `blobs/sha256/`, each named by
//! its digest. No registry and no container engine are needed to build it.

use std::io::Write;

use anyhow::Result;
use flate2::{Compression, write::GzEncoder};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What the image's config says besides its layer.
pub(super) struct Config {
    /// `uid:gid` the container runs as unless told otherwise.
    pub user: String,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub exposed_port: u16,
    /// OCI annotations, also the config's labels (`podman inspect` shows
    /// these).
    pub labels: Vec<(String, String)>,
    /// The name `podman load` gives the image (`org.opencontainers.image.ref.name`).
    pub reference: String,
}

struct Blob {
    media_type: &'static str,
    bytes: Vec<u8>,
}

impl Blob {
    fn digest(&self) -> String {
        format!("sha256:{}", hex(&Sha256::digest(&self.bytes)))
    }

    fn descriptor(&self) -> Value {
        json!({
            "mediaType": self.media_type,
            "digest": self.digest(),
            "size": self.bytes.len(),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The archive's bytes, for an uncompressed layer tar; also the layer's
/// compressed size, for the build's report.
pub(super) fn archive(layer_tar: &[u8], config: &Config) -> Result<(Vec<u8>, usize)> {
    let diff_id = format!("sha256:{}", hex(&Sha256::digest(layer_tar)));
    // gzip without a name or timestamp (flate2 writes neither): the same
    // layer gives the same digest.
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(layer_tar)?;
    let layer = Blob {
        media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
        bytes: gz.finish()?,
    };
    let labels: serde_json::Map<String, Value> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    // Epoch 0 rather than the build time: reproducible digests.
    let created = "1970-01-01T00:00:00Z";
    let image_config = Blob {
        media_type: "application/vnd.oci.image.config.v1+json",
        bytes: serde_json::to_vec(&json!({
            "created": created,
            "architecture": oci_architecture(),
            "os": "linux",
            "config": {
                "User": config.user,
                "Entrypoint": config.entrypoint,
                "Cmd": config.cmd,
                "ExposedPorts": { format!("{}/tcp", config.exposed_port): {} },
                "WorkingDir": "/",
                "Labels": labels,
            },
            "rootfs": { "type": "layers", "diff_ids": [diff_id] },
            "history": [{ "created": created, "created_by": "cargo xtask image" }],
        }))?,
    };
    let manifest = Blob {
        media_type: "application/vnd.oci.image.manifest.v1+json",
        bytes: serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": image_config.descriptor(),
            "layers": [layer.descriptor()],
            "annotations": labels,
        }))?,
    };
    let mut manifest_descriptor = manifest.descriptor();
    manifest_descriptor["annotations"] =
        json!({ "org.opencontainers.image.ref.name": config.reference });
    manifest_descriptor["platform"] = json!({ "architecture": oci_architecture(), "os": "linux" });
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_descriptor],
    }))?;

    let mut out = tar::Builder::new(Vec::new());
    let mut put = |path: &str, bytes: &[u8]| -> Result<()> {
        let mut header = tar::Header::new_ustar();
        header.set_mode(0o644);
        header.set_size(bytes.len() as u64);
        header.set_mtime(0);
        out.append_data(&mut header, path, bytes)?;
        Ok(())
    };
    put("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    put("index.json", &index)?;
    for blob in [&layer, &image_config, &manifest] {
        let name = blob.digest().replace(':', "/");
        put(&format!("blobs/{name}"), &blob.bytes)?;
    }
    let compressed = layer.bytes.len();
    Ok((out.into_inner()?, compressed))
}

/// GOARCH spelling, as the image spec asks.
fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
