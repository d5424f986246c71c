//! The recording pipeline: sources, envelopes, bounded queues, the chunker,
//! the compressor pool, the sequencer and segments on disk.
//!
//! ```no_run
//! use std::sync::Arc;
//! use edgerec_recorder::{Recorder, RecorderOptions, SystemClock};
//! use edgerec_recorder::synthetic::SyntheticSource;
//!
//! let cfg = edgerec_config::Config::load("config/demo.toml".as_ref()).unwrap();
//! let sources = SyntheticSource::from_config(&cfg.sources.synthetic);
//! let rec = Recorder::start(RecorderOptions::from_config(&cfg), sources, Arc::new(SystemClock)).unwrap();
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! let report = rec.stop().unwrap();
//! println!("{} messages in {}", report.status.messages_written, report.session_dir.display());
//! ```
#![deny(missing_docs)]

use std::path::PathBuf;

pub mod budget;
pub mod clock;
pub mod control;
pub mod envelope;
pub mod internal;
pub mod pipeline;
pub mod retention;
pub mod segment;
pub mod source;
pub mod status;
pub mod synthetic;

pub use clock::{RecordingClock, SystemClock};
pub use envelope::{ChannelId, Envelope};
pub use pipeline::{
    Recorder, RecorderOptions, RecordingReport, SegmentMetadataFn, StatusHandle, Watch,
    THROUGHPUT_BIN,
};
pub use source::{ChannelSpec, Source, SourceError, SourceSink, StopFlag};
pub use status::{ChannelStatus, RecorderState, RecorderStatus};

/// Errors of starting and running a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// A file-system operation on a path failed.
    #[error("{path}: cannot {what}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The storage writer failed (its message names the file).
    #[error("{source}")]
    Storage {
        /// The segment file.
        path: PathBuf,
        /// The storage error.
        source: edgerec_storage::StorageError,
    },
    /// A write failed while a segment was being closed; the file was cut
    /// at its last good block and left `.active` for recovery.
    #[error("{path}: a write failed while closing the segment; the file was cut at byte {kept} and left for `edgerec recover`")]
    ClosedAfterFailure {
        /// The segment file.
        path: PathBuf,
        /// Bytes kept.
        kept: u64,
    },
    /// Framing the MCAP file failed.
    #[error("{path}: {source}")]
    Format {
        /// The segment file.
        path: PathBuf,
        /// The format error.
        source: edgerec_format::FormatError,
    },
    /// A source could not start.
    #[error("source {source_name}: {reason}")]
    Source {
        /// The source.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// Options that cannot work.
    #[error("{0}")]
    Options(String),
    /// A thread could not start or died.
    #[error("{0}")]
    Thread(String),
}
