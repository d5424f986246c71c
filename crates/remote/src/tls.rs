//! The link's TLS: the broker's certificate must chain to `ca_file` (or
//! the system's CAs), and the vehicle shows its own certificate (mutual
//! TLS, the link's perimeter with the broker's ACL). rustls on ring, as
//! offload's; every file bounded before it is read, the key owner-only.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::{RemoteError, Settings};

/// A private key file larger than this is refused unread.
const MAX_KEY_FILE: u64 = 64 << 10;

/// The rustls configuration the link connects with.
pub fn client_config(s: &Settings) -> Result<Arc<rustls::ClientConfig>, RemoteError> {
    let mut roots = rustls::RootCertStore::empty();
    if s.ca_file.as_os_str().is_empty() {
        let bundle = edgerec_offload::s3::SYSTEM_CAS
            .iter()
            .map(Path::new)
            .find(|p| p.exists());
        let Some(bundle) = bundle else {
            return Err(RemoteError::Config(
                "remote.ca_file is empty and this system has no CA bundle: set remote.ca_file \
                 to the PEM file of the CA that signed the broker's certificate"
                    .to_owned(),
            ));
        };
        let (added, _) = roots.add_parsable_certificates(certificates(bundle, "system CA bundle")?);
        if added == 0 {
            return Err(file_error(
                bundle,
                "holds no usable CA certificate: set remote.ca_file",
            ));
        }
    } else {
        for c in certificates(&s.ca_file, "remote.ca_file")? {
            roots.add(c).map_err(|e| {
                file_error(
                    &s.ca_file,
                    &format!("remote.ca_file holds a certificate rustls refuses as a CA: {e}"),
                )
            })?;
        }
    }
    let chain = certificates(&s.cert_file, "remote.cert_file")?;
    let key_pem = edgerec_offload::credentials::read_private(
        &s.key_file,
        "private key (remote.key_file)",
        MAX_KEY_FILE,
    )
    .map_err(|e| RemoteError::Config(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        file_error(
            &s.key_file,
            &format!(
                "remote.key_file holds no PEM private key ({e}): name the key of remote.cert_file"
            ),
        )
    })?;
    // ring, as ureq's for offload: aws-lc-rs (which rustls now prefers
    // for its post-quantum key exchange) is a C and cmake build for the
    // aarch64 target. The broker is the fleet's own; X25519 and the NIST
    // curves are what Mosquitto, EMQX and AWS IoT Core offer.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RemoteError::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| {
            file_error(
                &s.key_file,
                &format!("the key does not go with remote.cert_file ({e}): name the pair the fleet issued"),
            )
        })?;
    Ok(Arc::new(config))
}

fn file_error(path: &Path, message: &str) -> RemoteError {
    RemoteError::File {
        path: path.to_path_buf(),
        message: message.to_owned(),
    }
}

/// The certificates of the PEM file `path` (`key` names it in errors);
/// at least one.
fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, RemoteError> {
    // Bounded: offload's reader takes at most MAX_CERT_FILE bytes.
    let pem = edgerec_offload::s3::read_cert_file(path)
        .map_err(|e| file_error(path, &format!("{key}: {e}")))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(file_error(path, &format!("{key} holds no PEM certificate")));
    }
    Ok(certs)
}
