//! `[offload]` as the uploader uses it: checked that it names a store,
//! with the vehicle's name resolved.

use std::path::PathBuf;

use edgerec_config::{Addressing, OffloadConfig, Sse};

use crate::OffloadError;

/// What the uploader needs of `[offload]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The store's URL, without a trailing `/`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The region signed into requests.
    pub region: String,
    /// Path-style or virtual-hosted URLs.
    pub addressing: Addressing,
    /// The key template.
    pub key_template: String,
    /// This vehicle's name in keys.
    pub vehicle: String,
    /// The credentials file and its profile.
    pub credentials_file: PathBuf,
    /// The profile read from it.
    pub profile: String,
    /// Part size of multipart uploads, bytes.
    pub part_size: u64,
    /// Parts sent at once.
    pub concurrency: usize,
    /// CA certificates (PEM) for the store's certificate; empty = the
    /// system's.
    pub ca_file: PathBuf,
    /// The client certificate (PEM) for mutual TLS, and its key; empty =
    /// none.
    pub client_cert: PathBuf,
    /// The client certificate's private key (PEM, owner-only).
    pub client_key: PathBuf,
    /// Server-side encryption asked for each object.
    pub sse: Sse,
    /// The KMS key of SSE-KMS; empty = the store's default.
    pub sse_kms_key_id: String,
    /// The upload journal's directory; empty = none.
    pub journal_dir: PathBuf,
    /// Bytes per second all requests together may send; 0 = no cap.
    pub max_rate: u64,
    /// When the agent may send.
    pub link: crate::link::LinkPolicy,
}

impl Settings {
    /// Whether the store's ETags are the MD5s S3 defines (of the object,
    /// or of its parts' MD5s for a multipart upload): true unless SSE-KMS
    /// is asked, under which S3's ETags are opaque.
    pub fn etag_is_md5(&self) -> bool {
        self.sse != Sse::Kms
    }

    /// The `x-amz-server-side-encryption*` headers each upload carries.
    pub fn sse_headers(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.sse != Sse::None {
            out.push(("x-amz-server-side-encryption", self.sse.as_str().to_owned()));
        }
        if self.sse == Sse::Kms && !self.sse_kms_key_id.is_empty() {
            out.push((
                "x-amz-server-side-encryption-aws-kms-key-id",
                self.sse_kms_key_id.clone(),
            ));
        }
        out
    }

    /// The settings of `cfg`, or why it names no store.
    pub fn from_config(cfg: &OffloadConfig) -> Result<Settings, OffloadError> {
        if cfg.endpoint.is_empty() || cfg.bucket.is_empty() {
            return Err(OffloadError::NotConfigured(
                "no object store: set offload.endpoint and offload.bucket in the configuration"
                    .to_owned(),
            ));
        }
        let vehicle = if cfg.vehicle_id.is_empty() {
            host_name()
        } else {
            cfg.vehicle_id.clone()
        };
        Ok(Settings {
            endpoint: cfg.endpoint.clone(),
            bucket: cfg.bucket.clone(),
            region: cfg.region.clone(),
            addressing: cfg.addressing,
            key_template: cfg.key_template.clone(),
            vehicle,
            credentials_file: cfg.credentials_file.clone(),
            profile: cfg.profile.clone(),
            part_size: cfg.part_size,
            concurrency: cfg.concurrency.max(1) as usize,
            ca_file: cfg.ca_file.clone(),
            client_cert: cfg.client_cert.clone(),
            client_key: cfg.client_key.clone(),
            sse: cfg.sse,
            sse_kms_key_id: cfg.sse_kms_key_id.clone(),
            journal_dir: cfg.journal_dir.clone(),
            max_rate: cfg.max_rate,
            link: crate::link::LinkPolicy {
                windows: cfg.windows.clone(),
                interfaces: cfg.interfaces.clone(),
                metered: cfg.metered_interfaces.clone(),
            },
        })
    }
}

/// This machine's host name, as key text (letters, digits, `.`, `_`,
/// `-`; anything else becomes `_`), or `vehicle` when it has none.
pub fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        "vehicle".to_owned()
    } else {
        name
    }
}
