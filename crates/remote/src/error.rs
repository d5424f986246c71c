//! What can go wrong setting up the link, each with its place and fix.

use std::path::PathBuf;

/// Why the link cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A file of `[remote]` (CA, certificate, key) cannot be used.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong and the fix.
        message: String,
    },
    /// `[remote]` does not hold together.
    #[error("{0}")]
    Config(String),
    /// The link's thread could not be started.
    #[error("starting the fleet link's thread: {0}")]
    Thread(#[source] std::io::Error),
}
