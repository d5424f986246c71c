//! What can go wrong offloading, each error naming the file, the object
//! or the setting, and the fix where there is one.

use std::path::PathBuf;

/// An offload error.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// `[offload]` does not say where to send.
    #[error("{0}")]
    NotConfigured(String),
    /// The credentials cannot be used.
    #[error("{path}: {message}")]
    Credentials {
        /// The credentials file (or `environment`).
        path: PathBuf,
        /// What is wrong and the fix.
        message: String,
    },
    /// A local file cannot be read.
    #[error("{path}: cannot {what}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The store could not be reached (connection, TLS, timeout), after
    /// the retries.
    #[error("{op} {key}: cannot reach the store: {message}")]
    Transport {
        /// The request (`PUT`, `UploadPart 3`, ...).
        op: String,
        /// The object key.
        key: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The TLS handshake failed: the store's certificate is not trusted,
    /// or the store refused this vehicle's. Not retried: a setting fixes
    /// it.
    #[error("{op} {key}: TLS with the store failed: {message} (the store's certificate must chain to offload.ca_file, or to the system's CAs when it is empty, and name the endpoint's host; a store that asks for a client certificate needs offload.client_cert and offload.client_key)")]
    Tls {
        /// The request.
        op: String,
        /// The object key.
        key: String,
        /// What rustls said.
        message: String,
    },
    /// The store refused the request.
    #[error("{op} {key}: the store answered {status} {code}: {message}{}", fix.as_deref().map(|f| format!(" ({f})")).unwrap_or_default())]
    Refused {
        /// The request.
        op: String,
        /// The object key.
        key: String,
        /// The HTTP status.
        status: u16,
        /// S3's error code (`AccessDenied`, `NoSuchBucket`), or `-`.
        code: String,
        /// S3's message, or what the reply held.
        message: String,
        /// What to do about it.
        fix: Option<String>,
    },
    /// The store answered something that is not S3 (or not what was
    /// asked).
    #[error("{op} {key}: the store's reply is not understood: {message}")]
    BadReply {
        /// The request.
        op: String,
        /// The object key.
        key: String,
        /// What was wrong with it.
        message: String,
    },
    /// The object the store holds after the upload is not the file.
    #[error("{key}: after the upload the store holds {what}; the file stays on the vehicle and is sent again next time")]
    Mismatch {
        /// The object key.
        key: String,
        /// What differs.
        what: String,
    },
}

impl OffloadError {
    /// Whether sending the same request again may succeed (the link, or
    /// the store being busy or restarting).
    pub fn is_transient(&self) -> bool {
        match self {
            OffloadError::Transport { .. } => true,
            OffloadError::Refused { status, code, .. } => {
                matches!(status, 500 | 502 | 503 | 504)
                    || matches!(
                        code.as_str(),
                        "SlowDown" | "RequestTimeout" | "InternalError"
                    )
            }
            _ => false,
        }
    }
}

/// An [`OffloadError::Io`] maker for `map_err`: what was attempted on
/// `path`.
pub(crate) fn io<'a>(
    path: &'a std::path::Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> OffloadError + 'a {
    move |source| OffloadError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}
